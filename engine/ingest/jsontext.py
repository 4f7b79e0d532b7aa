"""Walk a JSON document item by item, keeping the physical line where each item starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number (rollout numbers must be finite)")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large for a number (rollout numbers must be finite)")
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite)
_WS = " \t\r\n"


def loads(text: str) -> Any:
    """`json.loads` that refuses NaN, Infinity and numbers that overflow to infinity (e.g. 1e400)."""
    return _DECODER.decode(text)


class JsonTextError(ValueError):
    """Malformed JSON at a known physical line."""

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        super().__init__(message)


class JsonText:
    """A JSON document held as text, decoded lazily so each item keeps its line number."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_pos = 0  # line counting is incremental: positions are visited in increasing order
        self._line = 1

    def line_at(self, pos: int) -> int:
        if pos < self._line_pos:
            self._line_pos, self._line = 0, 1
        self._line += self.text.count("\n", self._line_pos, pos)
        self._line_pos = pos
        return self._line

    def _skip(self, pos: int) -> int:
        while pos < len(self.text) and self.text[pos] in _WS:
            pos += 1
        return pos

    def _expect(self, pos: int, char: str) -> int:
        pos = self._skip(pos)
        if pos >= len(self.text) or self.text[pos] != char:
            found = "end of file" if pos >= len(self.text) else repr(self.text[pos])
            raise JsonTextError(self.line_at(min(pos, len(self.text))), f"expected {char!r}, found {found}")
        return pos + 1

    def _decode(self, pos: int) -> tuple[Any, int]:
        try:
            return _DECODER.raw_decode(self.text, pos)
        except json.JSONDecodeError as exc:
            raise JsonTextError(exc.lineno, exc.msg) from exc
        except ValueError as exc:  # a non-finite number
            raise JsonTextError(self.line_at(pos), str(exc)) from exc
        except RecursionError as exc:
            raise JsonTextError(self.line_at(pos), "nested too deeply") from exc

    def first_char(self) -> str:
        pos = self._skip(0)
        return self.text[pos] if pos < len(self.text) else ""

    def array_items(self, pos: int = 0) -> Iterator[tuple[int, Any]]:
        """(line, item) for each item of the array starting at `pos`."""
        pos = self._expect(pos, "[")
        pos = self._skip(pos)
        if pos < len(self.text) and self.text[pos] == "]":
            return
        while True:
            pos = self._skip(pos)
            line = self.line_at(pos)
            item, pos = self._decode(pos)
            yield line, item
            pos = self._skip(pos)
            if pos < len(self.text) and self.text[pos] == "]":
                return
            pos = self._expect(pos, ",")

    def member(self, key: str, pos: int = 0) -> int | None:
        """Position of the value of `key` in the object at `pos` (other members are skipped), or None."""
        pos = self._expect(pos, "{")
        pos = self._skip(pos)
        if pos < len(self.text) and self.text[pos] == "}":
            return None
        while True:
            name, pos = self._decode(self._skip(pos))
            if not isinstance(name, str):
                raise JsonTextError(self.line_at(pos), "expected a string key")
            pos = self._skip(self._expect(pos, ":"))
            if name == key:
                return pos
            _, pos = self._decode(pos)
            pos = self._skip(pos)
            if pos < len(self.text) and self.text[pos] == "}":
                return None
            pos = self._expect(pos, ",")

    def value_at(self, pos: int) -> Any:
        return self._decode(pos)[0]
