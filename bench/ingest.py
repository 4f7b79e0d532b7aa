"""Ingest throughput and memory against merely parsing the same file with json.loads, in the same run.

    .venv/bin/python bench/ingest.py [--sizes 20000 100000]

Each measurement runs in a fresh subprocess, so its peak RSS (DuckDB's native memory included) is its own.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TOOLS = ["get_order", "search_flights", "update_booking", "cancel_booking", "transfer_to_human_agents"]


def generate(path: Path, n: int, seed: int = 0) -> None:
    """Canonical JSONL: n rollouts of 4-12 messages with text, reasoning and tool calls."""
    rng = np.random.default_rng(seed)
    with path.open("w") as out:
        for i in range(n):
            messages = [{"role": "user", "content": f"Please help with order {i}."}]
            for turn in range(int(rng.integers(2, 6))):
                tool = TOOLS[int(rng.integers(len(TOOLS)))]
                messages.append(
                    {
                        "role": "assistant",
                        "content": f"Let me look into that (step {turn}).",
                        "reasoning": "The user needs the order details before anything else." * int(rng.integers(1, 4)),
                        "tool_calls": [{"id": f"c{turn}", "name": tool, "arguments": {"order_id": f"A{i}", "n": turn}}],
                    }
                )
                messages.append({"role": "tool", "tool_call_id": f"c{turn}", "content": '{"status": "ok"}'})
            record = {
                "rollout_id": f"r{i}",
                "task_id": f"t{i % 500}",
                "trial": i // 500,
                "reward": float(i % 2),
                "messages": messages,
            }
            out.write(json.dumps(record) + "\n")


def measure(mode: str, path: Path) -> dict[str, float]:
    """Run in this process: 'parse' (json.loads per line) or 'ingest' (into a fresh store)."""
    start = time.perf_counter()
    if mode == "parse":
        rollouts = 0
        with path.open() as f:
            for line in f:
                json.loads(line)
                rollouts += 1
        segments = 0
    else:
        from engine.ingest import ingest_file
        from engine.store import Store

        with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "bench.duckdb") as store:
            result = ingest_file(store, path, "bench")
            rollouts, segments = result.rollouts, result.segments
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "rollouts": rollouts, "segments": segments, "peak_mb": peak_mb}


def child(mode: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], Path(args.child[1]))))
        return
    print(
        f"{'rollouts':>9} {'MB':>6} {'parse s':>8} {'ingest s':>9} {'ratio':>6} {'rollouts/s':>11} "
        f"{'segments/s':>11} {'parse RSS':>10} {'ingest RSS':>11}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"rollouts-{n}.jsonl"
            generate(path, n)
            parse, ingest = child("parse", path), child("ingest", path)
            print(
                f"{n:>9} {path.stat().st_size / 2**20:>6.0f} {parse['seconds']:>8.2f} {ingest['seconds']:>9.2f} "
                f"{ingest['seconds'] / parse['seconds']:>6.1f} {ingest['rollouts'] / ingest['seconds']:>11.0f} "
                f"{ingest['segments'] / ingest['seconds']:>11.0f} {parse['peak_mb']:>8.0f}MB "
                f"{ingest['peak_mb']:>9.0f}MB"
            )


if __name__ == "__main__":
    main()
