"""The product as a user meets it: `rldiff compare` on the demo pair, offline, with the real reader and an SAE
trained on the study; then the CLI, the report and the TUI on the store it made. One analysis (a few minutes on
two cores) serves every test here; tests that write work on a copy of the store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from engine.cli import main
from engine.kinds import HELDOUT
from tests.conftest import SAMPLE_DATA
from tests.factories_tui import settle
from tui.app import RldiffApp
from tui.screens.clusters import ClustersScreen
from tui.screens.deltas import DeltasScreen
from tui.screens.hypotheses import HypothesesScreen
from tui.screens.overview import OverviewScreen
from tui.screens.rollouts import RolloutsScreen

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("e2e") / "study.duckdb"
    pair = [str(SAMPLE_DATA / "tau2-grok3" / f"{name}.jsonl.gz") for name in ("standard", "tighter")]
    code = main(["compare", *pair, "--store", str(path), "--before", "standard", "--after", "tighter", "--llm", "none"])
    assert code == 0
    return path


@pytest.fixture
def copy(study: Path, tmp_path: Path) -> Path:
    return Path(shutil.copy(study, tmp_path / "copy.duckdb"))


def rows(path: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def test_every_stage_ran_and_recorded_itself(study: Path) -> None:
    runs = rows(study, "SELECT stage, status, versions, seed FROM runs ORDER BY started_at")
    assert [r[0] for r in runs] == ["split", "features", "deltas", "clusters", "hypotheses"]
    assert all(r[1] == "done" and r[3] == 0 and "duckdb" in json.loads(r[2]) for r in runs)
    sources = dict(rows(study, "SELECT source, count(*) FROM features GROUP BY source"))
    assert sources["sae"] > 100 and sources["structural"] > 10
    assert rows(study, "SELECT count(*) FROM segment_features WHERE activation = 0")[0][0] == 0
    assert rows(study, "SELECT count(DISTINCT checkpoint) FROM feature_examples")[0][0] == 2


def test_the_hand_off_is_a_significant_decrease(study: Path) -> None:
    found = dict(
        (kind, (delta, ci_high, q))
        for kind, delta, ci_high, q in rows(
            study,
            "SELECT kind, delta, ci_high, q_value FROM feature_deltas JOIN features USING (feature_id) "
            "WHERE name = 'tool:transfer_to_human_agents' AND tested",
        )
    )
    delta, ci_high, q = found["any"]
    assert delta < 0 and ci_high < 0 and q < 0.05
    # Among calls to the hand-off tool a tool-identity feature is always 1: its tool_call row is not tested
    # (a change in the tool mix is composition, docs/statistics.md section 2).
    assert "tool_call" not in found


def test_a_validated_hypothesis_is_about_handing_off(study: Path) -> None:
    """Some hypothesis validated on held-out rollouts says 'less hand-off', judged by what its labels mark."""
    shares = rows(
        study,
        "SELECT h.hypothesis_id, avg(CASE WHEN s.tool_name = 'transfer_to_human_agents' OR s.text ILIKE '%human%' "
        "THEN 1 ELSE 0 END) FROM hypotheses h JOIN hypothesis_labels l USING (hypothesis_id) "
        "JOIN segments s USING (segment_id) WHERE h.status = 'validated' AND h.direction = 'decrease' AND l.label "
        "GROUP BY ALL",
    )
    assert any(share >= 0.5 for _, share in shares), shares
    # 4 tasks: split within task and cross-fitted, so each hypothesis is labelled on the fold it was tested on,
    # never the one it was drafted on (the held-out fold for discovery drafts, discovery for the others)
    splits = rows(
        study,
        "SELECT DISTINCT h.hypothesis_id, coalesce(json_extract_string(h.provenance, '$.split'), 'heldout'), "
        "r.split FROM hypotheses h JOIN hypothesis_labels USING (hypothesis_id) JOIN segments USING (segment_id) "
        "JOIN rollouts r USING (rollout_key)",
    )
    assert splits and all(tested == labelled for _, tested, labelled in splits)
    assert (HELDOUT,) in {(labelled,) for *_, labelled in splits}


def test_cli_reads_the_study(copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a copy: the report shows held-out examples, so writing it logs a held-out view."""
    assert main(["info", str(copy)]) == 0
    assert main(["deltas", str(copy), "--kind", "tool_call", "--top", "5"]) == 0
    printed = capsys.readouterr().out
    assert "standard" in printed and "tool_call" in printed
    for name in ("report.md", "report.html"):
        assert main(["report", str(copy), "-o", str(tmp_path / name)]) == 0
    markdown = (tmp_path / "report.md").read_text()
    assert "Validated findings" in markdown and "transfer" in markdown.lower()
    assert (tmp_path / "report.html").read_text().lstrip().lower().startswith("<!doctype html>")


def test_a_user_hypothesis_is_tested_on_held_out_rollouts(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    statement = "The agent hands off to a human less often"
    assert main(["hypothesis", "add", str(copy), statement, "--pattern", "^transfer_to_human_agents\\b",
                 "--kind", "tool_call", "--direction", "decrease"]) == 0  # fmt: skip
    [(hypothesis_id,)] = rows(copy, "SELECT hypothesis_id FROM hypotheses WHERE statement = ?", [statement])
    assert main(["hypothesis", "test", str(copy), str(hypothesis_id)]) == 0
    assert "validated" in capsys.readouterr().out
    assert main(["hypothesis", "decide", str(copy), str(hypothesis_id), "accepted", "--note", "expected"]) == 0
    status = rows(copy, "SELECT status, decision, note FROM hypotheses WHERE hypothesis_id = ?", [hypothesis_id])
    assert status == [("validated", "accepted", "expected")]


def test_a_user_hypothesis_like_sentences_from_the_cli(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    statement = "The agent apologises more"
    exemplars = ["I am sorry for the trouble", "My apologies for the delay"]
    like = [a for e in exemplars for a in ("--like", e)]
    assert main(["hypothesis", "add", str(copy), statement, *like, "--kind", "text", "--min-similarity", "0.65"]) == 0
    [(spec,)] = rows(copy, "SELECT spec FROM hypotheses WHERE statement = ?", [statement])
    assert json.loads(spec) == {
        "all": [{"kind": "text"}, {"similar_to": {"exemplars": exemplars, "min_similarity": 0.65}}]
    }
    assert main(["hypothesis", "add", str(copy), "x", "--like", "a", "--min-similarity", "1.5"]) == 2
    assert "min_similarity" in capsys.readouterr().err


async def test_every_screen_opens_on_the_real_store(copy: Path) -> None:
    app = RldiffApp(copy)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        for key, screen in (("2", DeltasScreen), ("3", ClustersScreen), ("5", RolloutsScreen), ("4", HypothesesScreen)):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, screen)
        first = app.screen.current
        assert first is not None
        await pilot.press("a")  # accept: written to the store at once
        await settle(pilot)
    decision = rows(copy, "SELECT decision FROM hypotheses WHERE hypothesis_id = ?", [first.hypothesis_id])
    assert decision == [("accepted",)]
