"""The report as Markdown. Rollout text is escaped: no raw HTML, table breaks, links or images from transcripts
(an image in a transcript, `![](https://host/?leak=...)`, would load when the report is viewed)."""

from __future__ import annotations

from html import escape

from engine.hypotheses.calibration_record import calibration_lines
from engine.hypotheses.cautions import caution_line
from engine.hypotheses.provenance import provenance_text, tested_on
from engine.llm.fence import clean
from engine.report.content import ReportContent, excerpt, method_lines, pct, pts, q_text
from engine.store.queries import HypothesisRow
from engine.store.queries.deltas import LEVELS_READING
from engine.store.queries.overview import EXPLORATORY_RULE, EXPLORATORY_TITLE

EXCERPT = 240


# Markdown punctuation that could make rollout text into markup: table cells, code, emphasis, links and
# images (`[`, `]`, `!`, `(`, `)`), headings and strikethrough; backslash first, so escapes stay literal.
_MARKUP = str.maketrans({c: f"\\{c}" for c in "\\|`*_[]()!#~"})


def md(text: str | None, limit: int = EXCERPT) -> str:
    """Transcript or user text made inert for Markdown: control and bidi characters gone, HTML escaped,
    Markdown punctuation backslash-escaped, one line."""
    if not text:
        return ""
    flat = " ".join(clean(text, limit).split())
    return escape(flat).translate(_MARKUP)


def _finding(h: HypothesisRow, content: ReportContent) -> list[str]:
    lines = [
        f"### {h.hypothesis_id}. {md(h.statement, 400)}",
        "",
        f"- Prevalence on {tested_on(h.provenance)}: **{pct(h.prevalence_before)} -> {pct(h.prevalence_after)}** "
        f"(delta {pts(h.delta)} pts, 95% CI [{pts(h.ci_low)}, {pts(h.ci_high)}], q = {q_text(h.q_value)}, "
        f"{h.n_labeled or 0} segments labelled)",
    ]
    if h.reward_assoc is not None:
        lines.append(f"- Association with reward within checkpoint and task: {h.reward_assoc:+.2f}")
    if h.same_evidence:
        lines.append(f"- {h.same_evidence.phrase().capitalize()}")
    caution = caution_line(h.provenance, h.direction)
    if caution:
        lines.append(f"- **Caution**: {md(caution, 300)}")
    lines.append(f"- Provenance: {md(provenance_text(h), 400)}")
    if h.decision or h.note:
        lines.append(f"- Decision: {h.decision or 'none'}" + (f"; note: {md(h.note, 600)}" if h.note else ""))
    for ex in content.examples.get(h.hypothesis_id, []):
        seg = ex.segment
        pre, hit, post = excerpt(seg.text, ex.evidence)
        gap_before = " " if pre[-1:].isspace() else ""
        gap_after = " " if post[:1].isspace() else ""
        quote = f"{md(pre, 400)}{gap_before}**{md(hit, 400)}**{gap_after}{md(post, 400)}" if hit else md(post, 400)
        lines.append(
            f"- Evidence ({md(ex.split)}, {md(seg.checkpoint)}, task {md(seg.task_id)}, rollout {md(seg.rollout_id)}): "
            f"{quote}"
        )
    return [*lines, ""]


