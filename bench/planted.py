"""Planted-behaviour benchmark: recall per planted behaviour and false discoveries, rldiff vs a naive baseline.

    .venv/bin/python bench/planted.py [--work DIR] [--seed N] [--llm MODEL]

Plants known behaviours into one half of the gpt-4o same-model pair (sample_data/tau-bench-gpt4o), runs the
whole pipeline on the planted pair and on the unmodified pair, and prints a Markdown table for
docs/benchmarks.md. Offline by default.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

from engine.config import AnalyzeConfig
from engine.planted import result_lines, run_planted_benchmark
from engine.progress import RichBar


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, help="folder for the planted files and stores (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--llm", default=None, help="draft and judge with this model (default: offline)")
    parser.add_argument("--permutations", type=int, default=2000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    config = AnalyzeConfig(seed=args.seed, llm=args.llm, permutations=args.permutations)
    work = args.work or Path(tempfile.mkdtemp(prefix="rldiff-planted-"))
    start = time.perf_counter()
    result = run_planted_benchmark(work, config, progress=RichBar())
    for line in result_lines(result):
        print(line)
    print(
        f"\nseconds: {', '.join(f'{k} {v:.0f}' for k, v in result.seconds.items())}; "
        f"total {time.perf_counter() - start:.0f}"
    )


if __name__ == "__main__":
    main()
