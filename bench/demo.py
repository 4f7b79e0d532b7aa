"""Benchmark: where `make demo`'s time goes, from a fresh store (cold caches, as in a fresh clone).

    .venv/bin/python bench/demo.py [--work DIR] [--keep] [--dump FILE]

Runs `rldiff demo --no-tui` in a child process on a new store under `--work` (a temporary folder by default),
then prints the child's wall and CPU seconds (user + sys, from `getrusage`), the load average before and
after, each stage's wall seconds from the store's `runs` table and the features stage's own step times
(reader, SAE training, encoding, sentence pass), and ratios to the reader pass of the same run: on a shared
machine the absolute seconds move with the load, the ratios much less. The target is 180 s wall on an idle
2-core machine without a GPU (docs/benchmarks.md, "make demo and make quick, session 6").
`--dump FILE` writes the analysis outputs as canonical JSON lines (times and run ids left out), so that two
runs, before and after a change meant to be only faster, can be compared with `cmp`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

TARGET_S = 180.0  # the target for `make demo` on an idle 2-core machine
FEATURE_STEPS = ("reader_seconds", "sae_seconds", "encode_seconds", "sentence_seconds")


def _rldiff() -> list[str]:
    """The `rldiff` of this interpreter's environment (the checkout's engine first on the path)."""
    return [sys.executable, "-m", "engine.cli"]


def run_demo(store: Path) -> dict[str, float]:
    """Run the demo into `store`; wall and CPU seconds of the child process."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([*_rldiff(), "demo", "--no-tui", "--store", str(store)], check=True, env=env,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "wall": wall,
        "user": after.ru_utime - before.ru_utime,
        "sys": after.ru_stime - before.ru_stime,
    }


def stage_times(store: Path) -> tuple[dict[str, float], dict[str, float]]:
    """(stage -> wall seconds, features step -> seconds) from the store's runs table."""
    with duckdb.connect(str(store), read_only=True) as con:
        rows = con.execute(
            "SELECT stage, epoch(finished_at) - epoch(started_at), metrics FROM runs WHERE status = 'done' "
            "ORDER BY started_at"
        ).fetchall()
    stages = {stage: float(seconds) for stage, seconds, _ in rows}
    features = next((json.loads(m) for stage, _, m in rows if stage == "features" and m), {})
    return stages, {k: float(features[k]) for k in FEATURE_STEPS if k in features}


DUMPED = (  # (table, columns left out): everything the stages write that a speed change must leave alone
    ("hypotheses", ("created_at", "tested_at", "decided_at")),
    ("hypothesis_labels", ()),
    ("heldout_tests", ("tested_at",)),
    ("hypothesis_calibrations", ("computed_at",)),
    ("feature_deltas", ()),
    ("feature_task_deltas", ()),
    ("features", ("run_id",)),
    ("feature_examples", ()),
    ("clusters", ()),
    ("cluster_members", ()),
    ("sentences", ()),
    ("segment_features", ()),
)


def dump(store: Path, out: Path) -> None:
    """The tables of DUMPED, each row as one JSON line in a fixed order."""
    with duckdb.connect(str(store), read_only=True) as con, out.open("w") as f:
        for table, skipped in DUMPED:
            columns = [c[0] for c in con.execute(f"DESCRIBE {table}").fetchall() if c[0] not in skipped]
            rows = con.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY ALL").fetchall()
            f.write(f"## {table} ({len(rows)} rows)\n")
            f.writelines(json.dumps(r, default=str) + "\n" for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="folder for the demo store (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the store (to compare outputs)")
    parser.add_argument("--dump", type=Path, help="write the analysis outputs as canonical JSON lines to FILE")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="rldiff-bench-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / "demo.duckdb"
    for stale in (store, store.with_name(store.name + ".wal"), store.with_name(store.name + ".rldiff")):
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
    load_before = os.getloadavg()[0]
    cost = run_demo(store)
    load_after = os.getloadavg()[0]
    stages, steps = stage_times(store)
    reader = steps.get("reader_seconds") or float("nan")
    cpu = cost["user"] + cost["sys"]
    print(f"make demo: {cost['wall']:.0f} s wall, {cpu:.0f} s CPU ({cost['user']:.0f} user + {cost['sys']:.0f} sys), "
          f"CPU/wall {cpu / cost['wall']:.2f}; load average {load_before:.1f} before, {load_after:.1f} after; "
          f"target {TARGET_S:.0f} s wall on an idle 2-core machine")  # fmt: skip
    print(f"{'step':<22}{'wall s':>9}{'/ reader':>10}")
    for name, seconds in [*((f"stage {k}", v) for k, v in stages.items()), *steps.items()]:
        print(f"{name:<22}{seconds:>9.1f}{seconds / reader:>10.2f}")
    if args.dump:
        dump(store, args.dump)
        print(f"outputs written to {args.dump}")
    if args.keep or args.work:
        print(f"store kept: {store}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
