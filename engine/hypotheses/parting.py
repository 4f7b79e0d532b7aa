"""One behaviour a finding: the exemplars another kept finding counts dropped from a labeler
(`each_exemplar_once`), and a labeler of several behaviours parted into one finding each (`parted`). Decided on
discovery labels only."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.hypotheses.absorbed import take_in
from engine.hypotheses.discovery import MIN_Z, DiscoverySplit, Draft
from engine.hypotheses.exemplars import exemplar_texts, matched_rows, similar_nodes
from engine.hypotheses.geometry import behaviours, nearer_unrelated
from engine.hypotheses.ngrams import two_proportion_z
from engine.hypotheses.relabel import (
    evidence_of,
    keeping,
    labelled_by,
    positives_of,
    quote_of,
    quoting_the_most,
    restated,
)

MIN_BEHAVIOUR_SHARE = 0.25  # a behaviour this share of a labeler's positives is nearest is a finding (`parted`)
COUNTED_THERE = "its change is this finding's sentences, which its labeler also matched"


def each_exemplar_once(kept: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """Each kept exemplar draft without the exemplars that are another kept finding's behaviour: those the
    other finding's labeler matches and that are nearer its exemplars than any of the draft's own that it does
    not match, when the draft's remaining exemplars are another behaviour than the other finding's
    (`geometry.nearer_unrelated`); the other finding is one of the same direction counting some of the same
    kinds of segment. A latent or behaviour group that fires on two behaviours that change together
    (re-checking a sum, declining a check as out of scope) puts sentences of the second among the first's
    exemplars, and the finding then counts the second behaviour's turns too, while a finding of the second
    stands beside it: a few sentences (paraphrased seed 59: four out-of-scope exemplars in a re-checking
    finding, held-out precision 0.69) or half of them, too alike for the bisection of the source's carriers to
    part (paraphrased seed 1409: grader awareness and out-of-scope, held-out precision 0.46; those sentences
    are nearer each other than the other finding's, so measured against all the draft's own exemplars, not
    only those the other does not match, none was taken). The narrowed labeler is kept while it still
    separates the discovery checkpoints (z >= MIN_Z), better or not: the sentences it gives up are counted by
    the finding they belong to; the dropped ones are recorded (`counted_elsewhere`), and a dropped quote
    re-quoted (`quoting_the_most`). A draft whose change was the other findings' sentences (`_without_exemplars`
    gives None) is left out, in the provenance of the finding that took most of them (paraphrased seed 1777: a
    concept on every kind of segment fired on closings, "Safe travels in the future!", and on the planted
    empathy for "the traveller's anxiety"; its finding quoted a closing and validated on the empathy)."""
    embed = discovery.population.embedder.embed
    out: list[Draft | None] = list(kept)
    for i, draft in enumerate(kept):
        nodes = similar_nodes(draft.spec)
        if not nodes:
            continue
        mine = exemplar_texts(nodes)
        vectors = embed(mine)
        own = vectors @ vectors.T
        np.fill_diagonal(own, -1.0)
        ordinary = discovery.ordinary_sentence(draft.kinds)
        theirs = np.zeros(len(mine), dtype=bool)
        owners: list[tuple[int, Draft]] = []
        for other in out:
            if other is None or other is draft:
                continue
            other_nodes = similar_nodes(other.spec)
            if not other_nodes or other.direction != draft.direction or not set(other.kinds) & set(draft.kinds):
                continue
            other_vectors = embed(exemplar_texts(other_nodes))
            matched = matched_rows(vectors, other_nodes, embed) & ~theirs
            nearest_own = own[:, ~matched & ~theirs].max(axis=1, initial=-1.0)
            taken = matched & ((vectors @ other_vectors.T).max(axis=1) > nearest_own)
            rest = ~theirs & ~taken
            if taken.any() and rest.sum() >= 2 and nearer_unrelated(vectors[rest], other_vectors, ordinary):
                theirs |= taken
                owners.append((int(taken.sum()), other))
        if theirs.any():
            narrowed = _without_exemplars(draft, [t for t, gone in zip(mine, theirs, strict=True) if gone], discovery)
            if narrowed is None:  # its change was the other findings' sentences: it is counted there
                take_in(max(owners, key=lambda o: o[0])[1], draft, COUNTED_THERE)
            out[i] = narrowed
    return [d for d in out if d is not None]


def parted(draft: Draft, discovery: DiscoverySplit) -> list[Draft]:
    """The exemplar draft as one draft per behaviour its labeler counts. Its exemplars are grouped by where they
    lie among the other discovery sentences of its kinds (`geometry.behaviours`); each group that at least
    MIN_BEHAVIOUR_SHARE of its discovery evidence is nearest is labelled alone; a smaller group stays with the
    largest, unless it shows no change of its own though it labels enough segments to show one (`_stray`):
    such a stray is another behaviour than the finding's and no part of its change, and is left out. When two
    or more parts separate the discovery checkpoints in the draft's direction (z >= MIN_Z), each is a draft
    (provenance `apart`: the others' quotes); when one does, the draft is narrowed to it (`other_behaviour`:
    the exemplars dropped) if strays were left out or it separates better than the whole labeler; otherwise it
    stays as it was. A stray that leans with the change by chance separates the checkpoints a little better,
    and was counted as the finding's behaviour (shift suite, seed 5309: a rating request's labeler held the
    stock "Please confirm if you would like me to proceed ...", a group of its own, 31% of its held-out
    positives, and stayed inconclusive; without it, validated). A labeler fitted to a broad source covers
    what the source fires on, and its finding quotes one thing: on the tau2 sample "Fewer segments like 'Even a
    human agent cannot make changes to the number of passengers.'" also counted the closings "Safe travels!"
    and "Thank you for choosing us ...", 43% of its positives, and its words were theirs ("safe, travels").
    Each part quotes what its positives are like (and is named by its own words, `in_own_words`); the first
    keeps what the draft had absorbed."""
    nodes = similar_nodes(draft.spec)
    texts = exemplar_texts(nodes)
    evidence = evidence_of(draft, discovery) if len(texts) > 1 else []
    if not evidence:
        return [draft]
    embed = discovery.population.embedder.embed
    vectors, _ = discovery.sentences(draft.kinds)
    exemplar_vectors = embed(texts)
    group = behaviours(exemplar_vectors, vectors[~discovery.matched_sentences(draft.kinds, nodes)])
    nearest = (embed(evidence) @ exemplar_vectors.T).argmax(axis=1)
    share = np.bincount(group[nearest], minlength=group.max() + 1) / len(evidence)
    major = [int(g) for g in np.argsort(-share, kind="stable") if share[g] >= MIN_BEHAVIOUR_SHARE]
    if not major:
        return [draft]
    minor = [int(g) for g in np.unique(group) if g not in major]
    stray = [g for g in minor if _stray(draft, {t for t, h in zip(texts, group, strict=True) if h == g}, discovery)]
    if len(major) < 2 and not stray:
        return [draft]
    owner = np.where(np.isin(group, major), group, np.where(np.isin(group, stray), -1, major[0]))
    members = [{t for t, o in zip(texts, owner, strict=True) if o == g} for g in major]
    parts = [labelled_by(draft, keeping(draft, m.__contains__), discovery) for m in members]
    parts = [p for p in parts if p.score >= MIN_Z]
    if not parts or (len(parts) == 1 and not stray and parts[0].score <= draft.score):
        return [draft]
    kept = {t for p in parts for t in exemplar_texts(similar_nodes(p.spec))}
    by_evidence = np.argsort(-np.bincount(nearest, minlength=len(texts)), kind="stable")
    dropped = [texts[i] for i in by_evidence if texts[i] not in kept]  # what most of its evidence was like first
    out = []
    for i, part in enumerate(parts):
        provenance = dict(draft.provenance)
        if i:
            provenance |= {"merged": [], "side_effects": []}
        elif dropped:
            provenance["other_behaviour"] = dropped
        statement = restated(part, discovery, quote_of(part) or "", draft.provenance.get("words", []))
        part = replace(part, statement=statement, provenance=provenance)
        out.append(quoting_the_most(part, discovery))
    quotes = [quote_of(p) for p in out]
    for i, part in enumerate(out if len(out) > 1 else []):
        part.provenance["apart"] = [q for j, q in enumerate(quotes) if j != i]
    return out


def _stray(draft: Draft, texts: set[str], discovery: DiscoverySplit) -> bool:
    """Whether the draft's exemplars `texts`, as a labeler alone, show no change though they label enough
    segments to show one: they do not separate the discovery checkpoints in its direction (z < MIN_Z), while as
    many segments split between the checkpoints as the draft's positives are would (z >= MIN_Z). A stock
    sentence said in many turns of both checkpoints is such a stray; a paraphrase of the behaviour that labels
    a few turns, all of the checkpoint with more, is too small to tell, and stays. (`strays.strays` tests each
    exemplar's lean while a labeler is fitted; this tests a group of them once its finding is drafted, by the
    change it shows alone, which a lean near the others' by chance does not hide.)"""
    alone = labelled_by(draft, keeping(draft, texts.__contains__), discovery)
    if alone.score >= MIN_Z:
        return False
    index, _ = discovery.index(draft.kinds)
    positives = positives_of(draft, discovery)
    n_after = int(index.is_after.sum())
    after = round(len(alone.hits) * positives[index.is_after].sum() / max(int(positives.sum()), 1))
    z = two_proportion_z(after, n_after, len(alone.hits) - after, index.is_after.size - n_after)
    return (z if draft.direction == "increase" else -z) >= MIN_Z


def _without_exemplars(draft: Draft, gone: list[str], discovery: DiscoverySplit) -> Draft | None:
    """The exemplar draft without exemplars `gone`, relabelled and restated, when it still separates the
    discovery checkpoints (z >= MIN_Z); None when it no longer does, `gone` alone does, and they are at least
    half its exemplars (its change is theirs); else the draft as it was."""
    nodes = keeping(draft, lambda t: t not in gone)
    narrowed = labelled_by(draft, nodes, discovery)
    if narrowed.score < MIN_Z:
        theirs = labelled_by(draft, keeping(draft, lambda t: t in gone), discovery)
        half = 2 * len(gone) >= len(exemplar_texts(similar_nodes(draft.spec)))
        return None if half and theirs.score >= MIN_Z else draft
    statement = restated(narrowed, discovery, nodes[0]["exemplars"][0], draft.provenance.get("words", []))
    elsewhere = [*draft.provenance.get("counted_elsewhere", []), *gone]
    provenance = {**draft.provenance, "counted_elsewhere": elsewhere}
    narrowed = replace(narrowed, statement=statement, provenance=provenance)
    return quoting_the_most(narrowed, discovery) if quote_of(draft) in gone else narrowed
