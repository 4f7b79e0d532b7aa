"""The deltas stage (package): how often each feature fires before and after, per segment kind, on the discovery split.

For every feature and segment kind (plus 'any', the rollout-level view): prevalence per checkpoint as the
task-weighted mean of each rollout's own rate (firing segments of the kind / its segments of the kind; for
tool calls, stratified over tools: its rate among calls to each tool, combined with label-free tool weights),
the pooled share beside it, the rollout-level rate (share of rollouts where it fires at least once), delta and
ratio, a within-task permutation p-value (for 'any' rows on observed minus expected firing given the
feature's own exposure and its task's per-segment rate), Benjamini-Hochberg q-values within each pre-declared
family (engine.kinds.FAMILIES), a confidence interval on the same estimand, and the association of firing with
reward within each checkpoint. A feature is tested only when the design lets it reach significance (Tarone);
the others are recorded as skipped. Methods and choices: docs/statistics.md.
"""

from engine.deltas.compute import (
    CONFIDENCE,
    FEATURE_CHUNK,
    SKIP_NO_SEGMENTS,
    SKIP_UNATTAINABLE,
    DeltaTables,
    compute_deltas,
    length_change,
)
from engine.deltas.data import KINDS, DiscoveryCounts, inputs_fingerprint, load_discovery
from engine.deltas.stage import (
    METHOD_VERSION,
    STAGE,
    exploratory_ranking,
    ranked_deltas,
    run,
    testing_summary,
)
from engine.kinds import ANY

__all__ = [
    "ANY",
    "CONFIDENCE",
    "FEATURE_CHUNK",
    "KINDS",
    "METHOD_VERSION",
    "SKIP_NO_SEGMENTS",
    "SKIP_UNATTAINABLE",
    "STAGE",
    "DeltaTables",
    "DiscoveryCounts",
    "compute_deltas",
    "exploratory_ranking",
    "inputs_fingerprint",
    "length_change",
    "load_discovery",
    "ranked_deltas",
    "run",
    "testing_summary",
]
