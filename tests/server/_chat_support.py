"""Shared pieces of the chat handler tests: an echo model, stores, a submission builder."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import anyio

from agentskit_chat.conversation import ChatDefinition, InMemorySessionStorage, define_chat
from agentskit_chat.protocol import create_assistant_content_encoder
from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterRequest,
    ChatConfig,
    ChatMessage,
    ChatSource,
    ChatTool,
    InMemoryChatMemory,
    StreamChunk,
    ToolAuthorization,
    ToolAuthorizer,
)
from agentskit_chat.server import create_chat_app
from tests.conversation._support import Clock

JSON: Final = {"content-type": "application/json"}

#: A choice list whose first choice proposes the confirmation-gated ``create-support-ticket``
#: action (the seed docs' support-ticket flow); the chat, web and terminal tests share it.
SUPPORT_OFFER_FRAME: Final[dict[str, Any]] = {
    "protocol": "agentskit.chat.component",
    "version": 1,
    "type": "render",
    "componentKey": "choice-list",
    "instanceId": "support-offer",
    "props": {
        "prompt": "Would you like a specialist to follow up?",
        "choices": [
            {
                "id": "ticket",
                "label": "Open support ticket",
                "action": {"name": "create-support-ticket", "input": {"topic": "billing"}},
            },
            {"id": "chat", "label": "Keep chatting"},
        ],
    },
    "fallback": {"kind": "choice-list", "summary": "Open a ticket or keep chatting."},
}


class EchoSource:
    """``Echo: <last user message>``, after waiting for ``gate`` when one is given."""

    def __init__(self, adapter: EchoAdapter, reply: str) -> None:
        self.adapter = adapter
        self.reply = reply
        self.aborts = 0

    def abort(self) -> None:
        self.aborts += 1
        self.adapter.aborts += 1

    async def stream(self) -> AsyncIterator[StreamChunk]:
        adapter = self.adapter
        adapter.started.set()
        if adapter.fail:
            raise RuntimeError("model exploded")
        yield StreamChunk("text", content=adapter.prefix)
        if adapter.gate is not None:
            await adapter.gate.wait()
        yield StreamChunk("text", content=self.reply[len(adapter.prefix) :])
        adapter.finished += 1
        yield StreamChunk("done")


@dataclass
class EchoAdapter:
    """A stand-in model: counts turns and aborts; ``gate`` holds each turn mid-stream."""

    gate: anyio.Event | None = None
    fail: bool = False
    prefix: str = "Echo"
    #: What the reply starts with before the question (changing it changes the next answers).
    label: str = "Echo"
    calls: int = 0
    aborts: int = 0
    finished: int = 0
    inputs: list[str] = field(default_factory=list)
    started: anyio.Event = field(default_factory=anyio.Event)
    capabilities: AdapterCapabilities | None = None

    def create_source(self, request: AdapterRequest) -> ChatSource:
        self.calls += 1
        last = next(m.content for m in reversed(request.messages) if m.role == "user")
        self.inputs.append(last)
        return EchoSource(self, f"{self.label}: {last}")


class Memories:
    """One in-memory chat memory per session id; ``fail_save``/``fail_load`` make them fail."""

    def __init__(self) -> None:
        self.by_session: dict[str, InMemoryChatMemory] = {}
        self.fail_save = False
        self.fail_load = False
        self.saves = 0

    def __call__(self, context: Any, session_id: str) -> Any:
        memory = self.by_session.setdefault(session_id, InMemoryChatMemory())
        return _Watched(self, memory)

    def messages(self, session_id: str) -> tuple[ChatMessage, ...]:
        memory = self.by_session.get(session_id)
        return () if memory is None else tuple(memory._messages)


class _Watched:
    def __init__(self, owner: Memories, memory: InMemoryChatMemory) -> None:
        self._owner = owner
        self._memory = memory

    async def load(self) -> Sequence[ChatMessage]:
        if self._owner.fail_load:
            raise RuntimeError("memory load failed")
        return await self._memory.load()

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        self._owner.saves += 1
        if self._owner.fail_save:
            raise RuntimeError("memory save failed")
        await self._memory.save(messages)


class RejectingLaterSaves(InMemorySessionStorage):
    """Accepts the first ``accept`` saves (the claim), then refuses every compare-and-set."""

    def __init__(self, accept: int = 1) -> None:
        super().__init__()
        self.accept = accept

    async def save(self, snapshot: Any, expected_cursor: int | None) -> bool:
        if self.accept <= 0:
            return False
        self.accept -= 1
        return await super().save(snapshot, expected_cursor)


def definition(
    adapter: EchoAdapter,
    *,
    tools: tuple[ChatTool, ...] = (),
    authorize: ToolAuthorizer | None = None,
    **fields: Any,
) -> ChatDefinition:
    config = ChatConfig(adapter=adapter, tools=tools, authorize_tool_call=authorize)
    return define_chat(id="support", chat=config, **fields)


def submit(
    *,
    session_id: str = "session-1",
    turn_id: str = "turn-1",
    event_id: str = "event-1",
    text: str = "hello",
    extra: Mapping[str, Any] | None = None,
    payload: Mapping[str, Any] | None = None,
) -> bytes:
    event: dict[str, Any] = {
        "protocol": "agentskit.chat.turn",
        "version": 1,
        "eventId": event_id,
        "sessionId": session_id,
        "turnId": turn_id,
        "sequence": 0,
        "emittedAt": "2026-07-11T00:00:00.000Z",
        "event": "client.turn.submit",
        "payload": {"input": text, **(payload or {})},
    }
    event.update(extra or {})
    return json.dumps(event).encode()


def lines(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body.decode().splitlines() if line]


@dataclass
class Harness:
    """A chat app over shared in-memory stores, with the hooks' calls recorded."""

    adapter: EchoAdapter = field(default_factory=EchoAdapter)
    storage: InMemorySessionStorage = field(default_factory=InMemorySessionStorage)
    memories: Memories = field(default_factory=Memories)
    clock: Clock = field(default_factory=Clock)
    calls: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)

    def app(self, **options: Any) -> Any:
        def resolve(context: Any, session_id: str) -> ChatDefinition:
            self.calls.append(f"definition:{context}")
            return definition(self.adapter, **self.fields)

        return create_chat_app(
            resolve_definition=resolve,
            session_storage=lambda context: self.storage,
            chat_memory=self.memories,
            now=self.clock,
            **options,
        )

    def stored(self, session_id: str = "session-1") -> dict[str, Any]:
        """The session's stored snapshot, parsed."""
        data = self.storage._data[session_id]
        return dict(json.loads(data))


