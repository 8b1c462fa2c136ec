"""How the fault tests' clients classify what they get back (:mod:`tests.faults._load`)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.faults._load import classify_read, classify_turn

ERROR = {"error": {"code": "SERVER_INTERNAL", "message": "Failed.", "retryable": True}}


def _stream(*events: dict[str, object]) -> str:
    return "".join(json.dumps(event) + "\n" for event in events)


def _snapshot(status: str, **payload: object) -> dict[str, object]:
    return {"event": "server.turn.snapshot", "payload": {"status": status, **payload}}


@pytest.mark.parametrize(
    ("status", "text", "expected"),
    [
        (500, json.dumps(ERROR), ("typed", "SERVER_INTERNAL", "")),
        (502, "Bad gateway", ("defect", "", "502 without an error code")),
        (200, _stream(_snapshot("streaming"), _snapshot("complete")), ("complete", "", "")),
        (
            200,
            _stream({"event": "server.turn.diagnostic", "payload": {"code": "REQUEST_TIMEOUT"}}),
            ("typed", "REQUEST_TIMEOUT", ""),
        ),
        (
            200,
            _stream(_snapshot("error", error={"code": "CHAT_TURN_FAILED"})),
            ("typed", "CHAT_TURN_FAILED", ""),
        ),
        (
            200,
            _stream(_snapshot("streaming")),
            ("defect", "", "a 200 stream ending on a streaming snapshot"),
        ),
        (200, "", ("defect", "", "an empty 200 stream")),
        (200, "{not json\n", ("defect", "", "a stream line that is not JSON")),
    ],
)
def test_a_turn_response_is_classified(status: int, text: str, expected: tuple[str, ...]) -> None:
    assert classify_turn(httpx.Response(status, text=text)) == expected


@pytest.mark.parametrize(
    ("status", "text", "expected"),
    [
        (503, json.dumps(ERROR), ("typed", "SERVER_INTERNAL", "")),
        (500, "", ("defect", "", "500 without an error code")),
        (200, json.dumps(_snapshot("complete")), ("read", "", "")),
        (200, json.dumps({"event": "other"}), ("defect", "", "a 200 read that is not a snapshot")),
        (200, "<html>", ("defect", "", "a 200 read that is not JSON")),
    ],
)
def test_a_read_response_is_classified(status: int, text: str, expected: tuple[str, ...]) -> None:
    assert classify_read(httpx.Response(status, text=text)) == expected
