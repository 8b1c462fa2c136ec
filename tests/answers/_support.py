"""Shared helpers of the answer-plane tests: artifacts with correct hashes, clocks, streams."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

from agentskit_chat.protocol import compute_local_knowledge_artifact_content_hash
from agentskit_chat.protocol.fixtures import (
    DETERMINISTIC_CONTENT_HASH_FIXTURE,
    LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE,
    STALE_LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE,
)
from agentskit_chat.runtime import (
    AdapterContext,
    AdapterRequest,
    ChatMessage,
    ChatSource,
    StreamChunk,
)

SITE = "agentskit-docs"
HASH = DETERMINISTIC_CONTENT_HASH_FIXTURE
ARTIFACT = LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE
STALE = STALE_LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE
NOW = datetime(2026, 7, 13, 12, tzinfo=UTC)
CREATED = datetime(2026, 7, 13, 11, tzinfo=UTC)
EXPIRES_MS = 1783987200000  # 2026-07-14T00:00:00.000Z


def now() -> datetime:
    return NOW


def entry(entry_id: str, *values: str, label: str | None = None, cites: int = 0) -> dict[str, Any]:
    """A valid artifact entry answering ``Answer of <id>.``."""
    return {
        "id": entry_id,
        "kind": "document",
        "label": label or f"Label {entry_id}",
        "match": {"type": "exact", "values": list(values)},
        "answer": {
            "markdown": f"Answer of {entry_id}.",
            "citations": [
                {"id": f"{entry_id}-c{i}", "title": f"Title {i}", "href": f"/docs/{entry_id}/{i}"}
                for i in range(cites)
            ],
        },
    }


def artifact(entries: Sequence[dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    """The fixture artifact with other entries or top-level fields (``None`` removes one),
    its hash recomputed."""
    value = copy.deepcopy(ARTIFACT)
    if entries is not None:
        value["entries"] = list(entries)
    for key, item in top.items():
        if item is None:
            value.pop(key, None)
        else:
            value[key] = item
    value["contentHash"] = compute_local_knowledge_artifact_content_hash(value)
    return value


def user(content: str, message_id: str = "user-1") -> ChatMessage:
    return ChatMessage(id=message_id, role="user", content=content, created_at=CREATED)


def request(*contents: str, message_id: str = "user-1", **metadata: Any) -> AdapterRequest:
    messages = tuple(user(c, message_id) for c in contents)
    return AdapterRequest(messages=messages, context=AdapterContext(metadata=metadata))


async def collect(source: ChatSource) -> list[StreamChunk]:
    chunks: list[StreamChunk] = []
    async for chunk in source.stream():
        chunks.append(chunk)
    return chunks


async def agen(chunks: Sequence[StreamChunk]) -> AsyncIterator[StreamChunk]:
    for chunk in chunks:
        yield chunk
