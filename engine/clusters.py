"""The clusters stage: significant features that describe one behaviour, grouped and tested together.

Significant features (q < config.fdr in some kind) are grouped by direction (more or less in after) and
clustered with hdbscan on a distance combining
- co-activation: Jaccard distance between the sets of discovery turns (assistant messages) where each fires.
  Turns rather than segments, so a tool call and the text beside it in one message count as co-occurring;
- for two SAE features, the decoder directions' cosine, as 1 - max(cos, 0), averaged with the above.
A cluster's prevalence (any member fires in a segment of the cluster's kind) is tested with the deltas' test
and BH-corrected across clusters. Significant features hdbscan leaves as noise stay unclustered: they have no
cluster_members row and remain visible in feature_deltas. Methods: docs/statistics.md.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from engine import deltas
from engine.config import AnalyzeConfig
from engine.kinds import DIRECTIONS, DISCOVERY
from engine.progress import Progress
from engine.runs import is_done, record_run
from engine.stats.fdr import bh_qvalues
from engine.stats.prevalence import test_prevalence
from engine.store import Store
from engine.store.queries.base import DELTA_FEATURES, ROW_LABEL
from engine.store.queries.study import sae_source

log = logging.getLogger(__name__)

STAGE = "clusters"
# A cluster stands only if its members' mean pairwise distance is at most this: features co-firing in fewer
# than about one in five of the turns where either fires do not describe one behaviour.
MAX_CLUSTER_DISTANCE = 0.8
# ... and, from RELATIVE_FROM features on, at most COHESION_RATIO x the median distance of all pairs: on the
# tau2 sample, excess of mass put 126 of 146 decreasing features into one cluster whose mean distance (0.66)
# was barely under the median pair's (0.68). Such clusters are re-clustered (leaf selection) up to SPLIT_DEPTH.
RELATIVE_FROM = 10
COHESION_RATIO = 0.9
SPLIT_DEPTH = 2
# For a handful of features (no cluster found otherwise): features this close are not split apart.
SMALL_INPUT_MERGE = 0.5
LABEL_MEMBERS = 3
KIND_ORDER = (*deltas.KINDS, deltas.ANY)


def significant_features(store: Store, fdr: float) -> pl.DataFrame:
    """One row per feature significant in some kind: its most significant kind (segment kinds before 'any')."""
    rows = store.frame(
        f"SELECT d.feature_id, {ROW_LABEL} AS label, f.source, f.sae_index, d.kind, d.delta, d.q_value "
        f"FROM {DELTA_FEATURES} WHERE d.tested AND d.q_value < ?",
        [fdr],
    )
    if rows.height == 0:
        return rows.with_columns(direction=pl.lit(None, dtype=pl.String))
    rank = {kind: i for i, kind in enumerate(KIND_ORDER)}
    rows = rows.with_columns(
        is_any=pl.col("kind") == deltas.ANY, order=pl.col("kind").replace_strict(rank, return_dtype=pl.Int32)
    )
    best = rows.sort("feature_id", "is_any", "q_value", "order").unique("feature_id", keep="first", maintain_order=True)
    return best.drop("is_any", "order").with_columns(
        direction=pl.when(pl.col("delta") > 0).then(pl.lit("increase")).otherwise(pl.lit("decrease"))
    )


def decoder_directions(store: Store) -> np.ndarray | None:
    """(d_sae, d_in) decoder of the SAE the current features came from, when saved as a local folder."""
    source = sae_source(store)
    weights = Path(source) / "sae_weights.safetensors" if source else None
    if weights is None or not weights.is_file():
        return None
    from safetensors import safe_open

    try:
        with safe_open(str(weights), framework="pt") as handle:
            return handle.get_tensor("W_dec").float().numpy()
    except (OSError, KeyError, RuntimeError) as exc:
        log.warning("SAE decoder unreadable at %s (%s): clustering by co-activation only", weights, exc)
        return None


def coactivation_distance(store: Store, before: str, after: str, feature_ids: np.ndarray) -> np.ndarray:
    """(n, n) Jaccard distance between the sets of discovery turns where each feature fires."""
    n = feature_ids.size
    columns = pl.DataFrame(
        {"feature_id": feature_ids, "col": np.arange(n, dtype=np.int32)},
        schema={"feature_id": pl.Int64, "col": pl.Int32},
    )
    with store.temp_table("cluster_features", columns):
        fired = store.frame(
            "SELECT DISTINCT dense_rank() OVER (ORDER BY s.rollout_key, s.message_index) - 1 AS turn, c.col "
            "FROM segment_features sf JOIN cluster_features c USING (feature_id) JOIN features f USING (feature_id) "
            "JOIN segments s USING (segment_id) JOIN rollouts r USING (rollout_key) "
            "WHERE r.split = ? AND r.checkpoint IN (?, ?) AND sf.activation >= f.threshold",
            [DISCOVERY, before, after],
        )
    n_turns = int(fired["turn"].to_numpy().max()) + 1 if fired.height else 0
    incidence = sp.csc_array(
        (np.ones(fired.height), (fired["turn"].to_numpy(), fired["col"].to_numpy())), shape=(n_turns, n)
    )
    return jaccard_distance(incidence)


def jaccard_distance(incidence: sp.csc_array) -> np.ndarray:
    """(n, n) Jaccard distance between the columns of a 0/1 (units x features) sparse matrix; 1 when both
    columns are empty."""
    both = (incidence.T @ incidence).toarray()
    size = np.diag(both)
    union = size[:, None] + size[None, :] - both
    with np.errstate(divide="ignore", invalid="ignore"):
        distance = np.where(union > 0, 1.0 - both / union, 1.0)
    np.fill_diagonal(distance, 0.0)
    return distance


def decoder_distance(decoder: np.ndarray, sae_index: np.ndarray) -> np.ndarray:
    """(n, n) 1 - max(cos, 0) between decoder rows; NaN where either feature is not an SAE latent."""
    valid = ~np.isnan(sae_index)
    out = np.full((sae_index.size, sae_index.size), np.nan)
    rows = decoder[sae_index[valid].astype(np.int64)].astype(np.float64)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    out[np.ix_(valid, valid)] = 1.0 - np.clip(rows @ rows.T, 0.0, 1.0)
    return out


def combined_distance(coactivation: np.ndarray, decoder: np.ndarray | None) -> np.ndarray:
    """Mean of co-activation and decoder distance where both exist, co-activation alone elsewhere."""
    if decoder is None:
        return coactivation
    return np.where(np.isnan(decoder), coactivation, (coactivation + decoder) / 2)


def _hdbscan(distance: np.ndarray, method: str, single: bool = False) -> tuple[np.ndarray, np.ndarray]:
    import hdbscan

    model = hdbscan.HDBSCAN(
        metric="precomputed", min_cluster_size=2, min_samples=1, cluster_selection_method=method,
        allow_single_cluster=single, cluster_selection_epsilon=SMALL_INPUT_MERGE if single else 0.0,
    )  # fmt: skip
    model.fit(distance.astype(np.float64))
    return model.labels_.copy(), model.probabilities_.copy()


def _mean_distance(distance: np.ndarray, members: np.ndarray) -> float:
    return float(distance[np.ix_(members, members)].sum() / (members.size * (members.size - 1)))


def cluster_labels(distance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """hdbscan over a precomputed distance: (labels with -1 for unclustered, membership probabilities).

    Excess-of-mass selection (min cluster size 2, min samples 1). A cluster must be cohesive: its members'
    mean pairwise distance at most MAX_CLUSTER_DISTANCE and, with RELATIVE_FROM features or more, at most
    COHESION_RATIO x the median distance between any two of them (a cluster barely tighter than random pairs
    is a blob of loosely related latents, not one behaviour). A cluster that is not is re-clustered with leaf
    selection (the finest clusters of its hierarchy), SPLIT_DEPTH times at most, else dissolved. When the
    first fit finds no cluster at all (a handful of features, where the only candidate is the root) it is
    refitted allowing one. Fewer than two features: nothing to cluster.
    """
    n = distance.shape[0]
    labels, membership = np.full(n, -1), np.zeros(n)
    if n < 2:
        return labels, membership
    cohesion = MAX_CLUSTER_DISTANCE
    if n >= RELATIVE_FROM:
        cohesion = min(cohesion, COHESION_RATIO * float(np.median(distance[np.triu_indices(n, 1)])))
    found, probability = _hdbscan(distance, "eom")
    if (found < 0).all():
        found, probability = _hdbscan(distance, "eom", single=True)
    pending = [(np.flatnonzero(found == c), probability[found == c], 0) for c in np.unique(found[found >= 0])]
    next_label = 0
    while pending:
        members, prob, depth = pending.pop(0)
        if _mean_distance(distance, members) <= cohesion:
            labels[members], membership[members] = next_label, prob
            next_label += 1
        elif depth < SPLIT_DEPTH and members.size > 2:
            sub, sub_prob = _hdbscan(distance[np.ix_(members, members)], "leaf")
            pending += [(members[sub == c], sub_prob[sub == c], depth + 1) for c in np.unique(sub[sub >= 0])]
    return labels, membership


def _cluster_kind(kinds: list[str]) -> str:
    """The kind most members are significant in (segment kinds first on ties)."""
    counts = Counter(kinds)
    return min(counts, key=lambda k: (-counts[k], KIND_ORDER.index(k)))


def _label(members: pl.DataFrame) -> str:
    top = members.sort(pl.col("delta").abs(), descending=True)["label"].to_list()
    head = " / ".join(top[:LABEL_MEMBERS])
    return f"{head} (+{len(top) - LABEL_MEMBERS} more)" if len(top) > LABEL_MEMBERS else head


def build_clusters(
    store: Store, config: AnalyzeConfig, rng: np.random.Generator
) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """Cluster the significant features and test each cluster: (clusters rows, cluster_members rows, metrics)."""
    significant = significant_features(store, config.fdr)
    decoder = decoder_directions(store)
    members, next_id = [], 0
    for direction in DIRECTIONS:
        group = significant.filter(pl.col("direction") == direction).sort("feature_id")
        if group.height == 0:
            continue
        ids = group["feature_id"].to_numpy()
        distance = coactivation_distance(store, *config.checkpoints, ids)
        if decoder is not None:
            sae_index = group["sae_index"].cast(pl.Float64).fill_null(np.nan).to_numpy()
            in_range = np.isnan(sae_index) | (sae_index < decoder.shape[0])
            sae_index = np.where(in_range, sae_index, np.nan)
            distance = combined_distance(distance, decoder_distance(decoder, sae_index))
        labels, membership = cluster_labels(distance)
        for label in np.unique(labels[labels >= 0]):
            rows = group.filter(pl.Series(labels == label)).with_columns(
                cluster_id=pl.lit(next_id), membership=pl.Series(membership[labels == label])
            )
            members.append(rows)
            next_id += 1
    metrics = {"n_significant": significant.height, "decoder_used": decoder is not None, "fdr": config.fdr}
    if not members:
        metrics.update(n_clusters=0, n_clustered=0, n_unclustered=significant.height)
        return pl.DataFrame(), pl.DataFrame(), metrics
    member_rows = pl.concat(members)
    clusters = pl.DataFrame(
        [
            {
                "cluster_id": cid,
                "label": _label(rows),
                "kind": _cluster_kind(rows["kind"].to_list()),
                "size": rows.height,
            }
            for (cid,), rows in member_rows.group_by("cluster_id", maintain_order=True)
        ],
        schema={"cluster_id": pl.Int32, "label": pl.String, "kind": pl.String, "size": pl.Int32},
    )
    tests = _test_clusters(store, config, rng, member_rows, clusters)
    clusters = clusters.join(tests, on="cluster_id", how="left")
    metrics.update(
        n_clusters=clusters.height,
        n_clustered=member_rows.height,
        n_unclustered=significant.height - member_rows.height,
        n_significant_clusters=int((clusters["q_value"] < config.fdr).sum()),
    )
    return clusters, member_rows.select("cluster_id", "feature_id", "membership"), metrics


def _test_clusters(
    store: Store, config: AnalyzeConfig, rng: np.random.Generator, member_rows: pl.DataFrame, clusters: pl.DataFrame
) -> pl.DataFrame:
    """Any-member-fires prevalence per cluster on its kind, tested as features are; q across clusters."""
    groups = member_rows.select("feature_id", pl.col("cluster_id").cast(pl.Int64).alias("group"))
    data = deltas.load_discovery(store, *config.checkpoints, groups)
    out = []
    for kind in clusters["kind"].unique(maintain_order=True).to_list():
        ids = clusters.filter(pl.col("kind") == kind)["cluster_id"].to_numpy()
        if kind not in data.counts:
            continue
        counts = data.counts[kind][:, ids].toarray()
        test = test_prevalence(counts, data.totals[kind], data.is_after, data.task, rng, config.permutations)
        out.append(
            pl.DataFrame(
                {
                    "cluster_id": ids,
                    "prevalence_before": test.prevalence_before,
                    "prevalence_after": test.prevalence_after,
                    "delta": test.delta,
                    "ci_low": test.ci_low,
                    "ci_high": test.ci_high,
                    "p_value": test.p_value,
                },
                nan_to_null=True,
            )
        )
    tests = pl.concat(out)
    q = bh_qvalues(tests["p_value"].cast(pl.Float64).fill_null(np.nan).to_numpy())
    return tests.with_columns(q_value=pl.Series(q, nan_to_null=True)).with_columns(pl.col("cluster_id").cast(pl.Int32))


def run(store: Store, config: AnalyzeConfig, rng: np.random.Generator, progress: Progress) -> int:
    """Cluster significant features into `clusters` and `cluster_members`; returns clusters written."""
    stage_config = {"before": config.before, "after": config.after, "fdr": config.fdr,
                    "permutations": config.permutations, "seed": config.seed,
                    "max_cluster_distance": MAX_CLUSTER_DISTANCE, "cohesion_ratio": COHESION_RATIO,
                    "version": 2}  # fmt: skip
    decoder_source = sae_source(store)
    fingerprint = deltas.inputs_fingerprint(store, ("feature_deltas", "feature_id, kind, q_value, delta"))
    input_hash = hashlib.sha256(f"{fingerprint}:{decoder_source}".encode()).hexdigest()[:16]
    if is_done(store, STAGE, stage_config, input_hash):
        log.info("clusters: unchanged, skipped")
        return 0
    with record_run(store, STAGE, stage_config, input_hash, config.seed) as record:
        with progress.track("clusters", 1) as advance:
            clusters, members, metrics = build_clusters(store, config, rng)
            advance(1, status=f"{metrics['n_clusters']} clusters")
        store.replace({"clusters": clusters, "cluster_members": members})
        record.metrics.update(metrics)
        log.info("clusters: %d clusters over %d significant features (%d unclustered)", metrics["n_clusters"],
                 metrics["n_significant"], metrics["n_unclustered"])  # fmt: skip
    return clusters.height
