"""Verifiers: declarative JSON specs that label one segment. Never code: only the operators below.

    {"kind": "text"} | {"kind": ["text", "reasoning"]}     the segment's kind
    {"regex": PATTERN, "ignore_case": bool}                 found anywhere in the segment's text
    {"tool_name": NAME} | {"tool_name_regex": PATTERN}      a tool call to this tool
    {"arg_key": KEY}                                        a tool call whose arguments have this key
    {"arg_value": {"key": KEY, "equals": VALUE}}            ... whose argument equals VALUE
    {"arg_value": {"key": KEY, "regex": PATTERN}}           ... whose argument, as text, matches
    {"similar_to": {"exemplars": [TEXT, ...], "min_similarity": 0.7}}
                                                            one of its sentences is that close (cosine) to an
                                                            exemplar, embedded by the study's reader
    {"structural": NAME}                                    the segment has this structural feature
                                                            (deterministic, engine/features/structural.py)
    {"all": [NODE, ...]} | {"any": [NODE, ...]} | {"not": NODE}

Regexes run under the `regex` module with a time limit, so an LLM-written pattern cannot hang the labeler.
`similar_to` nodes are matched in one batch per `label_all` call (`engine.hypotheses.exemplars`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import regex

from engine.errors import InputError
from engine.features import structural
from engine.hypotheses.exemplars import (
    DEFAULT_MIN_SIMILARITY,
    MAX_EXEMPLAR_CHARS,
    MAX_EXEMPLARS,
    Embedder,
    Match,
    SentenceMatcher,
    Splitter,
    default_splitter,
    no_embedder,
)
from engine.kinds import SEGMENT_KINDS

log = logging.getLogger(__name__)

KINDS = SEGMENT_KINDS
MAX_PATTERN = 1000
MAX_DEPTH = 12
MAX_REGEXES = 8  # regex nodes per verifier: each may take REGEX_TIMEOUT_S on every segment
REGEX_TIMEOUT_S = 0.2
LEAVES = ("kind", "regex", "tool_name", "tool_name_regex", "arg_key", "arg_value", "similar_to", "structural")
BRANCHES = ("all", "any", "not")


class SpecError(InputError):
    """A verifier spec that is not valid JSON of the verifier language."""


@dataclass(frozen=True)
class SegmentView:
    """What a labeler sees of a segment: never its checkpoint, task or rollout."""

    segment_id: int
    kind: str
    text: str
    tool_name: str | None = None
    tool_args: str | None = None
    structural: frozenset[str] = frozenset()  # names of the structural features that fire on it


@dataclass(frozen=True)
class Verdict:
    label: bool
    evidence: str | None = None


def _compile(pattern: Any, ignore_case: bool, path: str) -> regex.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise SpecError(f"{path}: a regex must be a non-empty string")
    if len(pattern) > MAX_PATTERN:
        raise SpecError(f"{path}: regex longer than {MAX_PATTERN} characters")
    try:
        return regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except regex.error as exc:
        raise SpecError(f"{path}: bad regex {pattern!r}: {exc}") from exc


class Verifier:
    """A parsed, checked spec. `Verifier(spec)` raises `SpecError` with the path of the first problem.
    `embedder` and `splitter` serve `similar_to` nodes (the study's embedder; the sentence splitter)."""

    def __init__(
        self, spec: dict[str, Any] | str, *, embedder: Embedder | None = None, splitter: Splitter | None = None
    ) -> None:
        self.embedder = embedder or no_embedder()
        self.splitter = splitter or default_splitter
        self._similar: list[dict[str, Any]] = []
        if isinstance(spec, str):
            try:
                spec = json.loads(spec)
            except json.JSONDecodeError as exc:
                raise SpecError(f"verifier spec is not JSON: {exc}") from exc
        # JSON of any shape until `_check` (next) rejects all but an object at "$"
        self.spec: dict[str, Any] = spec  # type: ignore[assignment]
        self._patterns: dict[int, regex.Pattern[str]] = {}
        self._check(self.spec, "$", 0)
        if len(self._patterns) > MAX_REGEXES:
            raise SpecError(f"$: {len(self._patterns)} regexes; a verifier may hold at most {MAX_REGEXES}")

    def _check(self, node: Any, path: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise SpecError(f"{path}: nested deeper than {MAX_DEPTH}")
        if not isinstance(node, dict):
            raise SpecError(f"{path}: each node must be a JSON object")
        ops = [k for k in node if k in LEAVES + BRANCHES]
        extra = set(node) - set(ops) - ({"ignore_case"} if "regex" in node or "tool_name_regex" in node else set())
        if len(ops) != 1 or extra:
            raise SpecError(
                f"{path}: a node has exactly one operator of {', '.join(LEAVES + BRANCHES)}; got {sorted(node)}"
            )
        op, arg = ops[0], node[ops[0]]
        if op in ("all", "any"):
            if not isinstance(arg, list) or not arg:
                raise SpecError(f"{path}.{op}: must be a non-empty list of nodes")
            for i, child in enumerate(arg):
                self._check(child, f"{path}.{op}[{i}]", depth + 1)
        elif op == "not":
            self._check(arg, f"{path}.not", depth + 1)
        elif op == "kind":
            kinds = [arg] if isinstance(arg, str) else arg
            if not isinstance(kinds, list) or not kinds or any(k not in KINDS for k in kinds):
                raise SpecError(f"{path}.kind: must be one or more of {', '.join(KINDS)}")
        elif op in ("regex", "tool_name_regex"):
            self._patterns[id(node)] = _compile(arg, bool(node.get("ignore_case", False)), f"{path}.{op}")
        elif op in ("tool_name", "arg_key"):
            if not isinstance(arg, str) or not arg:
                raise SpecError(f"{path}.{op}: must be a non-empty string")
        elif op == "arg_value":
            if not isinstance(arg, dict) or not isinstance(arg.get("key"), str):
                raise SpecError(f"{path}.arg_value: needs a string 'key'")
            tests = set(arg) - {"key"}
            if tests not in ({"equals"}, {"regex"}):
                raise SpecError(f"{path}.arg_value: needs exactly one of 'equals' or 'regex'")
            if "regex" in arg:
                self._patterns[id(arg)] = _compile(arg["regex"], True, f"{path}.arg_value.regex")
        elif op == "structural":
            try:
                structural.label(arg if isinstance(arg, str) else "")
            except KeyError:
                raise SpecError(f"{path}.structural: unknown structural feature {arg!r}") from None
        elif op == "similar_to":
            _check_similar(arg, f"{path}.similar_to")
            self._similar.append(arg)

    # -- evaluation --------------------------------------------------------------------------------------

    def __call__(self, segment: SegmentView) -> Verdict:
        """Label one segment; the evidence is the span, tool name or similar sentence that made a positive label."""
        return self.label_all([segment])[0]

    @property
    def reads_sentences(self) -> bool:
        """Whether labelling embeds the segments' sentences (the spec has `similar_to`)."""
        return bool(self._similar)

    def label_all(
        self,
        segments: list[SegmentView],
        check: Callable[[], None] | None = None,
        matcher: SentenceMatcher | None = None,
    ) -> list[Verdict]:
        """Label segments; every sentence of all of them is embedded in one batch when the spec has `similar_to`
        (`matcher`: that batch, built on these `segments` by a caller that labels them many times).
        `check` runs between segments (a time budget raises there)."""
        matches: dict[int, list[Match | None]] = {}
        if self._similar:
            if matcher is None:
                matcher = SentenceMatcher([(s.kind, s.text) for s in segments], self.embedder, self.splitter)
            matches = {id(node): matcher.best(node["exemplars"]) for node in self._similar}
        verdicts = []
        for position, segment in enumerate(segments):
            if check is not None:
                check()
            hit, evidence = self._eval(self.spec, segment, {}, _At(matches, position))
            verdicts.append(Verdict(hit, evidence if hit else None))
        return verdicts

    def _eval(
        self, node: dict[str, Any], seg: SegmentView, args_cache: dict[str, Any], at: _At
    ) -> tuple[bool, str | None]:
        op = next(k for k in node if k != "ignore_case")
        arg = node[op]
        if op == "all":
            evidence = None
            for child in arg:
                hit, ev = self._eval(child, seg, args_cache, at)
                if not hit:
                    return False, None
                evidence = evidence or ev
            return True, evidence
        if op == "any":
            for child in arg:
                hit, ev = self._eval(child, seg, args_cache, at)
                if hit:
                    return True, ev
            return False, None
        if op == "not":
            return not self._eval(arg, seg, args_cache, at)[0], None
        if op == "kind":
            return seg.kind in ([arg] if isinstance(arg, str) else arg), None
        if op == "structural":
            return (True, structural.label(arg)) if arg in seg.structural else (False, None)
        if op == "similar_to":
            match = at.matches[id(arg)][at.position]
            threshold = arg.get("min_similarity", DEFAULT_MIN_SIMILARITY)
            return (True, match.sentence) if match is not None and match.similarity >= threshold else (False, None)
        if op == "regex":
            match = _search(self._patterns[id(node)], seg.text)
            return (True, match.group(0)) if match else (False, None)
        if seg.kind != "tool_call" or seg.tool_name is None:
            return False, None
        if op == "tool_name":
            return seg.tool_name == arg, seg.tool_name
        if op == "tool_name_regex":
            return _search(self._patterns[id(node)], seg.tool_name) is not None, seg.tool_name
        args = _arguments(seg, args_cache)
        if op == "arg_key":
            return arg in args, arg
        value = args.get(arg["key"], _MISSING)
        if value is _MISSING:
            return False, None
        if "equals" in arg:
            return value == arg["equals"], f"{arg['key']}={json.dumps(value)}"
        text = value if isinstance(value, str) else json.dumps(value)
        match = _search(self._patterns[id(arg)], text)
        return (True, f"{arg['key']}={match.group(0)}") if match else (False, None)


_MISSING = object()


@dataclass(frozen=True)
class _At:
    """Where `_eval` is in a batch: the batch's `similar_to` matches and this segment's position."""

    matches: dict[int, list[Match | None]]
    position: int


def _check_similar(arg: Any, path: str) -> None:
    if not isinstance(arg, dict) or set(arg) - {"exemplars", "min_similarity"}:
        raise SpecError(f"{path}: must be an object with 'exemplars' and optionally 'min_similarity'")
    exemplars = arg.get("exemplars")
    if not isinstance(exemplars, list) or not exemplars or len(exemplars) > MAX_EXEMPLARS:
        raise SpecError(f"{path}.exemplars: must be a list of 1 to {MAX_EXEMPLARS} sentences")
    for i, text in enumerate(exemplars):
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_EXEMPLAR_CHARS:
            raise SpecError(f"{path}.exemplars[{i}]: must be a non-empty string of at most {MAX_EXEMPLAR_CHARS} chars")
    threshold = arg.get("min_similarity", DEFAULT_MIN_SIMILARITY)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0.0 < threshold <= 1.0:
        raise SpecError(f"{path}.min_similarity: must be a number in (0, 1]")


def _arguments(seg: SegmentView, cache: dict[str, Any]) -> dict[str, Any]:
    if "args" not in cache:
        try:
            parsed = json.loads(seg.tool_args or "{}")
        except json.JSONDecodeError:
            parsed = {}
        cache["args"] = parsed if isinstance(parsed, dict) else {}
    return cache["args"]


def _search(pattern: regex.Pattern[str], text: str) -> regex.Match[str] | None:
    try:
        return pattern.search(text, timeout=REGEX_TIMEOUT_S)
    except TimeoutError:
        log.warning("verifier regex %r timed out on a segment; labelled no", pattern.pattern)
        return None


def spec_kinds(spec: dict[str, Any]) -> list[str]:
    """The segment kinds a spec can label positive (from a top-level kind filter), all kinds otherwise."""
    node = spec
    children = node.get("all", [node]) if isinstance(node, dict) else []
    for child in children:
        if isinstance(child, dict) and "kind" in child:
            kind = child["kind"]
            return [kind] if isinstance(kind, str) else list(kind)
        if isinstance(child, dict) and ({"tool_name", "tool_name_regex", "arg_key", "arg_value"} & set(child)):
            return ["tool_call"]
    return list(KINDS)


def describe(spec: dict[str, Any]) -> str:
    """A one-line readable rendering of a spec, for tables and reports."""
    op = next((k for k in spec if k != "ignore_case"), "?")
    arg: Any = spec.get(op)
    if op in ("all", "any"):
        return "(" + (" AND " if op == "all" else " OR ").join(describe(c) for c in arg) + ")"
    if op == "not":
        return f"NOT {describe(arg)}"
    if op == "kind":
        return "kind in " + "/".join([arg] if isinstance(arg, str) else arg)
    if op == "regex":
        return f"text ~ /{arg}/" + ("i" if spec.get("ignore_case") else "")
    if op == "arg_value":
        test = f"= {json.dumps(arg['equals'])}" if "equals" in arg else f"~ /{arg['regex']}/"
        return f"arg {arg['key']} {test}"
    if op == "structural":
        return structural.label(arg)
    if op == "similar_to":
        first = json.dumps(arg["exemplars"][0])
        more = f" (+{len(arg['exemplars']) - 1} more)" if len(arg["exemplars"]) > 1 else ""
        return f"a sentence like {first}{more} (cosine >= {arg.get('min_similarity', DEFAULT_MIN_SIMILARITY)})"
    return f"{op.replace('_', ' ')} {arg}"
