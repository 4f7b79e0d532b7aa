"""The verifier language: parsing, checking and labelling, with no code execution."""

from __future__ import annotations

import pytest

from engine.hypotheses.verifier import SegmentView, SpecError, Verifier, describe, spec_kinds

TEXT = SegmentView(1, "text", "I sincerely apologize for the delay. Rest assured, it is fixed.")
CALL = SegmentView(
    2,
    "tool_call",
    'cancel_reservation {"reason":"change of plan","reservation_id":"ZFA04Y"}',
    "cancel_reservation",
    '{"reason":"change of plan","reservation_id":"ZFA04Y"}',
)
THINK = SegmentView(3, "reasoning", "The user wants to cancel; check the policy first.")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"kind": "text"}, [True, False, False]),
        ({"kind": ["text", "reasoning"]}, [True, False, True]),
        ({"regex": "apologi[sz]e"}, [True, False, False]),
        ({"regex": "REST ASSURED", "ignore_case": True}, [True, False, False]),
        ({"regex": "REST ASSURED"}, [False, False, False]),
        ({"tool_name": "cancel_reservation"}, [False, True, False]),
        ({"tool_name_regex": "^cancel_"}, [False, True, False]),
        ({"arg_key": "reason"}, [False, True, False]),
        ({"arg_value": {"key": "reservation_id", "equals": "ZFA04Y"}}, [False, True, False]),
        ({"arg_value": {"key": "reason", "regex": "plan$"}}, [False, True, False]),
        ({"arg_value": {"key": "missing", "equals": 1}}, [False, False, False]),
        ({"all": [{"kind": "text"}, {"regex": "assured"}]}, [True, False, False]),
        ({"any": [{"tool_name": "cancel_reservation"}, {"regex": "policy"}]}, [False, True, True]),
        ({"not": {"kind": "tool_call"}}, [True, False, True]),
        ({"all": [{"kind": "reasoning"}, {"not": {"regex": "cancel"}}]}, [False, False, False]),
    ],
)
def test_operators(spec: dict, expected: list[bool]) -> None:
    verifier = Verifier(spec)
    assert [v.label for v in verifier.label_all([TEXT, CALL, THINK])] == expected


def test_evidence_is_the_deciding_span() -> None:
    assert Verifier({"regex": r"apologi\w+"})(TEXT).evidence == "apologize"
    assert Verifier({"all": [{"kind": "tool_call"}, {"tool_name": "cancel_reservation"}]})(CALL).evidence == (
        "cancel_reservation"
    )
    assert Verifier({"regex": "nothing"})(TEXT).evidence is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("not json", "not JSON"),
        ([], "JSON object"),
        ({"regex": "a", "tool_name": "b"}, "exactly one operator"),
        ({"eval": "__import__('os')"}, "exactly one operator"),
        ({"regex": "("}, "bad regex"),
        ({"regex": ""}, "non-empty"),
        ({"kind": "user"}, "one or more of"),
        ({"all": []}, "non-empty list"),
        ({"all": [{"kind": "text"}, {"regex": 3}]}, r"\$\.all\[1\]\.regex"),
        ({"arg_value": {"key": "k"}}, "exactly one of"),
        ({"arg_value": {"key": "k", "equals": 1, "regex": "x"}}, "exactly one of"),
        ({"regex": "a" * 2000}, "longer than"),
    ],
)
def test_bad_specs_are_refused_with_a_path(spec: object, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        Verifier(spec)  # type: ignore[arg-type]


def test_catastrophic_regex_times_out_as_no(caplog: pytest.LogCaptureFixture) -> None:
    verifier = Verifier({"regex": r"(a|aa)+$"})  # exponential backtracking on a's followed by '!'
    assert verifier(SegmentView(9, "text", "a" * 40 + "!")).label is False
    assert "timed out" in caplog.text


def test_invalid_tool_args_do_not_crash() -> None:
    broken = SegmentView(4, "tool_call", "get_order {bad", "get_order", "{bad")
    assert Verifier({"arg_key": "order_id"})(broken).label is False
    assert Verifier({"tool_name": "get_order"})(broken).label is True


def test_kinds_and_description() -> None:
    assert spec_kinds({"all": [{"kind": "text"}, {"regex": "x"}]}) == ["text"]
    assert spec_kinds({"tool_name": "x"}) == ["tool_call"]
    assert spec_kinds({"regex": "x"}) == ["reasoning", "text", "tool_call"]
    assert describe({"all": [{"kind": "text"}, {"not": {"regex": "x", "ignore_case": True}}]}) == (
        "(kind in text AND NOT text ~ /x/i)"
    )
