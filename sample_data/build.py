"""Rebuild the sample pairs from the public rollouts in ../shared/data (see README.md here for provenance).

Run from the repository root: `.venv/bin/python sample_data/build.py [SHARED_DATA_DIR]`.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from engine.errors import RecordError
from engine.ingest.formats import Source, parse
from engine.ingest.records import Rollout

HERE = Path(__file__).resolve().parent


def rollouts(path: Path, fmt: str) -> list[Rollout]:
    items = list(parse(Source(path), fmt))
    errors = [i for i in items if isinstance(i, RecordError)]
    if errors:
        raise SystemExit(f"{errors[0]}")
    return items  # type: ignore[return-value]


def write(target: Path, records: Iterable[Rollout]) -> int:
    target.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    # mtime=0 keeps the gzip bytes identical across rebuilds
    with gzip.GzipFile(target, "wb", mtime=0) as raw:
        for r in records:
            raw.write((json.dumps(r.to_json(), ensure_ascii=False) + "\n").encode())
            n += 1
    return n


def main(shared: Path) -> None:
    tau2 = shared / "tau2-grok3-policy"
    standard, tighter = [], []
    for path in sorted(tau2.glob("*.json")):
        if path.name == "MANIFEST.json":
            continue
        (tighter if "tighter_policy" in path.name else standard).extend(rollouts(path, "tau2"))
    print("tau2 standard", write(HERE / "tau2-grok3/standard.jsonl.gz", standard))
    print("tau2 tighter", write(HERE / "tau2-grok3/tighter.jsonl.gz", tighter))

    gpt4o = rollouts(shared / "tau-bench/gpt-4o-airline.json", "tau-bench")
    print(
        "tau-bench trials 0-1",
        write(HERE / "tau-bench-gpt4o/trials01.jsonl.gz", (r for r in gpt4o if r.trial in (0, 1))),
    )
    print(
        "tau-bench trials 2-3",
        write(HERE / "tau-bench-gpt4o/trials23.jsonl.gz", (r for r in gpt4o if r.trial in (2, 3))),
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent.parent / "shared" / "data")
