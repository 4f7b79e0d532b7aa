"""One finding per behaviour: near-duplicate drafts merged, and drafts whose change others explain set aside.

Decided on discovery labels only, before anything is tested on held-out. What a draft became is kept in the
surviving draft's provenance: `merged` (the same behaviour, another wording or labeler) and `side_effects`
(a change that follows from the finding: in its segments, or right after them in the same rollout).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from engine.hypotheses.discovery import MIN_Z, Discovery, Draft
from engine.hypotheses.ngrams import mostly_inside, nearly_equal


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _same_statement(a: Draft, b: Draft) -> bool:
    """Drafts without discovery labels (judge drafts) are the same when their statements share most words."""
    wa, wb = _words(a.statement), _words(b.statement)
    return bool(wa | wb) and len(wa & wb) / len(wa | wb) >= 0.7


def _names_a_behaviour(draft: Draft) -> bool:
    return "similar_to" in json.dumps(draft.spec)


def _absorbed(draft: Draft, relation: str) -> dict[str, Any]:
    return {
        "statement": draft.statement,
        "feature_ids": draft.provenance.get("feature_ids"),
        "spec": draft.spec,
        "relation": relation,
    }


def merge_near_duplicates(drafts: list[Draft], discovery: Discovery) -> list[Draft]:
    """One finding per behaviour, decided on discovery labels only. Drafts are taken broadest first (most
    discovery positives), each against the drafts already kept in the same direction:

    - the same verifier, or (judge drafts) nearly the same statement: merged into the kept one;
    - at least half of its positives inside kept drafts it co-occurs with (`Discovery.co_occurs`), and no change
      of its own among their segments: a narrower wording of their behaviour, merged into the one it overlaps
      most (an exemplar draft takes the place of a phrase or feature draft labelling nearly the same segments,
      as it names a behaviour worded many ways);
    - otherwise kept, however much it overlaps: a narrow draft with a change of its own inside a broad one
      (fewer apologies among the many short turns) is a distinct behaviour.

    Then `_without_side_effects` drops the kept drafts whose change the others explain."""
    kept: list[Draft] = []
    for draft in sorted(drafts, key=lambda d: (-len(d.hits), not _names_a_behaviour(d), -d.score)):
        peers = [k for k in kept if k.direction == draft.direction]
        twin = next(
            (k for k in peers if (k.labeler == draft.labeler and k.spec == draft.spec)
             or (not (k.hits and draft.hits) and _same_statement(k, draft))),
            None,
        )  # fmt: skip
        if twin is not None:
            twin.provenance["merged"].append(_absorbed(draft, "same labeler or statement"))
            continue
        near = [k for k in peers if discovery.co_occurs(draft, k)]
        near.sort(key=lambda k: -len(k.hits & draft.hits))
        within = frozenset().union(*(k.hits for k in near))
        if near and 2 * len(draft.hits & within) >= len(draft.hits) and discovery.z_among(draft, within, True) < MIN_Z:
            main = near[0]
            if (
                _names_a_behaviour(draft)
                and not _names_a_behaviour(main)
                and nearly_equal(len(main.hits & draft.hits), len(draft.hits), len(main.hits))
            ):
                kept[kept.index(main)] = _fresh(draft, [_absorbed(main, "same segments"), *main.provenance["merged"]])
            else:
                main.provenance["merged"].append(_absorbed(draft, "narrower wording"))
            continue
        kept.append(_fresh(draft, []))
    return _without_side_effects(kept, discovery)


def _fresh(draft: Draft, merged: list[dict[str, Any]]) -> Draft:
    return replace(draft, provenance={**draft.provenance, "merged": merged, "side_effects": []})


def _without_side_effects(kept: list[Draft], discovery: Discovery) -> list[Draft]:
    """Drop the drafts whose change the other kept drafts explain, in either direction, each recorded as a
    side effect of one of them: where their segments explain it (fewer reasoning turns of 10-49 words because
    others gained a sentence and grew), of the draft whose segments alone explain most of it; else where it
    follows one of them in sequence (`Discovery.follows`: the tool called again after a failed probe call),
    of that draft. The least preferred are tried first, so of two drafts that explain each other the
    preferred one stays."""
    kept = list(kept)
    for draft in reversed(list(kept)):
        # A draft nested inside this one is a part of it, not an explanation (fewer apologies in short turns).
        others = [
            k for k in kept if k is not draft and k.hits and not mostly_inside(len(k.hits & draft.hits), len(k.hits))
        ]
        if not draft.hits or not others:
            continue
        if discovery.explained(draft, frozenset().union(*(k.hits for k in others))):
            main = min(others, key=lambda k: discovery.z_among(draft, k.hits, False))
            relation = "change explained by this finding"
        else:
            cause = next((k for k in others if discovery.follows(draft, k)), None)
            if cause is None:
                continue
            main, relation = cause, "follows this finding's segments in the same rollout"
        main.provenance["side_effects"].append(_absorbed(draft, relation))
        kept.remove(draft)
    return kept
