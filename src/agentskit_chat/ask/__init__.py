"""The Ask client: a chat adapter that talks to an Ask service over HTTP.

:func:`create_ask_adapter` posts each turn as an ``agentskit.chat.ask`` request and streams the
NDJSON events back as chat chunks. The service itself lives in :mod:`agentskit_chat.service`
(the pipeline) and :mod:`agentskit_chat.server` (its ASGI app). Needs the ``server`` extra
(httpx).
"""

from __future__ import annotations

from ._client import (
    ASK_CONNECT_TIMEOUT_MESSAGE,
    ASK_CONNECT_TIMEOUT_S,
    ASK_REQUEST_FAILED_MESSAGE,
    AskAdapter,
    AskSource,
    create_ask_adapter,
)
from ._client_projection import (
    ASK_CONTENT_BYTE_LIMIT_MESSAGE,
    ASK_CONTENT_RECORD_LIMIT_MESSAGE,
    ProjectTool,
    project_ask_event,
    project_ask_messages,
    trim_ask_history,
)
from ._client_request import encode_ask_request_body, resolve_ask_endpoint

__all__ = [
    "ASK_CONNECT_TIMEOUT_MESSAGE",
    "ASK_CONNECT_TIMEOUT_S",
    "ASK_CONTENT_BYTE_LIMIT_MESSAGE",
    "ASK_CONTENT_RECORD_LIMIT_MESSAGE",
    "ASK_REQUEST_FAILED_MESSAGE",
    "AskAdapter",
    "AskSource",
    "ProjectTool",
    "create_ask_adapter",
    "encode_ask_request_body",
    "project_ask_event",
    "project_ask_messages",
    "resolve_ask_endpoint",
    "trim_ask_history",
]
