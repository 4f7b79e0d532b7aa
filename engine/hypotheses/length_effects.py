"""Turn length and the sentence drafts of the same turns: which explains which.

When a checkpoint's turns grow, every ordinary sentence is in more of them: "more reasoning turns like <an
ordinary sentence>" separates the discovery checkpoints though nothing per turn of a length changed (a pair
whose after-reasoning was only 1.6 times as long gave nine such drafts). Held-out validation marks such a claim
with a caution (`engine.hypotheses.equal_length`); drafting asks the same question of the fold it drafts on. A
sentence draft that would carry the caution there, beside a kept draft about the length of its kind of turns,
is that length draft's side effect: the finding a reader needs is that the turns are longer, not nine findings
that each half-say it. Without a length draft the sentence draft stays (held-out validation cautions it).

The other way round, a behaviour that adds a sentence to some turns makes them longer: a length draft is the
side effect of the sentence drafts of its kinds when the turns none of them labels show less than half of its
change. Methods: docs/hypotheses.md ("Longer turns").
"""

from __future__ import annotations

import numpy as np
import polars as pl

from engine.hypotheses.absorbed import absorbed
from engine.hypotheses.discovery import MIN_Z, DiscoverySplit, Draft
from engine.hypotheses.equal_length import about_length
from engine.hypotheses.length import BINNED_KINDS
from engine.hypotheses.merge import turn_length
from engine.hypotheses.validate import Claim, validate

LONGER = "changed with turn length only ({})"
WITH_SENTENCES = (
    "turn length changed mostly with the findings' sentences ({:+.1%} among the turns none labels, of {:+.1%})"
)
MOSTLY = 0.5  # the findings' turns carry a length change when the turns none labels show less than this share of it


def without_length_effects(
    drafts: list[Draft], discovery: DiscoverySplit, rng: np.random.Generator, *, fdr: float, n_permutations: int
) -> list[Draft]:
    """The drafts less (1) the verifier drafts of text or reasoning whose discovery change does not hold at
    equal turn length while their turns changed length their way (`validate`'s caution, on the drafting fold),
    each recorded in the `side_effects` of the kept length draft of its kinds with the largest change; then
    less (2) the length drafts whose change the remaining sentence drafts' turns carry (`_explained_length`)."""
    lengths = [d for d in drafts if turn_length(d) and d.hits]
    sentences = [d for d in drafts if _sentence_draft(d)]
    if not lengths or not sentences:
        return drafts
    labels = pl.concat([_labels(i, d, discovery) for i, d in enumerate(sentences)])
    claims = [Claim(i, d.direction) for i, d in enumerate(sentences)]
    results = validate(discovery.population, labels, claims, rng, fdr=fdr, n_permutations=n_permutations)
    gone: list[Draft] = []
    for draft, result in zip(sentences, results, strict=True):
        at_length = result.equal_length
        main = max((d for d in lengths if set(d.kinds) & set(draft.kinds)), key=lambda d: abs(d.score), default=None)
        if main is None or at_length is None or not at_length.caution:
            continue
        main.provenance.setdefault("side_effects", []).append(absorbed(draft, LONGER.format(at_length.phrase())))
        gone.append(draft)
    sentences = [d for d in sentences if all(d is not g for g in gone)]
    for length in lengths:
        changes = _explained_length(length, sentences, discovery)
        if changes is not None:
            main = max(
                (d for d in sentences if set(d.kinds) & set(length.kinds)), key=lambda d: len(d.hits & length.hits)
            )
            effects = [absorbed(length, WITH_SENTENCES.format(*changes)), *length.provenance.get("side_effects", [])]
            main.provenance.setdefault("side_effects", []).extend(effects)
            gone.append(length)
    return [d for d in drafts if all(d is not g for g in gone)]


def _sentence_draft(draft: Draft) -> bool:
    """A verifier draft of text or reasoning turns that is not about their length."""
    kinds = set(draft.kinds) & set(BINNED_KINDS)
    return draft.labeler == "verifier" and bool(draft.hits) and bool(kinds) and not about_length(draft.spec)


def _explained_length(length: Draft, sentences: list[Draft], discovery: DiscoverySplit) -> tuple[float, float] | None:
    """(the length draft's discovery change among the turns no sentence draft of its kinds labels, its change
    among all its turns) when the findings' turns carry the length change: among the turns none labels it is
    less than half of what it is overall, or not significant (z below MIN_Z). The share decides in a large study,
    where the turns a finding's labeler misses leave a small remainder that is significant (paraphrased seed
    1013: 3.6 of 15.8 points, z 2.5); the test in a small one, where the remainder is mostly noise. None
    otherwise, or with no such sentence draft."""
    mine = [d for d in sentences if set(d.kinds) & set(length.kinds)]
    if not mine:
        return None
    index, _ = discovery.index(length.kinds)
    labelled = np.isin(index.segment_ids, np.fromiter(frozenset().union(*(d.hits for d in mine)), dtype=np.int64))
    hits = np.isin(index.segment_ids, np.fromiter(length.hits, dtype=np.int64, count=len(length.hits)))
    after = index.is_after
    rest, whole = ~labelled, np.ones_like(labelled)
    if not ((rest & after).any() and (rest & ~after).any()):
        return None
    rest_change, change = (float(hits[rows & after].mean() - hits[rows & ~after].mean()) for rows in (rest, whole))
    z = discovery.z_among(length, frozenset(index.segment_ids[labelled]), False)
    carried = (change != 0 and rest_change / change < MOSTLY) or z < MIN_Z
    return (rest_change, change) if carried else None


def _labels(claim: int, draft: Draft, discovery: DiscoverySplit) -> pl.DataFrame:
    """The draft's discovery labels (segment_id, label, hypothesis_id = `claim`, weight 1) over its kinds."""
    index, _ = discovery.index(draft.kinds)
    ids = index.segment_ids
    hits = np.fromiter(draft.hits, dtype=np.int64, count=len(draft.hits))
    return pl.DataFrame(
        {"segment_id": ids, "label": np.isin(ids, hits), "hypothesis_id": np.full(ids.size, claim), "weight": 1.0}
    )
