"""agentskit-chat: one chat definition, every interface, wire-compatible with AgentsKit Chat.

The wire protocol lives in :mod:`agentskit_chat.protocol`; the answer plane in
:mod:`agentskit_chat.answers`; the adapter seam in :mod:`agentskit_chat.runtime`; the docs
assistant (the main job) in :mod:`agentskit_chat.assistant`. Their public names are re-exported
here; the Ask backend (:mod:`agentskit_chat.ask`), retrieval, storage, generation and operations
are imported from their own packages.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .answers import (
        ARTIFACT_FILE_NAME,
        CHOICE_UNAVAILABLE,
        DEFAULT_ARTIFACT_HREF,
        ESCALATION_METADATA_KEY,
        MAX_CHOICE_SESSIONS,
        MAX_SESSION_CHOICES,
        SITE_FILE_NAME,
        ArtifactBuild,
        ArtifactBuildStats,
        ChoiceReservation,
        ChoiceReservationStore,
        ChoiceUnavailable,
        Clock,
        DecisionObserver,
        DeterministicAnswerAdapter,
        DeterministicAnswerResolver,
        FallbackMode,
        LeftOut,
        build_local_knowledge_artifact,
        create_deterministic_answer_adapter,
        create_deterministic_answer_resolver,
        write_artifact_build,
    )
    from .assistant import (
        NO_GROUNDED_SOURCES,
        DocsAssistant,
        RelevanceRule,
        ask_docs,
        create_docs_assistant,
    )
    from .runtime import (
        CHUNK_TYPES,
        UNSCOPED_SESSION_ID,
        AdapterCapabilities,
        AdapterContext,
        AdapterRequest,
        ChatAdapter,
        ChatMessage,
        ChatSource,
        ChunkType,
        MessageRole,
        MessageStatus,
        SessionAwareChatAdapter,
        StreamChunk,
        create_scoped_source,
    )

__version__ = "0.1.0"

# Re-exports load on first use, so importing one subpackage (say the protocol) stays light.
_LAZY: dict[str, str] = {
    "ARTIFACT_FILE_NAME": "answers",
    "CHOICE_UNAVAILABLE": "answers",
    "DEFAULT_ARTIFACT_HREF": "answers",
    "ESCALATION_METADATA_KEY": "answers",
    "MAX_CHOICE_SESSIONS": "answers",
    "MAX_SESSION_CHOICES": "answers",
    "SITE_FILE_NAME": "answers",
    "ArtifactBuild": "answers",
    "ArtifactBuildStats": "answers",
    "ChoiceReservation": "answers",
    "ChoiceReservationStore": "answers",
    "ChoiceUnavailable": "answers",
    "Clock": "answers",
    "DecisionObserver": "answers",
    "DeterministicAnswerAdapter": "answers",
    "DeterministicAnswerResolver": "answers",
    "FallbackMode": "answers",
    "LeftOut": "answers",
    "build_local_knowledge_artifact": "answers",
    "create_deterministic_answer_adapter": "answers",
    "create_deterministic_answer_resolver": "answers",
    "write_artifact_build": "answers",
    "NO_GROUNDED_SOURCES": "assistant",
    "DocsAssistant": "assistant",
    "RelevanceRule": "assistant",
    "ask_docs": "assistant",
    "create_docs_assistant": "assistant",
    "CHUNK_TYPES": "runtime",
    "UNSCOPED_SESSION_ID": "runtime",
    "AdapterCapabilities": "runtime",
    "AdapterContext": "runtime",
    "AdapterRequest": "runtime",
    "ChatAdapter": "runtime",
    "ChatMessage": "runtime",
    "ChatSource": "runtime",
    "ChunkType": "runtime",
    "MessageRole": "runtime",
    "MessageStatus": "runtime",
    "SessionAwareChatAdapter": "runtime",
    "StreamChunk": "runtime",
    "create_scoped_source": "runtime",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ARTIFACT_FILE_NAME",
    "CHOICE_UNAVAILABLE",
    "CHUNK_TYPES",
    "DEFAULT_ARTIFACT_HREF",
    "ESCALATION_METADATA_KEY",
    "MAX_CHOICE_SESSIONS",
    "MAX_SESSION_CHOICES",
    "NO_GROUNDED_SOURCES",
    "SITE_FILE_NAME",
    "UNSCOPED_SESSION_ID",
    "AdapterCapabilities",
    "AdapterContext",
    "AdapterRequest",
    "ArtifactBuild",
    "ArtifactBuildStats",
    "ChatAdapter",
    "ChatMessage",
    "ChatSource",
    "ChoiceReservation",
    "ChoiceReservationStore",
    "ChoiceUnavailable",
    "ChunkType",
    "Clock",
    "DecisionObserver",
    "DeterministicAnswerAdapter",
    "DeterministicAnswerResolver",
    "DocsAssistant",
    "FallbackMode",
    "LeftOut",
    "MessageRole",
    "MessageStatus",
    "RelevanceRule",
    "SessionAwareChatAdapter",
    "StreamChunk",
    "__version__",
    "ask_docs",
    "build_local_knowledge_artifact",
    "create_deterministic_answer_adapter",
    "create_deterministic_answer_resolver",
    "create_docs_assistant",
    "create_scoped_source",
    "write_artifact_build",
]
