"""The terminal chat (``agentskit-chat chat``): a Textual app over the turn protocol.

It talks HTTP to a chat handler (``/api/chat``), even for a local docs folder, which it serves
in process; so the terminal and the web page see the same sessions, choices, confirmations and
sources. :class:`ChatTurnClient` is the protocol part without any user interface.

Textual is the ``tui`` extra and httpx/uvicorn the ``server`` extra; this package imports
without them, and starting the app without them raises an ``ImportError`` naming the extra.

Example::

    import anyio
    from agentskit_chat.tui import run_terminal_chat

    anyio.run(lambda: run_terminal_chat(url="http://127.0.0.1:8000"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._client import ChatTurnClient, TurnFailure, TurnResult
from ._local import local_chat_server, local_docs_server
from ._run import run_terminal_chat

if TYPE_CHECKING:
    from ._app import TerminalChatApp

__all__ = [
    "ChatTurnClient",
    "TerminalChatApp",
    "TurnFailure",
    "TurnResult",
    "local_chat_server",
    "local_docs_server",
    "run_terminal_chat",
]


def __getattr__(name: str) -> Any:
    if name == "TerminalChatApp":
        from agentskit_chat._drivers import require_extra  # noqa: PLC0415

        require_extra("The terminal chat", "tui", "textual")
        from ._app import TerminalChatApp  # noqa: PLC0415

        return TerminalChatApp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
