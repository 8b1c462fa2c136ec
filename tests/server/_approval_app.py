"""One worker of the model-approval race: ``uvicorn tests.server._approval_app:app --factory``.

It serves the help desk chat (:mod:`tests.server._approval_support`) at ``/api/chat`` on the
stores named by ``AGENTSKIT_APPROVAL_STORE`` (a store URL every worker shares); each run of a
tool appends ``<ref> <worker>`` to the file ``AGENTSKIT_APPROVAL_LOG``, the worker being
``AGENTSKIT_APPROVAL_WORKER``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Route

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
