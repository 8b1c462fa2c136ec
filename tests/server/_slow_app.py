"""A chat app for the ``kill -9`` test, served by uvicorn in a subprocess.

Its model records a side effect (one line in ``AGENTSKIT_SIDE_EFFECTS``) and then streams for
as long as ``AGENTSKIT_TURN_SECONDS``, so the test can kill the worker mid-turn. Sessions and
messages are in the stores ``AGENTSKIT_STORE`` names; a lease lasts 2 + 3 x 1 = 5 seconds.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from agentskit_chat.conversation import define_chat
from agentskit_chat.runtime import AdapterCapabilities, AdapterRequest, ChatConfig, StreamChunk
from agentskit_chat.server import create_chat_app
from agentskit_chat.storage import open_chat_stores


class _SlowSource:
    def __init__(self, text: str) -> None:
        self._text = text

    def abort(self) -> None:
        return None

    async def stream(self) -> AsyncIterator[StreamChunk]:
        with Path(os.environ["AGENTSKIT_SIDE_EFFECTS"]).open("a", encoding="utf-8") as log:
            log.write(f"{self._text}\n")
        yield StreamChunk("text", content="working")
        await anyio.sleep(float(os.environ.get("AGENTSKIT_TURN_SECONDS", "0")))
        yield StreamChunk("text", content=f" done: {self._text}")
        yield StreamChunk("done")


class _SlowAdapter:
    capabilities: AdapterCapabilities | None = None

    def create_source(self, request: AdapterRequest) -> _SlowSource:
        return _SlowSource(request.messages[-2].content)


def app() -> Any:
    """The ASGI app (a uvicorn factory), with a lifespan that opens and closes the stores."""
    stores = open_chat_stores(os.environ["AGENTSKIT_STORE"])
    definition = define_chat(id="slow", chat=ChatConfig(adapter=_SlowAdapter()))
    chat = create_chat_app(
        resolve_definition=lambda context, session_id: definition,
        session_storage=lambda context: stores.sessions,
        chat_memory=lambda context, session_id: stores.memory(session_id),
        timeout=2.0,
        cleanup_timeout=1.0,
    )

    async def serve(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await chat(scope, receive, send)
            return
        await receive()
        await stores.open()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await stores.aclose()
        await send({"type": "lifespan.shutdown.complete"})

    return serve
