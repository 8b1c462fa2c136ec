"""The deterministic answer resolver: exact answers from a verified artifact, or nothing.

``docs/answers.md``. A question is answered locally only when its
normalized form is exactly an alias of one artifact entry; several entries make a ``choices``
envelope; everything else is a low-confidence escalation. No token, prefix, fuzzy, semantic or
model matching is ever performed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from agentskit_chat.protocol import (
    ANSWER_PROTOCOL,
    AnswerBody,
    AnswerEnvelope,
    ChoicesAnswer,
    Diagnostic,
    ExactAnswer,
    KnowledgeEntry,
    LocalKnowledgeArtifact,
    LocalProvenance,
    Suggestion,
    normalize_knowledge_key,
    verify_local_knowledge_artifact,
)
from agentskit_chat.protocol._text import truncate_utf16, utf16_len
from agentskit_chat.protocol._time import epoch_ms

from ._envelopes import (
    CHOICES,
    CORRUPT,
    MISS,
    QUERY_MAX_UNITS,
    STALE,
    UNAVAILABLE,
    confidence,
    construct,
    escalation,
    truncate_query,
)

__all__ = ["Clock", "DeterministicAnswerResolver", "create_deterministic_answer_resolver"]

#: A clock: returns an aware ``datetime``, or epoch milliseconds.
Clock = Callable[[], datetime | int | float]

MAX_SUGGESTIONS: Final = 8
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS: Final = timedelta(milliseconds=1)
_UNVERIFIED: Final = Diagnostic(
    "DETERMINISTIC_INVALID_PAYLOAD", "Deterministic artifact integrity could not be verified."
)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def datetime_ms(value: datetime) -> int:
    """Epoch milliseconds of an aware ``datetime``.

    Raises:
        ValueError: when ``value`` is naive.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("the clock must return a timezone-aware datetime")
    return (value - _EPOCH) // _ONE_MS


def clock_ms(now: Clock | None) -> Callable[[], int | float]:
    """A function returning epoch milliseconds from ``now`` (the wall clock when ``None``)."""
    if now is None:
        return _wall_clock_ms

    def read() -> int | float:
        value = now()
        return datetime_ms(value) if isinstance(value, datetime) else value

    return read


