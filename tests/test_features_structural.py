"""Structural features on hand-built rollouts with known answers."""

from __future__ import annotations

import json

import pytest

from engine.features import structural
from engine.features.structural import Message, Segment, rollout_features, text_features


def msg(
    index: int,
    role: str,
    content: str | None = None,
    calls: list[dict] | None = None,
    call_id: str | None = None,
    is_error: bool | None = None,
) -> Message:
    return Message(index, role, content, calls or [], call_id, is_error)


def tool_call(sid: int, message: int, part: int, name: str, args: dict | str, valid: bool = True) -> Segment:
    arguments = json.dumps(args) if isinstance(args, dict) else args
    return Segment(sid, message, part, "tool_call", f"{name} {arguments}", name, arguments, valid)


def text(sid: int, message: int, body: str, kind: str = "text") -> Segment:
    return Segment(sid, message, 0, kind, body, None, None, None)


def features(messages: list[Message], segments: list[Segment]) -> dict[int, set[str]]:
    found: dict[int, set[str]] = {s.segment_id: set() for s in segments}
    for sid, name in rollout_features(messages, segments):
        found[sid].add(name)
    return found


def test_tool_calls_results_and_message_structure() -> None:
    calls = [
        {"id": "c1", "name": "get_user", "arguments": {"user_id": "u1"}},
        {"id": "c2", "name": "book", "arguments": {"email": "user@example.com"}},
    ]
    messages = [
        msg(0, "user", "hi"),
        msg(1, "assistant", "Let me check.", calls),
        msg(2, "tool", '{"name": "Ann"}', call_id="c1"),
        msg(3, "tool", "Error: card declined", call_id="c2"),
        msg(4, "assistant", None, [{"id": "c3", "name": "get_user", "arguments": {"user_id": "u1"}}]),
        msg(5, "tool", "{}", call_id="c3", is_error=True),
    ]
    segments = [
        text(10, 1, "Let me check."),
        tool_call(11, 1, 0, "get_user", {"user_id": "u1"}),
        tool_call(12, 1, 1, "book", {"email": "user@example.com"}),
        tool_call(13, 4, 0, "get_user", {"user_id": "u1"}),
    ]
    found = features(messages, segments)
    assert {"tool:get_user", "message:several_tool_calls", "message:text_with_tool_call"} <= found[11]
    assert "tool_result:error" not in found[11] and "tool_args:placeholder" not in found[11]
    assert {"tool:book", "tool_args:placeholder", "tool_result:error"} <= found[12]
    assert {"tool_call:repeated", "tool_result:error"} <= found[13]  # is_error set by the environment
    assert "message:several_tool_calls" not in found[13]
    assert "message:text_with_tool_call" in found[10]


def test_tool_results_without_ids_are_matched_by_order() -> None:
    messages = [
        msg(0, "assistant", None, [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]),
        msg(1, "tool", "ok"),
        msg(2, "tool", "Traceback (most recent call last): boom"),
    ]
    found = features(messages, [tool_call(1, 0, 0, "a", {}), tool_call(2, 0, 1, "b", {})])
    assert "tool_result:error" not in found[1] and "tool_result:error" in found[2]
    assert "tool_args:none" in found[1]


def test_hand_off_by_tool_and_by_announcement() -> None:
    messages = [msg(0, "assistant", "x", [{"id": "c", "name": "transfer_to_human_agents", "arguments": {}}])]
    found = features(
        messages,
        [
            tool_call(1, 0, 0, "transfer_to_human_agents", {"summary": "s"}),
            text(2, 0, "I'm transferring you to a human agent now."),
        ],
    )
    assert "handoff" in found[1] and "handoff" in found[2]
    assert "handoff" not in text_features("Even a human agent cannot change the number of passengers.", asks_user=True)
    assert "handoff" in text_features("YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.", asks_user=True)
    assert "handoff" in text_features("Let me escalate this to our support team.", asks_user=True)


def test_invalid_json_arguments() -> None:
    found = features(
        [msg(0, "assistant")],
        [tool_call(1, 0, 0, "f", "{not json", valid=False), tool_call(2, 0, 1, "g", "{broken", valid=None)],
    )
    assert "tool_args:invalid_json" in found[1] and "tool_args:invalid_json" in found[2]


@pytest.mark.parametrize(
    ("body", "expected", "absent"),
    [
        (
            "Here you go:\n```python\nimport numpy as np\nfrom pandas import DataFrame\nx = 1\n```",
            {"code:block", "code:lang:python", "code:import", "code:import:numpy", "code:import:pandas"},
            {"question"},
        ),
        ("```\nconst fs = require('fs')\n```", {"code:block", "code:import:fs"}, set()),
        ('Calling it now: {"name": "get_order", "arguments": {"id": 3}}', {"text:tool_call_as_json"}, set()),
        ("I'm sorry, but I cannot refund this ticket under our policy.", {"apology", "refusal", "policy"}, set()),
        ("Would you like me to proceed with the cancellation?", {"question", "asks_confirmation"}, set()),
        ("What is your user id?", {"question"}, {"asks_confirmation"}),
        ("Alternatively, I can book a later flight for $120.", {"alternatives", "money"}, {"question"}),
        ("Is there anything else I can help you with?", {"closing", "question"}, set()),
        ("- one\n- two\n**Total**: 3", {"markdown:list", "markdown:emphasis"}, set()),
        ("Wait, actually I think the date is wrong.", {"self_correction", "uncertainty"}, set()),
        ("```python\nprint('sorry?')\n```", {"code:block"}, {"apology", "question"}),
    ],
)
def test_text_features(body: str, expected: set[str], absent: set[str]) -> None:
    found = set(text_features(body, asks_user=True))
    assert expected <= found
    assert not absent & found


def test_questions_in_reasoning_are_not_questions_to_the_user() -> None:
    found = features([msg(0, "assistant")], [text(1, 0, "Should I check the policy first?", kind="reasoning")])
    assert "question" not in found[1] and "asks_confirmation" not in found[1]


@pytest.mark.parametrize(
    ("words", "band"),
    [(1, "length:lt10"), (10, "length:10-49"), (149, "length:50-149"), (150, "length:150-399"), (400, "length:400+")],
)
def test_length_bands(words: int, band: str) -> None:
    found = features([msg(0, "assistant")], [text(1, 0, " ".join(["w"] * words))])
    assert band in found[1]
    assert sum(name.startswith("length:") for name in found[1]) == 1


def test_every_feature_name_has_a_readable_label() -> None:
    for name in [*structural.LABELS, "tool:get_user", "code:lang:rust", "code:import:numpy"]:
        assert len(structural.label(name)) > 5
    assert structural.label("tool:get_user") == "calls tool get_user"
    with pytest.raises(KeyError):
        structural.label("unknown")
