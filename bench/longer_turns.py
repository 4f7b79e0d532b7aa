"""Benchmark: a pair whose after-reasoning is only longer, through the whole analysis.

    .venv/bin/python bench/longer_turns.py [--seeds 1201] [--share 0.6] [--work DIR]

Per seed: the sample pair's unmodified copy with generated reasoning (the planted suites' null,
`plant_paraphrased` with no behaviour), then every after-reasoning turn given `share` times its sentences more
of the same vocabulary's background sentences (`engine.planted_paraphrase.background`, drawn apart from the
turn's own). Nothing per turn of a length changed, so a reader should learn that reasoning turns got longer and
nothing else. Analysed with the `rldiff compare --llm none` defaults; printed: the validated findings about
length, the validated findings that carry the equal-length caution, those that do not (what a reader would take
as a behaviour change: want none), and how many drafts were listed as side effects of turn length.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from engine.config import AnalyzeConfig
from engine.hypotheses.cautions import has_caution
from engine.hypotheses.equal_length import about_length
from engine.pipeline import analyze
from engine.planted import SAMPLE_PAIR, analysed_study, read_records, write_records
from engine.planted_paraphrase import background, plant_paraphrased
from engine.planted_vocab import Vocabulary
from engine.progress import NullProgress
from engine.safe_text import line


def lengthen(path: Path, seed: int, share: float) -> None:
    """Append `share` times each reasoning turn's sentences of background reasoning to it, in place."""
    vocab = Vocabulary(seed)
    records = read_records(path)
    for record in records:
        for position, message in enumerate(record["messages"]):
            if message.get("reasoning"):
                have = len(background(vocab, record["rollout_id"], position))
                extra = background(vocab, f"{record['rollout_id']}/longer", position)
                wanted = max(1, round(share * have))
                extra = (extra * (wanted // max(len(extra), 1) + 1))[:wanted]
                message["reasoning"] = " ".join([message["reasoning"], *extra])
    write_records(path, records)


def words_per_turn(path: Path) -> float:
    turns = [m["reasoning"] for r in read_records(path) for m in r["messages"] if m.get("reasoning")]
    return sum(len(t.split()) for t in turns) / max(len(turns), 1)


def run(seed: int, share: float, work: Path) -> None:
    start = time.perf_counter()
    pair = plant_paraphrased(Path(SAMPLE_PAIR[0]), Path(SAMPLE_PAIR[1]), work / f"longer-{seed}", seed, ())
    before_words = words_per_turn(pair.after)
    lengthen(pair.after, seed, share)
    print(f"seed {seed}: after-reasoning {before_words:.0f} -> {words_per_turn(pair.after):.0f} words a turn")
    config = AnalyzeConfig(seed=seed)  # llm None: the offline path
    with analysed_study(work, f"longer-{seed}", pair.before, pair.after, config, analyze, NullProgress()) as store:
        rows = store.frame(
            "SELECT statement, spec, provenance FROM hypotheses WHERE status = 'validated' ORDER BY hypothesis_id"
        ).rows()
    found = [(statement, json.loads(spec or "null"), json.loads(prov or "{}")) for statement, spec, prov in rows]
    length = [f for f in found if about_length(f[1])]
    cautioned = [f for f in found if not about_length(f[1]) and has_caution(f[2])]
    face_value = [f for f in found if not about_length(f[1]) and not has_caution(f[2])]
    effects = sum("turn length" in e.get("relation", "") for f in found for e in f[2].get("side_effects", []))
    print(f"  validated about length: {len(length)}, cautioned: {len(cautioned)}, at face value: {len(face_value)}")
    print(f"  drafts listed as side effects of turn length: {effects}  ({time.perf_counter() - start:.0f} s)")
    for statement, _, _ in length + face_value:
        print(f"    {line(statement, 140)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1201", help="comma-separated vocabulary seeds")
    parser.add_argument("--share", type=float, default=0.6, help="extra sentences per sentence of a turn")
    parser.add_argument("--work", type=Path, default=None, help="folder for the files and stores")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="rldiff-longer-"))
    for seed in (int(s) for s in args.seeds.split(",")):
        run(seed, args.share, work)


if __name__ == "__main__":
    main()
