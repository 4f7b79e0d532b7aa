"""Behaviour groups: sentences that mean the same thing and that one checkpoint says far more than the other.

The pipeline's groups are contrastive (`find_contrastive_groups`, docs/concepts.md):
1. Contrast: each sentence of one half of the discovery tasks gets a binomial z of the after-share of its
   nearest sentences of the other half against that half's mean (`contrast_z`), read among each of SCALES
   neighbours and the largest kept; its own checkpoint is never read. Sentences with |z| >= CONTRAST_Z are
   kept.
   The halves then swap roles (cross-fitting), so every sentence of either half gets a z from the other.
2. Cluster: the kept sentences of both halves, one sign at a time, projected on PCA_DIMS principal components,
   are clustered by hdbscan (CONTRAST_SELECTION; a single cluster allowed where it finds none otherwise). A
   kept sentence hdbscan leaves as noise joins the group of its sign holding its most similar member, when
   that similarity reaches FLOOR (`_attached`).
3. Fire: each group keeps up to EXEMPLARS members nearest its centroid. A sentence's activation is its
   largest cosine similarity to the group's exemplars; it fires at the group's threshold, chosen on the
   clustered sample as the similarity that best separates members from the rest (F1), never below FLOOR,
   each exemplar scored by the group's other exemplars (leave one out). Rows that lean the group's way
   (|z| >= LEAN_Z, its sign) but are in no group are not scored: they missed the keep bar, which says
   nothing of whether they are the behaviour. The same rule scores every sentence
   of both splits, so a held-out segment is scored exactly as a discovery segment with the same text.
`find_groups` (density alone, hdbscan over every sampled sentence, with optional merging through concept
features, MERGE) is the first version, kept for `bench/groups.py`: it recovered no paraphrased behaviour.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import numpy as np

log = logging.getLogger(__name__)

Selection = Literal["leaf", "eom"]

CLUSTER_SAMPLE = 6000  # discovery sentences clustered at most (the rest are scored by similarity)
PCA_DIMS = 16
MIN_CLUSTER = 5  # hdbscan min_cluster_size: a behaviour said at least this many times
MIN_SAMPLES = 3
EXEMPLARS = 8  # members per group kept to score sentences against
FLOOR = 0.4  # no group fires below this cosine (MiniLM: unrelated sentences ~0.1, paraphrases ~0.35 on average)
# Merging is off in the pipeline: measured, it never recovered more (bench/groups.py) and on the demo pair it
# collapsed 179 groups into 4 (docs/concepts.md). `find_groups(..., merge=True)` keeps it for measurement.
MERGE = False
MERGE_OVERLAP = 0.5
MERGE_SIMILARITY = 0.7  # 0.5 merged 76 groups into 3 on bench/groups.py: a concept bridges too much
MERGE_CONCEPT_SHARE = 0.05  # only a specific concept (firing on at most this share of the sample) merges
MAX_GROUP_SHARE = 0.2  # a "group" holding more than this share of the sample is no behaviour: dropped
NEIGHBOURS = 15  # k of the nearest-neighbour view a sentence's contrast is read from, by default
# The neighbourhood sizes a sentence's contrast is read at, its largest |z| kept: 15 reaches CONTRAST_Z where a
# behaviour is said in few sentences and (nearly) by one checkpoint only; a rate that moves rather than appears
# cannot reach it among 15 (a fourfold shift, a fifth of the neighbours from the checkpoint with less: z = 2.3),
# and among 30 it can (z = 3.3). Measured: docs/concepts.md, "Rates that move".
SCALES = (15, 30)
CONTRAST_Z = 3.0  # binomial z of a neighbourhood's after-share against the base rate that keeps a candidate
# A row whose neighbourhood leans a group's way this much (the z the hypotheses stage calls a lean) but that
# joined no group is left out of fitting that group's threshold: counted against the group, the behaviour's
# own sentences below the keep bar pulled the threshold up (planted replies seed 38: a group on 17 of 50
# rating requests fired on 22 of them; 36 with them left out, precision 1.0 both ways).
LEAN_Z = 2.0
# eom over the kept sentences: leaf split each behaviour into one group per template, each firing narrowly
# (held-out F1 of the best group 0.15-0.25 against 0.48-0.88 with eom on the seed-0 paraphrased suite)
CONTRAST_SELECTION: Selection = "eom"


@dataclass(frozen=True)
class GroupModel:
    """Exemplar embeddings of every group (rows grouped by owner), and each group's threshold."""

    exemplars: np.ndarray  # float32 [m, d], L2-normalised
    owner: np.ndarray  # int64 [m], group of each exemplar row, non-decreasing
    thresholds: np.ndarray  # float32 [groups]
    exemplar_rows: list[np.ndarray]  # per group, rows of the clustered sample used as exemplars
    members: list[np.ndarray]  # per group, rows of the clustered sample in it

    @property
    def n_groups(self) -> int:
        return len(self.thresholds)

    def similarity(self, vectors: np.ndarray) -> np.ndarray:
        """float32 [n, groups]: each row's largest cosine similarity to each group's exemplars."""
        if self.n_groups == 0:
            return np.zeros((len(vectors), 0), dtype=np.float32)
        sims = vectors @ self.exemplars.T
        starts = np.flatnonzero(np.r_[True, self.owner[1:] != self.owner[:-1]])
        return np.maximum.reduceat(sims, starts, axis=1)

    def fire(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, group, similarity) for every row at or above a group's threshold."""
        sims = self.similarity(vectors)
        row, group = np.nonzero(sims >= self.thresholds[None, :])
        return row, group, sims[row, group]


