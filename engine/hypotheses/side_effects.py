"""Drafts whose change other kept drafts explain, set aside as their side effects: in their segments (fewer
short turns because others grew), or right after them in the same rollout (a tool called again after a failed
probe call)."""

from __future__ import annotations

from engine.hypotheses.absorbed import absorbed
from engine.hypotheses.discovery import MIN_Z, DiscoverySplit, Draft
from engine.hypotheses.ngrams import mostly_inside

EXPLAINED = "change explained by this finding"
INSIDE = ", which lies inside it"


def _cause_of(draft: Draft, effect: Draft, discovery: DiscoverySplit) -> bool:
    """Whether the draft, lying mostly inside `effect`, explains `effect`'s change: of two drafts that explain
    each other, the narrow one inside is the cause (every probe call fails, so errors rise), not an effect."""
    return mostly_inside(len(draft.hits & effect.hits), len(draft.hits)) and discovery.explained(effect, draft.hits)


def without_side_effects(kept: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """Drop the drafts whose change the other kept drafts explain, in either direction, each recorded as a
    side effect of one of them: where their segments explain it (fewer reasoning turns of 10-49 words because
    others gained a sentence and grew), of the draft whose segments alone explain most of it; else where it
    follows one of them in sequence (`DiscoverySplit.follows`: the tool called again after a failed probe call),
    of that draft. The drafts nested inside it are tried apart from the others (its change may be theirs:
    more errors because failing probe calls were added). Drafts are tried in the merge's order reversed (the
    narrowest first), so of two drafts that explain each other the broader one stays, unless the narrow one
    lies inside it and explains it (`_cause_of`): then the broader one goes, with its own side effects."""
    kept = list(kept)
    for draft in reversed(list(kept)):
        if all(k is not draft for k in kept):  # already gone as the side effect of a cause inside it
            continue
        others = [k for k in kept if k is not draft and k.hits]
        if not draft.hits or not others:
            continue
        # Drafts nested inside this one explain it only together (errors that rise only as probe calls, which
        # fail, were added), never mixed with the rest: with the short turns' own apologies among them, the
        # turns that left the short bin would no longer explain the short bin's fall.
        nested: list[Draft] = []
        outer: list[Draft] = []
        for k in others:
            (nested if mostly_inside(len(k.hits & draft.hits), len(k.hits)) else outer).append(k)
        # Of the rest, those among whose segments the draft has no change of its own explain it without the
        # others: a broad draft's turns hold every planted sentence, so turns grow inside it too.
        quiet = [k for k in outer if discovery.z_among(draft, k.hits, True) < MIN_Z]
        explaining = next(
            (group for group in (outer, nested, quiet if len(quiet) < len(outer) else [])
             if group and discovery.explained(draft, frozenset().union(*(k.hits for k in group)))),
            None,
        )  # fmt: skip
        if explaining is not None:
            main = min(explaining, key=lambda k: discovery.z_among(draft, k.hits, False))
            if explaining is not nested and _cause_of(draft, main, discovery):
                effects = [absorbed(main, EXPLAINED + INSIDE), *main.provenance["side_effects"]]
                draft.provenance["side_effects"] += effects
                kept.remove(main)
                continue
            relation = EXPLAINED + (INSIDE if explaining is nested else "")
        else:
            cause = next((k for k in others if discovery.follows(draft, k)), None)
            if cause is None:
                continue
            main, relation = cause, "follows this finding's segments in the same rollout"
        main.provenance["side_effects"] += [absorbed(draft, relation), *draft.provenance["side_effects"]]
        kept.remove(draft)
    return kept
