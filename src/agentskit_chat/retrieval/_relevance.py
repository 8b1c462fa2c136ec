"""When retrieved text is relevant enough to answer from, and when it is not.

A full-text search finds *something* for almost any question that shares one word with the
docs. The docs assistant must not build an answer out of that, so each retrieved section is
judged by one rule before it may ground an answer. A section is **relevant** when all three of
these hold:

1. **Coverage.** The section (its title and its text) contains at least ``min_coverage`` (half)
   of the question's content terms, each term weighted by how rare it is in the corpus
   (inverse document frequency over sections). A word that is on every page, such as the
   product's name, counts for almost nothing; a word the docs never use counts for a lot, so a
   question about something the docs do not cover cannot pass on common words alone.
2. **Title.** At least ``min_title_terms`` (one) of the question's content terms is in the
   section's title (the page title and the headings above the section), unless the section
   covers at least ``strong_coverage`` (three quarters) of the question on its own.
3. **Score.** Its search score is at least ``min_score`` (a floor on the negated BM25 score
   of the SQLite index, which rules out matches made only of words that are everywhere).

Content terms are the words of the question, NFKC case-folded, with English function words and
question scaffolding ("how", "can", "happens", "way") dropped and the Snowball English stemmer
applied, so "limits", "limiting" and "limiter" are one term (:mod:`agentskit_chat._terms`, the
same analysis extractive answers use). A question with no content term is
relevant to nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agentskit_chat._terms import content_terms, term_set
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import GroundedSource

from ._results import RetrievedChunk

if TYPE_CHECKING:
    from agentskit_chat.service import RetrievalRequest

__all__ = [
    "Relevance",
    "RelevanceRule",
    "RelevantRetriever",
    "Searcher",
    "TermWeights",
    "content_terms",
]


class TermWeights:
    """How rare each term is across the sections of a corpus (inverse document frequency).

    ``weight(term) = ln((N + 1) / (df + 0.5))`` for ``N`` sections of which ``df`` contain the
    term: near 0 for a term in every section, highest for a term in none.
    """

    def __init__(self, frequencies: Counter[str], sections: int) -> None:
        self._frequencies = frequencies
        self._sections = sections

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> TermWeights:
        """Count, for each term, how many of ``texts`` (one per section) contain it."""
        frequencies: Counter[str] = Counter()
        sections = 0
        for text in texts:
            sections += 1
            frequencies.update(term_set(text))
        return cls(frequencies, sections)

    @property
    def sections(self) -> int:
        """How many sections were counted."""
        return self._sections

    def weight(self, term: str) -> float:
        """The weight of ``term``: always above 0."""
        return math.log((self._sections + 1) / (self._frequencies.get(term, 0) + 0.5))


@dataclass(frozen=True, slots=True)
class Relevance:
    """The verdict on one retrieved section.

    Attributes:
        relevant: Whether all three conditions hold.
        coverage: The weighted share (0..1) of the question's content terms in the section.
        title_terms: How many content terms are in the section's title.
        score: The section's search score.
    """

    relevant: bool
    coverage: float
    title_terms: int
    score: float


@dataclass(frozen=True, slots=True)
class RelevanceRule:
    """The relevance rule's thresholds (see the module documentation).

    Attributes:
        min_coverage: Weighted share of the question's content terms a section must contain.
        min_title_terms: How many content terms its title must contain.
        strong_coverage: The coverage from which no title match is needed (above 1: always
            needed).
        min_score: The floor on its search score (negated BM25 for the SQLite index).

    Raises:
        ConfigurationError: ``min_coverage`` is not in 0..1, ``min_title_terms`` is negative,
            or ``min_score`` is not a finite number.
    """

    min_coverage: float = 0.5
    min_title_terms: int = 1
    strong_coverage: float = 0.75
    min_score: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.min_coverage, bool) or not 0 <= self.min_coverage <= 1:
            raise ConfigurationError("min_coverage must be a number from 0 to 1")
        if isinstance(self.strong_coverage, bool) or not self.strong_coverage >= 0:
            raise ConfigurationError("strong_coverage must be a number from 0 up")
        if type(self.min_title_terms) is not int or self.min_title_terms < 0:
            raise ConfigurationError("min_title_terms must be a whole number")
        if isinstance(self.min_score, bool) or not math.isfinite(self.min_score):
            raise ConfigurationError("min_score must be a finite number")

    def judge(
        self, question: Sequence[str], hit: RetrievedChunk, weights: TermWeights
    ) -> Relevance:
        """Judge ``hit`` for a question whose content terms are ``question``."""
        if not question:
            return Relevance(False, 0.0, 0, hit.score)
        title = term_set(hit.title)
        present = title | term_set(hit.text)
        total = sum(weights.weight(term) for term in question)
        covered = sum(weights.weight(term) for term in question if term in present)
        coverage = covered / total if total > 0 else 0.0
        in_title = sum(1 for term in question if term in title)
        relevant = (
            coverage >= self.min_coverage
            and (in_title >= self.min_title_terms or coverage >= self.strong_coverage)
            and hit.score >= self.min_score
        )
        return Relevance(relevant, coverage, in_title, hit.score)

    def select(
        self, question: str, hits: Sequence[RetrievedChunk], weights: TermWeights
    ) -> list[RetrievedChunk]:
        """The relevant ``hits``, in their order (best first)."""
        terms = content_terms(question)
        return [hit for hit in hits if self.judge(terms, hit, weights).relevant]


class Searcher(Protocol):
    """What the relevant retriever needs from an index: ranked search."""

    async def search(self, query: str, top_k: int | None = None) -> list[RetrievedChunk]:
        """The best chunks for ``query``, best first."""
        ...


class RelevantRetriever:
    """The :class:`~agentskit_chat.service.Retriever` port over an index, keeping relevant hits.

    It searches the ``top_k`` best sections for the question and returns those the rule finds
    relevant, as grounded sources, best first. None relevant → no sources, so the Ask service
    answers ``ASK_NO_GROUNDED_SOURCES`` instead of answering from weakly related text.
    """

    def __init__(
        self,
        index: Searcher,
        weights: TermWeights,
        rule: RelevanceRule | None = None,
        *,
        top_k: int = 8,
    ) -> None:
        self._index = index
        self._weights = weights
        self._rule = rule or RelevanceRule()
        self._top_k = top_k

    @property
    def rule(self) -> RelevanceRule:
        """The rule in force."""
        return self._rule

    async def relevant(self, question: str) -> list[RetrievedChunk]:
        """The relevant sections for ``question``, best first."""
        hits = await self._index.search(question, self._top_k)
        return self._rule.select(question, hits, self._weights)

    async def retrieve(self, request: RetrievalRequest) -> list[GroundedSource]:
        """The ``Retriever`` port: relevant sections for ``request.query`` as sources."""
        return [
            source
            for hit in await self.relevant(request.query)
            if (source := hit.to_source()) is not None
        ]