def find_groups(
    vectors: np.ndarray,
    rng: np.random.Generator,
    *,
    concepts: list[np.ndarray] | None = None,
    selection: Selection = "leaf",
    merge: bool = MERGE,
    threshold: float | None = None,
) -> GroupModel:
    """Groups of the (already sampled) L2-normalised `vectors`. `concepts`: per concept feature, the rows it
    fires on (for merging). `threshold` fixes every group's threshold instead of choosing it by F1."""
    import hdbscan

    n = len(vectors)
    if n < 2 * MIN_CLUSTER:
        return _model(vectors, [], threshold)
    reduced = _project(vectors, rng)
    labels = hdbscan.HDBSCAN(
        min_cluster_size=MIN_CLUSTER, min_samples=MIN_SAMPLES, cluster_selection_method=selection
    ).fit_predict(reduced)
    members = [np.flatnonzero(labels == g) for g in range(int(labels.max()) + 1)]
    members = [m for m in members if len(m) <= MAX_GROUP_SHARE * n]
    if merge and concepts:
        members = merge_groups(vectors, members, concepts)
    return _model(vectors, members, threshold)


def _project(vectors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    from sklearn.decomposition import PCA

    dims = min(PCA_DIMS, vectors.shape[1], len(vectors) - 1)
    if dims >= vectors.shape[1]:
        return vectors
    return PCA(dims, random_state=int(rng.integers(2**31 - 1))).fit_transform(vectors)


def merge_groups(vectors: np.ndarray, members: list[np.ndarray], concepts: list[np.ndarray]) -> list[np.ndarray]:
    """Union of groups bridged by a concept feature that covers most of each, when their centroids agree."""
    parent = list(range(len(members)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    centroids = np.stack([_unit(vectors[m].mean(0)) for m in members]) if members else np.zeros((0, 1))
    owner = np.full(len(vectors), -1)
    for g, rows in enumerate(members):
        owner[rows] = g
    sizes = np.array([len(m) for m in members])
    for rows in concepts:
        if len(rows) > MERGE_CONCEPT_SHARE * len(vectors):
            continue
        hit = owner[rows]
        counts = np.bincount(hit[hit >= 0], minlength=len(members))
        covered = np.flatnonzero(counts >= MERGE_OVERLAP * sizes)
        for a in covered:
            for b in covered:
                if a < b and float(centroids[a] @ centroids[b]) >= MERGE_SIMILARITY:
                    parent[root(int(b))] = root(int(a))
    merged: dict[int, list[np.ndarray]] = {}
    for g, rows in enumerate(members):
        merged.setdefault(root(g), []).append(rows)
    return [np.sort(np.concatenate(parts)) for parts in merged.values()]


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


def _model(
    vectors: np.ndarray, members: list[np.ndarray], fixed: float | None, unscored: list[np.ndarray | None] | None = None
) -> GroupModel:
    """Each group's EXEMPLARS members nearest its centroid, and its threshold: `fixed`, else the best F1 of its
    members against the other rows, less the group's `unscored` rows where given."""
    chosen = []
    for rows in members:
        centre = _unit(vectors[rows].mean(0))
        order = np.argsort(-(vectors[rows] @ centre), kind="stable")
        chosen.append(rows[order[:EXEMPLARS]])
    dim = vectors.shape[1]
    exemplars = np.concatenate([vectors[r] for r in chosen]) if chosen else np.zeros((0, dim), np.float32)
    owner = np.concatenate([np.full(len(r), g) for g, r in enumerate(chosen)]) if chosen else np.zeros(0, int)
    model = GroupModel(exemplars.astype(np.float32), owner, np.zeros(len(members), np.float32), chosen, members)
    if fixed is not None:
        thresholds = np.full(len(members), fixed, dtype=np.float32)
    else:
        sims = _leave_out(vectors, model)
        skip = unscored or [None] * len(members)
        thresholds = np.array([best_threshold(sims[:, g], rows, skip[g]) for g, rows in enumerate(members)], np.float32)
    return GroupModel(model.exemplars, owner, thresholds, chosen, members)


def _leave_out(vectors: np.ndarray, model: GroupModel) -> np.ndarray:
    """`model.similarity(vectors)` with each exemplar scored against its group's other exemplars only: a
    threshold fitted to an exemplar's similarity to itself (1.0) would fire on nothing but the exemplars."""
    sims = model.similarity(vectors)
    for g, rows in enumerate(model.exemplar_rows):
        own = vectors[rows] @ vectors[rows].T
        np.fill_diagonal(own, -1.0)
        sims[rows, g] = own.max(axis=1) if len(rows) > 1 else 0.0
    return sims


def best_threshold(similarity: np.ndarray, members: np.ndarray, unscored: np.ndarray | None = None) -> float:
    """The similarity that best separates `members` from the other rows (F1), at least FLOOR; `unscored` rows
    (not members) count neither way."""
    is_member = np.zeros(len(similarity), dtype=bool)
    is_member[members] = True
    scored = np.ones(len(similarity), dtype=bool)
    if unscored is not None:
        scored[unscored] = False
    scored[members] = True
    similarity, is_member = similarity[scored], is_member[scored]
    order = np.argsort(-similarity, kind="stable")
    hits = np.cumsum(is_member[order])
    fired = np.arange(1, len(order) + 1)
    f1 = 2 * hits / (fired + len(members))
    best = int(np.argmax(f1))
    return max(FLOOR, float(similarity[order[best]]))


def contrast_z(
    vectors: np.ndarray, after_share: np.ndarray, chooser: np.ndarray, scales: tuple[int, ...] = (NEIGHBOURS,)
) -> np.ndarray:
    """Per row, a binomial z of how far the after-share of its nearest chooser rows (cosine, itself left out)
    lies from the chooser rows' mean, read among each of `scales` nearest and the largest |z| kept (the first
    on a tie): positive in neighbourhoods the after checkpoint fills, negative in those it leaves. One
    neighbour search serves every scale. `after_share`: each sentence's share of occurrences in the after
    checkpoint."""
    pool = np.flatnonzero(chooser)
    ks = [k for k in (min(k, pool.size - 1) for k in scales) if k >= 1]
    if not ks:
        return np.zeros(len(vectors))
    base = float(after_share[pool].mean())
    widest = max(ks)
    z = np.empty(len(vectors))
    for start in range(0, len(vectors), 1024):
        sims = vectors[start : start + 1024] @ vectors[pool].T
        own = np.flatnonzero((pool >= start) & (pool < start + 1024))
        sims[pool[own] - start, own] = -np.inf  # a row is not its own neighbour
        nearest = np.argpartition(-sims, widest - 1, axis=1)[:, :widest]
        nearest = np.take_along_axis(nearest, np.argsort(-np.take_along_axis(sims, nearest, axis=1), axis=1), axis=1)
        shares = after_share[pool[nearest]]
        best = np.zeros(len(shares))
        for i, k in enumerate(ks):
            at_k = (shares[:, :k].mean(axis=1) - base) / np.sqrt(max(base * (1 - base), 1e-6) / k)
            best = at_k if i == 0 else np.where(np.abs(at_k) > np.abs(best), at_k, best)
        z[start : start + 1024] = best
    return z


def find_contrastive_groups(
    vectors: np.ndarray,
    after_share: np.ndarray,
    chooser: np.ndarray,
    candidate: np.ndarray,
    rng: np.random.Generator,
    *,
    selection: Selection = CONTRAST_SELECTION,
) -> GroupModel:
    """Groups of sentences in neighbourhoods that one checkpoint fills: each row of one half whose nearest rows
    of the other half (at any of SCALES) come from after (or before) far more than the base rate (`contrast_z`
    >= CONTRAST_Z) is kept (cross-fitted: `chooser` rows choose among `candidate` rows and the other way
    round), and the kept rows of both halves are clustered together by hdbscan, one sign at a time. Chooser
    and candidate rows are disjoint (sentences of two halves of the tasks), so no member is picked by its own
    checkpoint label, nor by those of its half; the clustering reads no label.

    Clustering the halves together gives a behaviour all its kept sentences (one half alone holds about half,
    and a behaviour of some 40 discovery sentences then fell below hdbscan's reach). Where the kept rows of a
    sign form no cluster of hdbscan's usual kind, they may be one behaviour (hdbscan never returns its root
    cluster unless allowed), so they are clustered again with a single cluster allowed. Kept rows left as
    noise then join their nearest group (`_attached`). A group's threshold is fitted without the rows that lean
    its way (LEAN_Z) in no group."""
    z = np.zeros(len(vectors))
    for choose, keep in ((chooser, candidate), (candidate, chooser)):
        z[keep] = contrast_z(vectors, after_share, choose, SCALES)[keep]
    members: list[np.ndarray] = []
    signs: list[float] = []
    kept = 0
    for sign in (1.0, -1.0):
        rows = np.flatnonzero((chooser | candidate) & (sign * z >= CONTRAST_Z))
        kept += len(rows)
        if len(rows) >= 2 * MIN_CLUSTER:
            clusters = [rows[group] for group in _clusters(_project(vectors[rows], rng), selection)]
            attached = _attached(vectors, clusters, rows)
            members += attached
            signs += [sign] * len(attached)
    log.info("contrastive groups: %d sentences kept, %d groups", kept, len(members))
    grouped = np.concatenate(members) if members else np.zeros(0, dtype=int)
    leaning = {s: np.setdiff1d(np.flatnonzero((chooser | candidate) & (s * z >= LEAN_Z)), grouped) for s in set(signs)}
    return _model(vectors, members, None, [leaning[s] for s in signs])


def _attached(vectors: np.ndarray, clusters: list[np.ndarray], rows: np.ndarray) -> list[np.ndarray]:
    """`clusters` with each of `rows` in none of them added to the one holding its most similar member, when that
    cosine reaches FLOOR (below it no group fires anyway). The rows were kept for their contrast, as the
    members were; hdbscan leaves many of them as noise where a behaviour is said in few sentences (groups of
    5 of a behaviour said 44 times, their thresholds fitted to those 5, fired on a fifth of its sentences)."""
    if not clusters:
        return clusters
    members = np.concatenate(clusters)
    owner = np.repeat(np.arange(len(clusters)), [len(c) for c in clusters])
    noise = np.setdiff1d(rows, members)
    if noise.size == 0:
        return clusters
    sims = vectors[noise] @ vectors[members].T
    nearest = sims.argmax(axis=1)
    joins = sims[np.arange(noise.size), nearest] >= FLOOR
    return [np.sort(np.r_[c, noise[joins & (owner[nearest] == g)]]) for g, c in enumerate(clusters)]


def _clusters(points: np.ndarray, selection: Selection) -> list[np.ndarray]:
    """hdbscan's clusters of `points` (row indices each), or, when it finds none, its clusters with the root
    allowed as one: kept rows that are all one behaviour."""
    import hdbscan

    for single in (False, True):
        labels = hdbscan.HDBSCAN(
            min_cluster_size=MIN_CLUSTER,
            min_samples=MIN_SAMPLES,
            cluster_selection_method=selection,
            allow_single_cluster=single,
        ).fit_predict(points)
        if labels.max() >= 0:
            break
    return [np.flatnonzero(labels == g) for g in range(int(labels.max()) + 1)]
