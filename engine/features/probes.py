"""Rules for tool-call behaviours the seed names: dummy/probe argument values, write-type tools, enumeration,
and tool calls issued from code. Pure functions of names and parsed arguments, used by `structural`.

A value is a probe value when it is short and made only of probe words (`probe`, `test`, `dummy`, `XXXX`,
`lorem ipsum`, ...), filler words (`id`, `value`, `invalid`, ...) and digits, joined by `_`, `-`, `.`, `:` or
spaces, with at least one probe word: `__PROBE_INVALID__`, `TEST123`, `dummy_id`, `invalid_test_value`. Words are
whole tokens, so a real value that merely contains a probe word (`contest`, `latest`, `Test Kitchen Ltd`) is not.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

PROBE_WORDS = frozenset(
    "probe probing test testing tst dummy placeholder fake mock foo bar baz qux asdf qwerty lorem ipsum".split()
)
# Words that make a value no more real when they join probe words (`dummy_id`, `invalid_test_value`), but are
# not probes alone: `id` or `value` by themselves are ordinary argument values.
FILLER_WORDS = frozenset(
    "id value val invalid bad string str data item user name code number num key x dolor sit amet".split()
)
MAX_PROBE_LENGTH = 64  # longer strings are prose (a note, a summary), where "test" is a real word
_TOKEN = re.compile(r"[a-z]+|\d+")
_JOINERS = re.compile(r"^[\w\s.:\-]+$")
_REPEATED_X = re.compile(r"^x{3,}$")

WRITE_VERBS = frozenset(
    "update cancel book create delete send publish write modify exchange return transfer remove submit edit "
    "insert patch post put set add pay refund upgrade".split()
)
_NAME_TOKEN = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_NAMESPACE = re.compile(r"^(?:functions\.|mcp__\w+?__|[\w-]+[.:/])")

CODE_TOOL = re.compile(
    r"python|bash|shell|(?:^|_)z?sh$|exec|run_code|code_interpreter|terminal|ipython|jupyter", re.IGNORECASE
)
_ENDPOINT = re.compile(
    r"\bcurl\s|\bwget\s|\brequests\.(?:get|post|put|patch|delete|request)\s*\(|\bhttpx\.|\burllib\.request|"
    r"\bfetch\s*\(|\baiohttp\.|https?://",
    re.I,
)
# Enumeration: calls to one tool, identical but for one argument, with this many distinct values of it in one
# rollout. On the public tau-bench and tau2 rollouts the most calls to one tool in a rollout is 15
# (search_direct_flight, where origin, destination and date all vary) and 7 (get_reservation_details over a
# user's reservations); a search over candidate ids, as in the seed's 1,095-candidate example, is far above.
MIN_ENUMERATION = 10


def is_probe_value(value: str) -> bool:
    """Whether a string argument is a dummy or probe value (rules in the module docstring)."""
    text = value.strip().lower()
    if not text or len(text) > MAX_PROBE_LENGTH or not _JOINERS.match(text):
        return False
    tokens = _TOKEN.findall(text)
    words = [t for t in tokens if not t.isdigit()]
    probe = [w for w in words if w in PROBE_WORDS or _REPEATED_X.match(w)]
    return bool(probe) and all(w in FILLER_WORDS or w in probe for w in words)


def probe_values(args: Any) -> list[str]:
    """The probe values among a call's string arguments, at any depth."""
    return [v for v in string_values(args) if is_probe_value(v)]


def is_write_tool(name: str) -> bool:
    """Whether a tool name starts with a write verb (`update_order`, `cancelReservation`, `functions.book`),
    after any namespace; `get_return_policy` is a read."""
    words = _NAME_TOKEN.findall(_NAMESPACE.sub("", name))
    return bool(words) and words[0].lower() in WRITE_VERBS


def code_calls(tool_name: str, args: Any, other_tools: Iterable[str]) -> bool:
    """Whether a code-execution tool call (python, bash, ...) requests endpoints or calls other tools by name."""
    if not CODE_TOOL.search(tool_name):
        return False
    code = "\n".join(string_values(args))
    if _ENDPOINT.search(code):
        return True
    names = [re.escape(t) for t in other_tools if t and t != tool_name]
    return bool(names) and re.search(r"\b(?:" + "|".join(names) + r")\s*\(", code) is not None


def enumerations(calls: list[tuple[int, str, Any]]) -> set[int]:
    """Ids of calls that belong to an enumeration: calls (id, tool, parsed args) to one tool whose arguments
    agree on every key but one, with at least MIN_ENUMERATION distinct values of that key."""
    groups: dict[tuple[str, str, str], dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for call_id, tool, args in calls:
        if not isinstance(args, dict) or not args:
            continue
        scalars = {k: v for k, v in args.items() if isinstance(v, str | int | float) and not isinstance(v, bool)}
        if len(scalars) != len(args):
            continue
        for key, value in scalars.items():
            rest = repr(sorted((k, repr(v)) for k, v in scalars.items() if k != key))
            groups[(tool, key, rest)][repr(value)].add(call_id)
    found: set[int] = set()
    for by_value in groups.values():
        if len(by_value) >= MIN_ENUMERATION:
            found.update(i for ids in by_value.values() for i in ids)
    return found


def string_values(value: Any) -> Iterable[str]:
    """Every string inside a parsed JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from string_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from string_values(item)
