"""Tiny study stores with planted behaviours, built by appending rows directly (no ingest, no features)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from engine.store import Store

FILLER = [
    "Let me look up your reservation details.",
    "Could you please confirm your user ID?",
    "The flight departs at 10:00 from JFK.",
    "Your booking has been updated as requested.",
    "I can help you change the cabin class.",
    "Please confirm that you want to proceed (yes/no).",
]
TOOLS = [
    ("get_reservation_details", {"reservation_id": "ABC123"}),
    ("search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}),
]


@dataclass(frozen=True)
class Planted:
    """A phrase appended to text segments (or a tool call added) with a rate per checkpoint."""

    name: str
    kind: str  # 'text' | 'tool_call'
    content: str  # the phrase, or the tool name
    p_before: float
    p_after: float


def make_study(
    path: Path, planted: list[Planted], *, n_tasks: int = 24, k: int = 2, texts: int = 4, seed: int = 0
) -> tuple[Store, dict[str, set[int]]]:
    """A store with checkpoints 'before'/'after', tasks split alternately discovery/held-out. Returns the
    open store and, per planted behaviour, the ids of the segments that carry it."""
    rng = np.random.default_rng(seed)
    store = Store(path)
    now = datetime.now(UTC).replace(tzinfo=None)
    store.append(
        "checkpoints", pl.DataFrame({"checkpoint": ["before", "after"], "ordinal": [0, 1], "created_at": [now, now]})
    )
    rollouts, segments = [], []
    truth: dict[str, set[int]] = {p.name: set() for p in planted}
    key = sid = 0
    for checkpoint in ("before", "after"):
        for t in range(n_tasks):
            for trial in range(k):
                rollouts.append(
                    {
                        "rollout_key": key,
                        "checkpoint": checkpoint,
                        "rollout_id": f"t{t}-r{trial}",
                        "task_id": f"t{t}",
                        "trial": trial,
                        "reward": float(rng.random() < 0.5),
                        "split": "discovery" if t % 2 == 0 else "heldout",
                        "source_hash": "x",
                        "source_line": key,
                        "n_messages": texts * 2,
                    }
                )
                for m in range(texts):
                    text = str(rng.choice(FILLER))
                    tool, args = TOOLS[m % len(TOOLS)]
                    calls = [(tool, args)]
                    carried = []
                    for p in planted:
                        rate = p.p_after if checkpoint == "after" else p.p_before
                        if rng.random() < rate:
                            if p.kind == "text":
                                text = f"{text} {p.content}"
                                carried.append((p.name, "text"))
                            else:
                                calls.append((p.content, {"note": "planted"}))
                                carried.append((p.name, p.content))
                    segments.append(
                        {
                            "segment_id": sid,
                            "rollout_key": key,
                            "message_index": 2 * m + 1,
                            "part_index": 0,
                            "kind": "text",
                            "text": text,
                            "origin": "content",
                            "content_hash": str(sid),
                        }
                    )
                    truth.update({n: truth[n] | {sid} for n, what in carried if what == "text"})
                    sid += 1
                    for part, (name, a) in enumerate(calls):
                        args_json = json.dumps(a, sort_keys=True, separators=(",", ":"))
                        segments.append(
                            {
                                "segment_id": sid,
                                "rollout_key": key,
                                "message_index": 2 * m + 1,
                                "part_index": part,
                                "kind": "tool_call",
                                "text": f"{name} {args_json}",
                                "tool_name": name,
                                "tool_args": args_json,
                                "args_valid": True,
                                "origin": "tool_calls",
                                "content_hash": str(sid),
                            }
                        )
                        truth.update({n: truth[n] | {sid} for n, what in carried if what == name})
                        sid += 1
                key += 1
    store.append("rollouts", pl.DataFrame(rollouts))
    store.append("segments", pl.DataFrame(segments))
    return store, truth
