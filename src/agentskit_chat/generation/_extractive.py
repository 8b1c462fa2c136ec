"""A grounded generator that needs no model: it answers with the sources' own sentences.

The question and every sentence of the retrieved excerpts are reduced to normalized terms (NFKC,
case-folded, stop words removed, Snowball stems: the analysis relevance uses too). Each sentence
scores the sum of the rarity (inverse sentence frequency) of the question terms it contains. The
best few sentences, at least half as good as the best one, become the answer, best first, each
followed by the ``[n]`` of its source (``n`` is the source's 1-based position, the order of the
``cite`` event). When no sentence shares a single term with the question, the answer is a fixed
sentence saying no grounded sources were found, never a guess.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Final

import anyio.lowlevel
import anyio.to_thread

from agentskit_chat._terms import STOP_WORDS, stem, words
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import AskUsage, GroundedSource
from agentskit_chat.service import GenerationRequest, TextDelta, UsageReport

__all__ = ["NO_GROUNDED_ANSWER", "ExtractiveGenerator"]

#: The whole answer when no sentence of the sources shares a term with the question.
NO_GROUNDED_ANSWER: Final = "No grounded sources were found for this question."

_WORD: Final = re.compile(r"[^\W_]+")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+(?=\S)")
_BLOCK_MARKER: Final = re.compile(r"^(?:#{1,6}\s+|>\s*|[-*+]\s+|\d{1,3}[.)]\s+)")
_FENCE: Final = re.compile(r"^\s*(```|~~~)")
_SPACES: Final = re.compile(r"\s+")
_DELTA: Final = re.compile(r"\S+\s*")
_TRAILING_JOINERS: Final = ":;,-–—"
_MIN_SENTENCE_WORDS: Final = 2
#: Up to this many excerpt characters, scoring is quicker than a hop to a worker thread.
_INLINE_CHARS: Final = 4096


def terms(text: str) -> list[str]:
    """The content terms of ``text``, in order (stop words removed, stemmed), as relevance
    reads them.

    >>> terms("How do I configure the servers?")
    ['configur', 'server']
    """
    return [
        stem(word)
        for word in words(text)
        if word not in STOP_WORDS and (len(word) > 1 or word.isdigit())
    ]


def split_sentences(excerpt: str) -> list[str]:
    """The sentences of an excerpt, with Markdown block markers and code fences removed.

    Paragraph lines are joined; headings, list items and quotes are sentences of their own.
    """
    segments: list[str] = []
    current: list[str] = []
    in_fence = False

    def flush() -> None:
        if current:
            segments.append(" ".join(current))
            current.clear()

    for raw_line in excerpt.splitlines():
        if _FENCE.match(raw_line):
            flush()
            in_fence = not in_fence
            continue
        line = raw_line.strip()
        if in_fence or not line:
            flush()
            continue
        marker = _BLOCK_MARKER.match(line)
        if marker:
            flush()
            current.append(line[marker.end() :])
            if line.startswith("#"):
                flush()
            continue
        current.append(line)
    flush()
    sentences: list[str] = []
    for segment in segments:
        for sentence in _SENTENCE_END.split(_SPACES.sub(" ", segment).strip()):
            if sentence:
                sentences.append(sentence)
    return sentences


def _cite(sentence: str, number: int) -> str:
    body = sentence.rstrip(_TRAILING_JOINERS + " ")
    if body and body[-1] in ".!?":
        return f"{body[:-1]} [{number}]{body[-1]}"
    return f"{body} [{number}]."


@dataclass(frozen=True, slots=True)
class _Candidate:
    text: str
    source: int
    position: int
    terms: frozenset[str]


class ExtractiveGenerator:
    """The :class:`~agentskit_chat.service.Generator` port, with no model behind it.

    Args:
        max_sentences: At most this many sentences in an answer.
        max_answer_chars: The answer's length budget (sentences that do not fit are skipped).
        max_sentence_chars: Longer sentences (tables, code) are never quoted.
        min_relative_score: A sentence is kept only if it scores at least this fraction of the
            best sentence, so weakly related text does not pad the answer.
        model: The ``model`` reported in usage (and so in the ``done`` event).

    Raises:
        ConfigurationError: for a non-positive bound or a fraction outside ``0..1``.

    Usage counts words, not model tokens: ``inputTokens`` are the words of the question and
    the excerpts, ``outputTokens`` the words of the answer; ``costUsd`` is 0.
    """

    def __init__(
        self,
        *,
        max_sentences: int = 3,
        max_answer_chars: int = 1200,
        max_sentence_chars: int = 600,
        min_relative_score: float = 0.5,
        model: str = "extractive",
    ) -> None:
        for value in (max_sentences, max_answer_chars, max_sentence_chars):
            if type(value) is not int or value < 1:
                raise ConfigurationError("The extractive generator bounds must be positive.")
        if not 0 <= min_relative_score <= 1:
            raise ConfigurationError("The relative score floor must be between 0 and 1.")
        if not model.strip():
            raise ConfigurationError("The extractive generator needs a model name.")
        self._max_sentences = max_sentences
        self._max_answer_chars = max_answer_chars
        self._max_sentence_chars = max_sentence_chars
        self._min_relative_score = min_relative_score
        self._model = model

    def compose(self, query: str, sources: Sequence[GroundedSource]) -> str:
        """The answer for ``query`` from ``sources``, deterministically (no I/O)."""
        wanted = frozenset(terms(query))
        candidates: list[_Candidate] = []
        for index, source in enumerate(sources):
            for position, sentence in enumerate(split_sentences(source.excerpt)):
                if len(sentence) > self._max_sentence_chars:
                    continue
                found = terms(sentence)
                if len(_WORD.findall(sentence)) < _MIN_SENTENCE_WORDS:
                    continue
                candidates.append(_Candidate(sentence, index, position, frozenset(found)))
        if not wanted or not candidates:
            return NO_GROUNDED_ANSWER
        frequency = {term: sum(1 for c in candidates if term in c.terms) for term in wanted}
        weight = {
            term: math.log(1 + len(candidates) / count)
            for term, count in frequency.items()
            if count
        }
        scored = sorted(
            ((sum(weight.get(term, 0.0) for term in wanted & c.terms), c) for c in candidates),
            key=lambda pair: (-pair[0], pair[1].source, pair[1].position),
        )
        best = scored[0][0]
        if best <= 0:
            return NO_GROUNDED_ANSWER
        chosen: list[str] = []
        seen: set[str] = set()
        used = 0
        for score, candidate in scored:
            if score <= 0 or score < best * self._min_relative_score:
                break
            key = " ".join(_WORD.findall(candidate.text.casefold()))
            if key in seen:
                continue
            piece = _cite(candidate.text, candidate.source + 1)
            extra = len(piece) + (1 if chosen else 0)
            if used + extra > self._max_answer_chars:
                continue
            seen.add(key)
            chosen.append(piece)
            used += extra
            if len(chosen) == self._max_sentences:
                break
        return " ".join(chosen) if chosen else NO_GROUNDED_ANSWER

    async def generate(self, request: GenerationRequest) -> AsyncIterator[TextDelta | UsageReport]:
        """Stream the composed answer in word-sized deltas, then usage (``model: extractive``).

        Scoring is CPU work: for large excerpts it runs in a worker thread, so the event loop
        keeps serving other streams meanwhile.
        """
        size = sum(len(source.excerpt) for source in request.sources)
        if size <= _INLINE_CHARS:
            answer = self.compose(request.query, request.sources)
        else:
            answer = await anyio.to_thread.run_sync(self.compose, request.query, request.sources)
        deltas = _DELTA.findall(answer)
        for delta in deltas:
            yield TextDelta(delta)
            # Let other streams run between words; cancellation lands here too.
            await anyio.lowlevel.checkpoint()
        read = len(_WORD.findall(request.query)) + sum(
            len(_WORD.findall(source.excerpt)) for source in request.sources
        )
        yield UsageReport(
            AskUsage(
                input_tokens=read,
                output_tokens=len(deltas),
                total_tokens=read + len(deltas),
                cost_usd=0,
                model=self._model,
            )
        )
