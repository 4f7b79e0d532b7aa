"""A fixture store for the TUI and the store queries: every table filled with plausible, deterministic data.

Two users need a store built row by row rather than by the stages (the TUI and query tests use the real
analysed study, tests/sample_study.py): the snapshots, which must draw identically on every machine (a real
study's SAE labels come from float training), and `bench/tui.py`, whose store scales to 100k segments and 1M
segment-feature rows. `build_store` serves both from one seeded generator.

Over 400 lines because it fills every table the screens read, each with its own plausible shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
from textual.worker import WorkerCancelled

from engine.kinds import DISCOVERY, HELDOUT
from engine.store import Store
from tests.hostile import HOSTILE

T0 = datetime(2025, 1, 6, 9, 30)
CHECKPOINTS = ("standard", "tighter")
KINDS = ("reasoning", "text", "tool_call", "any")
TOOLS = (
    "get_reservation_details",
    "search_direct_flight",
    "update_reservation_flights",
    "cancel_reservation",
    "transfer_to_human_agents",
    "get_user_details",
)
STRUCTURAL = (
    ("tool:transfer_to_human_agents", "calls transfer_to_human_agents (hand-off)"),
    ("tool:get_reservation_details", "calls get_reservation_details"),
    ("handoff_text", "mentions a hand-off to a human agent"),
    ("question_to_user", "asks the user a question"),
    ("multi_tool_calls", "several tool calls in one message"),
    ("tool_error", "tool result is an error"),
    ("length:long", "segment longer than 400 characters"),
    ("offers_alternative", "offers an alternative flight or option"),
)
WORDS = (
    "sorry apologize unfortunately policy cannot transfer human agent flight reservation cabin refund "
    "baggage alternative option confirm booking economy business date change cancel insurance voucher "
    "certificate upgrade delay compensation membership gold silver payment card points"
).split()
REASONING = (
    "The user wants to change their flight. I should check the reservation first.",
    "Policy says basic economy cannot be modified. I need to explain this and offer alternatives.",
    "The request is outside what I can do; the policy allows a transfer to a human agent.",
    "I must confirm the details with the user before updating the booking.",
)
TEXTS = (
    "I'm sorry, but I can't change a basic economy reservation. Would you like to look at other options?",
    "I have found two direct flights on that date. Which one would you prefer?",
    "I'll transfer you to a human agent who can help with this request.",
    "Your reservation has been updated. Is there anything else I can help you with?",
    "Could you please confirm your user id and the reservation number?",
    "Unfortunately the refund is not possible under the policy, but I can offer a travel certificate.",
)
USER_TURNS = (
    "Hi, I need to change my flight to next Tuesday.",
    "I want a refund for my cancelled trip.",
    "Can you upgrade me to business class?",
    "Just transfer me to a person please.",
)


@dataclass(frozen=True)
class FixtureSize:
    n_tasks: int = 4
    rollouts_per_task: int = 3  # per checkpoint
    turns: int = 3  # assistant turns per rollout (each 2-4 segments)
    n_sae_features: int = 16
    segment_features: int | None = None  # rows; default ~6 per segment
    n_hypotheses: int = 8
    n_clusters: int = 3
    labels_per_hypothesis: int = 12


BENCH_SIZE = FixtureSize(  # ~100k segments, 1M segment-feature rows, 5k features, 200 hypotheses
    n_tasks=50,
    rollouts_per_task=112,
    turns=3,
    n_sae_features=5000 - len(STRUCTURAL),
    segment_features=1_000_000,
    n_hypotheses=200,
    n_clusters=60,
    labels_per_hypothesis=50,
)


def _args(tool: str, rng: np.random.Generator) -> dict[str, object]:
    if tool == "search_direct_flight":
        return {"origin": "SFO", "destination": "JFK", "date": f"2024-05-{int(rng.integers(10, 29))}"}
    if tool == "get_user_details":
        return {"user_id": f"user_{int(rng.integers(100, 999))}"}
    if tool == "transfer_to_human_agents":
        return {"summary": "User asks for a change the policy does not allow."}
    return {"reservation_id": f"R{int(rng.integers(10000, 99999))}"}


def _rollouts(size: FixtureSize, rng: np.random.Generator, hostile: bool) -> tuple[list, list, list]:
    rollouts, messages, segments = [], [], []
    key = 0
    for c_index, checkpoint in enumerate(CHECKPOINTS):
        for t in range(size.n_tasks):
            for trial in range(size.rollouts_per_task):
                split = DISCOVERY if (t + trial) % 2 == 0 else HELDOUT
                reward = float(rng.random() < (0.45 + 0.15 * c_index))
                msgs = [
                    {"role": "system", "content": "You are an airline customer service agent. Follow the policy."},
                    {"role": "user", "content": USER_TURNS[(t + trial) % len(USER_TURNS)]},
                ]
                for turn in range(size.turns):
                    tools = [TOOLS[int(i)] for i in rng.choice(len(TOOLS), int(rng.integers(0, 3)), replace=False)]
                    if c_index == 0 and turn == size.turns - 1 and rng.random() < 0.5:
                        tools = ["transfer_to_human_agents"]
                    calls = [
                        {"id": f"c{turn}_{i}", "name": name, "arguments": _args(name, rng)}
                        for i, name in enumerate(tools)
                    ]
                    text = TEXTS[int(rng.integers(len(TEXTS)))]
                    if hostile and key == 0 and turn == 0:
                        text = HOSTILE
                        calls.append({"id": "c_h", "name": "get_user_details", "arguments": {"user_id": HOSTILE}})
                    msgs.append(
                        {
                            "role": "assistant",
                            "content": text,
                            "reasoning": REASONING[int(rng.integers(len(REASONING)))],
                            "tool_calls": calls,
                        }
                    )
                    for call in calls:
                        error = call["name"] == "cancel_reservation" and rng.random() < 0.5
                        result = "Error: reservation not found" if error else json.dumps({"status": "ok"})
                        msgs.append(
                            {
                                "role": "tool",
                                "content": HOSTILE if hostile and key == 0 else result,
                                "tool_call_id": call["id"],
                                "name": call["name"],
                                "is_error": error,
                            }
                        )
                    msgs.append({"role": "user", "content": "Okay, thanks."})
                for index, m in enumerate(msgs):
                    calls = m.get("tool_calls")
                    messages.append(
                        {
                            "rollout_key": key,
                            "message_index": index,
                            "role": m["role"],
                            "content": m.get("content"),
                            "reasoning": m.get("reasoning"),
                            "tool_calls": json.dumps(calls) if calls is not None else None,
                            "tool_call_id": m.get("tool_call_id"),
                            "name": m.get("name"),
                            "is_error": m.get("is_error"),
                        }
                    )
                    if m["role"] != "assistant":
                        continue
                    parts = [
                        ("reasoning", 0, m["reasoning"], None, None, "reasoning_field"),
                        ("text", 0, m["content"], None, None, "content"),
                    ]
                    parts += [
                        (
                            "tool_call",
                            i,
                            f"{c['name']} {json.dumps(c['arguments'])}",
                            c["name"],
                            json.dumps(c["arguments"]),
                            "tool_calls",
                        )
                        for i, c in enumerate(calls)
                    ]
                    for kind, part, text, tool, args, origin in parts:
                        segments.append(
                            {
                                "segment_id": len(segments),
                                "rollout_key": key,
                                "message_index": index,
                                "part_index": part,
                                "kind": kind,
                                "text": text,
                                "tool_name": tool,
                                "tool_args": args,
                                "args_valid": True if tool else None,
                                "origin": origin,
                                "content_hash": f"h{len(segments)}",
                            }
                        )
                rollouts.append(
                    {
                        "rollout_key": key,
                        "checkpoint": checkpoint,
                        "rollout_id": f"t{t}-r{trial}",
                        "task_id": f"t{t}",
                        "environment_id": "airline",
                        "trial": trial,
                        "reward": reward,
                        "split": split,
                        "source_hash": f"src{c_index}",
                        "source_line": t * size.rollouts_per_task + trial + 1,
                        "n_messages": len(msgs),
                        "metadata": json.dumps({"domain": "airline"}),
                    }
                )
                key += 1
    return rollouts, messages, segments


def _features(size: FixtureSize, rng: np.random.Generator, hostile: bool) -> pl.DataFrame:
    rows = [
        {
            "feature_id": i,
            "source": "structural",
            "name": name,
            "label": label,
            "explanation": None,
            "sae_index": None,
            "threshold": 0.5,
            "top_ngrams": None,
            "run_id": "features-fixture",
        }
        for i, (name, label) in enumerate(STRUCTURAL)
    ]
    for j in range(size.n_sae_features):
        words = [WORDS[int(w)] for w in rng.choice(len(WORDS), 3, replace=False)]
        label = " · ".join(words)
        if hostile and j == 0:
            label = "[bold red]sorry[/] · \x1b[31mpolicy"
        rows.append(
            {
                "feature_id": len(rows),
                "source": "sae",
                "name": f"sae:{j}",
                "label": label,
                "explanation": f"Fires on text about {words[0]} and {words[1]}." if j % 3 == 0 else None,
                "sae_index": j,
                "threshold": round(float(rng.uniform(0.05, 0.3)), 3),
                "top_ngrams": json.dumps([{"ngram": w, "score": round(float(rng.uniform(1, 5)), 2)} for w in words]),
                "run_id": "features-fixture",
            }
        )
    return pl.DataFrame(rows)


def _sentences(segments: pl.DataFrame) -> pl.DataFrame:
    """The sentences of the text and reasoning segments, as the features stage writes them."""
    from engine.features.sentences import split_sentences

    rows = [
        {"segment_id": sid, "sentence_index": i, "char_start": a, "char_end": b, "text": text[a:b]}
        for sid, kind, text in segments.select("segment_id", "kind", "text").iter_rows()
        if kind in ("text", "reasoning")
        for i, (a, b) in enumerate(split_sentences(text))
    ]
    return pl.DataFrame(rows).with_row_index("sentence_id").cast({"sentence_id": pl.Int64})


def _bh(p: np.ndarray) -> np.ndarray:
    order = np.argsort(p)
    ranked = p[order] * len(p) / np.arange(1, len(p) + 1)
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty_like(q)
    out[order] = np.minimum(q, 1.0)
    return out


def _deltas(n_features: int, tasks: list[str], rng: np.random.Generator) -> tuple[pl.DataFrame, pl.DataFrame]:
    fid = np.repeat(np.arange(n_features), len(KINDS))
    kind = np.tile(np.array(KINDS), n_features)
    before = rng.uniform(0.01, 0.6, fid.size)
    effect = rng.normal(0, 0.015, fid.size)
    planted = rng.random(fid.size) < 0.08
    effect[planted] += rng.choice([-1, 1], planted.sum()) * rng.uniform(0.08, 0.3, planted.sum())
    effect[fid == 0] = -0.35  # the hand-off tool call goes down
    after = np.clip(before + effect, 0.0, 1.0)
    delta = after - before
    tested = rng.random(fid.size) > 0.1
    p = np.where(np.abs(delta) > 0.06, rng.uniform(1e-5, 0.004, fid.size), rng.uniform(0.01, 1.0, fid.size))
    q = np.full(fid.size, np.nan)
    q[tested] = _bh(p[tested])
    half = rng.uniform(0.01, 0.05, fid.size)
    deltas = pl.DataFrame(
        {
            "feature_id": fid,
            "kind": kind,
            "prevalence_before": before,
            "prevalence_after": after,
            "delta": delta,
            "ratio": after / before,
            "ci_low": delta - half,
            "ci_high": delta + half,
            "p_value": np.where(tested, p, np.nan),
            "q_value": q,
            "pooled_before": np.clip(before * 0.9 + 0.02, 0.0, 1.0),  # longer rollouts weigh more: a little off
            "pooled_after": np.clip(after * 1.1 - 0.01, 0.0, 1.0),
            "rollout_rate_before": np.minimum(1.0, before * 2),
            "rollout_rate_after": np.minimum(1.0, after * 2),
            "n_before": rng.integers(50, 500, fid.size),
            "n_after": rng.integers(50, 500, fid.size),
            "reward_assoc_before": rng.uniform(-0.3, 0.3, fid.size),
            "reward_assoc_after": rng.uniform(-0.3, 0.3, fid.size),
            "tested": tested,
            "skip_reason": np.where(tested, None, "fires in under 1% of segments"),
        }
    ).with_columns(pl.col("p_value", "q_value").fill_nan(None))
    n_t = len(tasks)
    tfid = np.repeat(fid, n_t)
    tb = np.clip(np.repeat(before, n_t) + rng.normal(0, 0.05, tfid.size), 0, 1)
    ta = np.clip(np.repeat(after, n_t) + rng.normal(0, 0.05, tfid.size), 0, 1)
    task_deltas = pl.DataFrame(
        {
            "feature_id": tfid,
            "kind": np.repeat(kind, n_t),
            "task_id": np.tile(np.array(tasks), fid.size),
            "prevalence_before": tb,
            "prevalence_after": ta,
            "n_before": rng.integers(5, 60, tfid.size),
            "n_after": rng.integers(5, 60, tfid.size),
        }
    )
    return deltas, task_deltas


def _tokens(text: str, rng: np.random.Generator, peak: float) -> str:
    spans, start = [], 0
    for word in text.split(" "):
        end = start + len(word)
        if word:
            spans.append([start, end, round(float(peak * rng.random() ** 3), 3)])
        start = end + 1
    return json.dumps(spans)


def _examples(
    features: pl.DataFrame,
    segments: pl.DataFrame,
    rollouts: pl.DataFrame,
    rng: np.random.Generator,
    per_checkpoint: int = 5,
) -> pl.DataFrame:
    seg = segments.join(rollouts.select("rollout_key", "checkpoint"), on="rollout_key")
    by_checkpoint = {c: seg.filter(pl.col("checkpoint") == c) for c in CHECKPOINTS}
    rows = []
    for fid in features["feature_id"].to_list():
        for checkpoint, frame in by_checkpoint.items():
            picks = rng.choice(frame.height, min(per_checkpoint, frame.height), replace=False)
            for rank, i in enumerate(picks):
                activation = round(float(4.0 - rank * 0.5 + rng.random()), 3)
                rows.append(
                    {
                        "feature_id": fid,
                        "checkpoint": checkpoint,
                        "rank": rank,
                        "segment_id": frame["segment_id"][int(i)],
                        "activation": activation,
                        "tokens": _tokens(frame["text"][int(i)], rng, activation),
                    }
                )
    return pl.DataFrame(rows)


def _hypotheses(
    size: FixtureSize, deltas: pl.DataFrame, segments: pl.DataFrame, rollouts: pl.DataFrame, rng: np.random.Generator
) -> tuple[pl.DataFrame, pl.DataFrame]:
    statuses = ("validated", "validated", "rejected", "inconclusive", "proposed")
    heldout = (
        segments.join(rollouts.select("rollout_key", "split"), on="rollout_key")
        .filter(pl.col("split") == HELDOUT)["segment_id"]
        .to_numpy()
    )
    rows, labels = [], []
    for h in range(size.n_hypotheses):
        status = statuses[h % len(statuses)]
        tool = TOOLS[h % len(TOOLS)]
        judge = h % 3 == 2
        direction = "decrease" if h % 2 == 0 else "increase"
        before = float(rng.uniform(0.05, 0.5))
        delta = (-1 if direction == "decrease" else 1) * float(rng.uniform(0.02, 0.3))
        tested = status != "proposed"
        p = float(rng.uniform(1e-4, 0.01)) if status == "validated" else float(rng.uniform(0.05, 0.9))
        rows.append(
            {
                "hypothesis_id": h,
                "statement": (
                    f"After training the agent asks whether the user has other requests before a hand-off ({h})"
                    if judge
                    else f"The agent calls {tool} {'less' if direction == 'decrease' else 'more'} "
                    f"often in the tighter checkpoint ({h})"
                ),
                "direction": direction,
                "labeler": "judge" if judge else "verifier",
                "spec": json.dumps(
                    {"question": "Does the agent offer alternatives before a hand-off?"}
                    if judge
                    else {"kind": "tool_call", "tool_name": tool}
                ),
                "status": status,
                "origin": "llm" if judge else "extractive",
                "prevalence_before": before if tested else None,
                "prevalence_after": min(1.0, max(0.0, before + delta)) if tested else None,
                "delta": delta if tested else None,
                "ci_low": delta - 0.05 if tested else None,
                "ci_high": delta + 0.05 if tested else None,
                "p_value": p if tested else None,
                "q_value": min(1.0, p * 3) if tested else None,
                "mde": 0.12 if status == "inconclusive" else None,
                "n_labeled": size.labels_per_hypothesis if tested else None,
                "reward_assoc": float(rng.uniform(-0.3, 0.3)) if tested else None,
                "reason": {
                    "validated": "held-out prevalence changed in the stated direction (q < 0.05)",
                    "rejected": "not replicated: no held-out change in the stated direction; the CI rules out a "
                    "change of 2 pts or more",
                    "inconclusive": "no significant change on held-out; the test could detect changes of +/-12 pts",
                    "proposed": None,
                }[status],
                "decision": "accepted" if h == 1 else None,
                "note": "checked by hand" if h == 1 else None,
                "provenance": json.dumps({"cluster_id": h % max(1, size.n_clusters), "seed": 0, "split": HELDOUT}),
                "created_at": T0 + timedelta(minutes=h),
                "tested_at": T0 + timedelta(hours=1) if tested else None,
                "decided_at": T0 + timedelta(hours=2) if h == 1 else None,
            }
        )
        if tested:
            for sid in rng.choice(heldout, min(size.labels_per_hypothesis, heldout.size), replace=False):
                labels.append(
                    {
                        "hypothesis_id": h,
                        "segment_id": int(sid),
                        "label": bool(rng.random() < 0.4),
                        "evidence": "transfer" if rng.random() < 0.5 else None,
                        "weight": 1.0,
                    }
                )
    return pl.DataFrame(rows), pl.DataFrame(labels)


def build_store(path: str | Path, size: FixtureSize = FixtureSize(), *, seed: int = 0, hostile: bool = False) -> Path:
    """Write a complete study store at `path` (which must not exist) and return the path."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    rollouts_rows, message_rows, segment_rows = _rollouts(size, rng, hostile)
    rollouts = pl.DataFrame(rollouts_rows)
    segments = pl.DataFrame(segment_rows)
    features = _features(size, rng, hostile)
    tasks = sorted(set(rollouts["task_id"].to_list()))
    deltas, task_deltas = _deltas(features.height, tasks, rng)
    n_pairs = size.segment_features or segments.height * 6
    flat = np.unique(rng.integers(0, segments.height * features.height, int(n_pairs * 1.02)))[:n_pairs]
    segment_features = pl.DataFrame(
        {
            "segment_id": flat // features.height,
            "feature_id": flat % features.height,
            "activation": rng.gamma(2.0, 0.5, flat.size).astype(np.float32),
        }
    )
    significant = deltas.filter(pl.col("q_value") < 0.05).sort("q_value")
    clusters, members = [], []
    for c in range(min(size.n_clusters, significant.height)):
        member_rows = significant[c :: max(1, size.n_clusters)].head(6)
        clusters.append(
            {
                "cluster_id": c,
                "label": " / ".join(
                    features.filter(pl.col("feature_id").is_in(member_rows["feature_id"].implode()))["label"].head(2)
                ),
                "kind": member_rows["kind"][0],
                "size": member_rows.height,
                "prevalence_before": float(member_rows["prevalence_before"].max()),
                "prevalence_after": float(member_rows["prevalence_after"].max()),
                "delta": float(member_rows["delta"].mean()),
                "ci_low": float(member_rows["ci_low"].min()),
                "ci_high": float(member_rows["ci_high"].max()),
                "p_value": 1e-4 * (c + 1),
                "q_value": 1e-3 * (c + 1),
            }
        )
        members += [
            {"cluster_id": c, "feature_id": int(f), "membership": round(0.6 + 0.4 * float(rng.random()), 3)}
            for f in dict.fromkeys(member_rows["feature_id"].to_list())
        ]
    for c in clusters:
        c["size"] = sum(1 for m in members if m["cluster_id"] == c["cluster_id"])
    hypotheses, labels = _hypotheses(size, deltas, segments, rollouts, rng)
    with Store(path) as store, store.transaction():
        store.append(
            "checkpoints",
            pl.DataFrame(
                {"checkpoint": list(CHECKPOINTS), "ordinal": [0, 1], "created_at": [T0, T0 + timedelta(minutes=1)]}
            ),
        )
        store.append(
            "sources",
            pl.DataFrame(
                {
                    "source_hash": ["src0", "src1"],
                    "checkpoint": list(CHECKPOINTS),
                    "path": [f"sample_data/{c}.jsonl" for c in CHECKPOINTS],
                    "format": ["jsonl", "jsonl"],
                    "n_rollouts": [rollouts.height // 2] * 2,
                    "n_skipped": [0, 0],
                    "ingested_at": [T0, T0],
                }
            ),
        )
        store.append("rollouts", rollouts)
        store.append("messages", pl.DataFrame(message_rows, infer_schema_length=None))
        store.append("segments", segments)
        store.append("sentences", _sentences(segments))
        store.append("features", features)
        store.append("segment_features", segment_features)
        store.append("feature_examples", _examples(features, segments, rollouts, rng))
        store.append("feature_deltas", deltas)
        store.append("feature_task_deltas", task_deltas)
        if clusters:
            store.append("clusters", pl.DataFrame(clusters))
            store.append("cluster_members", pl.DataFrame(members))
        store.append("hypotheses", hypotheses)
        store.append("hypothesis_labels", labels)
        store.execute(
            "INSERT INTO heldout_tests SELECT statement, spec::VARCHAR, p_value, ? FROM hypotheses "
            "WHERE p_value IS NOT NULL",
            [T0],
        )
        store.append(
            "user_labels",
            labels.head(2).select("hypothesis_id", "segment_id", "label").with_columns(pl.lit(T0).alias("created_at")),
        )
        _calibration_and_view(store, int(hypotheses["hypothesis_id"][-1]), rng)
        config = {"before": CHECKPOINTS[0], "after": CHECKPOINTS[1], "seed": seed}
        stages = ("split", "features", "deltas", "clusters", "hypotheses")
        store.append(
            "runs",
            pl.DataFrame(
                {
                    "run_id": [f"{s}-fixture" for s in stages],
                    "stage": list(stages),
                    "config": [json.dumps(config)] * len(stages),
                    "input_hash": ["fixture"] * len(stages),
                    "versions": [json.dumps({"rldiff": "0.1.0"})] * len(stages),
                    "seed": [seed] * len(stages),
                    "status": ["done"] * len(stages),
                    "metrics": [json.dumps({"rows": i * 10}) for i in range(len(stages))],
                    "started_at": [T0 + timedelta(minutes=5 * i) for i in range(len(stages))],
                    "finished_at": [T0 + timedelta(minutes=5 * i + 4) for i in range(len(stages))],
                }
            ),
        )
        store.append(
            "llm_cache",
            pl.DataFrame(
                {
                    "prompt_hash": ["p0"],
                    "model": ["fake"],
                    "response": ['{"statement": "x"}'],
                    "input_tokens": [10],
                    "output_tokens": [5],
                    "cost_usd": [0.0],
                    "created_at": [T0],
                }
            ),
        )
    return path


async def settle(pilot, rounds: int = 20) -> None:  # noqa: ANN001
    """Wait until the app has no running workers and every message they posted has been handled."""
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        if not any(w.is_running for w in app.workers):
            await pilot.pause()
            if not any(w.is_running for w in app.workers):
                return
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:  # superseded by a newer query of the same kind
            pass


def _calibration_and_view(store: Store, hypothesis_id: int, rng: np.random.Generator) -> None:
    """A labeler calibration of one hypothesis (the real estimator on a simulated hand sample) and one logged
    view of its held-out examples, both before any test adds hypotheses."""
    from engine.hypotheses.calibration import RolloutRates, checkpoint_estimate, corrected_delta

    rollout = np.arange(400) // 25  # 8 rollouts of 25 labelled segments a checkpoint, 2 a task
    verdicts = rng.random(400) < np.where(rollout < 8, 0.2, 0.4)
    rates = RolloutRates(
        np.bincount(rollout, verdicts.astype(np.float64)), np.full(16, 25.0), np.arange(16) >= 8, np.arange(16) % 4
    )
    sides = []
    for side, level in enumerate(rates.levels()[:2]):
        mine = np.flatnonzero((rollout >= 8) == bool(side))
        hand = np.concatenate([mine[verdicts[mine]][:10], mine[~verdicts[mine]][:10]])
        truth = verdicts[hand] ^ (rng.random(hand.size) < 0.1)
        sides.append(checkpoint_estimate(level, mine.size, truth, verdicts[hand], np.ones(hand.size)))
    result = corrected_delta(hypothesis_id, 40, *sides, rates)
    store.execute("INSERT INTO hypothesis_calibrations VALUES (?, ?, ?)", [hypothesis_id, result.as_json(), T0])
    store.execute("INSERT INTO heldout_views VALUES (?, 'cli', ?)", [T0, hypothesis_id])
