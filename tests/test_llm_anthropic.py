"""The real Anthropic client against a fake HTTP transport replaying recorded API responses."""

from __future__ import annotations

import json

import pytest
from factories_llm import (
    BAD_REQUEST,
    MODEL,
    OVERLOADED,
    RATE_LIMITED,
    ScriptedTransport,
    batch_object,
    text_message,
    tool_message,
)

from engine.errors import InputError
from engine.llm.anthropic_client import AnthropicClient
from engine.llm.client import LLMError, LLMFailure, LLMRequest, LLMResponseError, LLMResult

SCHEMA = {
    "type": "object",
    "required": ["answer", "evidence"],
    "properties": {"answer": {"type": "boolean"}, "evidence": {"type": "string"}},
}
REQUEST = LLMRequest(system="Question: does the agent apologise?", user="Segment: sorry!", schema=SCHEMA)
MESSAGES = "/v1/messages"
BATCHES = "/v1/messages/batches"


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> ScriptedTransport:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    return ScriptedTransport()


def make_client(transport: ScriptedTransport, **kwargs: object) -> tuple[AnthropicClient, list[float]]:
    sleeps: list[float] = []
    client = AnthropicClient(MODEL, http_client=transport.client(), sleep=sleeps.append, **kwargs)
    return client, sleeps


def test_structured_answer_with_prompt_caching(transport: ScriptedTransport) -> None:
    transport.queue("POST", MESSAGES, (200, tool_message({"answer": True, "evidence": "sorry"}), {}))
    client, _ = make_client(transport)
    result = client.complete(REQUEST)
    assert result.data == {"answer": True, "evidence": "sorry"}
    assert result.usage.input_tokens == 812 and result.usage.cache_write_tokens == 640
    body = transport.bodies(MESSAGES)[0]
    assert body["model"] == MODEL
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tool_choice"] == {"type": "tool", "name": "record_answer"}
    assert body["tools"][0]["input_schema"] == SCHEMA
    sent = transport.requests[0]
    assert "sk-ant-test-key" in (sent.headers.get("x-api-key", "") + sent.headers.get("authorization", ""))


def test_missing_key_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(InputError, match="ANTHROPIC_API_KEY"):
        AnthropicClient(MODEL)


def test_rate_limit_then_success_backs_off(transport: ScriptedTransport) -> None:
    transport.queue("POST", MESSAGES, RATE_LIMITED, (200, tool_message({"answer": False, "evidence": ""}), {}))
    client, sleeps = make_client(transport)
    assert client.complete(REQUEST).data["answer"] is False
    assert len(transport.requests) == 2
    assert sleeps == [0.0]  # retry-after: 0 honoured


def test_overload_retries_with_exponential_backoff(transport: ScriptedTransport) -> None:
    transport.queue(
        "POST", MESSAGES, OVERLOADED, OVERLOADED, (200, tool_message({"answer": True, "evidence": "x"}), {})
    )
    client, sleeps = make_client(transport, base_delay=1.0)
    assert client.complete(REQUEST).data["answer"] is True
    assert len(sleeps) == 2
    assert 0.5 <= sleeps[0] <= 1.5 and 1.0 <= sleeps[1] <= 3.0


def test_overload_gives_up_after_max_attempts(transport: ScriptedTransport) -> None:
    transport.queue("POST", MESSAGES, *[OVERLOADED] * 3)
    client, sleeps = make_client(transport, max_attempts=3)
    with pytest.raises(LLMError, match="529.*Overloaded"):
        client.complete(REQUEST)
    assert len(sleeps) == 2


def test_bad_request_is_not_retried(transport: ScriptedTransport) -> None:
    transport.queue("POST", MESSAGES, BAD_REQUEST)
    client, sleeps = make_client(transport)
    with pytest.raises(LLMError, match="400"):
        client.complete(REQUEST)
    assert sleeps == [] and len(transport.requests) == 1


