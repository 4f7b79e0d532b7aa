"""What a report shows, gathered from the store through the typed queries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.hypotheses.calibration_record import stored_calibration
from engine.hypotheses.reasons import counted, tally
from engine.hypotheses.sources import DRAFT_FDR
from engine.store import Store, queries
from engine.store.queries import (
    ClusterRow,
    DeltaFilter,
    DeltaRow,
    HypothesisExample,
    HypothesisRow,
    SentenceFeature,
    StudySummary,
)
from engine.store.queries.deltas import families_line, family_summary
from engine.store.queries.llm import total_cost
from engine.store.queries.runs import stage_configs

TOP_DELTAS = 15
TOP_CLUSTERS = 10
EXAMPLES = 2
TOP_SENTENCE_FEATURES = 8
TOP_EXPLORATORY = 10


@dataclass(frozen=True)
class ReportContent:
    summary: StudySummary
    validated: list[HypothesisRow]
    others: list[HypothesisRow]  # rejected, inconclusive, exploratory, proposed
    examples: dict[int, list[HypothesisExample]]
    deltas: list[DeltaRow]
    clusters: list[ClusterRow]
    stage_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    llm_cost: float = 0.0
    sentence_features: list[SentenceFeature] = field(default_factory=list)  # concepts and groups, with sentences
    calibrations: dict[int, dict[str, Any]] = field(default_factory=dict)  # hypothesis_id -> stored calibration
    # a small study's whole-study ranking (it includes held-out rollouts: a report showing it logs the view)
    exploratory: list[dict[str, Any]] = field(default_factory=list)
    families: str = ""  # beneath the deltas table: tests per family, the rollouts' length change

    @property
    def restating_note(self) -> str | None:
        """A sentence under the validated findings' title when some likely restate another one."""
        n = sum(h.same_evidence is not None for h in self.validated)
        if not n:
            return None
        return (
            f"{n} of them likely {'restates' if n == 1 else 'restate'} a broader finding (the same evidence "
            f"decided most of {'its' if n == 1 else 'their'} positives), listed beneath it"
        )

    @property
    def others_tally(self) -> str:
        """The hypotheses not validated by status and why (`engine.hypotheses.reasons.tally`), '' for none."""
        return tally(self.others)

    @property
    def counts(self) -> str:
        """'1310 features, 15 hypotheses: 7 validated; 6 rejected (...); 2 inconclusive (...)'."""
        return f"{self.summary.n_features} features, {counted([*self.validated, *self.others])}"

    @property
    def shows_heldout(self) -> bool:
        """Whether the report shows held-out evidence (examples of findings, the whole-study ranking)."""
        return any(self.examples.values()) or bool(self.exploratory)


def gather(store: Store) -> ReportContent:
    con = store.cursor()
    rows = queries.hypotheses(con)
    validated = [h for h in rows if h.status == "validated"]
    others = [h for h in rows if h.status != "validated"]
    calibrations = {h.hypothesis_id: stored_calibration(con, h.hypothesis_id) for h in rows}
    summary = queries.study_summary(con)
    return ReportContent(
        summary=summary,
        validated=validated,
        others=others,
        examples={h.hypothesis_id: queries.hypothesis_examples(con, h.hypothesis_id, EXAMPLES) for h in validated},
        deltas=queries.delta_page(con, DeltaFilter(sort="q"), limit=TOP_DELTAS).rows,
        clusters=queries.clusters(con)[:TOP_CLUSTERS],
        stage_configs=stage_configs(con),
        llm_cost=total_cost(con),
        sentence_features=queries.sentence_features(con, TOP_SENTENCE_FEATURES),
        calibrations={k: v for k, v in calibrations.items() if v is not None},
        exploratory=queries.exploratory_ranking(con, summary)[:TOP_EXPLORATORY],
        families=families_line(family_summary(con)),
    )


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def pts(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f}"


def q_text(q: float | None) -> str:
    return "n/a" if q is None else f"{q:.2g}"


def method_lines(content: ReportContent) -> list[str]:
    """Plain sentences on how the numbers were made (shared by both formats), for the design this study had:
    the interval its deltas stage used, and how its hypotheses were tested (docs/statistics.md)."""
    hyp = content.stage_configs.get("hypotheses", {})
    interval = content.summary.metrics_of("deltas").get("interval") or "n/a"
    drafter = (
        f"LLM {hyp['llm']}"
        if hyp.get("llm")
        else "offline (extractive: structural facts, tool names, exemplar sentences and phrases as verifiers)"
    )
    tested = (
        "each tested on the other of two folds of rollouts split within each task (a small study: each fold "
        "drafts, the other tests), by permuting checkpoint labels within task, which speaks for these tasks"
        if content.summary.split_mode == "rollout"
        else "tested on held-out tasks by a sign-flip test over tasks, which speaks for new tasks like them"
    )
    hypotheses = (
        "No hypothesis was drafted: nothing was held out to test one on."
        if content.summary.split_mode == "none"
        else f"Hypotheses were drafted from clusters and features whose change on the drafting split reached "
        f"q < {DRAFT_FDR} (drafting only chooses what is tested), {tested}, "
        f"with a BH correction over every hypothesis ever tested (FDR {hyp.get('fdr', 0.05)})."
    )
    sentences = content.stage_configs.get("features", {}).get("sentence_features", True)
    features = (
        "SAE latents, sentence concepts and behaviour groups, structural features"
        if sentences
        else "SAE latents and structural features; no sentence features"
    )
    return [
        f"Features ({features}) were compared between checkpoints on the discovery split as each rollout's own "
        "rate (tool-call rows among calls to the same tool; rows of what fires anywhere in a rollout adjusted for "
        "its length); p-values from permuting checkpoint labels among rollouts within each task, q-values from "
        f"Benjamini-Hochberg within each testing family, 95% CIs {interval}.",
        hypotheses,
        f"Drafting: {drafter}; seed {hyp.get('seed', 'n/a')}; {hyp.get('permutations', 'n/a')} permutations.",
        *([f"LLM spending recorded in the store: ${content.llm_cost:.2f}."] if content.llm_cost else []),
    ]


def excerpt(text: str, evidence: str | None, width: int = 110) -> tuple[str, str, str]:
    """(before, evidence, after): the evidence span in its segment with up to `width` characters each side
    (the start of the segment when the span is not found verbatim)."""
    at = text.lower().find(evidence.lower()) if evidence else -1
    if at < 0:
        return "", "", text[: 2 * width] + ("..." if len(text) > 2 * width else "")
    end = at + len(evidence or "")
    before = ("..." if at > width else "") + text[max(0, at - width) : at]
    after = text[end : end + width] + ("..." if len(text) > end + width else "")
    return before, text[at:end], after
