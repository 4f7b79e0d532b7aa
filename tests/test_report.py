"""The report in both formats, from a study with validated, rejected and user-triaged hypotheses."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from factories_hypotheses import Planted, add_features, make_study

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.hypotheses import lifecycle, stage
from engine.hypotheses.calibration import calibrate
from engine.hypotheses.reasons import tally
from engine.progress import NullProgress
from engine.report import write_report
from engine.report.content import TOP_DELTAS, ReportContent, excerpt, method_lines
from engine.store import Store
from engine.store.queries import StudySummary, hypotheses, label_candidates
from engine.store.queries.overview import StageStatus

HOSTILE = "<script>alert(1)</script> | `x` **bold**"
APOLOGY = Planted("apology", "text", f"I sincerely apologize for the inconvenience. {HOSTILE}", 0.05, 0.45)


@pytest.fixture
def study(tmp_path: Path):
    store, truth = make_study(tmp_path / "s.duckdb", [APOLOGY], n_tasks=16)
    with store:
        add_features(store, truth)
        stage.run(
            store,
            AnalyzeConfig(before="before", after="after", permutations=300),
            np.random.default_rng(0),
            NullProgress(),
        )
        hid = lifecycle.add_hypothesis(store, "More departures <b>talk</b>", pattern="departs")
        lifecycle.test_hypothesis(store, hid)
        lifecycle.decide(store, hid, "rejected", note="just filler <i>noise</i>")
        for c in label_candidates(store.cursor(), hid, limit=30):
            lifecycle.add_user_label(store, hid, c.segment_id, "departs" in c.text)  # the verifier, exactly
        calibrate(store, hid)
        yield store, hid


def test_markdown_report(study, tmp_path: Path) -> None:
    store, hid = study
    text = write_report(store, tmp_path / "r.md").read_text()
    assert "# rldiff report: before -> after" in text
    assert "## Validated findings (1)" in text
    assert re.search(r"Prevalence on held-out: \*\*\d+\.\d% -> \d+\.\d%\*\*", text)
    evidence = [line for line in text.splitlines() if line.startswith("- Evidence (heldout, after")]
    assert evidence and all("**" in line for line in evidence)  # the span, marked, in its context
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "More departures &lt;b&gt;talk&lt;/b&gt;" in text and "just filler &lt;i&gt;noise&lt;/i&gt;" in text
    assert "| rejected" in text or "| inconclusive" in text
    assert "## Method and provenance" in text and "offline (extractive" in text
    calibration = text.split("## Labeler calibration against hand labels (1)")[1].split("##")[0]
    assert f"Hypothesis {hid}:" in calibration and "TP" in calibration and "corrected delta" in calibration


def test_the_reports_deltas_show_the_pooled_share_the_families_and_the_length_change(
    sample_study_copy: Path, tmp_path: Path
) -> None:
    """Both formats put each row's pooled share beside its tested rates, with a line saying which is which."""
    with Store(sample_study_copy) as store:
        stored = store.frame(
            "SELECT pooled_before, pooled_after FROM feature_deltas WHERE tested ORDER BY q_value ASC NULLS LAST, "
            f"abs(delta) DESC NULLS LAST, feature_id, kind LIMIT {TOP_DELTAS}"
        )
        markdown = write_report(store, tmp_path / "r.md").read_text()
        html = write_report(store, tmp_path / "r.html").read_text()
    pooled = [(f"{100 * b:.1f}%", f"{100 * a:.1f}%") for b, a in stored.iter_rows()]
    table = markdown.split("## Top feature deltas")[1].split("##")[0]
    assert "pooled: the share of all segments" in table and table.count("| pooled |") == 1
    assert all(f"| {b} -> {a} |" in table for b, a in pooled)
    assert "<th>pooled</th>" in html and all(f"{b} &rarr; {a}</td>" in html for b, a in pooled)
    # beside the table: tests per family and the length change the 'any' rows are adjusted for
    for text in (table, html):
        assert re.search(r"BH within each family: sae \d+ \(\d+ significant\)", text)
        assert re.search(r"Rollouts are \d\.\d\dx as long after \(\d+\.\d -(?:>|&gt;) \d+\.\d segments", text)


def test_html_report_is_self_contained_and_escaped(study, tmp_path: Path) -> None:
    store, _ = study
    text = write_report(store, tmp_path / "r.html").read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") >= 1
    assert "<script" not in text
    assert not re.search(r"(src|href)=['\"]https?:", text)
    assert "<b>talk</b>" not in text and "&lt;b&gt;talk&lt;/b&gt;" in text
    assert "Validated findings (1)" in text


