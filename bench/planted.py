"""Planted-behaviour benchmark: recall per planted behaviour and false discoveries, rldiff vs a naive baseline.

    .venv/bin/python bench/planted.py [--work DIR] [--seed N] [--quick] [--suite all|fixed|paraphrased|replies]
    .venv/bin/python bench/planted.py --rescore --work DIR   # score an earlier run's stores again

Plants known behaviours into one half of the gpt-4o same-model pair (sample_data/tau-bench-gpt4o): the
fixed-phrase suite, the paraphrased suite (behaviours written a different way each time inside generated
reasoning, probe calls, a composition shift), the reply suite (behaviours written many ways in the model's real
replies), a rate sweep (1%, 3%, 10% of reasoning turns), and the unmodified pairs; runs the whole pipeline on
each, and scores it beside the naive n-gram baseline (and, where the configuration has the switch, rldiff
without concept/group sources), on seeds N and N+1. Prints Markdown for docs/benchmarks.md. Offline by
default. The same as `rldiff bench-planted`.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

from engine.config import AnalyzeConfig
from engine.planted_suites import report_lines, rescore, run_suites
from engine.progress import RichBar


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, help="folder for the planted files and stores (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=0, help="first seed; the second is N+1")
    parser.add_argument(
        "--quick", action="store_true", help="one seed, the paraphrased (or reply) suite and its null only"
    )
    parser.add_argument("--suite", choices=("all", "fixed", "paraphrased", "replies"), default="all")
    parser.add_argument("--llm", default=None, help="draft and judge with this model (default: offline)")
    parser.add_argument("--permutations", type=int, default=2000)
    parser.add_argument("--rescore", action="store_true", help="score the stores of an earlier run in --work again")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    config = AnalyzeConfig(seed=args.seed, llm=args.llm, permutations=args.permutations)
    work = args.work or Path(tempfile.mkdtemp(prefix="rldiff-planted-"))
    start = time.perf_counter()
    if args.rescore:
        if args.work is None:
            parser.error("--rescore needs --work, the folder of an earlier run")
        report = rescore(args.work)
    else:
        report = run_suites(work, config, suite=args.suite, quick=args.quick, progress=RichBar())
    for line in report_lines(report):
        print(line)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
