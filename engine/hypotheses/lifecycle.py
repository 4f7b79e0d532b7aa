"""The hypothesis ledger: add, label, test and decide. Used by the pipeline stage, the CLI, the TUI and MCP."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.hypotheses.budget import Budget, LabelerTooSlow
from engine.hypotheses.equal_length import about_length
from engine.hypotheses.exemplars import DEFAULT_MIN_SIMILARITY, matched_by
from engine.hypotheses.exposure import exploratory_note
from engine.hypotheses.judge import judge_labels
from engine.hypotheses.population import Population, load_population
from engine.hypotheses.provenance import tested_split
from engine.hypotheses.validate import Claim, Validation, validate
from engine.hypotheses.verifier import KINDS, Verifier, spec_kinds
from engine.kinds import EXPLORATORY, HELDOUT, Split
from engine.llm.session import LLMSession
from engine.progress import NullProgress, Progress
from engine.store import Store, writes
from engine.store.queries import testing
from engine.study import last_config, stream

log = logging.getLogger(__name__)

STAGE = "hypotheses"


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def open_session(store: Store, config: AnalyzeConfig) -> LLMSession | None:
    """An LLM session for `config.llm`, or None on the offline path."""
    if not config.llm:
        return None
    from engine.llm.anthropic_client import AnthropicClient

    return LLMSession(AnthropicClient(config.llm), store, config.max_cost)


# -- labelling -------------------------------------------------------------------------------------------------


def hypothesis_kinds(labeler: str, spec: dict[str, Any]) -> list[str]:
    """The segment kinds a hypothesis is about (its prevalence's denominator)."""
    if labeler == "judge":
        kinds = spec.get("kinds") or list(KINDS)
        return [kinds] if isinstance(kinds, str) else list(kinds)
    return spec_kinds(spec)


def label(
    population: Population,
    labeler: str,
    spec: dict[str, Any],
    session: LLMSession | None,
    rng: np.random.Generator,
    budget: Budget | None = None,
) -> pl.DataFrame:
    """segment_id, label, evidence, weight on `population` for one hypothesis (blind to checkpoints).

    A verifier stops when `budget` is spent (`LabelerTooSlow`) or cancelled; a judge's time is the LLM's."""
    kinds = hypothesis_kinds(labeler, spec)
    if labeler == "verifier":
        return population.verifier_labels(Verifier(spec, embedder=population.embedder), kinds, budget)
    if session is None:
        raise InputError("this hypothesis is labelled by an LLM judge: set ANTHROPIC_API_KEY and pass --llm MODEL")
    return judge_labels(session, spec["question"], population.of_kinds(kinds), rng)


def replace_labels(store: Store, hypothesis_id: int, labels: pl.DataFrame) -> None:
    """Replace one hypothesis's labels by `labels`."""
    testing.delete_labels(store, hypothesis_id)
    store.append("hypothesis_labels", labels.with_columns(hypothesis_id=pl.lit(hypothesis_id, pl.Int32)))


# -- validation ------------------------------------------------------------------------------------------------


def revalidate(
    store: Store, populations: dict[Split, Population], config: AnalyzeConfig, rng: np.random.Generator
) -> list[Validation]:
    """Test every labelled hypothesis on the split it is tested on (`populations`: split -> Population,
    loaded here when missing) as one family: BH across all of them that can reach the level (`validate`) and
    every earlier held-out test, from `heldout_tests`; by sign-flip over tasks when the split held out whole
    tasks. Writes the results."""
    rows = store.frame(
        "SELECT hypothesis_id, direction, statement, spec, provenance, coalesce(exploratory, FALSE) AS exploratory, "
        "provenance ->> 'exploratory' AS exploratory_reason FROM hypotheses "
        "WHERE hypothesis_id IN (SELECT DISTINCT hypothesis_id FROM hypothesis_labels) ORDER BY hypothesis_id"
    )
    previous = store.frame(
        "SELECT p_value FROM heldout_tests t WHERE NOT EXISTS (SELECT 1 FROM hypotheses h JOIN "
        "(SELECT DISTINCT hypothesis_id FROM hypothesis_labels) USING (hypothesis_id) "
        "WHERE h.statement = t.statement AND h.spec::VARCHAR = t.spec)"
    )["p_value"].to_list()
    earlier = [p for p in previous if p is not None]
    new_tasks = store.meta("split_mode") in ("task", "environment")
    labels = store.frame("SELECT hypothesis_id, segment_id, label, weight FROM hypothesis_labels")
    split_of = [tested_split(p) for p in rows["provenance"]]
    groups = {split: [i for i, s in enumerate(split_of) if s == split] for split in dict.fromkeys(split_of)}
    base = int(rng.integers(2**32))

    def run(split: Split, other_p: list[float]) -> list[Validation]:
        if split not in populations:
            embedder = next(iter(populations.values())).embedder if populations else None
            population = load_population(store, *config.checkpoints, split)
            populations[split] = replace(population, embedder=embedder) if embedder is not None else population
        claims = [
            Claim(rows["hypothesis_id"][i], rows["direction"][i], about_length(json.loads(rows["spec"][i])))
            for i in groups[split]
        ]
        return validate(
            populations[split],
            labels,
            claims,
            np.random.default_rng([base, list(groups).index(split)]),  # the same draws in both passes
            fdr=config.fdr,
            n_permutations=config.permutations,
            new_tasks=new_tasks,
            previous_p=earlier + other_p,
        )

    # Cross-fitted folds are one family: a first pass gives each fold's p-values, the second runs BH over all.
    first = {split: run(split, []) for split in groups} if len(groups) > 1 else {}
    by_index: dict[int, Validation] = {}
    for split, members in groups.items():
        counted = (v for s, vs in first.items() if s != split for v in vs if v.q_value is not None)  # in BH's m
        others = [v.p_value for v in counted if v.p_value is not None]
        by_index.update(zip(members, run(split, others), strict=True))
    results = [by_index[i] for i in range(rows.height)]
    results = [
        _exploratory(v, r) if r["exploratory"] else v for r, v in zip(rows.iter_rows(named=True), results, strict=True)
    ]
    now = _now()
    for r, v in zip(rows.iter_rows(named=True), results, strict=True):
        testing.record_heldout_test(store, r["statement"], r["spec"], v.p_value, now)
        testing.set_result(store, v.hypothesis_id, _result_values(v), now)
        provenance = json.loads(r["provenance"] or "{}")
        tests = {"equal_length": v.equal_length, "turn_count": v.turn_count, "task_spread": v.task_spread}
        if any(t is not None or key in provenance for key, t in tests.items()):
            provenance.update({key: None if t is None else t.as_json() for key, t in tests.items()})
            testing.set_provenance(store, v.hypothesis_id, json.dumps(provenance))
    return results


def _result_values(v: Validation) -> tuple[Any, ...]:
    """A validation's values in the order the store records a result (`queries.testing.RESULT_COLUMNS`)."""
    return tuple(getattr(v, column) for column in testing.RESULT_COLUMNS)


def _exploratory(v: Validation, row: dict[str, Any]) -> Validation:
    """An exploratory hypothesis keeps its numbers (and its place in the BH family) but not its verdict."""
    why = row["exploratory_reason"] or "exploratory: written after held-out evidence was shown"
    return replace(v, status=EXPLORATORY, reason=f"{why}. The test said {v.status}: {v.reason}")


def labeler_provenance(
    labeler: str, session: LLMSession | None, config: AnalyzeConfig, split: Split = HELDOUT
) -> dict[str, Any]:
    return {
        "labeler": labeler if labeler == "verifier" else f"judge:{session.model if session else '?'}",
        "split": split,
        "seed": config.seed,
        "checkpoints": [config.before, config.after],
    }


def labels_provenance(spec: dict[str, Any], labels: pl.DataFrame, population: Population) -> dict[str, Any]:
    """What a hypothesis's labels add to its provenance: for an exemplar labeler, what its positives are like
    (`exemplars.matched_by`; empty for any other labeler)."""
    evidence = labels.filter(pl.col("label"))["evidence"].drop_nulls().to_list()
    return {"matched_by": matched_by(spec, evidence, population.embedder)}


# -- the user's hypotheses -------------------------------------------------------------------------------------


def add_hypothesis(
    store: Store,
    statement: str,
    *,
    pattern: str | None = None,
    kind: str | None = None,
    judge: str | None = None,
    like: list[str] | None = None,
    min_similarity: float | None = None,
    direction: str = "increase",
) -> int:
    """`rldiff hypothesis add`: a regex verifier (`pattern`), an exemplar verifier (`like`: sentences a
    matching segment has one close to, within `min_similarity` cosine), each optionally for one segment
    `kind`, or an LLM judge question (`judge`). Returns the new hypothesis id; status stays 'proposed' until
    tested. Added after held-out evidence was shown (`heldout_views`), it is exploratory: never validated."""
    if sum(x is not None for x in (pattern, judge, like)) != 1:
        raise InputError("give exactly one of --pattern REGEX, --like SENTENCE (repeatable) or --judge QUESTION")
    if kind is not None and kind not in KINDS:
        raise InputError(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if min_similarity is not None and like is None:
        raise InputError("--min-similarity goes with --like")
    if pattern is not None or like is not None:
        if like is not None:
            exemplars = {"exemplars": [t.strip() for t in like]}
            node: dict[str, Any] = {
                "similar_to": {**exemplars, "min_similarity": min_similarity or DEFAULT_MIN_SIMILARITY}
            }
        else:
            node = {"regex": pattern, "ignore_case": True}
        spec: dict[str, Any] = {"all": [{"kind": kind}, node]} if kind else node
        Verifier(spec)  # refuse a bad spec now, with its message
        labeler = "verifier"
    else:
        if not judge or not judge.strip():
            raise InputError("--judge needs a yes/no question")
        spec = {"question": judge.strip(), "kinds": [kind] if kind else list(KINDS)}
        labeler = "judge"
    con = store.cursor()
    return writes.add_user_hypothesis(con, statement, direction, labeler, spec, exploratory=exploratory_note(con))


def test_hypothesis(
    store: Store,
    hypothesis_id: int,
    *,
    llm: str | None = None,
    progress: Progress | None = None,
    budget: Budget | None = None,
) -> Validation:
    """`rldiff hypothesis test`: label the split it is tested on (held-out; discovery for a hypothesis drafted on
    the held-out fold of a cross-fitted small study) for one hypothesis and re-test the family.

    Uses the checkpoints, seed and FDR level of the last analysis; `llm` names the judge model (judge
    hypotheses only; default: the last analysis's, or the configured default when a key is set). `progress`
    hears of its three steps: loading the held-out segments, labelling them, re-testing the family. Past its
    `budget` (default `TEST_BUDGET_S`) labelling stops and the hypothesis is recorded inconclusive.
    """
    row = testing.hypothesis_spec(store, hypothesis_id)
    config = last_config(store)
    labeler, spec = row.labeler, row.spec
    session = None
    if labeler == "judge":
        config = replace(config, llm=llm or config.llm or AnalyzeConfig.default_llm())
        session = open_session(store, config)
    split = tested_split(row.provenance)
    with (progress or NullProgress()).track(f"testing hypothesis {hypothesis_id}", 3) as advance:
        population = load_population(store, *config.checkpoints, split)
        advance(status=f"labelling held-out segments with the {labeler}")
        rng = stream(config.seed, "hypothesis_test", hypothesis_id)
        try:
            labels = label(population, labeler, spec, session, rng, budget or Budget())
        except LabelerTooSlow as exc:
            return record_too_slow(store, hypothesis_id, str(exc))
        provenance = {
            **(json.loads(row.provenance) if row.provenance else {}),
            **labeler_provenance(labeler, session, config, split),
            **labels_provenance(spec, labels, population),
        }
        if labels.height == 0:
            raise InputError(
                f"hypothesis {hypothesis_id}: the {split} split has no segment of the kinds its labeler reads, so "
                "there is nothing to test it on (a reasoning hypothesis on rollouts without reasoning, say)"
            )
        advance(status=f"{labels.height} segments labelled; re-testing every labelled hypothesis")
        with store.transaction():
            replace_labels(store, hypothesis_id, labels)
            testing.set_provenance(store, hypothesis_id, json.dumps(provenance))
            results = revalidate(store, {split: population}, config, stream(config.seed, "revalidation"))
        advance(status="done")
    return next(v for v in results if v.hypothesis_id == hypothesis_id)


test_hypothesis.__test__ = False  # type: ignore[attr-defined]


def record_too_slow(store: Store, hypothesis_id: int, reason: str) -> Validation:
    """Record a hypothesis whose labelling ran past its budget as inconclusive, without labels."""
    verdict = Validation(
        hypothesis_id, "inconclusive", reason, prevalence_before=None, prevalence_after=None, delta=None,
        ci_low=None, ci_high=None, p_value=None, q_value=None, mde=None, n_labeled=0, reward_assoc=None,
    )  # fmt: skip
    with store.transaction():
        testing.delete_labels(store, hypothesis_id)
        testing.set_result(store, hypothesis_id, _result_values(verdict), _now())
    log.warning("hypothesis %d: %s", hypothesis_id, reason)
    return verdict


def decide(store: Store, hypothesis_id: int, decision: str | None, note: str | None = None) -> None:
    """The user's triage: 'accepted', 'rejected' or None, with an optional note."""
    con = store.cursor()
    writes.set_decision(con, hypothesis_id, decision)
    if note is not None:
        writes.set_note(con, hypothesis_id, note)


def add_user_label(store: Store, hypothesis_id: int, segment_id: int, value: bool) -> None:
    """A person's yes/no for one segment, used to calibrate the labeler."""
    writes.set_user_label(store.cursor(), hypothesis_id, segment_id, value)
