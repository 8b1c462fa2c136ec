"""A grounded generator that needs no model: it answers with the sources' own words.

The answer is composed from the structure of the retrieved sections (:func:`compose_answer`):
the best section's passage that answers, with its list, table or command kept as Markdown, and
up to two more sections when the question has parts the first does not cover, each cited
``[n]`` (``n`` is the source's 1-based position, the order of the ``cite`` event). When no part
of the sources shares a term with the question, the answer is a fixed sentence saying no
grounded sources were found, never a guess.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Final

import anyio.lowlevel
import anyio.to_thread

from agentskit_chat._terms import by_default, corrected, followup_question, words
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import AskUsage, GroundedSource
from agentskit_chat.service import CitedSources, GenerationRequest, TextDelta, UsageReport

from ._compose import NO_GROUNDED_ANSWER, compose_answer, compose_cited

__all__ = ["NO_GROUNDED_ANSWER", "ExtractiveGenerator"]

_WORD: Final = re.compile(r"[^\W_]+")
_DELTA: Final = re.compile(r"[^\n]*\n|[^\n]+")
_OUTPUT_WORD: Final = re.compile(r"\S+")
#: Up to this many excerpt characters, composing is quicker than a hop to a worker thread.
_INLINE_CHARS: Final = 4096
#: The most sections an answer may draw on.
_MAX_SECTIONS: Final = 8


class ExtractiveGenerator:
    """The :class:`~agentskit_chat.service.Generator` port, with no model behind it.

    Args:
        max_answer_chars: The answer's length budget: the parts of a section that do not fit
            are left out (the first section's best passage always comes, bounded by its
            source's excerpt).
        max_sections: How many sections an answer may draw on (1..8).
        model: The ``model`` reported in usage (and so in the ``done`` event).

    Raises:
        ConfigurationError: for a bound out of range or a blank model name.

    Usage counts words, not model tokens: ``inputTokens`` are the words of the question and
    the excerpts, ``outputTokens`` the words of the answer; ``costUsd`` is 0.
    """

    def __init__(
        self,
        *,
        max_answer_chars: int = 800,
        max_sections: int = 3,
        model: str = "extractive",
    ) -> None:
        if type(max_answer_chars) is not int or max_answer_chars < 1:
            raise ConfigurationError("max_answer_chars must be a positive integer.")
        if type(max_sections) is not int or not 1 <= max_sections <= _MAX_SECTIONS:
            raise ConfigurationError("max_sections must be an integer from 1 to 8.")
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError("The extractive generator needs a model name.")
        self._max_answer_chars = max_answer_chars
        self._max_sections = max_sections
        self._model = model

    def compose(self, query: str, sources: Sequence[GroundedSource]) -> str:
        """The answer for ``query`` from ``sources``, deterministically (no I/O)."""
        return compose_answer(
            query, sources, max_sections=self._max_sections, max_chars=self._max_answer_chars
        )

    def compose_cited(
        self, query: str, sources: Sequence[GroundedSource]
    ) -> tuple[str, tuple[int, ...]]:
        """:meth:`compose`, citing only the sources the answer uses, once each: the answer,
        in which ``[n]`` is the n-th cited source, and their 0-based positions in
        ``sources``."""
        return compose_cited(
            query, sources, max_sections=self._max_sections, max_chars=self._max_answer_chars
        )

    async def generate(
        self, request: GenerationRequest
    ) -> AsyncIterator[TextDelta | UsageReport | CitedSources]:
        """Stream the composed answer a line at a time, then usage (``model: extractive``).

        The question is read in its conversation: an elliptic follow-up ("and for Redis?")
        is answered as the previous question written out with it, and a misspelled word is read
        as the word the sources write one edit away. The answer cites only the sources it
        uses, once each: it says which first
        (:class:`~agentskit_chat.service.CitedSources`), so the ``cite`` event lists just
        those, and ``[n]`` is the n-th of them.

        The answer is composed whole before the first delta, so finer deltas would only pretend
        to stream; a line each keeps every layer above (events, records, snapshots) small.
        Output tokens are counted as words.

        Scoring is CPU work: for large excerpts it runs in a worker thread, so the event loop
        keeps serving other streams meanwhile.
        """
        query = _question(request)
        size = sum(len(source.excerpt) for source in request.sources)
        if size <= _INLINE_CHARS:
            answer, cited = self.compose_cited(query, request.sources)
        else:
            answer, cited = await anyio.to_thread.run_sync(
                self.compose_cited, query, request.sources
            )
        if cited:
            yield CitedSources(cited)
        deltas = _DELTA.findall(answer)
        for delta in deltas:
            yield TextDelta(delta)
            # Let other streams run between lines; cancellation lands here too.
            await anyio.lowlevel.checkpoint()
        written = len(_OUTPUT_WORD.findall(answer))
        read = len(_WORD.findall(request.query)) + sum(
            len(_WORD.findall(source.excerpt)) for source in request.sources
        )
        yield UsageReport(
            AskUsage(
                input_tokens=read,
                output_tokens=written,
                total_tokens=read + written,
                cost_usd=0,
                model=self._model,
            )
        )


def _question(request: GenerationRequest) -> str:
    """The question answered: an elliptic follow-up written out with the previous question,
    and a misspelled word read as the word the sources write one edit away."""
    earlier = [m.content for m in request.messages[:-1] if m.role == "user"]
    question = by_default(followup_question(request.query, earlier))
    vocabulary = Counter(
        word for source in request.sources for word in words(f"{source.title}\n{source.excerpt}")
    )
    return corrected(question, vocabulary)[0]
