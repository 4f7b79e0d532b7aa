"""A study store for the MCP tests: the tau2 sample pair, ingested, with analysis tables computed from it.

The analysis stages are written in parallel, and running the reader model would be slow in tests, so the
analysis tables are filled here by simple, exact rules over the real segments: a structural feature per tool
name (fires on calls to it) and two regex features on text replies, their prevalence per checkpoint on the
discovery split, a Fisher exact test with Benjamini-Hochberg q-values, and two clusters (features that
became more and less common). Tests compare the tools' answers with these tables and with the raw data.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
from scipy import stats

from engine.ingest import ingest_file
from engine.store import Store

REPO = Path(__file__).resolve().parents[1]
PAIR = (
    (REPO / "sample_data/tau2-grok3/standard.jsonl.gz", "standard"),
    (REPO / "sample_data/tau2-grok3/tighter.jsonl.gz", "tighter"),
)
BEFORE, AFTER = "standard", "tighter"
T0 = datetime(2025, 1, 6, 9, 30)
TEXT_FEATURES = (
    ("text:apology", "apologizes to the user", r"(?i)\b(sorry|apologi[sz]e)"),
    ("text:question", "asks the user a question", r"\?"),
)


def _features(segments: pl.DataFrame) -> tuple[pl.DataFrame, dict[int, str], pl.DataFrame]:
    """features, each feature's segment kind, and segment_features (activation 1.0 where it fires)."""
    tools = sorted(segments.filter(pl.col("kind") == "tool_call")["tool_name"].drop_nulls().unique().to_list())
    rows, kinds, fires = [], {}, []
    for tool in tools:
        fid = len(rows)
        rows.append({"feature_id": fid, "source": "structural", "name": f"tool:{tool}", "label": f"calls {tool}"})
        kinds[fid] = "tool_call"
        fires.append(segments.filter(pl.col("tool_name") == tool).select("segment_id").with_columns(feature_id=fid))
    for name, label, pattern in TEXT_FEATURES:
        fid = len(rows)
        rows.append({"feature_id": fid, "source": "structural", "name": name, "label": label})
        kinds[fid] = "text"
        hit = (pl.col("kind") == "text") & pl.col("text").str.contains(pattern)
        fires.append(segments.filter(hit).select("segment_id").with_columns(feature_id=fid))
    features = pl.DataFrame(rows).with_columns(threshold=pl.lit(0.5), run_id=pl.lit("features-fixture"))
    segment_features = pl.concat(fires).with_columns(
        pl.col("feature_id").cast(pl.Int64), activation=pl.lit(1.0, pl.Float32)
    )
    return features, kinds, segment_features


def _bh(p: np.ndarray) -> np.ndarray:
    return stats.false_discovery_control(p) if p.size else p


