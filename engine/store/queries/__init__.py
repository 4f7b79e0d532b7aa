"""Typed reads over the study store for the TUI, the MCP server and the report.

Every function takes a DuckDB connection or cursor first, so it can run in a worker thread on a cursor of its
own, and returns frozen dataclasses (no polars: the TUI imports this package on its start-up path). One module
per subject (overview, deltas, features, clusters, hypotheses, rollouts, search; the study's records in `study`,
stage runs in `runs`, the stages' and the ledger's writes in `ingest`, `results` and `llm`; `base` holds what
they share); what the TUI, the MCP server and the report use is re-exported here.
"""

from engine.store.queries.base import Connection
from engine.store.queries.clusters import ClusterMember, ClusterRow, cluster_members, clusters
from engine.store.queries.deltas import DeltaFilter, DeltaPage, DeltaRow, delta_page
from engine.store.queries.features import (
    SENTENCES_SHOWN,
    FeatureDelta,
    FeatureDetail,
    FeatureExample,
    SegmentActivation,
    SentenceFeature,
    TaskDelta,
    example_sentence,
    feature_detail,
    feature_labels,
    ngram_list,
    segment_activations,
    sentence_features,
)
from engine.store.queries.hypotheses import (
    HypothesisExample,
    HypothesisRow,
    LabelCandidate,
    hypotheses,
    hypothesis,
    hypothesis_examples,
    label_candidates,
    top_findings,
)
from engine.store.queries.overview import (
    AnalysisCounts,
    AnalysisOutcome,
    CheckpointSummary,
    StageStatus,
    StudySummary,
    analysis_counts,
    analysis_outcome,
    checkpoint_summaries,
    exploratory_ranking,
    stage_statuses,
    study_summary,
)
from engine.store.queries.rollouts import (
    MessageRow,
    RolloutPage,
    RolloutRow,
    SegmentRow,
    Transcript,
    counterpart_rollouts,
    has_heldout,
    rollout_page,
    segment_location,
    transcript,
)
from engine.store.queries.search import SearchHit, search
from engine.store.queries.study import analysis_config, checkpoint_names, compared_checkpoints, sae_source

__all__ = [
    "AnalysisCounts",
    "AnalysisOutcome",
    "CheckpointSummary",
    "ClusterMember",
    "ClusterRow",
    "Connection",
    "DeltaFilter",
    "DeltaPage",
    "DeltaRow",
    "FeatureDelta",
    "FeatureDetail",
    "FeatureExample",
    "HypothesisExample",
    "HypothesisRow",
    "LabelCandidate",
    "MessageRow",
    "RolloutPage",
    "RolloutRow",
    "SENTENCES_SHOWN",
    "SearchHit",
    "SegmentActivation",
    "SegmentRow",
    "SentenceFeature",
    "StageStatus",
    "StudySummary",
    "TaskDelta",
    "Transcript",
    "analysis_config",
    "analysis_counts",
    "analysis_outcome",
    "checkpoint_summaries",
    "cluster_members",
    "clusters",
    "checkpoint_names",
    "compared_checkpoints",
    "counterpart_rollouts",
    "delta_page",
    "example_sentence",
    "exploratory_ranking",
    "feature_detail",
    "feature_labels",
    "has_heldout",
    "hypotheses",
    "hypothesis",
    "hypothesis_examples",
    "label_candidates",
    "ngram_list",
    "rollout_page",
    "sae_source",
    "search",
    "segment_activations",
    "segment_location",
    "sentence_features",
    "stage_statuses",
    "study_summary",
    "top_findings",
    "transcript",
]
