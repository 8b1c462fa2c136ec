"""Every HTTP surface of agentskit-chat, as plain ASGI apps.

- :func:`create_app`: any chat definition on the web — its page, the turn protocol, storage and
  health — the app ``agentskit-chat serve app.py:chat`` runs (:func:`load_chat_target` reads
  such a reference).
- :func:`create_ask_service_app`: the Ask service (``agentskit.chat.ask`` v1 in, NDJSON events
  out), the HTTP edge of :class:`~agentskit_chat.service.AskService`: method, media type,
  bounded body, decoding.
- :func:`create_chat_app`: the chat turn handler (one ``client.turn.submit`` in, full
  ``server.turn.snapshot`` events out as NDJSON), with turn leases and messages in storage
  that every worker shares.
- :func:`create_docs_assistant_app`: the docs assistant (``/api/answer``, ``/api/ask``,
  ``/healthz``, ``/metrics``), behind one authentication rule.
- :func:`create_healthz_app` and :func:`create_prometheus_metrics_app`: readiness and a
  Prometheus registry, mountable anywhere.

Each app mounts in Starlette or FastAPI or runs alone under uvicorn. They share one set of ASGI
helpers, one bounded body reader and one JSON error body. Needs the ``server`` extra.
"""

from __future__ import annotations

from ._app import ChatSite, create_app
from ._ask_app import AskServiceApp, Authenticate, create_ask_service_app
from ._auth import is_loopback
from ._chat_app import (
    ChatApp,
    ChatAuthenticate,
    ChatMemoryFactory,
    NewSessionLimit,
    ResolveDefinition,
    SessionStorageFactory,
    create_chat_app,
)
from ._docs_app import create_docs_assistant_app
from ._edge import RateLimits
from ._healthz import HealthCheck, HealthzApp, create_healthz_app
from ._prometheus import PrometheusMetricsApp, create_prometheus_metrics_app
from ._run import serve
from ._target import ChatTarget, ChatTargetHolder, load_chat_target
from ._web_page import create_chat_page_app

__all__ = [
    "AskServiceApp",
    "Authenticate",
    "ChatApp",
    "ChatAuthenticate",
    "ChatMemoryFactory",
    "ChatSite",
    "ChatTarget",
    "ChatTargetHolder",
    "HealthCheck",
    "HealthzApp",
    "NewSessionLimit",
    "PrometheusMetricsApp",
    "RateLimits",
    "ResolveDefinition",
    "SessionStorageFactory",
    "create_app",
    "create_ask_service_app",
    "create_chat_app",
    "create_chat_page_app",
    "create_docs_assistant_app",
    "create_healthz_app",
    "create_prometheus_metrics_app",
    "is_loopback",
    "load_chat_target",
    "serve",
]
