"""When retrieved text is relevant enough to answer from, and when it is not.

A full-text search finds *something* for almost any question that shares one word with the
docs. The docs assistant must not build an answer out of that, so one measure decides, the
**coverage** of the question by a section: the share of the question's content terms that the
section (its title and its text) contains, each term weighted by how rare it is in the corpus
(inverse document frequency over sections) and each *name* counting ``name_weight`` times (a
word written as a name: ``GraphQL``, ``Datadog``, ``@scope/pkg``, ``snake_case``). A word on
every page, such as the product's name, counts for almost nothing; a word the docs never use
counts for a lot.

- A section is **relevant** when its coverage is at least ``min_coverage`` and, when the
  question's terms are written by two words or more (``conda-forge`` is one,
  :func:`term_groups`), it holds terms of two of them: a section holding only one thing the
  question names does not answer what the question asks of it, however rare its words.
- A question whose terms include a name that no section of the docs writes at all is relevant
  to nothing: the docs cannot say how to use what they never mention (its coverage is 0).
- When one section is relevant, the question is answered from every retrieved section whose
  coverage is at least ``keep_share`` × ``min_coverage`` (the other parts of a two-part
  question); otherwise it is refused.
- A question with parts ("X, and Y?", :func:`~agentskit_chat._terms.question_clauses`) is also
  searched part by part; each part's first section relevant to that part leads the sources,
  and the question is answered when every part has one, even if no section covers enough of
  the whole.

The defaults were chosen on the development half of a 177-question benchmark over docs this
project did not write (``bench/ask_quality.py``); ``docs/benchmarks.md`` shows the trade-off
between answered and wrong answers on the other half.

Content terms are the words of the question, NFKC case-folded, with English function words and
question scaffolding ("how", "can", "happens", "way") dropped and the Snowball English stemmer
applied, so "limits", "limiting" and "limiter" are one term (:mod:`agentskit_chat._terms`, the
same analysis extractive answers use). A question with no content term is relevant to nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agentskit_chat._terms import (
    by_default,
    content_terms,
    corrected,
    followup_question,
    name_terms,
    question_clauses,
    rooted,
    term_set,
)
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import GroundedSource

from ._command_lead import CommandSections, commands_first
from ._corpus import TITLE_SEPARATOR, MarkdownChunk
from ._page_kinds import guides_first, set_aside
from ._results import RetrievedChunk
from ._section_parts import SectionParts

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

    @property
    def frequencies(self) -> Mapping[str, int]:
        """How many counted sections contain each term (what the index cache keeps)."""
        return self._frequencies

    def occurs(self, term: str) -> bool:
        """Whether any counted section contains ``term``."""
        return self._frequencies.get(term, 0) > 0

    def weight(self, term: str) -> float:
        """The weight of ``term``: always above 0."""
        return math.log((self._sections + 1) / (self._frequencies.get(term, 0) + 0.5))


@dataclass(frozen=True, slots=True)
class Relevance:
    """The verdict on one retrieved section.

    Attributes:
        relevant: Whether its coverage reaches the rule's ``min_coverage``.
        coverage: The weighted share (0..1) of the question's content terms in the section
            (0 when the question names something the docs never write).
        unknown_names: The question's names (stemmed) that no section of the docs contains.
        score: The section's search score.
    """

    relevant: bool
    coverage: float
    unknown_names: tuple[str, ...]
    score: float


@dataclass(frozen=True, slots=True)
class RelevanceRule:
    """The relevance rule's thresholds (see the module documentation).

    Attributes:
        min_coverage: The weighted share of the question's content terms that the best
            section must contain for the question to be answered.
        name_weight: How many times a name counts (1: like any word).
        keep_share: Sections covering at least this share of ``min_coverage`` are answered
            from beside the best one (1: only relevant sections).

    Raises:
        ConfigurationError: ``min_coverage`` or ``keep_share`` is not in 0..1, or
            ``name_weight`` is below 1 or not finite.
    """

    min_coverage: float = 0.45
    name_weight: float = 2.0
    keep_share: float = 0.75

    def __post_init__(self) -> None:
        for name in ("min_coverage", "keep_share"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ConfigurationError(f"{name} must be a number from 0 to 1")
        weight = self.name_weight
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not math.isfinite(weight)
            or weight < 1
        ):
            raise ConfigurationError("name_weight must be a finite number from 1 up")

    def judge(self, question: str, hit: RetrievedChunk, weights: TermWeights) -> Relevance:
        """Judge ``hit`` for ``question``."""
        terms = content_terms(question)
        return self._judge(terms, name_terms(question), hit, weights, term_groups(question, terms))

    def _judge(
        self,
        terms: Sequence[str],
        names: frozenset[str],
        hit: RetrievedChunk,
        weights: TermWeights,
        groups: Sequence[frozenset[str]] = (),
    ) -> Relevance:
        unknown = tuple(term for term in terms if term in names and not weights.occurs(term))
        present = term_set(hit.title) | term_set(hit.text)
        coverage = 0.0 if unknown else self._coverage(terms, names, present, weights)
        relevant = coverage >= self.min_coverage and bool(terms)
        if relevant and len(groups) >= _MIN_GROUPS:
            # A question naming several things is not answered by a section holding only one
            # of them, however rare its words ("publish … to conda-forge" and "Install from
            # conda-forge").
            relevant = sum(1 for group in groups if group & present) >= _MIN_GROUPS
        return Relevance(relevant, coverage, unknown, hit.score)

    def _coverage(
        self,
        terms: Sequence[str],
        names: frozenset[str],
        present: frozenset[str],
        weights: TermWeights,
    ) -> float:
        total = covered = 0.0
        for term in terms:
            weight = weights.weight(term) * (self.name_weight if term in names else 1.0)
            total += weight
            if term in present:
                covered += weight
        return covered / total if total > 0 else 0.0

    def select(
        self,
        question: str,
        hits: Sequence[RetrievedChunk],
        weights: TermWeights,
        *,
        site_terms: frozenset[str] = frozenset(),
        overviews: frozenset[str] = frozenset(),
    ) -> list[RetrievedChunk]:
        """The hits to answer ``question`` from, in their order (best first); none when no
        hit is relevant. ``site_terms`` (the site's own name) are not counted, unless the
        question has no other term.

        Beside coverage, the first hit is relevant when its own heading is the question's
        words (at least two terms, all the question's) and search ranks it well ahead of the
        rest (:func:`heading_leads`): a question that paraphrases a section names its heading. An
        ``overviews`` hit (the link of a landing page's opening, which names every feature in
        passing) is used only when search ranks it first. A relevant hit covering clearly more
        of the question than the first (:data:`COVERING_MARGIN` times its coverage) comes first,
        unless the first leads on its heading: search ranks by how often a section writes the
        question's words, coverage by how many of them it holds. A how-to question naming a
        thing gets the relevant hits whose code holds it first, when the best hit shows no code
        of the question (:func:`~agentskit_chat.retrieval._command_lead.commands_first`).
        """
        return self._select(
            question, hits, weights, relevant=False, site_terms=site_terms, overviews=overviews
        )

    def _select(
        self,
        question: str,
        hits: Sequence[RetrievedChunk],
        weights: TermWeights,
        *,
        relevant: bool,
        site_terms: frozenset[str] = frozenset(),
        overviews: frozenset[str] = frozenset(),
        parts: bool = False,
    ) -> list[RetrievedChunk]:
        """:meth:`select`, or, when the question is known ``relevant`` otherwise (each of its
        parts is), the hits at least as good as the companions of a relevant one. For a
        question with ``parts``, each part's section leads, not the one covering most."""
        # The question is read once, not once per hit.
        terms = topic_terms(content_terms(question), site_terms)
        names = name_terms(question)
        groups = term_groups(question, terms)
        verdicts = [self._judge(terms, names, hit, weights, groups) for hit in hits]
        # A landing page's opening counts only when it ranks first.
        usable = [at == 0 or hit.href not in overviews for at, hit in enumerate(hits)]
        lead = (
            bool(hits) and not verdicts[0].unknown_names and heading_leads(terms, hits, site_terms)
        )
        if not (relevant or lead) and not any(
            verdict.relevant and use for verdict, use in zip(verdicts, usable, strict=True)
        ):
            return []
        floor = self.keep_share * self.min_coverage
        kept = [
            (hit, use and verdict.relevant, verdict.coverage)
            for at, (hit, verdict, use) in enumerate(zip(hits, verdicts, usable, strict=True))
            if (use and verdict.coverage >= floor) or (at == 0 and lead)
        ]
        if not (parts or lead):
            kept = covering_first(kept)
        # A how-to question naming a thing: a command holding it before prose about it.
        return commands_first(question, terms, names, weights.weight, kept)


#: A relevant hit whose coverage is at least this many times the first hit's comes first.
COVERING_MARGIN = 1.1


def covering_first(
    kept: list[tuple[RetrievedChunk, bool, float]],
) -> list[tuple[RetrievedChunk, bool, float]]:
    """``kept`` (hits with whether each is relevant and its coverage) with the relevant hit
    covering the most of the question first (the best ranked of equals), when it covers at
    least :data:`COVERING_MARGIN` times as much as the first."""
    if len(kept) < 2:
        return kept
    best = max(range(len(kept)), key=lambda at: (kept[at][1], kept[at][2], -at))
    if kept[best][1] and kept[best][2] >= COVERING_MARGIN * kept[0][2] > 0:
        return [kept[best], *kept[:best], *kept[best + 1 :]]
    return kept


#: A question whose terms are written by at least this many words ("conda-forge" is one) is
#: relevant only to a section holding terms of at least this many of them.
_MIN_GROUPS = 2


def term_groups(question: str, terms: Sequence[str]) -> tuple[frozenset[str], ...]:
    """``terms`` grouped by the word of ``question`` that writes them, in order: the parts of
    ``conda-forge`` or ``@scope/pkg`` are one thing the question names, not two.

    >>> groups = term_groups("Publish to conda-forge?", ("publish", "conda", "forg"))
    >>> [sorted(group) for group in groups]
    [['publish'], ['conda', 'forg']]
    """
    kept = frozenset(terms)
    groups: list[frozenset[str]] = []
    for word in question.split():
        group = frozenset(content_terms(word)) & kept
        if group and group not in groups:
            groups.append(group)
    return tuple(groups)


#: The first hit leads on its heading when its search score is at least this many times
#: every other hit's.
HEADING_MARGIN = 1.2
#: ... and its heading has at least this many terms, all the question's: one shared word is
#: what coverage already weighs ("Which license covers the weather station?" and "Licensing").
HEADING_TERMS = 2


def heading_terms(hit: RetrievedChunk, site_terms: frozenset[str] = frozenset()) -> frozenset[str]:
    """The content terms of ``hit``'s own heading (the last part of its title), without the
    site's own name."""
    heading = hit.title.rsplit(TITLE_SEPARATOR, 1)[-1]
    return frozenset(content_terms(heading)) - site_terms


def heading_leads(
    terms: Sequence[str], hits: Sequence[RetrievedChunk], site_terms: frozenset[str]
) -> bool:
    """Whether the first of ``hits`` answers on its heading: its own heading has at least
    :data:`HEADING_TERMS` terms, each one of the question's ``terms``, and its score is at
    least :data:`HEADING_MARGIN` times every other hit's, of which there is at least one
    ("How do I start a new project?" and the section "New project")."""
    if not hits:
        return False
    own = heading_terms(hits[0], site_terms)
    if len(own) < HEADING_TERMS or not own <= set(terms):
        return False
    first = hits[0].score
    rest = [hit.score for hit in hits[1:]]
    return first > 0 and bool(rest) and all(first >= HEADING_MARGIN * score for score in rest)


def topic_terms(terms: tuple[str, ...], site_terms: frozenset[str]) -> tuple[str, ...]:
    """``terms`` without the site's own name, unless nothing else is left."""
    kept = tuple(term for term in terms if term not in site_terms)
    return kept or terms


#: How many sections are searched for each part of a question with parts.
_PART_TOP_K = 3


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

    The question is read in its conversation: an elliptic follow-up ("and for Redis?") is
    written out with the previous question (:func:`~agentskit_chat._terms.followup_question`),
    and, given the corpus's ``vocabulary`` (how often each folded word occurs), a misspelled
    word is read as the corpus word one edit away. ``site_terms`` are the terms of the site's
    own name (the docs assistant passes the root page's title): every page is about the site,
    so a question's "with PyMdown Extensions" says nothing about which page answers it, and
    those terms are not counted (unless the question has no other term). ``overviews`` are the
    links of landing pages' openings (the docs assistant passes the root page's): used only
    when search ranks one first.

    ``sections`` are the corpus's chunks, in which the relevant sections' other parts are
    looked up (:class:`~agentskit_chat.retrieval._section_parts.SectionParts`): a "How do I
    …?" question gets the part of a long section holding its command when search found only
    another part, and an option the best section names brings its row of the page's option
    table, right after it.
    """

    def __init__(
        self,
        index: Searcher,
        weights: TermWeights,
        rule: RelevanceRule | None = None,
        *,
        top_k: int = 8,
        vocabulary: Mapping[str, int] | None = None,
        site_terms: Iterable[str] = (),
        overviews: Iterable[str] = (),
        sections: Iterable[MarkdownChunk] = (),
    ) -> None:
        self._index = index
        self._weights = weights
        self._rule = rule or RelevanceRule()
        self._top_k = top_k
        self._vocabulary = vocabulary
        self._site_terms = frozenset(site_terms)
        self._overviews = frozenset(overviews)
        chunks = tuple(sections)
        self._parts = SectionParts(chunks)
        self._commands = CommandSections(chunks)

    @property
    def rule(self) -> RelevanceRule:
        """The rule in force."""
        return self._rule

    async def relevant(self, question: str) -> list[RetrievedChunk]:
        """The relevant sections for ``question``, best first.

        A question with parts ("X, and Y?") is also searched part by part (each part with
        the context before a colon or dash): the first of a part's few best sections that is
        relevant to that part comes first, in the parts' order, so the section answering the
        second part is not crowded out by the first part's pages. Such a question is answered
        when one section is relevant to the whole question, or each part has one.
        """
        hits = guides_first(question, await self._index.search(question, self._top_k))
        context, clauses = question_clauses(question)
        if len(clauses) < 2:
            selected = self._rule.select(
                question,
                hits,
                self._weights,
                site_terms=self._site_terms,
                overviews=self._overviews,
            )
            # A how-to question's thing: the command using it leads (see _command_lead).
            terms = topic_terms(content_terms(question), self._site_terms)
            names, groups = name_terms(question), term_groups(question, terms)
            selected = self._commands.leading(
                question,
                (terms, names, self._weights.weight),
                selected,
                lambda hit: self._rule._judge(terms, names, hit, self._weights, groups).relevant,
            )
            return self._parts.joined(question, set_aside(question, selected), self._site_terms)
        names = name_terms(question)
        firsts: list[RetrievedChunk] = []
        parts = 0
        for clause in clauses:
            part = f"{context} {clause}".strip()
            terms = topic_terms(content_terms(part), self._site_terms)
            if not terms:
                continue
            parts += 1
            found = guides_first(question, await self._index.search(part, _PART_TOP_K))
            best = next(
                (
                    hit
                    for hit in found
                    if self._rule._judge(
                        terms, names, hit, self._weights, term_groups(part, terms)
                    ).relevant
                ),
                None,
            )
            if best is not None:
                firsts.append(best)
        each_part = len(firsts) == parts > 1
        kept = self._rule._select(
            question,
            hits,
            self._weights,
            relevant=each_part,
            parts=True,
            site_terms=self._site_terms,
            overviews=self._overviews,
        )
        if not kept and not each_part:
            return []
        merged: dict[str, RetrievedChunk] = {}
        for hit in (*firsts, *kept):
            merged.setdefault(hit.id, hit)
        return self._parts.joined(
            question, set_aside(question, list(merged.values())), self._site_terms
        )

    def question(self, query: str, earlier: Sequence[str] = ()) -> str:
        """The question searched for ``query``: a follow-up written out with the ``earlier``
        user questions (oldest first), misspelled words corrected against the vocabulary."""
        question = by_default(followup_question(query, earlier))
        if self._vocabulary:
            question, _ = corrected(question, self._vocabulary)
            question = rooted(question, self._vocabulary)
        return question

    async def retrieve(self, request: RetrievalRequest) -> list[GroundedSource]:
        """The ``Retriever`` port: relevant sections for the question (:meth:`question` of
        ``request.query`` in its conversation) as sources."""
        earlier = [m.content for m in request.messages[:-1] if m.role == "user"]
        return [
            source
            for hit in await self.relevant(self.question(request.query, earlier))
            if (source := hit.to_source()) is not None
        ]