def test_both_formats_say_why_the_hypotheses_not_validated_were_not(study, tmp_path: Path) -> None:
    """The study's counts say how many hypotheses were validated and why the others were not; the list of those
    others opens with their own tally."""
    store, _ = study
    rows = hypotheses(store.cursor())
    others = [h for h in rows if h.status != "validated"]
    assert others and len(rows) > len(others)
    markdown = write_report(store, tmp_path / "r.md").read_text().splitlines()
    assert f"{len(rows)} hypotheses: {tally(rows)}." in markdown[markdown.index("## Validated findings (1)") - 2]
    title = markdown.index(f"## Rejected, inconclusive and exploratory ({len(others)})")
    assert markdown[title + 2] == f"{tally(others)}."
    html = write_report(store, tmp_path / "r.html").read_text()
    assert f"hypotheses: {tally(rows)}.</p>" in html and f"</h2><p>{tally(others)}.</p><table>" in html


def test_unknown_suffix_is_refused(study, tmp_path: Path) -> None:
    store, _ = study
    with pytest.raises(InputError, match=".md or .html"):
        write_report(store, tmp_path / "r.pdf")


def test_excerpt_centres_the_evidence() -> None:
    text = "x" * 300 + " I sincerely apologize " + "y" * 300
    before, hit, after = excerpt(text, "SINCERELY apologize", width=20)
    assert hit == "sincerely apologize" and before.startswith("...") and after.endswith("...")
    assert before.endswith("x I ") and len(after) == 23
    assert excerpt("short text", "missing") == ("", "", "short text")


def test_provenance_names_a_findings_side_effects() -> None:
    from engine.hypotheses.provenance import provenance_text
    from engine.store.queries import HypothesisRow

    side = {"statement": "Length: 10-49 words: 90% -> 79% of reasoning turns", "relation": "explained"}
    row = HypothesisRow(
        *(1, "More reasoning turns like ...", "increase", "verifier", {}, "validated", "extractive"),
        *([None] * 14),
        provenance={
            **{"merged": [{"statement": "x"}] * 2, "side_effects": [side], "other_fold": [{"statement": "y"}]},
            **{"drafted_on": "heldout", "split": "discovery", "feature_names": ["ngram:regarding"]},
            "narrowed": ["So, by the policy, payment must come from the profile.\x1b[2J"],
            "counted_elsewhere": ["Then again, that is outside the scope."],
            "other_behaviour": ["Safe travels!", "Thank you for choosing us."],
            "apart": ["Please hold on while I check.\x1b[31m"],
            "matched_by": [
                {"exemplar": "Regarding your refund.", "share": 0.25},
                {"exemplar": "- Total: $5", "share": 0.5, "wordings": 3},
            ],
        },
    )
    text = provenance_text(row)
    assert "2 narrower or duplicate drafts merged in" in text and "drafted on both folds, tested once" in text
    assert "drafted on held-out, tested on discovery; from ngram:regarding" in text
    assert (
        "discovery positives by nearest exemplar: the quoted one 25%, “- Total: $5” (and 2 other wordings) 50%" in text
    )
    assert "side effects: Length: 10-49 words: 90% -> 79% of reasoning turns" in text
    assert "1 exemplar(s) both checkpoints say dropped from the labeler: “So, by the policy, payment" in text
    assert "1 exemplar(s) another finding counts dropped from the labeler: “Then again, that is outside" in text
    assert "2 exemplar(s) of another behaviour, no change alone, dropped from the labeler: “Safe travels!”" in text
    assert "parted from the same labeler: “Please hold on while I check." in text
    assert "\x1b" not in text


def test_a_finding_that_restates_another_is_listed_beneath_it(study, tmp_path: Path) -> None:
    """A hypothesis whose positives the drafted finding's own evidence decided (its span holds the drafted
    one's) is listed right after that finding in both formats, saying so with its counts."""
    store, _ = study
    [drafted] = hypotheses(store.cursor(), "validated")
    span = r"apologize for the inconvenience\. <script>alert"
    mine = lifecycle.add_hypothesis(store, "Apologises more", pattern=span)
    lifecycle.test_hypothesis(store, mine)
    text = write_report(store, tmp_path / "r.md").read_text()
    assert "## Validated findings (2)" in text and "1 of them likely restates a broader finding" in text
    assert text.index(f"### {drafted.hypothesis_id}. ") < text.index(f"### {mine}. Apologises more")
    said = re.search(
        rf"- Likely the same behaviour as finding {drafted.hypothesis_id}: the same evidence in (\d+) of its (\d+) ",
        text,
    )
    assert said and int(said[1]) >= 0.8 * int(said[2]) > 0
    page = write_report(store, tmp_path / "r.html").read_text()
    assert f"Likely the same behaviour as finding {drafted.hypothesis_id}: the same evidence in {said[1]} of" in page


