"""Tools for what the analysis found: the study summary, feature deltas, features and clusters."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Annotated

from pydantic import Field

from engine.errors import InputError
from engine.hypotheses.reasons import tally
from engine.kinds import DeltaKind, DeltaSort, Direction, Source
from engine.mcp.results import to_json
from engine.mcp.tools.base import Id, Limit, MaxChars, Offset, ToolGroup, page_json, segment_json
from engine.store import queries
from engine.store.queries.deltas import family_summary
from engine.store.queries.overview import EXPLORATORY_RULE


class FindingTools(ToolGroup):
    """The study summary, the deltas table, one feature, the clusters."""

    def study_summary(self) -> str:
        """Start here. What the study holds and how far its analysis got: each checkpoint's tasks, rollouts,
        segments by kind and success rate (mean reward with a task-clustered 95% CI); the compared
        before/after pair; rollouts per split; tested and significant (q <= 0.05) feature deltas, also per
        testing family (BH runs within each) with the rollouts' length change ('any' rows are adjusted for it);
        clusters;
        hypotheses by status, and in words with why those not validated were not (`hypotheses_tally`); the
        user's decisions; and the pipeline stages that ran."""
        with self.access.reading() as s:
            summary = queries.study_summary(s.con)
            counts = queries.analysis_counts(s.con)
            families = family_summary(s.con)
            hypotheses_tally = tally(queries.hypotheses(s.con))
        return to_json(
            {
                "store": str(self.access.path),
                "before": summary.before,
                "after": summary.after,
                "shared_tasks": summary.n_shared_tasks,
                "checkpoints": [
                    {
                        "checkpoint": c.checkpoint,
                        "tasks": c.n_tasks,
                        "rollouts": c.n_rollouts,
                        "segments": c.segments_by_kind,
                        "reward": None
                        if c.mean_reward is None
                        else {
                            "mean": c.mean_reward,
                            "ci_low": None if c.reward_ci is None else c.reward_ci[0],
                            "ci_high": None if c.reward_ci is None else c.reward_ci[1],
                            "n": c.n_rewarded,
                        },
                    }
                    for c in summary.checkpoints
                ],
                "rollouts_by_split": counts.rollouts_by_split,
                "features": counts.n_features,
                "deltas_tested": counts.n_deltas_tested,
                "deltas_significant": counts.n_deltas_significant,
                "deltas_by_family": families,
                "clusters": counts.n_clusters,
                "hypotheses_by_status": counts.hypotheses_by_status,
                "hypotheses_tally": hypotheses_tally or None,
                "decisions": counts.decisions,
                "stale": summary.stale_notice() or None,
                "small_study": summary.small_study_notice() or None,
                "exploratory_ranking": summary.exploratory_pointer("the exploratory_ranking tool shows it") or None,
                "stages": [
                    {"stage": st.stage, "status": st.status, "finished_at": st.finished_at} for st in summary.stages
                ],
            }
        )

    def exploratory_ranking(self, limit: Annotated[int, Field(ge=1, le=20, description="rows to return")] = 20) -> str:
        """Small studies only (fewer than 10 shared tasks, split within task; study_summary's small_study says
        so): the whole study's largest credible changes, both folds pooled, the first `limit` of the deltas
        stage's 20, one row per feature (at its kind whose 95% interval lies farthest from 0). Within each
        family the row farthest from 0 comes first, and the families take turns (their units differ).
        Exploratory: never validated, and it includes held-out rollouts, so calling this writes a log entry
        (`heldout_views`) and a hypothesis added afterwards is `exploratory` (tested and counted, never
        validated). Errors on a study split by task, which has no such ranking."""
        from engine.hypotheses.exposure import show_exploratory

        with self.access.writing() as s:
            rows = show_exploratory(s.con, "mcp", queries.study_summary(s.con))
        if not rows:
            raise InputError(
                "no exploratory ranking: it is made for small studies (split within task); list_deltas ranks "
                "the discovery deltas"
            )
        return to_json({"rule": EXPLORATORY_RULE, "rows": rows[:limit]})

    def list_deltas(
        self,
        kind: Annotated[
            DeltaKind | None, Field(description="segment kind; 'any' is the rollout-level view; default all")
        ] = None,
        direction: Annotated[Direction | None, Field(description="only features that became more/less common")] = None,
        source: Annotated[
            Source | None,
            Field(description="token-SAE latents, structural features, sentence concepts or behaviour groups"),
        ] = None,
        max_q: Annotated[float | None, Field(ge=0, le=1, description="only rows with q_value <= this")] = None,
        search: Annotated[str, Field(max_length=200, description="case-insensitive text in label or name")] = "",
        include_untested: Annotated[bool, Field(description="also untested rows (cannot reach significance)")] = False,
        sort: Annotated[DeltaSort, Field(description="row order")] = "abs_delta",
        limit: Limit = 20,
        offset: Offset = 0,
    ) -> str:
        """Ranked feature deltas on the discovery split: per feature and segment kind, prevalence before and
        after (0-1: each rollout's share of its segments of the kind where the feature fires, averaged within
        task; a tool-call row among calls to the same tool; kind 'any': the share of rollouts where it fires,
        its test adjusted for length), delta = after - before with a 95% CI (cluster-robust over tasks; over
        rollouts in a small study), and the q_value of a within-task permutation test, Benjamini-Hochberg within
        the row's testing family (`family`). Filter, search and page; pass feature_id to get_feature."""
        flt = queries.DeltaFilter(
            kind=kind,
            direction=direction,
            source=source,
            max_q=max_q,
            tested_only=not include_untested,
            search=search.strip(),
            sort=sort,
        )
        with self.access.reading() as s:
            page = queries.delta_page(s.con, flt, offset=offset, limit=limit)
        return page_json(page.rows, page.total, offset)

    def get_feature(
        self,
        feature_id: Id,
        examples_per_checkpoint: Annotated[int, Field(ge=0, le=10, description="top segments per checkpoint")] = 3,
        include_tasks: Annotated[bool, Field(description="per-task prevalences too")] = True,
        max_chars: MaxChars = 500,
    ) -> str:
        """One feature: label, explanation, top n-grams, its deltas for every segment kind (each with the label
        drawn from that kind's examples, rollout rates, sample sizes and association with reward), per-task
        prevalences, its clusters, and its top-activating segments from each checkpoint (segment_id,
        rollout_key, text and the peak-activation span; for concept and group features, `sentence` is the
        sentence the example fired on)."""
        with self.access.reading() as s:
            detail = queries.feature_detail(s.con, feature_id, examples_per_checkpoint)
        if detail is None:
            raise InputError(f"no feature with id {feature_id}; list_deltas shows feature ids")
        examples = []
        for e in detail.examples:
            peak = max(e.tokens, key=lambda t: t[2], default=None)
            examples.append(
                segment_json(e.segment, max_chars)
                | {
                    "rank": e.rank,
                    "activation": e.activation,
                    "peak": e.segment.text[peak[0] : peak[1]] if peak else None,
                    "sentence": queries.example_sentence(detail.source, e),
                }
            )
        return to_json(
            {
                "feature_id": detail.feature_id,
                "name": detail.name,
                "label": detail.label,
                "source": detail.source,
                "explanation": detail.explanation,
                "threshold": detail.threshold,
                "top_ngrams": detail.top_ngrams,
                "deltas": [
                    asdict(d.row) | {f.name: getattr(d, f.name) for f in fields(d) if f.name != "row"}
                    for d in detail.deltas
                ],
                "task_deltas": detail.task_deltas if include_tasks else None,
                "clusters": [{"cluster_id": c, "label": label} for c, label in detail.clusters],
                "examples": examples,
            }
        )

    def list_clusters(self, limit: Limit = 50, offset: Offset = 0) -> str:
        """Clusters of features that changed together, the strongest combined change first: label, segment
        kind, size, prevalence of 'any member fires' before and after, delta with CI, p and q values."""
        with self.access.reading() as s:
            rows = queries.clusters(s.con)
        return page_json(rows[offset : offset + limit], len(rows), offset)

    def get_cluster(self, cluster_id: Id) -> str:
        """One cluster and its member features, each with its delta for the cluster's segment kind and its
        membership probability."""
        with self.access.reading() as s:
            cluster = next((c for c in queries.clusters(s.con) if c.cluster_id == cluster_id), None)
            members = queries.cluster_members(s.con, cluster_id) if cluster else []
        if cluster is None:
            raise InputError(f"no cluster with id {cluster_id}; list_clusters shows cluster ids")
        return to_json({"cluster": cluster, "members": members})