def build_sample_store(path: str | Path) -> Path:
    """Write the store at `path` (which must not exist) and return the path."""
    path = Path(path)
    with Store(path) as store:
        for file, checkpoint in PAIR:
            ingest_file(store, file, checkpoint)
        tasks = sorted(store.frame("SELECT DISTINCT task_id FROM rollouts")["task_id"].to_list())
        discovery = tasks[::2]
        segments = store.frame(
            "SELECT s.segment_id, s.rollout_key, s.kind, s.text, s.tool_name, r.checkpoint, r.task_id, r.split "
            "FROM segments s JOIN rollouts r USING (rollout_key)"
        ).with_columns(
            split=pl.when(pl.col("task_id").is_in(discovery)).then(pl.lit("discovery")).otherwise(pl.lit("heldout"))
        )
        features, kinds, segment_features = _features(segments)
        fired = segments.join(segment_features, on="segment_id")
        deltas, task_deltas, examples = [], [], []
        for fid, kind in kinds.items():
            pool = segments.filter((pl.col("split") == "discovery") & (pl.col("kind") == kind))
            hits = set(fired.filter(pl.col("feature_id") == fid)["segment_id"].to_list())
            pool = pool.with_columns(fires=pl.col("segment_id").is_in(list(hits)))
            n = {c: pool.filter(pl.col("checkpoint") == c).height for c in (BEFORE, AFTER)}
            k = {c: int(pool.filter((pl.col("checkpoint") == c) & pl.col("fires")).height) for c in (BEFORE, AFTER)}
            before, after = k[BEFORE] / max(n[BEFORE], 1), k[AFTER] / max(n[AFTER], 1)
            delta = after - before
            se = np.sqrt(before * (1 - before) / max(n[BEFORE], 1) + after * (1 - after) / max(n[AFTER], 1))
            tested = k[BEFORE] + k[AFTER] >= 5
            p = stats.fisher_exact([[k[AFTER], n[AFTER] - k[AFTER]], [k[BEFORE], n[BEFORE] - k[BEFORE]]])[1]
            deltas.append(
                {
                    "feature_id": fid,
                    "kind": kind,
                    "prevalence_before": before,
                    "prevalence_after": after,
                    "delta": delta,
                    "ratio": after / before if before else None,
                    "ci_low": delta - 1.96 * se,
                    "ci_high": delta + 1.96 * se,
                    "p_value": p if tested else None,
                    "n_before": n[BEFORE],
                    "n_after": n[AFTER],
                    "tested": tested,
                    "skip_reason": None if tested else "fires fewer than 5 times",
                }
            )
            for (task, checkpoint), frame in pool.group_by("task_id", "checkpoint"):
                task_deltas.append(
                    {
                        "feature_id": fid,
                        "kind": kind,
                        "task_id": task,
                        "checkpoint": checkpoint,
                        "prevalence": frame["fires"].mean(),
                        "n": frame.height,
                    }
                )
            for checkpoint in (BEFORE, AFTER):
                top = pool.filter(pl.col("fires") & (pl.col("checkpoint") == checkpoint)).sort("segment_id").head(3)
                examples += [
                    {
                        "feature_id": fid,
                        "checkpoint": checkpoint,
                        "rank": rank,
                        "segment_id": sid,
                        "activation": 1.0,
                        "tokens": json.dumps([[0, min(len(text), 20), 1.0]]),
                    }
                    for rank, (sid, text) in enumerate(zip(top["segment_id"], top["text"], strict=True))
                ]
        deltas_frame = pl.DataFrame(deltas, infer_schema_length=None)
        tested = deltas_frame.filter(pl.col("tested"))
        q = dict(zip(tested["feature_id"].to_list(), _bh(tested["p_value"].to_numpy()).tolist(), strict=True))
        deltas_frame = deltas_frame.with_columns(q_value=pl.col("feature_id").replace_strict(q, default=None))
        per_task = pl.DataFrame(task_deltas).pivot(
            "checkpoint", index=["feature_id", "kind", "task_id"], values=["prevalence", "n"]
        )
        per_task = per_task.rename(
            {
                f"prevalence_{BEFORE}": "prevalence_before",
                f"prevalence_{AFTER}": "prevalence_after",
                f"n_{BEFORE}": "n_before",
                f"n_{AFTER}": "n_after",
            }
        )
        clusters, members = [], []
        for cid, (label, sign) in enumerate((("more common after", 1), ("less common after", -1))):
            rows = tested.filter((pl.col("kind") == "tool_call") & (pl.col("delta") * sign > 0))
            clusters.append(
                {
                    "cluster_id": cid,
                    "label": label,
                    "kind": "tool_call",
                    "size": rows.height,
                    "delta": float(rows["delta"].mean()) if rows.height else None,
                }
            )
            members += [{"cluster_id": cid, "feature_id": f, "membership": 1.0} for f in rows["feature_id"]]
        with store.transaction():
            store.execute(
                "UPDATE rollouts SET split = CASE WHEN task_id IN (SELECT unnest(?)) THEN 'discovery' "
                "ELSE 'heldout' END",
                [discovery],
            )
            store.append("features", features)
            store.append("segment_features", segment_features)
            store.append("feature_deltas", deltas_frame)
            store.append("feature_task_deltas", per_task)
            store.append("feature_examples", pl.DataFrame(examples))
            store.append("clusters", pl.DataFrame(clusters))
            store.append("cluster_members", pl.DataFrame(members))
            config = json.dumps({"before": BEFORE, "after": AFTER, "seed": 0, "permutations": 500})
            store.append(
                "runs",
                pl.DataFrame(
                    {
                        "run_id": ["split-fixture"],
                        "stage": ["split"],
                        "config": [config],
                        "input_hash": ["fixture"],
                        "versions": ["{}"],
                        "seed": [0],
                        "status": ["done"],
                        "metrics": ["{}"],
                        "started_at": [T0],
                        "finished_at": [T0],
                    }
                ),
            )
    return path
