"""What a finding took in: the drafts merged into it (`merged`) or explained by it (`side_effects`), kept in
its provenance with how they relate."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.hypotheses.discovery import Draft


def absorbed(draft: Draft, relation: str) -> dict[str, Any]:
    """What provenance keeps of a draft merged into another or explained by it, and how they relate."""
    return {
        "statement": draft.statement,
        "feature_ids": draft.provenance.get("feature_ids"),
        "spec": draft.spec,
        "relation": relation,
    }


def fresh(draft: Draft) -> Draft:
    """The draft with its own lists of what it absorbed (`merged`) and explains (`side_effects`): empty for a
    new draft, copies of an earlier pass's for a kept one."""
    p = draft.provenance
    return replace(
        draft, provenance={**p, "merged": list(p.get("merged", [])), "side_effects": list(p.get("side_effects", []))}
    )


def take_in(into: Draft, draft: Draft, relation: str) -> None:
    """Record in `into`'s provenance that it absorbed `draft` (`relation`), with what `draft` had absorbed and
    explained."""
    into.provenance["merged"] += [absorbed(draft, relation), *draft.provenance.get("merged", [])]
    into.provenance["side_effects"] += draft.provenance.get("side_effects", [])


def in_place_of(draft: Draft, main: Draft, relation: str) -> Draft:
    """The draft, kept in the place of `main`, which it absorbs."""
    kept = fresh(draft)
    take_in(kept, main, relation)
    return kept
