"""The report as one self-contained HTML page: inline CSS and SVG, no scripts, every text escaped."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from engine.hypotheses.calibration_record import calibration_lines
from engine.hypotheses.cautions import caution_line
from engine.hypotheses.provenance import provenance_text, tested_on
from engine.llm.fence import clean
from engine.report.content import ReportContent, excerpt, method_lines, pct, pts, q_text
from engine.report.svg import delta_dot, prevalence_bars
from engine.store.queries.deltas import LEVELS_READING
from engine.store.queries.overview import EXPLORATORY_RULE, EXPLORATORY_TITLE

CSS = """body{font:14px/1.45 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;width:100%;margin:.5em 0 1.5em}td,th{border-bottom:1px solid #ddd;padding:4px 6px;
text-align:left;vertical-align:top}th{background:#f4f4f4}.finding{border:1px solid #ddd;border-radius:6px;
padding:.6em 1em;margin:1em 0}.evidence{background:#fafafa;border-left:3px solid #f58518;padding:.3em .6em;
margin:.3em 0;white-space:pre-wrap}.muted{color:#666}"""


def h(text: object, limit: int = 600) -> str:
    """Escape anything shown (transcript text included) after stripping control characters."""
    return escape(clean(str(text), limit)) if text is not None else ""


def _axis(values: Iterable[float | None]) -> float:
    """The half-width of a table's delta axis: its largest |value| (0.1 when it has none)."""
    return max([abs(x) for x in values if x is not None] or [0.1])


def _exploratory(content: ReportContent) -> list[str]:
    """A small study's whole-study ranking, titled and captioned as never validated ([] when there is none)."""
    if not content.exploratory:
        return []
    parts = [
        f"<h2>{h(EXPLORATORY_TITLE)} (top {len(content.exploratory)})</h2><p class='muted'>{h(EXPLORATORY_RULE)}.</p>"
        "<table><tr><th>feature</th><th>kind</th><th>family</th><th>before</th><th>after</th><th>delta (pts)</th>"
        "<th></th><th>p</th></tr>"
    ]
    span = _axis(r[k] for r in content.exploratory for k in ("ci_low", "ci_high", "delta"))
    for r in content.exploratory:
        parts.append(
            f"<tr><td>{h(r['label'])}</td><td>{h(r['kind'])}</td><td>{h(r['family'])}</td>"
            f"<td>{pct(r['prevalence_before'])}</td><td>{pct(r['prevalence_after'])}</td><td>{pts(r['delta'])}</td>"
            f"<td>{delta_dot(r['delta'], r['ci_low'], r['ci_high'], span)}</td><td>{q_text(r['p_value'])}</td></tr>"
        )
    return [*parts, "</table>"]


def render_html(content: ReportContent) -> str:
    s = content.summary
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>rldiff report: {h(s.before)} vs {h(s.after)}</title><style>{CSS}</style></head><body>",
        f"<h1>rldiff report: {h(s.before)} &rarr; {h(s.after)}</h1>",
        f"<p><strong>Warning: {h(s.stale_notice())}.</strong></p>" if s.stale else "",
        f"<p><strong>{h(s.small_study_notice(), 600)}.</strong></p>" if s.small_study_notice() else "",
        "<h2>Study</h2>",
        "<table><tr><th>checkpoint</th><th>tasks</th><th>rollouts</th><th>success rate</th><th>95% CI</th></tr>",
    ]
    for c in s.checkpoints:
        ci = f"[{c.reward_ci[0]:.1%}, {c.reward_ci[1]:.1%}]" if c.reward_ci else "n/a"
        parts.append(
            f"<tr><td>{h(c.checkpoint)}</td><td>{c.n_tasks}</td><td>{c.n_rollouts}</td>"
            f"<td>{pct(c.mean_reward)}</td><td>{ci}</td></tr>"
        )
    parts.append(f"</table><p class='muted'>{h(content.counts)}.</p>")
    parts.append(f"<h2>Validated findings ({len(content.validated)})</h2>")
    if not content.validated:
        parts.append("<p>No hypothesis was validated on the held-out split.</p>")
    if content.restating_note:
        parts.append(f"<p class='muted'>{h(content.restating_note)}.</p>")
    for f in content.validated:
        parts.append(
            f"<div class='finding'><h3>{f.hypothesis_id}. {h(f.statement)}</h3>"
            f"{prevalence_bars(f.prevalence_before, f.prevalence_after, f.ci_low, f.ci_high)}"
            f"<p>Prevalence on {tested_on(f.provenance)} {pct(f.prevalence_before)} &rarr; "
            f"{pct(f.prevalence_after)}: delta "
            f"{pts(f.delta)} pts, 95% CI [{pts(f.ci_low)}, {pts(f.ci_high)}], q = {q_text(f.q_value)}, "
            f"{f.n_labeled or 0} segments labelled."
            + (f" Association with reward: {f.reward_assoc:+.2f}." if f.reward_assoc is not None else "")
            + "</p>"
            + (f"<p>{h(f.same_evidence.phrase().capitalize())}</p>" if f.same_evidence else "")
            + (f"<p><b>Caution</b>: {h(caution)}</p>" if (caution := caution_line(f.provenance, f.direction)) else "")
            + f"<p class='muted'>{h(provenance_text(f))}</p>"
        )
        if f.decision or f.note:
            parts.append(f"<p>Decision: <b>{h(f.decision or 'none')}</b> {h(f.note or '')}</p>")
        for ex in content.examples.get(f.hypothesis_id, []):
            seg = ex.segment
            pre, hit, post = excerpt(seg.text, ex.evidence)
            parts.append(
                f"<div class='evidence'><span class='muted'>{h(ex.split)} · {h(seg.checkpoint)} · "
                f"task {h(seg.task_id)} · rollout {h(seg.rollout_id)}</span>\n"
                f"{h(pre)}<mark>{h(hit)}</mark>{h(post)}</div>"
            )
        parts.append("</div>")
    parts += _exploratory(content)
    parts.append(
        f"<h2>Rejected, inconclusive and exploratory ({len(content.others)})</h2>"
        + (f"<p>{h(content.others_tally)}.</p>" if content.others else "")
        + "<table><tr><th>id</th>"
        "<th>statement</th><th>status</th><th>why</th><th>decision</th></tr>"
    )
    for o in content.others:
        parts.append(
            f"<tr><td>{o.hypothesis_id}</td><td>{h(o.statement)}</td><td>{h(o.status)}</td>"
            f"<td>{h(o.reason)}</td><td>{h(o.decision or '')} {h(o.note or '')}</td></tr>"
        )
    parts.append("</table>")
    if content.calibrations:
        parts.append(f"<h2>Labeler calibration against hand labels ({len(content.calibrations)})</h2><ul>")
        for hypothesis_id, calibration in sorted(content.calibrations.items()):
            lines = "<br>".join(h(x) for x in calibration_lines(calibration))
            parts.append(f"<li>Hypothesis {hypothesis_id}: {lines}</li>")
        parts.append("</ul>")
    span = _axis(x for d in content.deltas for x in (d.ci_low, d.ci_high, d.delta))
    parts.append(
        "<h2>Top feature deltas (discovery split)</h2>"
        f"<p class='muted'>{h(LEVELS_READING)} {h(content.families)}</p><table><tr>"
        "<th>feature</th><th>kind</th><th>family</th><th>before</th><th>after</th><th>delta (pts)</th><th></th>"
        "<th>q (in family)</th><th>pooled</th></tr>"
    )
    for d in content.deltas:
        parts.append(
            f"<tr><td>{h(d.label)}</td><td>{h(d.kind)}</td><td>{h(d.family or '')}</td>"
            f"<td>{pct(d.prevalence_before)}</td>"
            f"<td>{pct(d.prevalence_after)}</td><td>{pts(d.delta)}</td>"
            f"<td>{delta_dot(d.delta, d.ci_low, d.ci_high, span)}</td><td>{q_text(d.q_value)}</td>"
            f"<td class='muted'>{pct(d.pooled_before)} &rarr; {pct(d.pooled_after)}</td></tr>"
        )
    if content.sentence_features:
        parts.append("</table><h2>Concepts and behaviour groups: their sentences</h2><ul>")
        for sf in content.sentence_features:
            sentences = "".join(f"<li>{h(t)}</li>" for t in sf.sentences)
            parts.append(
                f"<li><b>{h(sf.label)}</b> ({h(sf.source)}, {h(sf.kind)}): {pts(sf.delta)} pts, q {q_text(sf.q_value)}"
                f"<ul>{sentences}</ul></li>"
            )
        parts.append("</ul><table>")
    parts.append(
        "</table><h2>Clusters</h2><table><tr><th>cluster</th><th>label</th><th>kind</th><th>size</th>"
        "<th>delta (pts)</th><th>q</th></tr>"
    )
    for cl in content.clusters:
        parts.append(
            f"<tr><td>{cl.cluster_id}</td><td>{h(cl.label)}</td><td>{h(cl.kind)}</td><td>{cl.size}</td>"
            f"<td>{pts(cl.delta)}</td><td>{q_text(cl.q_value)}</td></tr>"
        )
    parts.append("</table><h2>Method and provenance</h2><ul>")
    parts += [f"<li>{h(line)}</li>" for line in method_lines(content)]
    parts.append("</ul></body></html>")
    return "\n".join(parts)
