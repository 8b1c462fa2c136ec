"""The deterministic answer plane: exact local answers, choices, and honest escalations.

:func:`create_deterministic_answer_resolver` answers a question from a verified knowledge
artifact by exact normalized match only. :func:`create_deterministic_answer_adapter` puts that
resolver in front of any backend chat adapter, streams local answers and choices as ordered
assistant content, and hands out single-use reservations for choice clicks. The conformance
cases live in :mod:`agentskit_chat.answers.fixtures`. See ``docs/answers.md``.
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
from ._resolver import (
    Clock,
    DeterministicAnswerResolver,
    create_deterministic_answer_resolver,
)

__all__ = [
    "CHOICE_UNAVAILABLE",
    "ESCALATION_METADATA_KEY",
    "MAX_CHOICE_SESSIONS",
    "MAX_SESSION_CHOICES",
    "ChoiceReservation",
    "ChoiceReservationStore",
    "ChoiceUnavailable",
    "Clock",
    "DecisionObserver",
    "DeterministicAnswerAdapter",
    "DeterministicAnswerResolver",
    "FallbackMode",
    "create_deterministic_answer_adapter",
    "create_deterministic_answer_resolver",
]
