"""Where a hypothesis came from: the split it is tested on, and in words one line for the report, the same
facts and the other fold's wordings for `rldiff hypothesis show` and the TUI. Statements and feature names
quote rollouts: callers sanitise what they print (`engine.safe_text`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from engine.hypotheses.equal_length import EqualLength
from engine.hypotheses.task_spread import TaskSpread
from engine.hypotheses.turn_count import TurnCount
from engine.kinds import DISCOVERY, HELDOUT, Split
from engine.safe_text import line

if TYPE_CHECKING:  # the TUI imports this module, and it never loads the store itself (tests/test_tui_import.py)
    from engine.store.queries import HypothesisRow

MAX_NAMED = 5  # features named in the line
MAX_SIDE_EFFECTS = 3
QUOTE_CHARS = 60  # of each other exemplar named
# What a hypothesis is tested on (provenance 'split'): held-out, or in a cross-fitted small study discovery
# (it was drafted on the held-out fold).
SPLIT_NAMES: dict[str, str] = {HELDOUT: "held-out", DISCOVERY: "discovery"}


def tested_split(provenance: str | dict[str, Any] | None) -> Split:
    """The split a hypothesis is tested on, from its provenance (default: held-out)."""
    p = json.loads(provenance) if isinstance(provenance, str) else provenance or {}
    return DISCOVERY if p.get("split") == DISCOVERY else HELDOUT


def tested_on(provenance: str | dict[str, Any] | None) -> str:
    """Where a hypothesis's test numbers come from, in words: the held-out split, or in a cross-fitted small
    study the discovery fold (it was drafted on the held-out one)."""
    return "held-out" if tested_split(provenance) == HELDOUT else "the discovery fold"


def provenance_parts(h: HypothesisRow) -> list[str]:
    """The facts of a hypothesis' provenance, each a short phrase."""
    p = h.provenance or {}
    parts = [f"origin {h.origin}", f"labeler {p.get('labeler', h.labeler)}"]
    tested = SPLIT_NAMES[tested_split(p)]
    if p.get("drafted_on"):
        parts.append(f"drafted on {SPLIT_NAMES.get(p['drafted_on'], p['drafted_on'])}, tested on {tested}")
    elif p.get("split"):
        parts.append(f"tested on {tested}")
    if p.get("equal_length"):  # the held-out change within turn-length strata (engine.hypotheses.length)
        parts.append(EqualLength(**p["equal_length"]).phrase())
    if p.get("turn_count"):  # the held-out change in turns like it a rollout (engine.hypotheses.validate)
        parts.append(TurnCount(**p["turn_count"]).phrase())
    if p.get("task_spread"):  # which tasks the held-out change comes from (engine.hypotheses.validate)
        parts.append(TaskSpread(**p["task_spread"]).phrase())
    if p.get("cluster_id") is not None:
        parts.append(f"cluster {p['cluster_id']}")
    named = p.get("feature_names") or p.get("feature_ids")
    if named:
        parts.append("from " + ", ".join(str(f) for f in named[:MAX_NAMED]))
    if p.get("model"):
        parts.append(f"model {p['model']}")
    if p.get("prompt_hash"):
        parts.append(f"prompt {str(p['prompt_hash'])[:12]}")
    if p.get("seed") is not None:
        parts.append(f"seed {p['seed']}")
    if p.get("merged"):
        parts.append(f"{len(p['merged'])} narrower or duplicate drafts merged in")
    if p.get("narrowed"):  # exemplars both checkpoints say, dropped from the labeler (engine.hypotheses.merge)
        first = line(p["narrowed"][0], QUOTE_CHARS)
        parts.append(f"{len(p['narrowed'])} exemplar(s) both checkpoints say dropped from the labeler: “{first}”")
    if p.get("counted_elsewhere"):  # exemplars another finding counts, dropped from the labeler (merge)
        elsewhere = p["counted_elsewhere"]
        first = line(elsewhere[0], QUOTE_CHARS)
        parts.append(f"{len(elsewhere)} exemplar(s) another finding counts dropped from the labeler: “{first}”")
    if p.get("other_behaviour"):  # exemplars of a behaviour that alone shows no change, dropped (parting.parted)
        dropped = p["other_behaviour"]
        first = line(dropped[0], QUOTE_CHARS)
        parts.append(
            f"{len(dropped)} exemplar(s) of another behaviour, no change alone, dropped from the labeler: “{first}”"
        )
    if p.get("apart"):  # behaviours its source's labeler also counted, each a finding of its own (parting.parted)
        parts.append("parted from the same labeler: " + ", ".join(f"“{line(q, QUOTE_CHARS)}”" for q in p["apart"]))
    if p.get("other_fold"):  # cross-fitting: the other fold drafted the same behaviour (engine.hypotheses.merge)
        parts.append("drafted on both folds, tested once")
    if p.get("matched_by"):  # an exemplar labeler's positives by their nearest exemplar (exemplars.matched_by)
        quote, *others = p["matched_by"]
        like = "".join(f", “{line(o['exemplar'], QUOTE_CHARS)}”{_wordings(o)} {o['share']:.0%}" for o in others)
        parts.append(
            f"{tested} positives by nearest exemplar: the quoted one{_wordings(quote)} {quote['share']:.0%}{like}"
        )
    if p.get("side_effects"):  # drafts whose discovery change this finding's segments explain (docs/hypotheses.md)
        effects = p["side_effects"][:MAX_SIDE_EFFECTS]
        parts.append("side effects: " + " | ".join(str(e.get("statement", ""))[:120] for e in effects))
    return parts


def _wordings(matched: dict[str, Any]) -> str:
    """The words " (and N other wordings)" for a `matched_by` entry that stands for several exemplars, else
    nothing (entries written before session 36 counted each exemplar alone)."""
    n = int(matched.get("wordings", 1)) - 1
    return f" (and {n} other wording{'s' if n > 1 else ''})" if n > 0 else ""


def provenance_text(h: HypothesisRow) -> str:
    """The provenance as one line (the report's)."""
    return "; ".join(provenance_parts(h))


def other_fold_wordings(h: HypothesisRow) -> list[str]:
    """How the other fold of a cross-fitted study drafted the same behaviour (not tested again there)."""
    return [str(e.get("statement", "")) for e in (h.provenance or {}).get("other_fold", [])]
