"""The clients of the fault tests: chat turns and snapshot reads, each outcome classified.

Every response a client gets is one of: a turn it may take as stored (the stream ended on a
``complete`` snapshot), a typed error (a JSON body with an error code, a diagnostic line
ending the stream, or a snapshot whose status is ``error`` with its code), a snapshot read,
or a defect: a broken connection, a cut stream, a body without a code, a stream that ended on
a half-written answer, or no answer within :data:`REQUEST_BOUND_S` (a hang).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import anyio
import httpx

from tests.server._chat_support import JSON, submit

__all__ = ["REQUEST_BOUND_S", "Load", "Outcome", "classify_read", "classify_turn", "summary"]

#: No request may take longer than this, whatever the store does (the turn timeout is 30 s;
#: a store's own timeouts are 10 s at most).
REQUEST_BOUND_S: Final = 20.0
#: Completed turns after which a client starts a new conversation.
TURNS_PER_SESSION: Final = 4

Kind = Literal["complete", "typed", "read", "defect"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request's result: what it was, when it started and ended (monotonic seconds)."""

    kind: Kind
    started: float
    ended: float
    status: int
    code: str = ""
    detail: str = ""
    session_id: str = ""
    text: str = ""
    client: int = -1


def _error_code(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) and code else ""


def _refused(response: httpx.Response) -> tuple[Kind, str, str]:
    """A response other than 200: typed when its body names an error code, else a defect."""
    code = _error_code(response)
    if code:
        return "typed", code, ""
    return "defect", "", f"{response.status_code} without an error code"


def classify_turn(response: httpx.Response) -> tuple[Kind, str, str]:
    """``(kind, code, detail)`` of a turn's response (its body read in full)."""
    if response.status_code != 200:
        return _refused(response)
    try:
        events = [json.loads(line) for line in response.text.splitlines() if line]
    except ValueError:
        return "defect", "", "a stream line that is not JSON"
    if not events:
        return "defect", "", "an empty 200 stream"
    last = events[-1]
    payload = last.get("payload") or {}
    if last.get("event") == "server.turn.diagnostic":
        told = payload.get("code")
        if isinstance(told, str) and told:
            return "typed", told, ""
        return "defect", "", "a diagnostic without a code"
    if last.get("event") != "server.turn.snapshot":
        return "defect", "", f"a stream ending on {last.get('event')}"
    status = payload.get("status")
    if status == "complete":
        return "complete", "", ""
    error = payload.get("error") or {}
    if status == "error" and error.get("code"):
        return "typed", str(error["code"]), ""
    return "defect", "", f"a 200 stream ending on a {status} snapshot"


def classify_read(response: httpx.Response) -> tuple[Kind, str, str]:
    """``(kind, code, detail)`` of a ``GET /api/chat?sessionId=`` response."""
    if response.status_code != 200:
        return _refused(response)
    try:
        snapshot = response.json()
    except ValueError:
        return "defect", "", "a 200 read that is not JSON"
    if snapshot.get("event") != "server.turn.snapshot":
        return "defect", "", "a 200 read that is not a snapshot"
    return "read", "", ""


@dataclass
class Load:
    """Clients doing turns (a new conversation every few completed turns) and reads.

    Attributes:
        url: The server.
        tag: A prefix of every session id (unique per test).
        outcomes: Every request's outcome, in the order they ended.
    """

    url: str
    tag: str
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: anyio.Event = field(default_factory=anyio.Event)

    def stop(self) -> None:
        """Let every client finish its current request and stop."""
        self._stop.set()

    def since(self, moment: float, kind: Kind | None = None) -> list[Outcome]:
        """Outcomes of requests that started at or after ``moment`` (of ``kind``)."""
        return [
            o for o in self.outcomes if o.started >= moment and (kind is None or o.kind == kind)
        ]

    def answered(self, start: float, end: float, kind: Kind | None = None) -> list[Outcome]:
        """Outcomes the clients received between ``start`` and ``end`` (of ``kind``)."""
        return [
            o for o in self.outcomes if start <= o.ended < end and (kind is None or o.kind == kind)
        ]

    async def client(self, number: int) -> None:
        """One client's loop until :meth:`stop`."""
        conversation = 0
        completed = 0
        turn = 0
        session_id = f"{self.tag}-c{number}-s{conversation}"
        async with httpx.AsyncClient(base_url=self.url, timeout=REQUEST_BOUND_S) as http:
            while not self._stop.is_set():
                turn += 1
                text = f"question {number}.{turn} about invoice {turn * 7}"
                outcome = await self._turn(http, number, session_id, turn, text)
                self.outcomes.append(outcome)
                if outcome.kind == "complete":
                    completed += 1
                if turn % 3 == 0:
                    self.outcomes.append(await self._read(http, number, session_id))
                if completed >= TURNS_PER_SESSION:
                    conversation += 1
                    completed = 0
                    session_id = f"{self.tag}-c{number}-s{conversation}"
                # An error is retried after a pause, as a client would.
                await anyio.sleep(0.01 if outcome.kind == "complete" else 0.1)

    async def _turn(
        self, http: httpx.AsyncClient, number: int, session_id: str, turn: int, text: str
    ) -> Outcome:
        turn_id = f"t{turn}"
        body = submit(session_id=session_id, turn_id=turn_id, event_id=f"e{turn}", text=text)
        started = time.monotonic()
        try:
            response = await http.post("/api/chat", content=body, headers=JSON)
        except httpx.TimeoutException:
            detail = "no answer (hang)"
            return Outcome("defect", started, time.monotonic(), 0, "", detail, session_id)
        except httpx.HTTPError as error:
            detail = f"transport: {type(error).__name__}"
            return Outcome("defect", started, time.monotonic(), 0, "", detail, session_id)
        kind, code, detail = classify_turn(response)
        ended = time.monotonic()
        return Outcome(
            kind, started, ended, response.status_code, code, detail, session_id, text, number
        )

    async def _read(self, http: httpx.AsyncClient, number: int, session_id: str) -> Outcome:
        started = time.monotonic()
        try:
            response = await http.get("/api/chat", params={"sessionId": session_id})
        except httpx.TimeoutException:
            return Outcome("defect", started, time.monotonic(), 0, "", "read: no answer (hang)")
        except httpx.HTTPError as error:
            detail = f"read transport: {type(error).__name__}"
            return Outcome("defect", started, time.monotonic(), 0, "", detail)
        kind, code, detail = classify_read(response)
        return Outcome(
            kind, started, time.monotonic(), response.status_code, code, detail, session_id
        )


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """Counts by kind and code, for assertion messages."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        key = outcome.kind if not outcome.code else f"{outcome.kind}:{outcome.code}"
        key = key if not outcome.detail else f"{key}:{outcome.detail}"
        counts[key] = counts.get(key, 0) + 1
    return counts
