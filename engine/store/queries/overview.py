"""The study at a glance: checkpoints, stages, counts, the analysis's progress."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.store.queries.base import Connection, Executor, fetch_dicts, fetch_rows, fetchone, json_value
from engine.store.queries.features import row_labels
from engine.store.queries.study import compared_checkpoints, meta_value


@dataclass(frozen=True)
class CheckpointSummary:
    """One checkpoint's size and success rate (mean reward with a task-clustered 95% CI)."""

    checkpoint: str
    n_tasks: int
    n_rollouts: int
    segments_by_kind: dict[str, int]
    mean_reward: float | None
    reward_ci: tuple[float, float] | None
    n_rewarded: int


@dataclass(frozen=True)
class StageStatus:
    """The latest run of one pipeline stage."""

    stage: str
    status: str
    started_at: datetime | None
    finished_at: datetime | None
    metrics: dict[str, Any]


EXPLORATORY_TITLE = "Exploratory ranking, whole study"
# How the ranking is ordered (engine.deltas.ranking), said wherever it is shown: a reader who sees a family's
# second row below another family's best must know why.
EXPLORATORY_RULE = (
    "not validated: these rows include the held-out rollouts and share data with every test. One row per "
    "feature, at its kind with the largest credible change (its 95% interval's distance from 0); within each "
    "family the largest comes first, and the families take turns, because their rows are in different units "
    "(a share of rollouts; a rate per segment or per tool call)"
)


@dataclass(frozen=True)
class StudySummary:
    checkpoints: list[CheckpointSummary]
    before: str | None
    after: str | None
    n_tasks: int
    n_features: int
    n_hypotheses: int
    stages: list[StageStatus]
    n_shared_tasks: int = 0  # tasks with rollouts in every checkpoint
    split_mode: str | None = None  # engine.split: 'task' | 'environment' | 'rollout' | 'none'; None before
    split_warning: str | None = None

    @property
    def stale(self) -> list[str]:
        """Stages whose results were computed from an earlier stage's previous output (e.g. features
        re-computed, then the analysis stopped): readers say so rather than show them as current."""
        return [s.stage for s in self.stages if s.status == "stale"]

    def metrics_of(self, stage: str) -> dict[str, Any]:
        """The metrics of `stage`'s latest run ({} when it never ran)."""
        run = next((s for s in self.stages if s.stage == stage), None)
        return run.metrics if run else {}

    @property
    def exploratory(self) -> list[dict[str, Any]]:
        """The deltas stage's whole-study ranking (small studies only), each row marked exploratory."""
        return list(self.metrics_of("deltas").get("exploratory") or [])

    def small_study_notice(self) -> str:
        """A sentence for readers when too few tasks are shared to split by task (engine.split), else ''."""
        if self.split_mode != "rollout":
            return ""
        return (
            f"Small study: {self.split_warning or 'rollouts are split within task'}. Rankings over the whole "
            "study are exploratory, never validated; a hypothesis is confirmed only on the fold of rollouts it "
            "was not drafted on"
        )

    @property
    def small_study_ranking(self) -> list[dict[str, Any]]:
        """The deltas stage's whole-study ranking where the study is small (split within task), else []."""
        return self.exploratory if self.small_study_notice() else []

    def exploratory_pointer(self, how: str) -> str:
        """Where a small study's whole-study ranking is (`how`: the command or key that shows it), else ''.

        The ranking includes the held-out rollouts, so it is shown only on request and the showing is logged
        (docs/statistics.md, "No leaks")."""
        if not self.small_study_ranking:
            return ""
        return (
            f"An exploratory ranking of the whole study is ready: {how}. It includes the held-out rollouts, so "
            "showing it is logged in this store, and hypotheses anyone adds to the store afterwards are "
            "exploratory: add the ones you want confirmed first"
        )

    def stale_notice(self, store: str = "STORE") -> str:
        """A sentence for readers when some results are stale, else ''."""
        if not self.stale:
            return ""
        return (
            f"{', '.join(self.stale)} predate the current features (their tables were cleared or are out of "
            f"date); run `rldiff analyze {store}` to bring them up to date"
        )


