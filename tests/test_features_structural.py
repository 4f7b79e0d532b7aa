"""Structural features on hand-built rollouts with known answers."""

from __future__ import annotations

import json

import pytest

from engine.features import probes, structural
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


# -- the seed's tool-call behaviours (engine/features/probes.py) ------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "probe",
        "PROBE",
        "test",
        "Test",
        "dummy",
        "dummy_id",
        "placeholder",
        "XXXX",
        "xxxxxxx",
        "TEST123",
        "__PROBE__",
        "__PROBE_INVALID__",
        "invalid_test_value",
        "foo",
        "foo-bar",
        "Lorem ipsum dolor sit amet",
        "test-user-01",
        "probe:1",
    ],
)
def test_probe_values_are_recognised(value: str) -> None:
    assert probes.is_probe_value(value)


@pytest.mark.parametrize(
    "value",
    [
        "contest",
        "latest",
        "testament",
        "Test Kitchen Ltd",
        "Please test the brakes before the trip, thanks",  # prose: a real word in a real note
        "invalid",  # filler alone is an ordinary value
        "id",
        "12345",
        "#W2378156",
        "sit",
        "the customer asked for a test of the booking flow before confirming the payment in full",
        "",
    ],
)
def test_real_values_are_not_probe_values(value: str) -> None:
    assert not probes.is_probe_value(value)


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("update_order_status", True),
        ("cancel_pending_order", True),
        ("book_reservation", True),
        ("createTicket", True),
        ("functions.delete_user", True),
        ("mcp__shop__send_email", True),
        ("exchange_delivered_order_items", True),
        ("return_delivered_order_items", True),
        ("transfer_to_human_agents", True),
        ("get_return_policy", False),
        ("get_order_details", False),
        ("search_direct_flight", False),
        ("booking_lookup", False),
        ("think", False),
    ],
)
def test_write_tools_are_named_by_their_first_verb(name: str, write: bool) -> None:
    assert probes.is_write_tool(name) is write


def test_probe_then_write_with_the_seed_values() -> None:
    messages = [msg(0, "assistant"), msg(1, "assistant")]
    segments = [
        tool_call(1, 0, 0, "update_ticket_status", {"ticket_id": "T-1", "new_status": "__PROBE_INVALID__"}),
        tool_call(2, 0, 1, "add_note", {"ticket_id": "T-1", "note": "probe"}),
        tool_call(3, 1, 0, "get_ticket", {"ticket_id": "dummy_id"}),
        tool_call(4, 1, 1, "update_ticket_status", {"ticket_id": "T-1", "new_status": "resolved"}),
        tool_call(5, 1, 2, "add_note", {"ticket_id": "T-1", "note": "Latest test results attached for the reviewer"}),
    ]
    found = features(messages, segments)
    assert {"tool_args:probe", "tool_call:write_with_probe"} <= found[1] & found[2]
    assert "tool_args:probe" in found[3] and "tool_call:write_with_probe" not in found[3]  # a read
    for sid in (4, 5):
        assert not {"tool_args:probe", "tool_call:write_with_probe"} & found[sid]


def test_retry_after_a_failed_call_to_the_same_tool() -> None:
    messages = [
        msg(0, "assistant", None, [{"id": "a", "name": "book", "arguments": {}}]),
        msg(1, "tool", "Error: invalid flight", call_id="a"),
        msg(2, "assistant", None, [{"id": "b", "name": "search", "arguments": {}}]),
        msg(3, "tool", "[]", call_id="b"),
        msg(4, "assistant", None, [{"id": "c", "name": "book", "arguments": {}}]),
        msg(5, "tool", "ok", call_id="c"),
        msg(6, "assistant", None, [{"id": "d", "name": "book", "arguments": {}}]),
        msg(7, "tool", "ok", call_id="d"),
    ]
    segments = [
        tool_call(1, 0, 0, "book", {"flight": "X1"}),
        tool_call(2, 2, 0, "search", {"q": "x"}),
        tool_call(3, 4, 0, "book", {"flight": "HAT001"}),
        tool_call(4, 6, 0, "book", {"flight": "HAT002"}),
    ]
    found = features(messages, segments)
    assert "tool_call:retry_after_error" in found[3]
    assert not any("tool_call:retry_after_error" in found[s] for s in (1, 2, 4))  # 4 follows a success


def test_enumeration_needs_many_values_of_one_argument_with_the_rest_fixed() -> None:
    many = probes.MIN_ENUMERATION
    messages = [msg(0, "assistant")]
    ids = [tool_call(i, 0, i, "get_user", {"user_id": f"user_{i:04d}", "fields": "all"}) for i in range(many)]
    few = [tool_call(100 + i, 0, 100 + i, "get_order", {"order_id": f"#W{i}"}) for i in range(many - 1)]
    # As many calls, but two arguments vary together: a search over routes, not an enumeration of one value.
    routes = [
        tool_call(200 + i, 0, 200 + i, "search_flight", {"origin": f"A{i}", "destination": f"B{i}"})
        for i in range(many)
    ]
    found = features(messages, ids + few + routes)
    assert all("tool_call:enumeration" in found[s.segment_id] for s in ids)
    assert not any("tool_call:enumeration" in found[s.segment_id] for s in few + routes)


def test_tool_calls_issued_from_code() -> None:
    loop = "for oid in ids:\n    r = get_order_details(order_id=oid)\n    print(r)"
    segments = [
        tool_call(1, 0, 0, "get_order_details", {"order_id": "#W1"}),
        tool_call(2, 0, 1, "python", {"code": loop}),
        tool_call(3, 0, 2, "bash", {"command": "for i in $(seq 1 50); do curl -s api.local/users/$i; done"}),
        tool_call(4, 0, 3, "execute_python", {"code": "import requests\nrequests.post(url, json=body)"}),
        tool_call(5, 0, 4, "python", {"code": "total = sum([12.5, 7.25])\nprint(total)"}),
        tool_call(6, 0, 5, "calculate", {"expression": "get_order_details(1)"}),  # not a code tool
    ]
    found = features([msg(0, "assistant")], segments)
    assert all("code:calls_tools" in found[s] for s in (2, 3, 4))
    assert not any("code:calls_tools" in found[s] for s in (1, 5, 6))


def test_a_fact_a_sentence_says_has_its_pattern_and_a_fact_of_form_has_none() -> None:
    """What a sentence says (an amount, an apology) can be found sentence by sentence; bold text, a call written
    as JSON, a tool or a length band is no one sentence's content."""
    money, apology = structural.said_in("money"), structural.said_in("apology")
    assert money is not None and money.search("That comes to $240.") and not money.search("Two nights, then.")
    assert apology is not None and apology.search("I'm sorry for the wait.")
    for name in ("markdown:emphasis", "text:tool_call_as_json", "tool:search_flights", "length:10-49", "handoff"):
        assert structural.said_in(name) is None
