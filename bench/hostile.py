"""Memory and time to refuse hostile files, against the same process doing nothing but start, in the same run.

    .venv/bin/python bench/hostile.py [--mb 200] [--line-mb 512]

Cases (issue 14, item 8): a large JSONL file whose first line is broken (`--format auto` used to read the
whole file to detect the format), and a small gzip holding one huge line (it used to be decompressed whole).
Each runs `rldiff ingest` in a fresh subprocess, so its peak RSS is its own; the baseline is the same
subprocess refusing a one-line file with the same broken line (imports, DuckDB, the store): a file's size
should not show in the figures.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import generate  # noqa: E402  (bench/ingest.py: the synthetic canonical file)

BROKEN = '{"rollout_id": "r-bad", oops\n'


def measure(args: list[str]) -> dict[str, float]:
    """Run in this process: `rldiff ingest ARGS`; exit code, seconds and peak RSS."""
    from engine.cli import main

    start = time.perf_counter()
    code = main(["ingest", *args])
    return {
        "code": code,
        "seconds": time.perf_counter() - start,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def child(args: list[str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(args)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200, help="size of the file with a broken first line")
    parser.add_argument("--line-mb", type=int, default=512, help="length of the one line in the gzip")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(json.loads(args.child))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        small = work / "broken-small.jsonl"
        small.write_text(BROKEN)
        broken = work / "broken-first-line.jsonl"
        generate(work / "body.jsonl", int(args.mb * 720))  # ~720 rollouts a MB
        with broken.open("w") as out, (work / "body.jsonl").open() as body:
            out.write(BROKEN)
            for line in body:
                out.write(line)
        huge = work / "one-line.jsonl.gz"
        with gzip.open(huge, "wb", compresslevel=1) as out:
            out.write(b'{"rollout_id": "r0", "task_id": "t0", "messages": [{"role": "assistant", "content": "')
            chunk = b"y" * (1 << 20)
            for _ in range(args.line_mb):
                out.write(chunk)
            out.write(b'"}]}\n')
        cases: list[tuple[str, Path, list[str]]] = [
            ("baseline: the broken line alone", small, []),
            (f"broken first line, {broken.stat().st_size >> 20} MB", broken, []),
            (f"gzip {huge.stat().st_size >> 20} MB holding a {args.line_mb} MB line", huge, []),
        ]
        print(f"{'case':<48} {'exit':>4} {'seconds':>8} {'peak RSS':>9} {'RSS / baseline':>15}")
        base = None
        for name, path, extra in cases:
            result = child([str(work / f"{path.name}.duckdb"), str(path), "--checkpoint", "a", *extra])
            base = base or result["peak_mb"]
            print(
                f"{name:<48} {result['code']:>4} {result['seconds']:>8.2f} {result['peak_mb']:>7.0f}MB "
                f"{result['peak_mb'] / base:>14.2f}x"
            )


if __name__ == "__main__":
    main()