# --- the support-ticket flow ---------------------------------------------------------------------

#: When the seeded support conversation happened.
SEEDED_AT: Final = datetime(2026, 7, 11, tzinfo=UTC)


class TicketService:
    """The injected service behind ``create-support-ticket``: records every ticket it creates."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    async def __call__(self, args: Mapping[str, Any]) -> str:
        self.created.append(dict(args))
        return f"SUP-{len(self.created)}"


def support_ticket_tool(execute: Any) -> ChatTool:
    """``create-support-ticket {topic}``, run by ``execute`` once a human approves each call."""
    return ChatTool(
        name="create-support-ticket",
        parameters={
            "type": "object",
            "properties": {"topic": {"type": "string"}},
            "required": ["topic"],
            "additionalProperties": False,
        },
        execute=execute,
        requires_confirmation=True,
    )


def seeded(harness: Harness, *frames: Mapping[str, Any], session_id: str = "session-1") -> None:
    """Store a conversation whose answer shows ``frames`` (in one ordered-content message)."""
    encoder = create_assistant_content_encoder()
    content = "".join(encoder.encode({"kind": "component", "frame": f}) for f in frames)
    harness.memories.by_session[session_id] = InMemoryChatMemory(
        [
            ChatMessage(id="u1", role="user", content="/support", created_at=SEEDED_AT),
            ChatMessage(id="m1", role="assistant", content=content, created_at=SEEDED_AT),
        ]
    )


def ticket_harness(service: TicketService, *, allow: bool = True) -> Harness:
    """A chat app whose assistant offered the support ticket, its tool behind a confirmation
    and an authorizer that allows it (or refuses it with ``missing-capability``)."""

    def authorize(call: Any, context: Any) -> ToolAuthorization:
        return ToolAuthorization(allow, None if allow else "missing-capability")

    harness = Harness()
    harness.fields.update(tools=(support_ticket_tool(service),), authorize=authorize)
    seeded(harness, SUPPORT_OFFER_FRAME)
    return harness
