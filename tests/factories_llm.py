"""Recorded Anthropic API responses (shapes as the API returns them) and a scripted fake HTTP transport."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2

MODEL = "claude-sonnet-5-5"


def tool_message(
    answer: dict[str, Any],
    *,
    input_tokens: int = 812,
    output_tokens: int = 64,
    cache_read: int = 0,
    cache_write: int = 640,
) -> dict[str, Any]:
    """A Messages API answer that calls the forced answer tool."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9",
                "name": "record_answer",
                "input": answer,
            }
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
            "service_tier": "standard",
        },
    }


def text_message(text: str, stop_reason: str = "end_turn") -> dict[str, Any]:
    """An answer that ignored the tool and wrote text instead (e.g. truncated JSON at max_tokens)."""
    return {
        "id": "msg_01Bq8sGCR3UELHNbpoWfmaGQ",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 790,
            "output_tokens": 1024,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 640,
        },
    }


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


RATE_LIMITED = (
    429,
    error_body("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    {"retry-after": "0", "anthropic-ratelimit-requests-remaining": "0"},
)
OVERLOADED = (529, error_body("overloaded_error", "Overloaded"), {})
BAD_REQUEST = (400, error_body("invalid_request_error", "max_tokens: Field required"), {})


def batch_object(status: str, n: int, batch_id: str = "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF") -> dict[str, Any]:
    ended = status == "ended"
    return {
        "id": batch_id,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": {
            "processing": 0 if ended else n,
            "succeeded": n - 1 if ended else 0,
            "errored": 1 if ended else 0,
            "canceled": 0,
            "expired": 0,
        },
        "ended_at": "2026-11-29T10:42:11.000Z" if ended else None,
        "created_at": "2026-11-29T10:40:02.000Z",
        "expires_at": "2026-11-30T10:40:02.000Z",
        "archived_at": None,
        "cancel_initiated_at": None,
        "results_url": f"https://api.anthropic.com/v1/messages/batches/{batch_id}/results" if ended else None,
    }


Reply = tuple[int, Any, dict[str, str]]


class ScriptedTransport:
    """Answers each request with the next reply queued for its (method, path); records requests."""

    def __init__(self) -> None:
        self.queues: dict[tuple[str, str], list[Reply | Callable[[httpx2.Request], Reply]]] = {}
        self.requests: list[httpx2.Request] = []

    def queue(self, method: str, path: str, *replies: Reply | Callable[[httpx2.Request], Reply]) -> None:
        self.queues.setdefault((method, path), []).extend(replies)

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        queue = self.queues.get((request.method, request.url.path))
        if not queue:
            return httpx2.Response(404, json=error_body("not_found_error", f"no reply for {request.url.path}"))
        reply = queue.pop(0)
        status, body, headers = reply(request) if callable(reply) else reply
        if isinstance(body, str):
            return httpx2.Response(status, content=body.encode(), headers=headers)
        return httpx2.Response(status, json=body, headers=headers)

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self.handler))

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.url.path == path and r.content]
