"""Input formats: each adapter turns one source file into canonical `Rollout` records with their lines."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from engine.errors import RecordError
from engine.ingest import inspect_logs, openai_responses, swe_agent
from engine.ingest.input_file import InputFile
from engine.ingest.jsontext import JsonText, JsonTextError, loads
from engine.ingest.records import RecordReader, Rollout, object_member, unpaired_surrogate

FORMATS = ("auto", "jsonl", "openai", "anthropic", "tau-bench", "tau2", "openai-responses", "inspect", "swe-agent")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# Keys that mark a multi-line document's format in its first DETECT_BYTES.
_INSPECT_KEYS = (re.compile(r'"eval"\s*:\s*\{'), re.compile(r'"task"\s*:'))
_SWE_AGENT_KEYS = re.compile(
    r'"trajectory_format"\s*:\s*"mini-swe-agent'
    r'|"trajectory"\s*:\s*\[\s*\{\s*"(?:action|thought|observation|response)"'
)

# A parsed item: a rollout, or the error that made its record unusable (kept so --skip-bad can quarantine it).
Item = Rollout | RecordError


def detect(source: InputFile) -> str:
    """The format of a source, from a bounded prefix of its content (`DETECT_BYTES`).

    A zip is an Inspect `.eval` log or nothing. Otherwise from the first line when it parses; from the keys in
    the prefix when it opens a multi-line document; and when it is a broken JSONL record, from the next
    complete line that parses (the parser then reports line 1's own error, and `--skip-bad` can skip it).
    """
    if source.magic() == b"PK\x03\x04":  # a zip: only Inspect's .eval logs are read
        if inspect_logs.is_inspect_log(source.path, None):
            return "inspect"
        raise RecordError(str(source.path), 1, "format", "a zip archive that is not an Inspect .eval log")
    prefix, whole = source.prefix()
    if not prefix.strip():
        raise RecordError(str(source.path), 1, "file", "empty file: no rollouts")
    lines = [line for line in prefix.splitlines() if line.strip()]
    complete = lines if whole or prefix.endswith("\n") else lines[:-1]
    first = prefix.lstrip()[:1]
    found: str | None = None
    if not complete:  # one line longer than the prefix: JSONL (the parser caps its length), unless a document
        found = _document_format(first, prefix, whole) or ("jsonl" if first == "{" else None)
    elif _opens_document(complete[0]):
        found = _document_format(first, prefix, whole)
    elif (record := _decoded(complete[0])) is not None:
        found = _record_format(record)
    else:  # a broken first record: the next one that parses decides, else the parser reports line 1's error
        records = (r for r in map(_decoded, complete[1:]) if r is not None)
        found = next((f for f in map(_record_format, records) if f), "jsonl" if first == "{" else None)
    if found is None:
        raise _undetected(source)
    return found


def _decoded(line: str) -> Any:
    """The JSON value of one line, or None when it does not parse."""
    try:
        return loads(line)
    except (ValueError, RecursionError):
        return None


def _opens_document(line: str) -> bool:
    """Whether `line` is the start of a JSON value that goes on after it (a multi-line document)."""
    try:
        loads(line)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(line.rstrip())  # ran out of text, rather than hit a syntax error
    except (ValueError, RecursionError):
        return False
    return False


def _record_format(record: Any) -> str | None:
    """The format of a file whose first (or first good) line, or whole document, decodes to `record`."""
    if swe_agent.is_trajectory(record):
        return "swe-agent"
    if openai_responses.is_responses_record(record):
        return "openai-responses"
    if isinstance(record, dict) and "messages" in record:
        return _message_dialect(record["messages"])
    if isinstance(record, dict) and "simulations" in record:
        return "tau2"
    if isinstance(record, dict) and isinstance(record.get("eval"), dict) and "task" in record["eval"]:
        return "inspect"
    if isinstance(record, list) and record and isinstance(record[0], dict) and "traj" in record[0]:
        return "tau-bench"
    return None


def _document_format(first: str, prefix: str, whole: bool) -> str | None:
    """The format of a multi-line JSON document: from its value when the prefix holds all of it, else from the
    keys in the prefix."""
    if whole and (record := _decoded(prefix)) is not None:
        return _record_format(record)
    if first == "[" and re.search(r'"traj"\s*:', prefix):
        return "tau-bench"
    if first == "{":
        if re.search(r'"simulations"\s*:', prefix):
            return "tau2"
        if all(key.search(prefix) for key in _INSPECT_KEYS):
            return "inspect"
        if _SWE_AGENT_KEYS.search(prefix):
            return "swe-agent"
    return None


def _undetected(source: InputFile) -> RecordError:
    return RecordError(
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


def parse(source: InputFile, fmt: str, score: str | None = None) -> Iterator[Item]:
    """The rollouts of a source in the given format (not 'auto'); `score` names an Inspect log's reward."""
    if fmt == "inspect":
        return inspect_logs.parse(str(source.path), score)
    return _ADAPTERS[fmt](source)


def json_lines(source: InputFile) -> Iterator[tuple[RecordReader, Any] | RecordError]:
    """Each non-blank line of a JSON Lines source decoded, with its reader; a line that cannot be read or
    decoded (not UTF-8, too long, bad JSON, non-finite numbers, too deep, lone surrogates) comes as its error."""
    path = str(source.path)
    for number, line in source.numbered():
        if isinstance(line, RecordError):
            yield line
            continue
        if not line.strip():
            continue
        reader = RecordReader(path, number)
        try:
            record = loads(line.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            yield reader.fail("json", f"{exc.msg} (column {exc.pos + 1})")
            continue
        except ValueError as exc:
            yield reader.fail("json", str(exc))
            continue
        except RecursionError:
            yield reader.fail("json", "nested too deeply")
            continue
        if _SURROGATE_ESCAPE.search(line) and (error := _surrogate_error(reader, record)):
            yield error
            continue
        yield reader, record


def _jsonl(source: InputFile, dialect: str | None = None) -> Iterator[Item]:
    """Canonical JSONL; with `dialect`, messages must use one vendor's shapes."""
    for decoded in json_lines(source):
        if isinstance(decoded, RecordError):
            yield decoded
            continue
        reader, record = decoded
        if dialect and isinstance(record, dict):
            found = _message_dialect(record.get("messages"))
            if found not in (dialect, "jsonl"):
                yield reader.fail("messages", f"{found} message shapes in a file read as --format {dialect}")
                continue
        yield guard(reader, partial(reader.rollout, record))


def _surrogate_error(reader: RecordReader, record: Any) -> RecordError | None:
    """The error for a record holding a lone surrogate escape (checked only where the text has one)."""
    where = unpaired_surrogate(record)
    return reader.fail(where, "lone UTF-16 surrogate escape (\\ud800-\\udfff): not text") if where else None


def _tau_bench(source: InputFile) -> Iterator[Item]:
    """tau-bench historical trajectories: a JSON list of {task_id, trial, reward, info, traj}."""
    path = str(source.path)
    try:
        doc = JsonText(source.text())
        suspicious = bool(_SURROGATE_ESCAPE.search(doc.text))
        for line, record in doc.array_items():
            reader = RecordReader(path, line)

            def convert(r: RecordReader = reader, rec: Any = record) -> Rollout:
                if suspicious and (error := _surrogate_error(r, rec)):
                    raise error
                if not isinstance(rec, dict):
                    raise r.fail("record", f"expected a JSON object, got {type(rec).__name__}")
                task, trial = rec.get("task_id"), rec.get("trial")
                info = object_member(rec, "info")
                return r.rollout(
                    rec,
                    rec.get("traj"),
                    rollout_id=f"t{task}-r{trial}" if task is not None else None,
                    metadata={
                        "source_format": "tau-bench",
                        **({"user_cost": info["user_cost"]} if "user_cost" in info else {}),
                    },
                )

            yield guard(reader, convert)
    except JsonTextError as exc:
        yield RecordError(path, exc.line, "json", str(exc))


def _tau2(source: InputFile) -> Iterator[Item]:
    """sierra-research/tau2-bench simulation results: {timestamp, info, tasks, simulations: [...]}."""
    path = str(source.path)
    doc = JsonText(source.text())
    suspicious = bool(_SURROGATE_ESCAPE.search(doc.text))
    try:
        start = doc.member("simulations")
        if start is None:
            yield RecordError(path, 1, "simulations", "missing")
            return
        model = _tau2_agent_model(doc)
        for line, sim in doc.array_items(start):
            reader = RecordReader(path, line)

            def convert(r: RecordReader = reader, s: Any = sim) -> Rollout:
                if suspicious and (error := _surrogate_error(r, s)):
                    raise error
                if not isinstance(s, dict):
                    raise r.fail("simulation", f"expected a JSON object, got {type(s).__name__}")
                reward_info = object_member(s, "reward_info")
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

            yield guard(reader, convert)
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


def guard(reader: RecordReader, convert: Callable[[], Rollout]) -> Item:
    """The converted record, or its error: anything unexpected while converting one record is that record's
    error (so `--skip-bad` can quarantine it), never a crash of the whole ingest."""
    try:
        return convert()
    except RecordError as exc:
        return exc
    except Exception as exc:
        return reader.unexpected(exc)


_ADAPTERS: dict[str, Callable[[InputFile], Iterator[Item]]] = {
    "jsonl": _jsonl,
    "openai": lambda source: _jsonl(source, "openai"),
    "anthropic": lambda source: _jsonl(source, "anthropic"),
    "tau-bench": _tau_bench,
    "tau2": _tau2,
    "openai-responses": lambda source: (
        d if isinstance(d, RecordError) else guard(d[0], partial(openai_responses.rollout, *d))
        for d in json_lines(source)
    ),
    "swe-agent": lambda source: swe_agent.parse(source.path, source.text()),
}
