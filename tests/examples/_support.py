"""Driving a reference application over a real socket: one turn at a time, as a client would.

Each example's ``create_app(...)`` runs under uvicorn on 127.0.0.1; :class:`Client` posts
``client.turn.submit`` events with httpx and reads the NDJSON back.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentskit_chat.protocol import decode_assistant_content


@dataclass(frozen=True)
class Turn:
    """What one POST answered: its status, the NDJSON lines (or the JSON error body)."""

    status: int
    lines: list[dict[str, Any]]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The messages of the last snapshot."""
        snapshots = [line for line in self.lines if line.get("event") == "server.turn.snapshot"]
        assert snapshots, self.lines
        messages: list[dict[str, Any]] = snapshots[-1]["payload"]["messages"]
        return messages

    @property
    def diagnostics(self) -> list[str]:
        """The codes of the stream's diagnostics, or of the error body."""
        codes = [
            line["payload"]["code"]
            for line in self.lines
            if line.get("event") == "server.turn.diagnostic"
        ]
        codes += [line["error"]["code"] for line in self.lines if "error" in line]
        return codes

    @property
    def answer(self) -> str:
        """The last assistant message's text."""
        return str(self.messages[-1]["content"])

    def frame(self) -> dict[str, Any]:
        """The component frame the last assistant message shows."""
        decoded = decode_assistant_content(self.answer)
        assert decoded.ok
        frames = [part.frame for part in decoded.parts if part.kind == "component"]
        assert len(frames) == 1, decoded.parts
        return frames[0].model_dump(mode="json", by_alias=True, exclude_none=True)

    def text(self) -> str:
        """The prose the last assistant message shows before its components."""
        decoded = decode_assistant_content(self.answer)
        assert decoded.ok
        return "".join(part.text for part in decoded.parts if part.kind == "text")

    def calls(self) -> list[dict[str, Any]]:
        """Every tool call of the conversation, oldest first."""
        return [call for message in self.messages for call in message.get("toolCalls") or ()]


@dataclass
class Client:
    """One conversation with a served chat."""

    url: str
    session_id: str = "session-1"
    headers: Mapping[str, str] = field(default_factory=dict)
    _turns: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    async def send(self, text: str, **payload: Any) -> Turn:
        """Post one turn whose input is ``text`` and whose payload has ``payload``'s keys."""
        number = next(self._turns)
        event = {
            "protocol": "agentskit.chat.turn",
            "version": 1,
            "eventId": f"event-{self.session_id}-{number}",
            "sessionId": self.session_id,
            "turnId": f"turn-{self.session_id}-{number}",
            "sequence": 0,
            "emittedAt": "2026-07-11T00:00:00.000Z",
            "event": "client.turn.submit",
            "payload": {"input": text, **payload},
        }
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(
                f"{self.url}/api/chat",
                content=json.dumps(event),
                headers={"content-type": "application/json", **self.headers},
            )
        body = response.text
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        return Turn(response.status_code, lines)

    async def select(self, frame: Mapping[str, Any], choice_id: str) -> Turn:
        """Click ``choice_id`` of the choice list ``frame``."""
        label = next(c["label"] for c in frame["props"]["choices"] if c["id"] == choice_id)
        selection = {
            "protocol": "agentskit.chat.component",
            "version": 1,
            "type": "select",
            "componentKey": frame["componentKey"],
            "instanceId": frame["instanceId"],
            "choiceId": choice_id,
        }
        return await self.send(label, selection=selection)

    async def decide(self, tool_call_id: str, decision: str) -> Turn:
        """Approve or reject the call ``tool_call_id``."""
        text = "Approve" if decision == "approve" else "Reject"
        return await self.send(
            text, confirmation={"toolCallId": tool_call_id, "decision": decision}
        )

    async def interact(
        self, frame: Mapping[str, Any], event: str, value: Any, text: str = "Submitted"
    ) -> Turn:
        """Send component event ``event`` with ``value`` for ``frame``."""
        interaction = {
            "instanceId": frame["instanceId"],
            "componentKey": frame["componentKey"],
            "event": event,
            "value": value,
        }
        return await self.send(text, interaction=interaction)


def waiting(turn: Turn) -> dict[str, Any]:
    """The one call of ``turn`` waiting for a human."""
    (call,) = [c for c in turn.calls() if c["status"] == "requires_confirmation"]
    return call
