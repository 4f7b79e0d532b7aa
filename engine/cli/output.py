"""The CLI's terminal: stdout and stderr consoles, JSON output, and the checks every command makes of its store.

Commands print through `output.out` and `output.err` (looked up when they run), so one place redirects them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from engine.errors import InputError

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def print_json(value: object) -> None:
    """`value` (dataclasses, frames, lists) as JSON on stdout: ASCII-escaped, so rollout text cannot drive
    the terminal."""
    import dataclasses
    import json

    import polars as pl

    def plain(v: object) -> object:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return dataclasses.asdict(v)
        if isinstance(v, pl.DataFrame):
            return v.to_dicts()
        return str(v)

    sys.stdout.write(json.dumps(value, default=plain, indent=1))
    sys.stdout.write("\n")


def existing(path: str) -> str:
    """`path`, when a store file is there (else a clear error, exit code 2)."""
    if not Path(path).is_file():
        raise InputError(f"{path}: no such store (create one with `rldiff ingest` or `rldiff compare`)")
    return path


@contextmanager
def created_or_removed(path: str) -> Iterator[None]:
    """Remove the store (and its write-ahead log) when the command that created it fails."""
    existed = Path(path).exists()
    try:
        yield
    except BaseException:
        if not existed:
            for created in (Path(path), Path(path + ".wal")):
                created.unlink(missing_ok=True)
        raise