def test_malformed_json_is_retried_then_reported(transport: ScriptedTransport) -> None:
    truncated = text_message('{"answer": true, "evidence": "I am so', stop_reason="max_tokens")
    transport.queue("POST", MESSAGES, (200, truncated, {}), (200, truncated, {}))
    client, _ = make_client(transport)
    with pytest.raises(LLMResponseError, match="not JSON.*max_tokens"):
        client.complete(REQUEST)
    assert len(transport.requests) == 2


def test_text_json_and_schema_violations(transport: ScriptedTransport) -> None:
    transport.queue(
        "POST",
        MESSAGES,
        (200, text_message('```json\n{"answer": false, "evidence": ""}\n```'), {}),
        (200, tool_message({"answer": "yes"}), {}),
        (200, tool_message({"answer": "yes", "evidence": ""}), {}),
    )
    client, _ = make_client(transport, malformed_retries=1)
    assert client.complete(REQUEST).data == {"answer": False, "evidence": ""}
    with pytest.raises(LLMResponseError, match=r"\$.answer: expected boolean"):
        client.complete(REQUEST)


def test_message_batch_round_trip(transport: ScriptedTransport) -> None:
    requests = [LLMRequest(system=REQUEST.system, user=f"Segment {i}", schema=SCHEMA) for i in range(3)]
    batch_id = "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF"
    lines = [  # results come back out of order, one errored, one malformed
        {
            "custom_id": "r2",
            "result": {
                "type": "succeeded",
                "message": tool_message({"answer": True, "evidence": "Segment 2"}),
            },
        },
        {
            "custom_id": "r0",
            "result": {"type": "succeeded", "message": tool_message({"answer": False, "evidence": ""})},
        },
        {
            "custom_id": "r1",
            "result": {
                "type": "errored",
                "error": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            },
        },
    ]
    transport.queue("POST", BATCHES, (200, batch_object("in_progress", 3, batch_id), {}))
    transport.queue(
        "GET",
        f"{BATCHES}/{batch_id}",
        RATE_LIMITED,
        (200, batch_object("in_progress", 3, batch_id), {}),
        (200, batch_object("ended", 3, batch_id), {}),
        (200, batch_object("ended", 3, batch_id), {}),
    )
    transport.queue(
        "GET",
        f"{BATCHES}/{batch_id}/results",
        (200, "\n".join(json.dumps(line) for line in lines) + "\n", {"content-type": "application/binary"}),
    )
    client, sleeps = make_client(transport, poll_interval=5.0)
    results = client.complete_batch(requests)
    assert isinstance(results[0], LLMResult) and results[0].data["answer"] is False
    assert isinstance(results[1], LLMFailure) and "errored" in results[1].reason
    assert isinstance(results[2], LLMResult) and results[2].usage.batch
    sent = transport.bodies(BATCHES)[0]["requests"]
    assert [r["custom_id"] for r in sent] == ["r0", "r1", "r2"]
    assert sent[1]["params"]["messages"][0]["content"] == "Segment 1"
    assert sleeps.count(5.0) == 2


def test_batch_malformed_answer_becomes_failure(transport: ScriptedTransport) -> None:
    batch_id = "msgbatch_01"
    line = {
        "custom_id": "r0",
        "result": {"type": "succeeded", "message": text_message("Sure! The answer is yes.")},
    }
    transport.queue("POST", BATCHES, (200, batch_object("ended", 1, batch_id), {}))
    transport.queue("GET", f"{BATCHES}/{batch_id}", (200, batch_object("ended", 1, batch_id), {}))
    transport.queue("GET", f"{BATCHES}/{batch_id}/results", (200, json.dumps(line) + "\n", {}))
    client, _ = make_client(transport)
    [result] = client.complete_batch([REQUEST])
    assert isinstance(result, LLMFailure) and "malformed" in result.reason
    assert result.usage.output_tokens == 1024
