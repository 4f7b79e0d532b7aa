"""Input formats: each adapter turns one source file into canonical `Rollout` records with their lines."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from engine.errors import InputError, RecordError
from engine.ingest import inspect_logs, openai_responses, swe_agent
from engine.ingest.jsontext import JsonText, JsonTextError
from engine.ingest.records import RecordReader, Rollout

FORMATS = ("auto", "jsonl", "openai", "anthropic", "tau-bench", "tau2", "openai-responses", "inspect", "swe-agent")

# A parsed item: a rollout, or the error that made its record unusable (kept so --skip-bad can quarantine it).
Item = Rollout | RecordError


@dataclass(frozen=True)
class Source:
    """One input file, gzipped or not. JSONL is streamed line by line; JSON documents are read whole."""

    path: Path

    def _binary(self) -> BinaryIO:
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read: {exc.strerror or exc}") from exc
        if handle.read(2) == b"\x1f\x8b":
            handle.seek(0)
            return gzip.GzipFile(fileobj=handle)  # type: ignore[return-value]
        handle.seek(0)
        return handle

    def digest(self) -> str:
        """sha256 of the file's bytes as stored."""
        sha = hashlib.sha256()
        with self.path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                sha.update(chunk)
        return sha.hexdigest()

    def lines(self) -> Iterator[tuple[int, str]]:
        """(physical line number, text) for every line."""
        with self._binary() as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise RecordError(str(self.path), number, "encoding", "not valid UTF-8") from exc
                yield number, text

    def magic(self) -> bytes:
        """The file's first four bytes as stored (a zip's signature, say)."""
        with self.path.open("rb") as handle:
            return handle.read(4)

    def head(self) -> str:
        """The first non-blank line (enough to recognise JSONL and the start of a document)."""
        for _, line in self.lines():
            if line.strip():
                return line
        return ""

    def text(self) -> str:
        with self._binary() as handle:
            data = handle.read()
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise RecordError(
                str(self.path), data[: exc.start].count(b"\n") + 1, "encoding", "not valid UTF-8"
            ) from exc


def detect(source: Source) -> str:
    """The format of a source, from its content."""
    if source.magic() == b"PK\x03\x04":  # a zip: only Inspect's .eval logs are read
        if inspect_logs.is_inspect_log(source.path, None):
            return "inspect"
        raise RecordError(str(source.path), 1, "format", "a zip archive that is not an Inspect .eval log")
    head = source.head().strip()
    first = head[:1]
    if first == "":
        raise RecordError(str(source.path), 1, "file", "empty file: no rollouts")
    if first == "[":
        items = JsonText(source.text()).array_items()
        try:
            _, item = next(items, (1, None))
        except JsonTextError as exc:
            raise RecordError(str(source.path), exc.line, "json", str(exc)) from exc
        if isinstance(item, dict) and "traj" in item:
            return "tau-bench"
    elif first == "{":
        try:
            record = json.loads(head)
        except json.JSONDecodeError:
            record = None
        if swe_agent.is_trajectory(record):
            return "swe-agent"
        if openai_responses.is_responses_record(record):
            return "openai-responses"
        if isinstance(record, dict) and "messages" in record:
            return _message_dialect(record["messages"])
        if record is None or "simulations" in record:
            text = source.text()
            try:
                if JsonText(text).member("simulations") is not None:
                    return "tau2"
            except JsonTextError:
                pass
            if inspect_logs.is_inspect_log(source.path, text):
                return "inspect"
            try:
                if swe_agent.is_trajectory(json.loads(text)):
                    return "swe-agent"
            except json.JSONDecodeError:
                pass
    raise RecordError(
        str(source.path),
        1,
        "format",
        "cannot detect the format (expected canonical JSONL with 'messages', a tau-bench trajectory list, "
        "a tau2 simulation file, Responses API items, an Inspect log or a SWE-agent trajectory); "
        "name it with --format",
    )


def _message_dialect(messages: Any) -> str:
    """'openai' or 'anthropic' when the messages use that vendor's shapes, else canonical 'jsonl'."""
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, dict):
            continue
        if any(isinstance(c, dict) and "function" in c for c in m.get("tool_calls") or []):
            return "openai"
        if isinstance(m.get("content"), list):
            return "anthropic"
    return "jsonl"


def parse(source: Source, fmt: str, score: str | None = None) -> Iterator[Item]:
    """The rollouts of a source in the given format (not 'auto'); `score` names an Inspect log's reward."""
    if fmt == "inspect":
        return inspect_logs.parse(str(source.path), score)
    return _ADAPTERS[fmt](source)