class DeterministicAnswerResolver:
    """Answers questions from one verified artifact. Build it with
    :func:`create_deterministic_answer_resolver`.

    A resolver whose artifact did not verify is *corrupt*: it answers every question with a
    ``corrupt`` escalation. Both methods are synchronous, pure apart from reading the clock, and
    safe to call from any number of tasks or threads.
    """

    __slots__ = (
        "_answers",
        "_artifact",
        "_choices",
        "_clock",
        "_diagnostic",
        "_entries",
        "_expires_ms",
        "_index",
    )

    def __init__(
        self,
        *,
        artifact: LocalKnowledgeArtifact | None,
        diagnostic: Diagnostic | None,
        clock: Callable[[], int | float],
    ) -> None:
        self._artifact = artifact
        self._diagnostic = diagnostic
        self._clock = clock
        self._index: dict[str, tuple[str, ...]] = {}
        self._entries: dict[str, KnowledgeEntry] = {}
        self._answers: dict[str, dict[str, Any]] = {}
        self._choices: dict[str, dict[str, Any]] = {}
        self._expires_ms: int | None = None
        if artifact is not None:
            self._build(artifact)

    def _build(self, artifact: LocalKnowledgeArtifact) -> None:
        if artifact.expires_at is not None:
            self._expires_ms = epoch_ms(artifact.expires_at)
        self._index = dict(artifact.alias_index)
        self._entries = {entry.id: entry for entry in artifact.entries}

    # Envelope templates are built on first use and cached: construction stays a verification
    # plus an index copy, and a template is only ever built from the verified artifact. Two
    # threads building the same template at once build equal ones; either may be kept.

    def _answer_template(self, entry_id: str) -> dict[str, Any]:
        template = self._answers.get(entry_id)
        if template is None:
            artifact, entry = self._verified(), self._entries[entry_id]
            body = construct(
                AnswerBody,
                {"markdown": entry.answer.markdown, "citations": entry.answer.citations},
            )
            template = self._answers[entry_id] = {
                "protocol": ANSWER_PROTOCOL,
                "version": 1,
                "outcome": "answer",
                "query": "",
                "normalized_query": "",
                "answer": body,
                "provenance": self._provenance(artifact, (entry_id,)),
                "confidence": confidence("high", "exact"),
            }
        return template

    def _choices_template(self, key: str, ids: tuple[str, ...]) -> dict[str, Any]:
        template = self._choices.get(key)
        if template is None:
            offered = ids[:MAX_SUGGESTIONS]
            suggestions = tuple(
                construct(
                    Suggestion,
                    {
                        "id": entry_id,
                        "label": self._entries[entry_id].label,
                        "value": self._unique_alias(self._entries[entry_id]),
                    },
                )
                for entry_id in offered
            )
            template = self._choices[key] = {
                "protocol": ANSWER_PROTOCOL,
                "version": 1,
                "outcome": "choices",
                "query": "",
                "normalized_query": "",
                "message": CHOICES,
                "suggestions": suggestions,
                "provenance": self._provenance(self._verified(), offered),
                "confidence": confidence("medium", "ambiguous"),
            }
        return template

    def _verified(self) -> LocalKnowledgeArtifact:
        assert self._artifact is not None
        return self._artifact

    @staticmethod
    def _provenance(artifact: LocalKnowledgeArtifact, ids: tuple[str, ...]) -> LocalProvenance:
        return construct(
            LocalProvenance,
            {
                "source": "local",
                "artifact_id": artifact.artifact_id,
                "content_hash": artifact.content_hash,
                "entry_ids": ids,
            },
        )

    def _unique_alias(self, entry: KnowledgeEntry) -> str:
        for value in entry.match.values:
            if len(self._index.get(normalize_knowledge_key(value), ())) == 1:
                return value
        return entry.match.values[0] if entry.match.values else entry.id

    # --- public surface ----------------------------------------------------------------------

    @property
    def is_corrupt(self) -> bool:
        """True when the artifact did not verify: every question then escalates as corrupt."""
        return self._artifact is None

    @property
    def artifact(self) -> LocalKnowledgeArtifact | None:
        """The verified copy of the artifact this resolver answers from (``None`` if corrupt)."""
        return self._artifact

    @property
    def diagnostic(self) -> Diagnostic | None:
        """Why the artifact did not verify (``None`` when it did). Never echoes input."""
        return self._diagnostic

    def _answer(self, entry_id: str, query: str, normalized: str) -> ExactAnswer:
        values = self._answer_template(entry_id).copy()
        values["query"] = query
        values["normalized_query"] = normalized
        return construct(ExactAnswer, values)

    def resolve(self, query: str) -> AnswerEnvelope:
        """Decide what to answer to ``query``.

        Checks, in order: a corrupt artifact; staleness (``expiresAt`` at or before now); a
        query over 512 UTF-16 units; a normalized query over 512 units; then the exact lookup:
        no entry is a ``miss``, several are ``choices`` (the first 8, each with its unique
        alias as ``value``), one is the entry's answer.

        Returns:
            A validated ``ExactAnswer``, ``ChoicesAnswer`` or ``EscalationAnswer``.

        Example:
            >>> from agentskit_chat.protocol.fixtures import LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE as A
            >>> resolver = create_deterministic_answer_resolver(
            ...     A, expected_content_hash=A["contentHash"], expected_site_id=A["siteId"],
            ...     now=lambda: datetime(2026, 7, 13, 12, tzinfo=UTC),
            ... )
            >>> resolver.resolve("  INSTALL CLI ").answer.markdown
            'Run `npm install agentskit`.'
        """
        if self._artifact is None:
            return escalation("corrupt", CORRUPT, truncate_query(query))
        if self._expires_ms is not None and self._expires_ms <= self._clock():
            return escalation("stale", STALE, truncate_query(query))
        if len(query) > QUERY_MAX_UNITS // 2 and utf16_len(query) > QUERY_MAX_UNITS:
            return escalation("miss", MISS, truncate_query(query))
        normalized = normalize_knowledge_key(query)
        if len(normalized) > QUERY_MAX_UNITS // 2 and utf16_len(normalized) > QUERY_MAX_UNITS:
            return escalation("miss", MISS, query, truncate_utf16(normalized, QUERY_MAX_UNITS))
        ids = self._index.get(normalized)
        if ids is None:
            return escalation("miss", MISS, query, normalized)
        if len(ids) == 1:
            return self._answer(ids[0], query, normalized)
        values = self._choices_template(normalized, ids).copy()
        values["query"] = query
        values["normalized_query"] = normalized
        return construct(ChoicesAnswer, values)

    def resolve_choice(self, choice_id: str, original_query: str) -> AnswerEnvelope:
        """Answer the choice ``choice_id`` that was offered for ``original_query``.

        Only an entry among the (first 8) entries offered for that query is accepted, and a
        single-entry match is accepted too. Checks, in order: a corrupt artifact; staleness; a
        query over 512 units; then whether ``choice_id`` was offered. Anything else is a
        ``miss`` whose message says the selected answer is unavailable.
        """
        if self._artifact is None:
            return escalation("corrupt", CORRUPT, truncate_query(original_query))
        if self._expires_ms is not None and self._expires_ms <= self._clock():
            return escalation("stale", STALE, truncate_query(original_query))
        query = original_query
        if len(query) > QUERY_MAX_UNITS // 2 and utf16_len(query) > QUERY_MAX_UNITS:
            return escalation("miss", UNAVAILABLE, truncate_query(query))
        normalized = normalize_knowledge_key(query)
        if len(normalized) > QUERY_MAX_UNITS // 2 and utf16_len(normalized) > QUERY_MAX_UNITS:
            return escalation(
                "miss", UNAVAILABLE, query, truncate_utf16(normalized, QUERY_MAX_UNITS)
            )
        offered = self._index.get(normalized, ())[:MAX_SUGGESTIONS]
        if choice_id in offered:
            return self._answer(choice_id, query, normalized)
        return escalation("miss", UNAVAILABLE, query, normalized)


