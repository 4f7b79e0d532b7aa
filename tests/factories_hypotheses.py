"""Tiny study stores with planted behaviours, built by appending rows directly (no ingest, no features)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from engine.hypotheses.population import Population
from engine.hypotheses.validate import Claim, Validation, validate
from engine.hypotheses.verifier import Verifier
from engine.kinds import DISCOVERY, HELDOUT
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
                        "split": DISCOVERY if t % 2 == 0 else HELDOUT,
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


def add_features(store: Store, truth: dict[str, set[int]], seed: int = 0) -> None:
    """Features as the features and deltas stages would leave them: an SAE feature firing on the apology
    segments (plus noise), a structural tool feature, and a feature that changes nowhere."""
    rng = np.random.default_rng(seed)
    segments = store.frame("SELECT segment_id, kind, tool_name FROM segments")
    texts = segments.filter(pl.col("kind") == "text")["segment_id"].to_numpy()
    noise = set(rng.choice(texts, size=texts.size // 20, replace=False).tolist())
    airports = segments.filter(pl.col("tool_name") == "list_all_airports")["segment_id"].to_list()
    store.append(
        "features",
        pl.DataFrame(
            {
                "feature_id": [0, 1, 2],
                "source": ["sae", "structural", "sae"],
                "name": ["sae:17", "tool:list_all_airports", "sae:3"],
                "label": ["apologize / inconvenience", "calls list_all_airports", "flight / departs"],
                "threshold": [0.5, 0.5, 0.5],
                "top_ngrams": ['["sincerely apologize", "inconvenience"]', None, '["departs"]'],
            }
        ),
    )
    fired = [(s, 0) for s in sorted(truth.get("apology", set()) | noise)] + [(s, 1) for s in airports]
    fired += [(int(s), 2) for s in rng.choice(texts, size=texts.size // 4, replace=False)]
    store.append(
        "segment_features",
        pl.DataFrame(
            {
                "segment_id": [s for s, _ in fired],
                "feature_id": [f for _, f in fired],
                "activation": rng.uniform(0.6, 3.0, len(fired)).astype(np.float32),
            }
        ),
    )
    store.append(
        "feature_deltas",
        pl.DataFrame(  # feature 1 also changes at rollout level ('any'), more significantly
            {
                "feature_id": [0, 1, 1, 2],
                "kind": ["text", "any", "tool_call", "text"],
                "prevalence_before": [0.1, 0.6, 0.3, 0.25],
                "prevalence_after": [0.45, 0.1, 0.02, 0.25],
                "delta": [0.35, -0.5, -0.28, 0.0],
                "q_value": [1e-4, 1e-5, 1e-4, 0.9],
                "p_value": [1e-4, 1e-5, 1e-4, 0.9],
                "tested": [True, True, True, True],
            }
        ),
    )


HELDOUT_ONLY_PHRASE = "Kindly review the updated itinerary below."


def split_within_task(store: Store, *, heldout_phrase: bool = False) -> None:
    """A small study's split: even trials discovery, odd held out (`split_mode` rollout). With `heldout_phrase`,
    HELDOUT_ONLY_PHRASE is appended to 2 in 5 of the held-out fold's after-replies: a change only fold B sees."""
    store.execute("UPDATE rollouts SET split = CASE WHEN trial % 2 = 0 THEN 'discovery' ELSE 'heldout' END")
    store.execute("INSERT INTO meta VALUES ('split_mode', 'rollout')")
    if heldout_phrase:
        store.execute(
            "UPDATE segments SET text = text || ' ' || ? WHERE kind = 'text' AND segment_id % 5 < 2 AND rollout_key "
            "IN (SELECT rollout_key FROM rollouts WHERE split = 'heldout' AND checkpoint = 'after')",
            [HELDOUT_ONLY_PHRASE],
        )


def validate_regex(population: Population, pattern: str, direction: str, n_permutations: int) -> Validation:
    """The held-out verdict on one claim (hypothesis 0) whose text turns are labelled by `pattern`."""
    labels = population.verifier_labels(Verifier({"regex": pattern}), ["text"])
    [result] = validate(
        population, labels.with_columns(hypothesis_id=pl.lit(0)), [Claim(0, direction)], np.random.default_rng(0),
        n_permutations=n_permutations,
    )  # fmt: skip
    return result
