"""Planted-behaviour benchmark: recall per planted behaviour and false discoveries, rldiff vs a naive baseline.

    .venv/bin/python bench/planted.py [--work DIR] [--seed N] [--llm MODEL]

Plants known behaviours into one half of the gpt-4o same-model pair (sample_data/tau-bench-gpt4o), runs the
whole pipeline on the planted pair and on the unmodified pair, and prints a Markdown table for
docs/benchmarks.md. Offline by default.
"""

from __future__ import annotations

import argparse
import importlib
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
    missing = [m for _, m in _stages() if importlib.util.find_spec(m) is None]
    if missing:
        print(f"note: pipeline stages not available yet, skipped: {', '.join(missing)}")
    config = AnalyzeConfig(seed=args.seed, llm=args.llm, permutations=args.permutations)
    work = args.work or Path(tempfile.mkdtemp(prefix="rldiff-planted-"))
    start = time.perf_counter()
    result = run_planted_benchmark(work, config, progress=RichBar(), analyze=_analyze if missing else None)
    for line in result_lines(result):
        print(line)
    print(f"\nseconds: {', '.join(f'{k} {v:.0f}' for k, v in result.seconds.items())}; "
          f"total {time.perf_counter() - start:.0f}")


def _stages():
    from engine.pipeline import STAGES

    return STAGES


def _analyze(store, config, progress):
    """The pipeline's stages in order, skipping those whose module does not exist yet."""
    import numpy as np

    from engine.pipeline import resolve_checkpoints

    config = resolve_checkpoints(store, config)
    for i, (_, module) in enumerate(_stages()):
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module).run(store, config, np.random.default_rng([config.seed, i]), progress)


if __name__ == "__main__":
    main()