def _jsonl(source: Source, dialect: str | None = None) -> Iterator[Item]:
    """Canonical JSONL; with `dialect`, messages must use one vendor's shapes."""
    path = str(source.path)
    for number, line in source.lines():
        if not line.strip():
            continue
        reader = RecordReader(path, number)
        try:
            record = json.loads(line.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            yield reader.fail("json", f"{exc.msg} (column {exc.pos + 1})")
            continue
        if dialect and isinstance(record, dict):
            found = _message_dialect(record.get("messages"))
            if found not in (dialect, "jsonl"):
                yield reader.fail("messages", f"{found} message shapes in a file read as --format {dialect}")
                continue
        yield _guard(reader, lambda r=reader, rec=record: r.rollout(rec))


def _tau_bench(source: Source) -> Iterator[Item]:
    """tau-bench historical trajectories: a JSON list of {task_id, trial, reward, info, traj}."""
    path = str(source.path)
    try:
        for line, record in JsonText(source.text()).array_items():
            reader = RecordReader(path, line)

            def convert(r: RecordReader = reader, rec: Any = record) -> Rollout:
                if not isinstance(rec, dict):
                    raise r.fail("record", f"expected a JSON object, got {type(rec).__name__}")
                task, trial = rec.get("task_id"), rec.get("trial")
                info = rec.get("info") if isinstance(rec.get("info"), dict) else {}
                return r.rollout(
                    rec,
                    rec.get("traj"),
                    rollout_id=f"t{task}-r{trial}" if task is not None else None,
                    metadata={
                        "source_format": "tau-bench",
                        **({"user_cost": info["user_cost"]} if "user_cost" in info else {}),
                    },
                )

            yield _guard(reader, convert)
    except JsonTextError as exc:
        yield RecordError(path, exc.line, "json", str(exc))


def _tau2(source: Source) -> Iterator[Item]:
    """sierra-research/tau2-bench simulation results: {timestamp, info, tasks, simulations: [...]}."""
    path = str(source.path)
    doc = JsonText(source.text())
    try:
        start = doc.member("simulations")
        if start is None:
            yield RecordError(path, 1, "simulations", "missing")
            return
        model = _tau2_agent_model(doc)
        for line, sim in doc.array_items(start):
            reader = RecordReader(path, line)

            def convert(r: RecordReader = reader, s: Any = sim) -> Rollout:
                if not isinstance(s, dict):
                    raise r.fail("simulation", f"expected a JSON object, got {type(s).__name__}")
                reward_info = s.get("reward_info") if isinstance(s.get("reward_info"), dict) else {}
                meta = {k: s[k] for k in ("termination_reason", "duration", "agent_cost", "seed") if k in s}
                reason = s.get("termination_reason")
                return r.rollout(
                    s,
                    s.get("messages"),
                    rollout_id=s.get("id"),
                    reward=reward_info.get("reward"),
                    metadata={"source_format": "tau2", **meta},
                    error=reason if reason in TAU2_ERRORS else None,
                    timed_out=None if reason is None else reason in TAU2_LIMITS,
                    tokens=_tau2_tokens(s.get("messages")),
                    cost_usd=s.get("agent_cost"),
                    model=model,
                )

            yield _guard(reader, convert)
    except JsonTextError as exc:
        yield RecordError(path, exc.line, "json", str(exc))


# tau2's termination reasons that mean the run hit a limit, or failed (the others: user_stop, agent_stop)
TAU2_LIMITS = frozenset({"max_steps"})
TAU2_ERRORS = frozenset({"too_many_errors", "agent_error", "user_error"})


def _tau2_agent_model(doc: JsonText) -> str | None:
    """The agent's model from the file's `info.agent_info.llm`, when the file has one."""
    start = doc.member("info")
    info = doc.value_at(start) if start is not None else None
    agent = info.get("agent_info") if isinstance(info, dict) else None
    model = agent.get("llm") if isinstance(agent, dict) else None
    return model if isinstance(model, str) else None


def _tau2_tokens(messages: Any) -> int | None:
    """Prompt and completion tokens summed over the agent's turns, from each message's `usage`."""
    total, seen = 0, False
    for m in messages if isinstance(messages, list) else []:
        usage = m.get("usage") if isinstance(m, dict) and m.get("role") == "assistant" else None
        if isinstance(usage, dict):
            for key in ("prompt_tokens", "completion_tokens"):
                if isinstance(usage.get(key), int) and not isinstance(usage.get(key), bool):
                    total, seen = total + usage[key], True
    return total if seen else None


def _guard(reader: RecordReader, convert: Callable[[], Rollout]) -> Item:
    try:
        return convert()
    except RecordError as exc:
        return exc


_ADAPTERS: dict[str, Callable[[Source], Iterator[Item]]] = {
    "jsonl": _jsonl,
    "openai": lambda source: _jsonl(source, "openai"),
    "anthropic": lambda source: _jsonl(source, "anthropic"),
    "tau-bench": _tau_bench,
    "tau2": _tau2,
    "openai-responses": lambda source: openai_responses.parse(str(source.path), source.lines()),
    "swe-agent": lambda source: swe_agent.parse(source.path, source.text()),
}
