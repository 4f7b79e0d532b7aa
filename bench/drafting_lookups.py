"""Benchmark: the hypotheses stage with sentence vectors kept in memory, against every lookup read from disk.

    .venv/bin/python bench/drafting_lookups.py STORE [--rounds 2]

STORE is an analysed study (e.g. the one `rldiff demo` or `rldiff compare` made). Each round re-runs its
hypotheses stage twice on fresh copies, in this process, alternating: once with the embedder's in-memory
vectors off (`MEMO_BYTES = 0`: every lookup joins the disk cache's index, as before session 29) and once
with them on. Both read the same disk cache (warmed by the store's own run), so neither runs the reader for
sentences it already embedded. Prints each run's seconds and the ratio; on a shared machine only the ratio
within a round means much. Both runs must write the same hypotheses (checked).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from engine.features import sentence_embed
from engine.hypotheses import stage
from engine.progress import NullProgress
from engine.store import Store
from engine.study import last_config, stream


def rerun(source: Path, folder: Path, memo_bytes: int) -> tuple[float, list[tuple]]:
    """Seconds of the hypotheses stage on a copy of `source` (its earlier hypotheses removed), and what it wrote."""
    store_path = folder / "study.duckdb"
    shutil.copy(source, store_path)
    (folder / "study.duckdb.rldiff").symlink_to(Path(f"{source}.rldiff").resolve())  # the warm caches
    sentence_embed.MEMO_BYTES = memo_bytes
    with Store(store_path) as store:
        for table in ("runs WHERE stage = 'hypotheses'", "heldout_tests", "hypothesis_labels", "hypotheses"):
            store.execute(f"DELETE FROM {table}")
        config = last_config(store)
        started = time.perf_counter()
        stage.run(store, config, stream(config.seed, "hypotheses"), NullProgress())
        seconds = time.perf_counter() - started
        written = store.execute("SELECT statement, status, q_value FROM hypotheses ORDER BY hypothesis_id").fetchall()
    return seconds, written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path, help="an analysed study (its .rldiff caches beside it)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    memo = sentence_embed.MEMO_BYTES
    print("| round | disk lookups only (s) | in memory (s) | ratio |\n|---:|---:|---:|---:|")
    for round_ in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as off, tempfile.TemporaryDirectory() as on:
            slow, slow_written = rerun(args.store, Path(off), 0)
            fast, fast_written = rerun(args.store, Path(on), memo)
        if slow_written != fast_written:
            raise SystemExit("the two runs wrote different hypotheses:\n" + json.dumps([slow_written, fast_written]))
        print(f"| {round_} | {slow:.1f} | {fast:.1f} | {slow / fast:.2f}x |")


if __name__ == "__main__":
    main()
