"""The deterministic answer plane: exact local answers, choices, and honest escalations.

:func:`create_deterministic_answer_resolver` answers a question from a verified knowledge
artifact by exact normalized match only. :func:`create_deterministic_answer_adapter` puts that
resolver in front of any backend chat adapter, streams local answers and choices as ordered
assistant content, and hands out single-use reservations for choice clicks. The conformance
cases live in :mod:`agentskit_chat.answers.fixtures`. :func:`build_local_knowledge_artifact`
produces an artifact from a folder of Markdown. See ``docs/answers.md`` and ``docs/artifacts.md``.

:func:`render_answer` is the ``answer_commit`` renderer: an agent's final answer, validated and
laid out by code (fields, a table in Markdown/CSV/TSV/lines, or unresolved), never by prose.
See ``docs/answer-commit.md``.
"""

from __future__ import annotations

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
from ._commit import (
    AnswerReading,
    AnswerShape,
    CommittedAnswer,
    commit_answer,
    render_answer,
)
from ._commit_schema import (
    ANSWER_COMMIT_DESCRIPTION,
    ANSWER_COMMIT_TOOL_NAME,
    MAX_BASIS_CHARACTERS,
    MAX_RENDERED_ANSWER_CHARACTERS,
    answer_commit_json_schema,
    is_reserved_tool_name,
)
from ._producer import (
    ARTIFACT_FILE_NAME,
    DEFAULT_ARTIFACT_HREF,
    SITE_FILE_NAME,
    ArtifactBuild,
    ArtifactBuildStats,
    LeftOut,
    build_local_knowledge_artifact,
    write_artifact_build,
)
from ._resolver import (
    Clock,
    DeterministicAnswerResolver,
    create_deterministic_answer_resolver,
)

__all__ = [
    "ANSWER_COMMIT_DESCRIPTION",
    "ANSWER_COMMIT_TOOL_NAME",
    "ARTIFACT_FILE_NAME",
    "CHOICE_UNAVAILABLE",
    "DEFAULT_ARTIFACT_HREF",
    "ESCALATION_METADATA_KEY",
    "MAX_BASIS_CHARACTERS",
    "MAX_CHOICE_SESSIONS",
    "MAX_RENDERED_ANSWER_CHARACTERS",
    "MAX_SESSION_CHOICES",
    "SITE_FILE_NAME",
    "AnswerReading",
    "AnswerShape",
    "ArtifactBuild",
    "ArtifactBuildStats",
    "ChoiceReservation",
    "ChoiceReservationStore",
    "ChoiceUnavailable",
    "Clock",
    "CommittedAnswer",
    "DecisionObserver",
    "DeterministicAnswerAdapter",
    "DeterministicAnswerResolver",
    "FallbackMode",
    "LeftOut",
    "answer_commit_json_schema",
    "build_local_knowledge_artifact",
    "commit_answer",
    "create_deterministic_answer_adapter",
    "create_deterministic_answer_resolver",
    "is_reserved_tool_name",
    "render_answer",
    "write_artifact_build",
]
