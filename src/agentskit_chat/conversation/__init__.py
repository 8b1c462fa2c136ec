"""Chat definitions and sessions: deterministic routes over a statechart, persisted by CAS.

:func:`define_chat` declares a chat application once: its chat config and, optionally, a
deterministic conversation whose routes answer known commands without a model. A
:class:`ChatSession` (from :func:`create_chat_session` or :func:`resume_chat_session`) gives a
host ``session.chat``, the config to build a :class:`~agentskit_chat.runtime.ChatController`
from: routes first, the adapter for everything else. Decisions are cached by user message, so
retries and regenerations replay them and edits re-evaluate them. Sessions are stored as
``agentskit.chat.session`` snapshots in a compare-and-set :class:`SessionStorage`. See
``docs/conversations.md``.
"""

from __future__ import annotations

from ._confirmations import DEFAULT_SETTLE_TIMEOUT_S, reconcile_confirmation
from ._definition import (
    ChatDefinition,
    ChoiceSubmission,
    ConversationDefinition,
    ConversationStateDefinition,
    ConversationTrace,
    InteractionHandler,
    Route,
    RouteContext,
    RouteGuard,
    RouteMatcher,
    RouteResponder,
    RouteTraceKind,
    TraceKind,
    TraceObserver,
    command_route,
    define_chat,
)
from ._factory import create_chat_session, resolve_chat_session, resume_chat_session
from ._interactions import (
    INTERACTION_FAILED_MESSAGE,
    INTERACTION_METADATA_KEY,
    interaction_metadata,
    message_interaction,
)
from ._lifecycle import LifecycleTargets, get_lifecycle_targets
from ._page import LOGO_MEDIA_TYPES, MAX_LOGO_BYTES, MAX_PAGE_SUGGESTIONS, ChatPage
from ._policy import with_action_policy
from ._session import (
    MAX_TERMINAL_TURNS,
    ChatSession,
    ConversationSnapshot,
    PersistErrorObserver,
    SessionClock,
    TurnOutcome,
)
from ._sources import ROUTE_FAILED_MESSAGE
from ._storage import InMemorySessionStorage, SessionStorage

__all__ = [
    "DEFAULT_SETTLE_TIMEOUT_S",
    "INTERACTION_FAILED_MESSAGE",
    "INTERACTION_METADATA_KEY",
    "LOGO_MEDIA_TYPES",
    "MAX_LOGO_BYTES",
    "MAX_PAGE_SUGGESTIONS",
    "MAX_TERMINAL_TURNS",
    "ROUTE_FAILED_MESSAGE",
    "ChatDefinition",
    "ChatPage",
    "ChatSession",
    "ChoiceSubmission",
    "ConversationDefinition",
    "ConversationSnapshot",
    "ConversationStateDefinition",
    "ConversationTrace",
    "InMemorySessionStorage",
    "InteractionHandler",
    "LifecycleTargets",
    "PersistErrorObserver",
    "Route",
    "RouteContext",
    "RouteGuard",
    "RouteMatcher",
    "RouteResponder",
    "RouteTraceKind",
    "SessionClock",
    "SessionStorage",
    "TraceKind",
    "TraceObserver",
    "TurnOutcome",
    "command_route",
    "create_chat_session",
    "define_chat",
    "get_lifecycle_targets",
    "interaction_metadata",
    "message_interaction",
    "reconcile_confirmation",
    "resolve_chat_session",
    "resume_chat_session",
    "with_action_policy",
]
