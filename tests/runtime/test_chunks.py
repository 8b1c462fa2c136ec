"""Stream chunks, adapter requests and the adapter seam protocols."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime
from types import MappingProxyType

import pytest

from agentskit_chat.protocol import TokenUsage
from agentskit_chat.runtime import (
    CHUNK_TYPES,
    UNSCOPED_SESSION_ID,
    AdapterCapabilities,
    AdapterContext,
    AdapterRequest,
    ChatAdapter,
    ChatMessage,
    ChatSource,
    SessionAwareChatAdapter,
    StreamChunk,
    create_scoped_source,
)

USER = ChatMessage(id="u1", role="user", content="q", created_at=datetime(2026, 7, 13, tzinfo=UTC))


@pytest.mark.parametrize("kind", CHUNK_TYPES)
def test_every_chunk_type_is_accepted(kind: str) -> None:
    assert StreamChunk(kind).type == kind  # type: ignore[arg-type]


def test_chunk_types_are_the_seven_of_the_spec() -> None:
    assert CHUNK_TYPES == (
        "text",
        "reasoning",
        "tool_call",
        "tool_result",
        "usage",
        "error",
        "done",
    )


def test_unknown_chunk_type_raises() -> None:
    with pytest.raises(ValueError, match="unknown chunk type"):
        StreamChunk("delta")  # type: ignore[arg-type]


def test_chunk_is_frozen_and_metadata_read_only() -> None:
    metadata = {"answer": 1}
    chunk = StreamChunk("text", content="x", metadata=metadata)
    metadata["answer"] = 2
    assert chunk.metadata == {"answer": 1}
    assert isinstance(chunk.metadata, MappingProxyType)
    with pytest.raises(FrozenInstanceError):
        chunk.content = "y"  # type: ignore[misc]
    assert StreamChunk("done").metadata is None


def test_usage_chunk_carries_token_usage() -> None:
    usage = TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3)
    assert StreamChunk("usage", usage=usage).usage == usage


def test_request_with_metadata_keeps_everything_else() -> None:
    context = AdapterContext(system_prompt="be brief", tools=("t",), metadata={"tenant": "docs"})
    request = AdapterRequest(messages=(USER,), context=context)
    copy = request.with_metadata("agentskit.chat.escalation", "envelope")
    assert copy.messages == request.messages
    assert copy.context.system_prompt == "be brief"
    assert copy.context.tools == ("t",)
    assert dict(copy.context.metadata) == {
        "tenant": "docs",
        "agentskit.chat.escalation": "envelope",
    }
    assert dict(request.context.metadata) == {"tenant": "docs"}


def test_default_context_is_empty() -> None:
    request = AdapterRequest(messages=())
    assert request.context.metadata == {}
    assert request.context.system_prompt is None
    assert request.context.tools == ()


class _Source:
    def __init__(self) -> None:
        self.aborted = False

    async def stream(self) -> AsyncIterator[StreamChunk]:
        yield StreamChunk("done")

    def abort(self) -> None:
        self.aborted = True


class _Plain:
    capabilities: AdapterCapabilities | None = None

    def __init__(self) -> None:
        self.calls: list[str] = []

    def create_source(self, request: AdapterRequest) -> ChatSource:
        self.calls.append("plain")
        return _Source()


class _Aware(_Plain):
    capabilities = AdapterCapabilities(streaming=True, structured_output=True)

    def create_source_for_session(self, request: AdapterRequest, session_id: str) -> ChatSource:
        self.calls.append(session_id)
        return _Source()


def test_protocols_recognise_adapters_and_sources() -> None:
    assert isinstance(_Plain(), ChatAdapter)
    assert not isinstance(_Plain(), SessionAwareChatAdapter)
    assert isinstance(_Aware(), SessionAwareChatAdapter)
    assert isinstance(_Source(), ChatSource)


def test_scoped_source_prefers_the_session_aware_entry_point() -> None:
    request = AdapterRequest(messages=(USER,))
    plain, aware = _Plain(), _Aware()
    create_scoped_source(plain, request, "s1")
    create_scoped_source(aware, request, "s1")
    assert plain.calls == ["plain"]
    assert aware.calls == ["s1"]


def test_capabilities_defaults() -> None:
    assert AdapterCapabilities() == AdapterCapabilities(streaming=True, structured_output=False)
    assert UNSCOPED_SESSION_ID == "unscoped"