def checkpoint_summaries(con: Connection) -> list[CheckpointSummary]:
    """Every checkpoint with its counts and success rate (the CI `rldiff info` prints), in ingest order."""
    import numpy as np

    from engine.stats.intervals import clustered_mean_ci

    rewards: dict[str, tuple[list[str], list[float]]] = {}
    for checkpoint, task_id, reward in con.execute(
        "SELECT checkpoint, task_id, reward FROM rollouts WHERE reward IS NOT NULL"
    ).fetchall():
        tasks, values = rewards.setdefault(checkpoint, ([], []))
        tasks.append(task_id)
        values.append(float(reward))
    kinds: dict[str, dict[str, int]] = {}
    for checkpoint, kind, n in con.execute(
        "SELECT r.checkpoint, s.kind, count(*) FROM segments s JOIN rollouts r USING (rollout_key) "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall():
        kinds.setdefault(checkpoint, {})[kind] = int(n)
    out = []
    for checkpoint, n_tasks, n_rollouts in con.execute(
        "SELECT c.checkpoint, count(DISTINCT r.task_id), count(r.rollout_key) FROM checkpoints c "
        "LEFT JOIN rollouts r USING (checkpoint) GROUP BY c.checkpoint, c.ordinal ORDER BY c.ordinal"
    ).fetchall():
        tasks, values = rewards.get(checkpoint, ([], []))
        mean, ci = None, None
        if values:
            reward = clustered_mean_ci(np.array(values), np.array(tasks))
            mean = reward.mean
            ci = None if math.isnan(reward.low) else (reward.low, reward.high)
        out.append(
            CheckpointSummary(
                checkpoint=checkpoint,
                n_tasks=int(n_tasks),
                n_rollouts=int(n_rollouts),
                segments_by_kind=kinds.get(checkpoint, {}),
                mean_reward=mean,
                reward_ci=ci,
                n_rewarded=len(values),
            )
        )
    return out


def stage_statuses(con: Connection) -> list[StageStatus]:
    """The latest run of each stage that has run, most recent first."""
    rows = fetch_dicts(
        con,
        "SELECT stage, status, started_at, finished_at, metrics FROM runs "
        "QUALIFY row_number() OVER (PARTITION BY stage ORDER BY started_at DESC) = 1 ORDER BY started_at",
    )
    return [
        StageStatus(
            stage=r["stage"],
            status=r["status"],
            started_at=r["started_at"],
            finished_at=r["finished_at"],
            metrics=json_value(r["metrics"]) or {},
        )
        for r in rows
    ]


# The tasks with rollouts in every checkpoint.
SHARED_TASKS = (
    "SELECT task_id FROM rollouts GROUP BY task_id HAVING count(DISTINCT checkpoint) = "
    "(SELECT count(*) FROM checkpoints)"
)


def exploratory_ranking(con: Connection, summary: StudySummary) -> list[dict[str, Any]]:
    """A small study's whole-study ranking (the deltas stage's rows in `summary`, each with its feature's
    `label`); [] when the study is not small or the ranking was not made. It includes held-out rollouts: a
    surface that shows it logs the view (`engine.hypotheses.exposure.show_exploratory`)."""
    rows = summary.small_study_ranking
    labels = row_labels(con, [(int(r["feature_id"]), str(r["kind"])) for r in rows])
    return [{**r, "label": labels.get((int(r["feature_id"]), str(r["kind"]))) or str(r.get("name"))} for r in rows]


def study_summary(con: Connection) -> StudySummary:
    """The study at a glance: checkpoints, counts, stages, the split and the compared pair."""
    before, after = compared_checkpoints(con)
    return StudySummary(
        checkpoints=checkpoint_summaries(con),
        before=before,
        after=after,
        n_tasks=int(fetchone(con, "SELECT count(DISTINCT task_id) FROM rollouts")[0]),
        n_features=int(fetchone(con, "SELECT count(*) FROM features")[0]),
        n_hypotheses=int(fetchone(con, "SELECT count(*) FROM hypotheses")[0]),
        stages=stage_statuses(con),
        n_shared_tasks=int(fetchone(con, f"SELECT count(*) FROM ({SHARED_TASKS})")[0]),
        split_mode=meta_value(con, "split_mode"),
        split_warning=meta_value(con, "split_warning"),
    )


@dataclass(frozen=True)
class AnalysisCounts:
    """How far the analysis got and what it found: what an agent needs to decide where to look first."""

    rollouts_by_split: dict[str, int]
    n_features: int
    n_deltas_tested: int
    n_deltas_significant: int
    n_clusters: int
    hypotheses_by_status: dict[str, int]
    decisions: dict[str, int]


def analysis_counts(con: Connection, fdr: float = 0.05) -> AnalysisCounts:
    """Rollouts per split ('unsplit' before the split is drawn), features, tested and significant
    (q <= `fdr`) deltas, clusters, hypotheses per status and the user's decisions ('undecided' for none)."""
    splits = {
        str(split or "unsplit"): int(n)
        for split, n in con.execute("SELECT split, count(*) FROM rollouts GROUP BY ALL ORDER BY ALL").fetchall()
    }
    tested, significant = con.execute(
        "SELECT count(*) FILTER (WHERE tested), count(*) FILTER (WHERE tested AND q_value <= ?) FROM feature_deltas",
        [fdr],
    ).fetchall()[0]
    statuses = {
        str(s): int(n)
        for s, n in con.execute("SELECT status, count(*) FROM hypotheses GROUP BY ALL ORDER BY ALL").fetchall()
    }
    decisions = {
        str(d or "undecided"): int(n)
        for d, n in con.execute("SELECT decision, count(*) FROM hypotheses GROUP BY ALL ORDER BY ALL").fetchall()
    }
    return AnalysisCounts(
        rollouts_by_split=splits,
        n_features=int(fetchone(con, "SELECT count(*) FROM features")[0]),
        n_deltas_tested=int(tested),
        n_deltas_significant=int(significant),
        n_clusters=int(fetchone(con, "SELECT count(*) FROM clusters")[0]),
        hypotheses_by_status=statuses,
        decisions=decisions,
    )


@dataclass(frozen=True)
class AnalysisOutcome:
    """What an analysis found, in the figures an A/A check (`rldiff check-null`) reports."""

    n_rollouts: int
    n_tasks: int
    n_shared_tasks: int
    validated: list[str]  # statements of validated hypotheses, by id
    n_hypotheses_tested: int
    min_hypothesis_q: float | None
    min_delta_q: float | None
    min_delta_p: float | None
    n_deltas_tested: int
    n_significant_deltas: int  # tested deltas with q < `fdr`


def analysis_outcome(con: Executor, fdr: float) -> AnalysisOutcome:
    """Counts of the study, its validated hypotheses and the smallest q- and p-values of what was tested."""
    n_rollouts, n_tasks, n_shared = fetchone(
        con, f"SELECT count(*), count(DISTINCT task_id), (SELECT count(*) FROM ({SHARED_TASKS})) FROM rollouts"
    )
    validated = fetch_rows(con, "SELECT statement FROM hypotheses WHERE status = 'validated' ORDER BY hypothesis_id")
    tested, min_h = fetchone(con, "SELECT count(q_value), min(q_value) FROM hypotheses")
    min_d, min_p, n_deltas, significant = fetchone(
        con,
        "SELECT min(q_value), min(p_value), count(*), count(*) FILTER (WHERE q_value < ?) FROM feature_deltas "
        "WHERE tested",
        [fdr],
    )
    return AnalysisOutcome(
        n_rollouts=int(n_rollouts),
        n_tasks=int(n_tasks),
        n_shared_tasks=int(n_shared),
        validated=[r[0] for r in validated],
        n_hypotheses_tested=int(tested),
        min_hypothesis_q=min_h,
        min_delta_q=min_d,
        min_delta_p=min_p,
        n_deltas_tested=int(n_deltas),
        n_significant_deltas=int(significant),
    )
