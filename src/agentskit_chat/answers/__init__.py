"""The deterministic answer plane: exact local answers, choices, and honest escalations.

:func:`create_deterministic_answer_resolver` answers a question from a verified knowledge
artifact by exact normalized match only. :func:`create_deterministic_answer_adapter` puts that
resolver in front of any backend chat adapter, streams local answers and choices as ordered
assistant content, and hands out single-use reservations for choice clicks. The conformance
cases live in :mod:`agentskit_chat.answers.fixtures`. :func:`build_local_knowledge_artifact`
produces an artifact from Markdown pages (:class:`SourceDocument`, :class:`DocsFolder`; reading
them from disk is :func:`agentskit_chat.retrieval.read_docs_folder`'s job). See
``docs/answers.md`` and ``docs/artifacts.md``.

The ``answer_commit`` renderer has its own package, :mod:`agentskit_chat.answer_commit`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentskit_chat._lazy import lazy_attribute as _lazy_attribute

from ._documents import MARKDOWN_SUFFIXES, DocsFolder, SourceDocument, is_markdown_name
from ._producer import (
    ARTIFACT_FILE_NAME,
    DEFAULT_ARTIFACT_HREF,
    SITE_FILE_NAME,
    ArtifactBuild,
    ArtifactBuildStats,
    LeftOut,
    build_local_knowledge_artifact,
)
from ._resolver import (
    Clock,
    DeterministicAnswerResolver,
    create_deterministic_answer_resolver,
)

if TYPE_CHECKING:
    from ._adapter import (
        ESCALATION_METADATA_KEY,
        DecisionObserver,
        DeterministicAnswerAdapter,
        FallbackMode,
        create_deterministic_answer_adapter,
    )
    from ._choices import (
        CHOICE_UNAVAILABLE,
        MAX_CHOICE_SESSIONS,
        MAX_SESSION_CHOICES,
        ChoiceReservation,
        ChoiceReservationStore,
        ChoiceUnavailable,
    )

#: Names imported when first used: the adapter needs the chat runtime and the choice
#: reservations the component wire models, which answering from a docs folder
#: (``agentskit-chat ask``) does not.
_LAZY = {
    "ESCALATION_METADATA_KEY": "._adapter",
    "DecisionObserver": "._adapter",
    "DeterministicAnswerAdapter": "._adapter",
    "FallbackMode": "._adapter",
    "create_deterministic_answer_adapter": "._adapter",
    "CHOICE_UNAVAILABLE": "._choices",
    "MAX_CHOICE_SESSIONS": "._choices",
    "MAX_SESSION_CHOICES": "._choices",
    "ChoiceReservation": "._choices",
    "ChoiceReservationStore": "._choices",
    "ChoiceUnavailable": "._choices",
}


def __getattr__(name: str) -> Any:
    return _lazy_attribute(__name__, _LAZY, globals(), name)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ARTIFACT_FILE_NAME",
    "CHOICE_UNAVAILABLE",
    "DEFAULT_ARTIFACT_HREF",
    "ESCALATION_METADATA_KEY",
    "MARKDOWN_SUFFIXES",
    "MAX_CHOICE_SESSIONS",
    "MAX_SESSION_CHOICES",
    "SITE_FILE_NAME",
    "ArtifactBuild",
    "ArtifactBuildStats",
    "ChoiceReservation",
    "ChoiceReservationStore",
    "ChoiceUnavailable",
    "Clock",
    "DecisionObserver",
    "DeterministicAnswerAdapter",
    "DeterministicAnswerResolver",
    "DocsFolder",
    "FallbackMode",
    "LeftOut",
    "SourceDocument",
    "build_local_knowledge_artifact",
    "create_deterministic_answer_adapter",
    "create_deterministic_answer_resolver",
    "is_markdown_name",
]