def test_a_report_with_heldout_examples_logs_the_view(study, tmp_path: Path) -> None:
    """The report shows held-out examples: writing it is logged; a read-only store is refused before any file."""
    from engine.store import Store

    store, _ = study
    assert store.scalar("SELECT count(*) FROM heldout_views") == 0
    write_report(store, tmp_path / "r.md")
    assert store.execute("SELECT via FROM heldout_views").fetchall() == [("report",)]
    store.close()
    with Store(store.path, read_only=True) as read_only, pytest.raises(InputError, match="open the store for writing"):
        write_report(read_only, tmp_path / "again.md")
    assert not (tmp_path / "again.md").exists()


def test_a_small_studys_report_shows_its_exploratory_ranking_and_logs_it(
    sample_study_copy: Path, tmp_path: Path
) -> None:
    """The demo pair is a small study: both formats show its whole-study ranking after the validated findings,
    titled never validated with its ordering rule, labels escaped; showing it is held-out evidence, so the
    report logs a view even with no example shown. Split by task, the same study's report has no such section."""
    from engine.store import Store
    from engine.store.queries import exploratory_ranking, study_summary

    with Store(sample_study_copy) as store:
        con = store.cursor()
        con.execute("DELETE FROM hypotheses")  # no finding, so no example: the ranking alone is held-out evidence
        top = exploratory_ranking(con, study_summary(con))[0]
        con.execute(
            "UPDATE features SET label = ? WHERE feature_id = ?", [f"{top['label']} {HOSTILE}", top["feature_id"]]
        )
        text = write_report(store, tmp_path / "r.md").read_text()
        page = write_report(store, tmp_path / "r.html").read_text()
        assert store.execute("SELECT via FROM heldout_views").fetchall() == [("report",), ("report",)]
        section = text.split("## Exploratory ranking, whole study (top 10)")[1].split("\n## ")[0]
        assert "not validated: these rows include the held-out rollouts" in section
        rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
        assert len(rows) == 10 and "&lt;script&gt;" in rows[0] and "<script>" not in text
        assert text.index("## Validated findings") < text.index("## Exploratory ranking")
        assert "Exploratory ranking, whole study (top 10)</h2>" in page and "<script>" not in page
        store.execute("UPDATE meta SET value = 'task' WHERE key = 'split_mode'")
        assert "Exploratory ranking" not in write_report(store, tmp_path / "task.md").read_text()


@pytest.mark.parametrize(
    ("split_mode", "interval", "says"),
    [
        ("task", "cluster-robust t over tasks, G-1 df", "sign-flip test over tasks, which speaks for new tasks"),
        ("rollout", "heteroscedasticity-robust t within task (these tasks)", "each fold drafts, the other tests"),
        ("none", "cluster-robust t over tasks, G-1 df", "No hypothesis was drafted: nothing was held out"),
    ],
)
def test_the_method_section_says_how_this_study_was_tested(split_mode: str, interval: str, says: str) -> None:
    """The method lines follow the study's design (its deltas stage's interval, its split), not one fixed text:
    a report once said "BH across everything tested, CIs from a bootstrap over tasks" after both had changed."""
    deltas = StageStatus("deltas", "done", None, None, {"interval": interval})
    summary = StudySummary([], "before", "after", 4, 10, 2, [deltas], 4, split_mode)
    content = ReportContent(summary, [], [], {}, [], [], stage_configs={"features": {"sentence_features": False}})
    text = " ".join(method_lines(content))
    assert f"95% CIs {interval}." in text and says in text
    assert "within each testing family" in text and "no sentence features" in text and "bootstrap" not in text
    assert ("change on the drafting split reached q < 0.5" in text) == (split_mode != "none")  # sources.DRAFT_FDR


def test_a_finding_tested_on_the_discovery_fold_says_so(study, tmp_path: Path) -> None:
    """A small study's finding drafted on the held-out fold is tested on discovery: its numbers are labelled
    with the fold they come from (the report called every finding's "Prevalence on held-out")."""
    store, _ = study
    validated = [h for h in hypotheses(store.cursor()) if h.status == "validated"]
    assert validated
    moved = validated[0].hypothesis_id
    store.execute(
        'UPDATE hypotheses SET provenance = json_merge_patch(provenance, \'{"split": "discovery"}\') '
        "WHERE hypothesis_id = ?",
        [moved],
    )
    text = write_report(store, tmp_path / "r.md").read_text()
    finding = text.split(f"### {moved}. ")[1].split("\n### ")[0]
    assert "- Prevalence on the discovery fold: **" in finding
    others = [f for f in text.split("\n### ")[1:] if not f.startswith(f"{moved}. ") and "- Prevalence" in f]
    assert all("- Prevalence on held-out: **" in f for f in others)
    assert "Prevalence on the discovery fold" in write_report(store, tmp_path / "r.html").read_text()
