"""Structural features: deterministic facts about a segment and its place in the rollout, each with a label.

They catch what a small reader model cannot: which tool was called and how, whether its result was an error,
probes with dummy values, retries, enumeration, tool calls from code (rules in `probes`), hand-offs to a human,
code and imports, questions and confirmations, apologies, refusals, length. Each
fires with activation 1.0 (threshold 0.5). Text features look at `text` and `reasoning` segments with their
fenced code removed, so words inside code do not count as, say, an apology.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine import safe_text
from engine.features import probes

THRESHOLD = 0.5  # binary features: 1.0 when present

LABELS: dict[str, str] = {
    "handoff": "hands off or transfers to a human agent (tool call or announcement)",
    "tool_args:placeholder": "tool call with placeholder or dummy argument values",
    "tool_args:probe": "tool call with dummy/probe argument values (probe, test, dummy_id, XXXX, ...)",
    "tool_call:write_with_probe": "write-type tool call (update, cancel, book, ...) with dummy/probe argument values",
    "tool_call:retry_after_error": "calls a tool again after its previous call to that tool failed",
    "tool_call:enumeration": f"one of {probes.MIN_ENUMERATION}+ calls to a tool that vary only one argument",
    "code:calls_tools": "issues tool calls or HTTP requests from code (a python/shell tool call)",
    "tool_args:invalid_json": "tool call whose arguments are not valid JSON",
    "tool_args:none": "tool call without arguments",
    "tool_result:error": "tool call whose result is an error",
    "tool_call:repeated": "repeats an earlier tool call with the same arguments",
    "message:several_tool_calls": "one of several tool calls in one message",
    "message:text_with_tool_call": "text and a tool call in the same message",
    "text:tool_call_as_json": "tool call written as JSON in text instead of a real call",
    "code:block": "contains a fenced code block",
    "code:import": "imports a library in code",
    "question": "asks the user a question",
    "asks_confirmation": "asks the user to confirm before acting",
    "apology": "apologises",
    "refusal": "declines or says it cannot do something",
    "policy": "cites policy, rules or eligibility",
    "alternatives": "offers alternatives or other options",
    "closing": "closes the conversation (anything else? / have a nice day)",
    "money": "mentions an amount of money",
    "markdown:list": "uses a bulleted or numbered list",
    "markdown:emphasis": "uses markdown bold or headings",
    "self_correction": "second-guesses or corrects itself (wait, actually, let me re-check)",
    "uncertainty": "expresses uncertainty (I think, probably, not sure)",
    "length:lt10": "length: under 10 words",
    "length:10-49": "length: 10-49 words",
    "length:50-149": "length: 50-149 words",
    "length:150-399": "length: 150-399 words",
    "length:400+": "length: 400 words or more",
}
_PREFIX_LABELS = {"tool:": "calls tool {}", "code:lang:": "code block in {}", "code:import:": "imports {} in code"}
_LENGTH_BANDS = ((10, "length:lt10"), (50, "length:10-49"), (150, "length:50-149"), (400, "length:150-399"))

_I = re.IGNORECASE
_CODE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_HANDOFF_TOOL = re.compile(r"transfer|hand_?off|handover|escalat|human", _I)
_HANDOFF_TEXT = re.compile(
    r"\bbeing transferred\b|\b(?:transfer(?:ring|red)?|hand(?:ing)?\s+(?:you\s+)?(?:off|over)|escalat\w*|"
    r"connect(?:ing)?\s+you)\b[^.?!\n]{0,80}?\b(?:human|live|real|agents?|representatives?|specialists?|"
    r"supervisors?|team|department|colleagues?)\b",
    _I,
)
_PLACEHOLDER = re.compile(
    r"^\s*$|^(?:n/?a|none|null|nil|tbd|todo|unknown|placeholder|example|sample|dummy|string|value|"
    r"x{2,}|\.{3}|-+|\?+|0+|1234\d*)$|<[^<>]{1,40}>|\{\{[^{}]*\}\}|\byour[_ ]\w+|example\.(?:com|org)|"
    r"\b(?:john|jane) doe\b|\bfoo(?:bar)?\b|\blorem ipsum\b",
    _I,
)
_JSON_CALL = re.compile(
    r"\{\s*\"(?:name|function|tool|tool_name|action)\"\s*:\s*\"[^\"]+\"\s*,\s*"
    r"\"(?:arguments|parameters|args|input|action_input)\"\s*:|<tool_call>|<function_call>|<function=",
    _I,
)
_IMPORT = re.compile(
    r"^\s*(?:from\s+([A-Za-z_][\w.]*)\s+import\b|import\s+([A-Za-z_][\w.]*)|#include\s*[<\"]([\w./]+)[>\"])|"
    r"\brequire\(\s*['\"]([@\w./-]+)['\"]\s*\)|\bfrom\s+['\"]([@\w./-]+)['\"]",
    re.MULTILINE,
)
_SENTENCE_QUESTION = re.compile(r"[^.!?\n]*\?")
_CONFIRM = re.compile(
    r"\bconfirm|\bproceed\b|\bgo ahead\b|\bshall i\b|\bshould i\b|\bdo you want me to\b|"
    r"\bwould you like me to\b|\b(?:is|are) (?:that|this|these|those) (?:correct|right|ok(?:ay)?)\b|"
    r"\byes\s*(?:/|or)\s*no\b",
    _I,
)
_TEXT_FEATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("apology", re.compile(r"\b(?:sorry|apologi[sz]e\w*|apologies|regret to)\b", _I)),
    (
        "refusal",
        re.compile(
            r"\b(?:i|we)(?:\s+(?:am|are)|'m|’m|'re|’re)?\s+(?:cannot|can ?not|can't|can’t|unable to|not able to|"
            r"won't be able to|will not be able to|must decline|not (?:allowed|permitted|authori[sz]ed) to)\b|"
            r"\bnot (?:possible|allowed|permitted)\b|\bagainst (?:our |the )?polic",
            _I,
        ),
    ),
    ("policy", re.compile(r"\b(?:polic(?:y|ies)|rules?|regulations?|terms and conditions|eligib\w*)\b", _I)),
    (
        "alternatives",
        re.compile(
            r"\b(?:alternatives?|alternatively|instead|other options?|another option|options? available|"
            r"you (?:could|can|might) (?:also|instead)|here are (?:some|a few|your|the) options)\b",
            _I,
        ),
    ),
    (
        "closing",
        re.compile(
            r"\banything else\b|\bhave a (?:great|nice|good|wonderful|safe|pleasant) (?:day|trip|flight|journey)|"
            r"\bgoodbye\b|\btake care\b|\bsafe travels\b",
            _I,
        ),
    ),
    ("money", re.compile(r"[$€£]\s?\d|\b\d[\d,]*(?:\.\d+)?\s?(?:usd|dollars|euros?|eur|gbp)\b", _I)),
    ("markdown:emphasis", re.compile(r"\*\*[^*\n]+\*\*|^#{1,6}\s", re.MULTILINE)),
    (
        "self_correction",
        re.compile(
            r"\b(?:wait|actually|hmm+|on second thought|let me (?:re-?check|reconsider|double[- ]check|re-?verify)|"
            r"i (?:was wrong|made a mistake|misread|misunderstood))\b",
            _I,
        ),
    ),
    (
        "uncertainty",
        re.compile(
            r"\b(?:i'?m not sure|i am not sure|not certain|i think|i believe|probably|possibly|might be|"
            r"may be|it seems)\b",
            _I,
        ),
    ),
    ("text:tool_call_as_json", _JSON_CALL),
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+\S", re.MULTILINE)
# Text features of what a sentence says, not of its form (bold, a call written as JSON): the sentences that match
# one are where a finding of it was said (`said_in`)
_SAID = {
    name: pattern for name, pattern in _TEXT_FEATURES if name not in ("markdown:emphasis", "text:tool_call_as_json")
}


def said_in(name: str) -> re.Pattern[str] | None:
    """The pattern a sentence that says the text feature `name` matches (an apology, a policy citation, an amount
    of money); None for a feature of form, of tool calls or of length, which no one sentence says."""
    return _SAID.get(name)


def label(name: str) -> str:
    """The readable label of a structural feature name (the tool name or language in it cleaned and cut: it
    comes from the rollouts)."""
    if name in LABELS:
        return LABELS[name]
    for prefix, template in _PREFIX_LABELS.items():
        if name.startswith(prefix):
            return template.format(safe_text.line(name[len(prefix) :]))
    raise KeyError(name)


@dataclass(frozen=True)
class Message:
    index: int
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]]
    tool_call_id: str | None
    is_error: bool | None


@dataclass(frozen=True)
class Segment:
    segment_id: int
    message_index: int
    part_index: int
    kind: str
    text: str
    tool_name: str | None
    tool_args: str | None
    args_valid: bool | None


def message_from_row(row: dict[str, Any]) -> Message:
    calls = row.get("tool_calls")
    parsed = json.loads(calls) if isinstance(calls, str) and calls else (calls or [])
    return Message(
        row["message_index"],
        row["role"],
        row.get("content"),
        parsed if isinstance(parsed, list) else [],
        row.get("tool_call_id"),
        row.get("is_error"),
    )


def rollout_features(messages: list[Message], segments: list[Segment]) -> Iterator[tuple[int, str]]:
    """(segment_id, feature name) for every structural feature that fires in one rollout."""
    results = _tool_results(messages)
    calls_in_message: dict[int, int] = {}
    text_in_message: set[int] = set()
    for segment in segments:
        if segment.kind == "tool_call":
            calls_in_message[segment.message_index] = calls_in_message.get(segment.message_index, 0) + 1
        elif segment.kind == "text":
            text_in_message.add(segment.message_index)
    seen_calls: set[tuple[str | None, str | None]] = set()
    ordered = sorted(segments, key=lambda s: (s.message_index, s.part_index, s.segment_id))
    calls = [s for s in ordered if s.kind == "tool_call"]
    parsed = {s.segment_id: _parsed_args(s) for s in calls}
    enumerated = probes.enumerations([(s.segment_id, s.tool_name or "", parsed[s.segment_id]) for s in calls])
    tool_names = {s.tool_name for s in calls if s.tool_name}
    last_failed: dict[str | None, bool] = {}
    for segment in ordered:
        names: list[str] = [_length_band(segment.text)]
        if segment.kind == "tool_call":
            result = results.get((segment.message_index, segment.part_index))
            names += _tool_call_features(segment, parsed[segment.segment_id], result, tool_names)
            if last_failed.get(segment.tool_name):
                names.append("tool_call:retry_after_error")
            last_failed[segment.tool_name] = result is not None and _is_error(result)
            if segment.segment_id in enumerated:
                names.append("tool_call:enumeration")
            if calls_in_message.get(segment.message_index, 0) > 1:
                names.append("message:several_tool_calls")
            if segment.message_index in text_in_message:
                names.append("message:text_with_tool_call")
            if (segment.tool_name, segment.tool_args) in seen_calls:
                names.append("tool_call:repeated")
            seen_calls.add((segment.tool_name, segment.tool_args))
        else:
            names += text_features(segment.text, asks_user=segment.kind == "text")
            if segment.kind == "text" and segment.message_index in calls_in_message:
                names.append("message:text_with_tool_call")
        for name in dict.fromkeys(names):
            yield segment.segment_id, name


def _length_band(text: str) -> str:
    words = len(text.split())
    return next((name for limit, name in _LENGTH_BANDS if words < limit), "length:400+")


def _parsed_args(segment: Segment) -> Any:
    """A tool call's arguments parsed from JSON; None when absent or invalid."""
    try:
        return json.loads(segment.tool_args) if segment.tool_args and segment.args_valid is not False else None
    except json.JSONDecodeError:
        return None


