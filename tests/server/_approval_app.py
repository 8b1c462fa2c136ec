"""The help desk chat (:mod:`tests.server._approval_support`) as a worker of the approval race.

Two ways to run it, each run of a tool appending ``<ref> <worker>`` to the file named by
``AGENTSKIT_APPROVAL_LOG``:

- ``uvicorn tests.server._approval_app:app --factory``: one process serving ``/api/chat`` on
  the stores ``AGENTSKIT_APPROVAL_STORE`` names, the worker called ``AGENTSKIT_APPROVAL_WORKER``;
- ``agentskit-chat serve tests.server._approval_app:chat --workers 2 --store URL``: each
  worker process builds the chat once, and is called ``pid<its process id>``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Route

from agentskit_chat.conversation import ChatDefinition
from agentskit_chat.server import create_chat_app
from agentskit_chat.storage import open_chat_stores
from tests.server._approval_support import TicketDesk, desk_definition


def app() -> Starlette:
    """The worker's ASGI app; its lifespan opens and closes the shared stores."""
    stores = open_chat_stores(os.environ["AGENTSKIT_APPROVAL_STORE"])
    desk = TicketDesk(
        log=os.environ["AGENTSKIT_APPROVAL_LOG"], worker=os.environ["AGENTSKIT_APPROVAL_WORKER"]
    )
    definition = desk_definition(desk)
    chat = create_chat_app(
        resolve_definition=lambda context, session_id: definition,
        session_storage=lambda context: stores.sessions,
        chat_memory=lambda context, session_id: stores.memory(session_id),
    )

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with stores:
            yield

    return Starlette(routes=[Route("/api/chat", chat, methods=["GET", "POST"])], lifespan=lifespan)


def chat() -> ChatDefinition:
    """The chat target of ``agentskit-chat serve`` (called once in each worker process)."""
    return desk_definition(
        TicketDesk(log=os.environ["AGENTSKIT_APPROVAL_LOG"], worker=f"pid{os.getpid()}")
    )
