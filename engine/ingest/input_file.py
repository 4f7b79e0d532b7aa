"""One input file, gzipped or not, read as the format adapters need it: streamed lines, a bounded prefix for
format detection, or the whole text; every read problem comes as a `RecordError` naming file, line and field."""

from __future__ import annotations

import codecs
import gzip
import hashlib
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from io import BufferedIOBase
from pathlib import Path

from engine.errors import InputError, RecordError

# A JSONL line longer than this is refused without being held: the longest real rollouts are a few MB, and
# decoding a line takes several times its size in memory.
MAX_LINE_BYTES = 64 << 20
# `--format auto` decides from at most this much of the (decompressed) start of a file.
DETECT_BYTES = 1 << 20
# What a broken gzip stream raises while it is read.
_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


@dataclass(frozen=True)
class InputFile:
    """One input file, gzipped or not. JSONL is streamed line by line; JSON documents are read whole."""

    path: Path

    def _binary(self) -> BufferedIOBase:
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read: {exc.strerror or exc}") from exc
        if handle.read(2) == b"\x1f\x8b":
            handle.seek(0)
            return gzip.GzipFile(fileobj=handle)
        handle.seek(0)
        return handle

    def digest(self) -> str:
        """sha256 of the file's bytes as stored."""
        sha = hashlib.sha256()
        with self.path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                sha.update(chunk)
        return sha.hexdigest()

    def numbered(self) -> Iterator[tuple[int, str | RecordError]]:
        """(physical line number, text) for every line; a line that cannot be read (not UTF-8, longer than
        `MAX_LINE_BYTES`) comes as its error, and a broken gzip stream ends with one."""
        path = str(self.path)
        number = 0
        with self._binary() as handle:
            while True:
                number += 1
                try:
                    raw = handle.readline(MAX_LINE_BYTES + 1)
                    if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                        while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                            pass  # skip the rest of the line without holding it
                        yield number, RecordError(path, number, "line", f"longer than {MAX_LINE_BYTES >> 20} MiB")
                        continue
                except _GZIP_ERRORS as exc:
                    yield number, RecordError(path, number, "gzip", f"corrupt or truncated gzip data ({exc})")
                    return
                if not raw:
                    return
                try:
                    yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError:
                    yield number, RecordError(path, number, "encoding", "not valid UTF-8")

    def magic(self) -> bytes:
        """The file's first four bytes as stored (a zip's signature, say)."""
        with self.path.open("rb") as handle:
            return handle.read(4)

    def lines(self) -> Iterator[tuple[int, str]]:
        """(physical line number, text) for every line; raises the first line's error."""
        for number, text in self.numbered():
            if isinstance(text, RecordError):
                raise text
            yield number, text

    def prefix(self) -> tuple[str, bool]:
        """At most `DETECT_BYTES` of the decoded start of the file (what `detect` decides from), and whether
        that is the whole file."""
        try:
            with self._binary() as handle:
                data = handle.read(DETECT_BYTES)
        except _GZIP_ERRORS as exc:
            raise RecordError(str(self.path), 1, "gzip", f"corrupt or truncated gzip data ({exc})") from exc
        try:  # incremental: a character cut at the end of the prefix is dropped, not an error
            text = codecs.getincrementaldecoder("utf-8-sig")().decode(data, final=False)
            return text, len(data) < DETECT_BYTES
        except UnicodeDecodeError as exc:
            raise RecordError(
                str(self.path), data[: exc.start].count(b"\n") + 1, "encoding", "not valid UTF-8"
            ) from exc

    def text(self) -> str:
        try:
            with self._binary() as handle:
                data = handle.read()
        except _GZIP_ERRORS as exc:
            raise RecordError(str(self.path), 1, "gzip", f"corrupt or truncated gzip data ({exc})") from exc
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise RecordError(
                str(self.path), data[: exc.start].count(b"\n") + 1, "encoding", "not valid UTF-8"
            ) from exc
