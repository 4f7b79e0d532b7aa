"""Planted behaviours in a small same-model study: what rldiff recovers when a study has 4 tasks.

    .venv/bin/python bench/small_planted.py [--source FILE] [--seeds 3,5] [--suites paraphrased,replies,habits]
                                            [--work DIR]

One checkpoint's rollouts (default: the tau2 sample's standard checkpoint, grok-3, 4 tasks, 66 rollouts) are
dealt alternately within each task into two halves, a same-model pair of 33 + 33 rollouts; each suite is
planted into it and scored as `rldiff bench-planted --quick` does (planted and unmodified pair, rldiff, the
naive n-gram baseline, rldiff without concept and group sources). With 4 shared tasks the split is within task
and the hypotheses stage cross-fits (docs/statistics.md, section 12), so this is the small-study path end to
end, on a model and a format the 50-task suites never see. Prints Markdown for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from collections import Counter
from pathlib import Path

from engine.config import AnalyzeConfig
from engine.planted import read_records
from engine.planted_suites import report_lines, run_suites
from engine.progress import RichBar

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "tau2-grok3" / "standard.jsonl.gz"


def halves(source: Path, folder: Path) -> tuple[Path, Path]:
    """`source`'s rollouts dealt alternately, in file order, within each task into two files."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / "a.jsonl", folder / "b.jsonl")
    dealt: Counter[str] = Counter()
    with paths[0].open("w") as a, paths[1].open("w") as b:
        for record in read_records(source):
            task = str(record["task_id"])
            (a if dealt[task] % 2 == 0 else b).write(json.dumps(record) + "\n")
            dealt[task] += 1
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=SAMPLE, help="one checkpoint's rollouts (canonical JSONL)")
    parser.add_argument("--seeds", default="3", help="comma-separated seeds (vocabulary, planting, split, SAE)")
    parser.add_argument("--suites", default="paraphrased,replies,habits")
    parser.add_argument("--work", type=Path, help="folder for the halves, planted files and stores")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    work = args.work or Path(tempfile.mkdtemp(prefix="rldiff-small-planted-"))
    pair = halves(args.source, work / "halves")
    for seed in (int(s) for s in args.seeds.split(",")):
        for suite in args.suites.split(","):
            start = time.perf_counter()
            report = run_suites(
                work / f"{suite}-{seed}", AnalyzeConfig(seed=seed), suite=suite, quick=True, pair=pair,
                progress=RichBar(),
            )  # fmt: skip
            print(f"\n## {suite}, seed {seed} ({time.perf_counter() - start:.0f} s)\n")
            for line in report_lines(report):
                print(line)


if __name__ == "__main__":
    main()
