"""Benchmark: do an analysed study's findings depend on the hypotheses stage's random draws?

    .venv/bin/python bench/stream_stability.py STORE [--seeds 0,1,2] [--work DIR]

The hypotheses stage draws random numbers for its Monte Carlo tests (lexical n-grams, a small study's second
fold's deltas, length checks, held-out p-values). With the data, the split, the features and the deltas fixed
(as stored), the findings should not turn on those draws. This re-runs only the hypotheses stage of a copy of
STORE under each seed (the stage's generator and `--seed`'s streams; every upstream stage as stored) and prints
how many findings each run validates, how many every run validates, and the mean Jaccard overlap of the
validated statements between runs; then the statements some runs validate and others do not.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from engine.hypotheses import stage
from engine.progress import NullProgress
from engine.safe_text import line
from engine.store import Store
from engine.study import last_config, stream


def validated_under(store_path: Path, seed: int, work: Path) -> set[str]:
    """The statements the hypotheses stage validates on a copy of the store, run with `seed`."""
    copy = work / f"seed{seed}.duckdb"
    shutil.copy(store_path, copy)
    with Store(copy) as store:
        store.execute("DELETE FROM runs WHERE stage = 'hypotheses'")
        config = replace(last_config(store), seed=seed)
        stage.run(store, config, stream(seed, "hypotheses"), NullProgress())
        rows = store.execute("SELECT statement FROM hypotheses WHERE status = 'validated'").fetchall()
    return {statement for (statement,) in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds, one run each")
    parser.add_argument("--work", type=Path, help="folder for the store copies (default: a temp folder)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        found = {seed: validated_under(args.store, seed, work) for seed in seeds}
    in_all = set.intersection(*found.values())
    pairs = list(itertools.combinations(seeds, 2))
    jaccard = [len(found[a] & found[b]) / max(1, len(found[a] | found[b])) for a, b in pairs]
    print(f"store: {args.store}")
    print("validated per seed: " + ", ".join(f"{s}: {len(found[s])}" for s in seeds))
    print(f"validated under every seed: {len(in_all)}")
    print(f"mean Jaccard between seeds: {sum(jaccard) / max(1, len(jaccard)):.2f} ({len(pairs)} pairs)")
    for statement in sorted(set.union(*found.values()) - in_all):
        under = ",".join(str(s) for s in seeds if statement in found[s])
        print(f"  seeds {under}: {line(statement, 110)}")


if __name__ == "__main__":
    main()
