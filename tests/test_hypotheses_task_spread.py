"""Which tasks a held-out change comes from: a finding one task carries (a greeting with one task's passenger's
name) is validated with a caution that names the task; a change spread over the tasks is not cautioned."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from factories_hypotheses import make_study, validate_regex

from engine.hypotheses.cautions import caution_flag, caution_line
from engine.hypotheses.population import Population, load_population
from engine.hypotheses.provenance import provenance_parts
from engine.hypotheses.task_spread import TaskSpread
from engine.hypotheses.validate import Validation
from engine.kinds import HELDOUT
from engine.store.queries.hypotheses import HypothesisRow

GREETING = "Hello Mia, thanks for waiting."


@pytest.fixture
def heldout(tmp_path: Path) -> Population:
    store, _ = make_study(tmp_path / "s.duckdb", [], n_tasks=8, k=6, texts=3)  # held-out: tasks t1, t3, t5, t7
    with store:
        return load_population(store, "before", "after", HELDOUT)


def greeted(population: Population, share: dict[str, float], seed: int = 0) -> Population:
    """After rollouts' text turns open with GREETING, in each task with the given probability a turn."""
    rng = np.random.default_rng(seed)
    rollouts = population.rollouts.select("rollout_key", "task_id", after=pl.col("checkpoint") == population.after)
    where = {key: share.get(task, 0.0) if after else 0.0 for key, task, after in rollouts.iter_rows()}
    segments = population.segments.with_columns(
        text=pl.struct("rollout_key", "kind", "text").map_elements(
            lambda r: f"{GREETING} {r['text']}" if r["kind"] == "text" and rng.random() < where[r["rollout_key"]]
            else r["text"],
            return_dtype=pl.String,
        )
    )  # fmt: skip
    return replace(population, segments=segments)


def greeting_result(population: Population) -> Validation:
    return validate_regex(population, "Hello Mia", "increase", n_permutations=2000)


def test_a_change_one_task_carries_is_validated_with_a_caution_naming_it(heldout: Population) -> None:
    result = greeting_result(greeted(heldout, {"t3": 1.0}))
    spread = result.task_spread
    assert result.status == "validated" and spread is not None and spread.caution
    assert (spread.n_tasks, spread.toward, spread.against, spread.top_task) == (4, 1, 0, "t3")
    assert spread.rest_delta == pytest.approx(0.0) and spread.delta == pytest.approx(result.delta)
    assert result.reason.startswith("caution, it may be one task's: in 1 of 4 tasks its way, 0 against; ")
    assert "without task 't3' +0.0 pts" in result.reason


def test_a_change_spread_over_the_tasks_is_not_cautioned(heldout: Population) -> None:
    result = greeting_result(greeted(heldout, {"t1": 0.5, "t3": 0.6, "t5": 0.4, "t7": 0.5}))
    spread = result.task_spread
    assert result.status == "validated" and spread is not None and not spread.caution
    assert spread.toward == spread.n_tasks == 4 and spread.rest_delta is not None
    assert spread.rest_delta > 0.5 * result.delta and "caution" not in result.reason


@pytest.mark.parametrize(
    ("sign", "rest", "caution"),
    [
        (1, 0.02, True),  # +0.02 of +0.20 without the top task: it rests on it
        (1, 0.08, False),  # +0.08 of +0.20: most of the change stays
        (1, -0.05, True),  # the other tasks go the other way
        (-1, -0.02, True),  # a fewer-claim, mirrored
        (-1, -0.15, False),
    ],
)
def test_one_task_carries_it_when_the_others_keep_under_a_quarter(sign: int, rest: float, caution: bool) -> None:
    spread = TaskSpread(4, 2, 1, "t1", 0.2 * sign, rest)
    assert spread.rests_on_one_task(sign) is caution


def test_the_caution_reaches_every_surface_and_the_task_id_is_inert() -> None:
    """The flag (`rldiff hypothesis list`), the report's caution line and the provenance phrase read the stored
    spread; a task id is rollout text, shown on one line without control characters."""
    spread = TaskSpread(4, 1, 0, "task\x1b[31m\nred", 0.153, 0.004, caution=True)
    provenance = {"task_spread": spread.as_json()}
    assert caution_flag(provenance) == "(may be one task's) "
    line = caution_line(provenance, "increase")
    assert line == (
        "it may be one task's: in 1 of 4 tasks its way, 0 against; without task 'task red' +0.4 pts (of +15.3)"
    )
    fields = dict.fromkeys(HypothesisRow.__dataclass_fields__) | {"origin": "auto", "provenance": provenance}
    row = HypothesisRow(**fields)
    assert any(part.startswith("in 1 of 4 tasks its way") for part in provenance_parts(row))
    assert caution_flag({"task_spread": TaskSpread(4, 4, 0, "t1", 0.1, 0.09).as_json()}) == ""