def create_deterministic_answer_resolver(
    artifact: object,
    *,
    expected_content_hash: str,
    expected_site_id: str,
    now: Clock | None = None,
) -> DeterministicAnswerResolver:
    """Verify ``artifact`` against trusted anchors and build a resolver over it.

    The artifact is re-verified here, synchronously, whatever its history: the trusted options
    must be valid, it must decode within its bounds, declare ``expected_content_hash`` and
    ``expected_site_id``, and its recomputed SHA-256 must match. The resolver keeps its own
    validated copy, so later changes to ``artifact`` have no effect.

    Args:
        artifact: The candidate artifact: a parsed JSON object, JSON text or bytes, a
            ``LocalKnowledgeArtifact`` model, or ``None``.
        expected_content_hash: The trusted ``sha256:<64 hex>`` from the site configuration.
        expected_site_id: The trusted site id from the site configuration.
        now: The clock, read on every call: an aware ``datetime`` or epoch milliseconds.
            Defaults to the wall clock.

    Returns:
        A resolver. Never raises: anything wrong makes a *corrupt* resolver, which escalates
        every question (see :attr:`DeterministicAnswerResolver.diagnostic`).
    """
    clock = clock_ms(now)
    try:
        payload = artifact.to_wire() if isinstance(artifact, LocalKnowledgeArtifact) else artifact
        result = verify_local_knowledge_artifact(
            payload,
            expected_content_hash=expected_content_hash,
            expected_site_id=expected_site_id,
        )
        if result.ok:
            return DeterministicAnswerResolver(artifact=result.value, diagnostic=None, clock=clock)
        diagnostic = result.diagnostic
    except Exception:
        diagnostic = _UNVERIFIED
    return DeterministicAnswerResolver(artifact=None, diagnostic=diagnostic, clock=clock)