def _exploratory(content: ReportContent) -> list[str]:
    """A small study's whole-study ranking, titled and captioned as never validated ([] when there is none)."""
    if not content.exploratory:
        return []
    lines = [
        f"## {EXPLORATORY_TITLE} (top {len(content.exploratory)})",
        "",
        f"{EXPLORATORY_RULE}.",  # the project's own sentence: no markup to escape
        "",
        "| feature | kind | family | before | after | delta (pts) | 95% CI | p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in content.exploratory:
        lines.append(
            f"| {md(str(r['label']), 80)} | {md(str(r['kind']))} | {md(str(r['family']))} | "
            f"{pct(r['prevalence_before'])} | {pct(r['prevalence_after'])} | {pts(r['delta'])} | "
            f"[{pts(r['ci_low'])}, {pts(r['ci_high'])}] | {q_text(r['p_value'])} |"
        )
    return [*lines, ""]


def render_markdown(content: ReportContent) -> str:
    s = content.summary
    out = [
        f"# rldiff report: {md(s.before)} -> {md(s.after)}",
        "",
        *([f"**Warning: {md(s.stale_notice(), 400)}.**", ""] if s.stale else []),
        *([f"**{md(s.small_study_notice(), 600)}.**", ""] if s.small_study_notice() else []),
        "## Study",
        "",
        "| checkpoint | tasks | rollouts | success rate | 95% CI |",
        "|---|---|---|---|---|",
    ]
    for c in s.checkpoints:
        ci = f"[{c.reward_ci[0]:.1%}, {c.reward_ci[1]:.1%}]" if c.reward_ci else "n/a"
        out.append(f"| {md(c.checkpoint)} | {c.n_tasks} | {c.n_rollouts} | {pct(c.mean_reward)} | {ci} |")
    out += [
        "",
        f"{content.counts}.",
        "",
        f"## Validated findings ({len(content.validated)})",
        "",
    ]
    if not content.validated:
        out += ["No hypothesis was validated on the held-out split.", ""]
    if content.restating_note:
        out += [f"{content.restating_note}.", ""]
    for h in content.validated:
        out += _finding(h, content)
    out += _exploratory(content)
    out += [
        f"## Rejected, inconclusive and exploratory ({len(content.others)})",
        "",
        *([f"{content.others_tally}.", ""] if content.others else []),
        "| id | statement | status | why | decision |",
        "|---|---|---|---|---|",
    ]
    for h in content.others:
        out.append(
            f"| {h.hypothesis_id} | {md(h.statement, 160)} | {h.status} | {md(h.reason, 300)} | "
            f"{h.decision or ''}{' (' + md(h.note, 120) + ')' if h.note else ''} |"
        )
    if content.calibrations:
        out += ["", f"## Labeler calibration against hand labels ({len(content.calibrations)})", ""]
        for hypothesis_id, calibration in sorted(content.calibrations.items()):
            lines = "; ".join(md(line, 400) for line in calibration_lines(calibration))
            out += [f"- Hypothesis {hypothesis_id}: {lines}"]
    out += [
        "",
        "## Top feature deltas (discovery split)",
        "",
        " ".join(filter(None, (LEVELS_READING, content.families))),
        "",
        "| feature | kind | family | before | after | delta (pts) | 95% CI | q (in family) | pooled |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in content.deltas:
        out.append(
            f"| {md(d.label, 80)} | {d.kind} | {d.family or ''} | {pct(d.prevalence_before)} | "
            f"{pct(d.prevalence_after)} | "
            f"{pts(d.delta)} | [{pts(d.ci_low)}, {pts(d.ci_high)}] | {q_text(d.q_value)} | "
            f"{pct(d.pooled_before)} -> {pct(d.pooled_after)} |"
        )
    if content.sentence_features:
        out += ["", "## Concepts and behaviour groups: their sentences", ""]
        for f in content.sentence_features:
            out.append(f"- **{md(f.label, 200)}** ({f.source}, {f.kind}): {pts(f.delta)} pts, q {q_text(f.q_value)}")
            out += [f"  - {md(t, 200)}" for t in f.sentences]
    out += ["", "## Clusters", "", "| cluster | label | kind | size | delta (pts) | q |", "|---|---|---|---|---|---|"]
    for cl in content.clusters:
        out.append(
            f"| {cl.cluster_id} | {md(cl.label, 80)} | {cl.kind} | {cl.size} | {pts(cl.delta)} | {q_text(cl.q_value)} |"
        )
    out += ["", "## Method and provenance", "", *[f"- {line}" for line in method_lines(content)], ""]
    return "\n".join(out)