def _tool_call_features(segment: Segment, args: Any, result: Message | None, tool_names: set[str]) -> list[str]:
    name = segment.tool_name or ""
    names = [f"tool:{name}"] if name else []
    if _HANDOFF_TOOL.search(name):
        names.append("handoff")
    if segment.args_valid is False or (args is None and (segment.tool_args or "").strip() not in ("", "null")):
        names.append("tool_args:invalid_json")
    elif not args:
        names.append("tool_args:none")
    else:
        values = list(probes.string_values(args))
        if any(_PLACEHOLDER.search(value) for value in values):
            names.append("tool_args:placeholder")
        if any(probes.is_probe_value(value) for value in values):
            names.append("tool_args:probe")
            if probes.is_write_tool(name):
                names.append("tool_call:write_with_probe")
        if probes.code_calls(name, args, tool_names):
            names.append("code:calls_tools")
    if result is not None and _is_error(result):
        names.append("tool_result:error")
    return names


def text_features(text: str, *, asks_user: bool) -> list[str]:
    """Features of a text or reasoning segment; questions and confirmations only when addressed to the user."""
    names: list[str] = []
    blocks = _CODE.findall(text)
    prose = _CODE.sub(" ", text)
    if blocks:
        names.append("code:block")
        names += [f"code:lang:{lang.lower()}" for lang, _ in blocks if lang]
    imports = [next(g for g in m.groups() if g) for _, code in blocks for m in _IMPORT.finditer(code)]
    if imports:
        names.append("code:import")
        names += [f"code:import:{lib.strip('@').split('/')[0].split('.')[0].lower()}" for lib in imports]
    if _HANDOFF_TEXT.search(prose):
        names.append("handoff")
    names += [name for name, pattern in _TEXT_FEATURES if pattern.search(prose)]
    if len(_LIST_ITEM.findall(prose)) >= 2:
        names.append("markdown:list")
    if asks_user:
        questions = _SENTENCE_QUESTION.findall(prose)
        if questions:
            names.append("question")
        if any(_CONFIRM.search(q) for q in questions):
            names.append("asks_confirmation")
    return names


def _tool_results(messages: list[Message]) -> dict[tuple[int, int], Message]:
    """(assistant message index, call position) -> its tool result: by call id, else by order after the call."""
    by_id = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    results: dict[tuple[int, int], Message] = {}
    ordered = sorted(messages, key=lambda m: m.index)
    for position, message in enumerate(ordered):
        if message.role != "assistant" or not message.tool_calls:
            continue
        following: list[Message] = []
        for later in ordered[position + 1 :]:
            if later.role != "tool":
                break
            following.append(later)
        for part, call in enumerate(message.tool_calls):
            call_id = call.get("id") if isinstance(call, dict) else None
            found = by_id.get(call_id) if call_id else None
            if found is None and part < len(following) and not following[part].tool_call_id:
                found = following[part]
            if found is not None:
                results[(message.index, part)] = found
    return results


_ERROR_TEXT = re.compile(r"^\s*(?:error|exception|traceback|failed|failure)\b|^\s*\{\s*\"error\"\s*:", _I)


def _is_error(result: Message) -> bool:
    return bool(result.is_error) or bool(_ERROR_TEXT.search(result.content or ""))
