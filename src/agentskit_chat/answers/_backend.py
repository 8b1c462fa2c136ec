"""Watching a backend's stream: pass every chunk through, attach one honest answer envelope.

``docs/answers.md``. The backend's chunks reach the consumer unchanged
and immediately. Its text is observed up to 262,144 UTF-16 units; when the turn ends, the
observed text becomes a ``high/backend`` answer envelope (with the citations of any valid
``source-list`` components), or a low ``corrupt`` escalation when it broke a limit or is not
well-formed ordered content. Envelopes a backend attaches itself are never trusted.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any, Final

from agentskit_chat.protocol import (
    ANSWER_PROTOCOL,
    AnswerBody,
    AnswerEnvelope,
    BackendProvenance,
    Citation,
    ComponentPart,
    EscalationAnswer,
    ExactAnswer,
    TextPart,
    decode_assistant_content,
)
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.protocol._text import js_trim, utf16_len
from agentskit_chat.runtime import ChatSource, StreamChunk

from ._envelopes import (
    BACKEND_INCOMPLETE,
    BACKEND_INVALID,
    BACKEND_OVERFLOW,
    BACKEND_TOO_LONG,
    confidence,
    escalation,
)
from ._projection import source_list_sources

__all__ = [
    "OBSERVATION_LIMIT",
    "ObservedBackendSource",
    "closing_iterator",
    "finalize_backend_answer",
]

#: How much backend text (UTF-16 units) is observed before the answer counts as overflowed.
OBSERVATION_LIMIT: Final = 262144
#: The longest answer Markdown an envelope can carry.
ANSWER_TEXT_LIMIT: Final = 16384
_MAX_CITATIONS: Final = 8
_MARK: Final = "\x1e"


def _corrupt(escalated: EscalationAnswer, message: str) -> EscalationAnswer:
    return escalation("corrupt", message, escalated.query, escalated.normalized_query)


def _citations(parts: tuple[TextPart | ComponentPart, ...]) -> tuple[Citation, ...]:
    citations: list[Citation] = []
    for part in parts:
        if not isinstance(part, ComponentPart) or part.frame.component_key != "source-list":
            continue
        for source in source_list_sources(part.frame.props) or ():
            if "url" not in source:
                continue
            citation = validate_model(
                Citation, {"id": source["id"], "title": source["title"], "href": source["url"]}
            )
            if citation is not None:
                citations.append(citation)
    return tuple(citations[:_MAX_CITATIONS])


def finalize_backend_answer(
    content: str,
    *,
    overflowed: bool,
    escalated: EscalationAnswer,
    provenance: BackendProvenance,
) -> AnswerEnvelope | None:
    """The envelope for observed backend text, or ``None`` when there is nothing to attach.

    Checks, in order: overflow of the observation limit; content starting with U+001E that is
    not valid ordered content; valid but unfinished ordered content; then the Markdown (the text
    records, or the plain text), trimmed: empty means no envelope, over 16,384 units is corrupt.
    """
    if overflowed:
        return _corrupt(escalated, BACKEND_OVERFLOW)
    citations: tuple[Citation, ...] = ()
    if content.startswith(_MARK):
        decoded = decode_assistant_content(content)
        if not decoded.ok:
            return _corrupt(escalated, BACKEND_INVALID)
        if not decoded.complete:
            return _corrupt(escalated, BACKEND_INCOMPLETE)
        markdown = js_trim(
            "".join(part.text for part in decoded.parts if isinstance(part, TextPart))
        )
        citations = _citations(decoded.parts)
    else:
        markdown = js_trim(content)
    if not markdown:
        return None
    if utf16_len(markdown) > ANSWER_TEXT_LIMIT:
        return _corrupt(escalated, BACKEND_TOO_LONG)
    return ExactAnswer(
        protocol=ANSWER_PROTOCOL,
        version=1,
        outcome="answer",
        query=escalated.query,
        normalized_query=escalated.normalized_query,
        answer=AnswerBody(markdown=markdown, citations=citations),
        provenance=provenance,
        confidence=confidence("high", "backend"),
    )


@contextlib.asynccontextmanager
async def closing_iterator(iterator: AsyncIterator[Any]) -> AsyncIterator[AsyncIterator[Any]]:
    """Close ``iterator`` on the way out, however the consumer leaves (``aclosing`` for any
    async iterator that has ``aclose``)."""
    try:
        yield iterator
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


class ObservedBackendSource:
    """A backend source wrapped by the decision observer.

    ``abort()`` is forwarded to the backend unchanged. When the consumer stops iterating or its
    task is cancelled, the backend's iterator is closed.
    """

    __slots__ = ("_escalated", "_notify", "_provenance", "_source")

    def __init__(
        self,
        source: ChatSource,
        *,
        escalated: EscalationAnswer,
        provenance: BackendProvenance,
        notify: Callable[[AnswerEnvelope], None],
    ) -> None:
        self._source = source
        self._escalated = escalated
        self._provenance = provenance
        self._notify = notify

    def abort(self) -> None:
        """Abort the backend source."""
        self._source.abort()

    def _finalize(self, observed: list[str], overflowed: bool) -> AnswerEnvelope | None:
        return finalize_backend_answer(
            "".join(observed),
            overflowed=overflowed,
            escalated=self._escalated,
            provenance=self._provenance,
        )

    async def stream(self) -> AsyncIterator[StreamChunk]:
        """The backend's chunks, with the final answer envelope attached to ``done``.

        A ``done`` chunk gets ``metadata["answer"]`` (replacing any the backend set) unless an
        ``error`` chunk came first; when the backend ends without ``done`` or ``error``, a
        ``done`` chunk carrying the answer is added. Exceptions of the backend propagate.
        """
        observed: list[str] = []
        units = 0
        overflowed = completed = failed = False
        async with closing_iterator(self._source.stream()) as chunks:
            async for chunk in chunks:
                if chunk.type == "text" and not overflowed:
                    incoming = chunk.content or ""
                    size = utf16_len(incoming)
                    if size > OBSERVATION_LIMIT - units:
                        # The envelope is corrupt from here on whatever follows: stop keeping text.
                        overflowed = True
                    elif size:
                        observed.append(incoming)
                        units += size
                elif chunk.type == "error":
                    failed = True
                if chunk.type != "done":
                    yield chunk
                    continue
                completed = True
                answer = None if failed else self._finalize(observed, overflowed)
                if answer is None:
                    yield chunk
                    continue
                self._notify(answer)
                yield replace(chunk, metadata={**(chunk.metadata or {}), "answer": answer})
        if completed or failed:
            return
        answer = self._finalize(observed, overflowed)
        if answer is not None:
            self._notify(answer)
            yield StreamChunk("done", metadata={"answer": answer})
