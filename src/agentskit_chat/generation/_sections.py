"""The sections an extractive answer draws on: each scored by its best unit, then chosen.

See :mod:`._compose` for the whole rule: a unit scores the summed rarity of the question terms
it holds (less in code and in a label), a section its best unit plus the question terms of its
title, a little less the lower search ranked it; the best leads, and a further section comes
when it brings a question term the chosen ones do not and scores at least half as well.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from agentskit_chat._terms import DOING_TERMS, command_terms, term_set
from agentskit_chat.protocol import GroundedSource

from ._blocks import Block, parse_blocks
from ._questions import SAYS_NO, unit_terms

__all__ = [
    "FURTHER_SECTION",
    "Section",
    "best_for",
    "choose",
    "command_leads",
    "merged",
    "read_section",
    "scored",
    "second_topics",
]

#: The search's order counts too: the n-th source's score is divided by 1 + decay × (n - 1).
_RANK_DECAY: Final = 0.1
#: Question terms in a section's title count this much of their rarity.
_TITLE_SHARE: Final = 1.0
#: A code block's words count this much: identifiers (``status_code``) match question words
#: by accident far more often than prose does.
_CODE_SHARE: Final = 0.8
#: A paragraph of at most this many words without a sentence's end is a label.
_LABEL_WORDS: Final = 8
#: A label's words count this much.
_LABEL_SHARE: Final = 0.5
#: A further section must be at least this good, relative to the first.
FURTHER_SECTION: Final = 0.5
#: Beside a first section shown whole, a further one brings at least this many new terms.
_SECOND_TOPIC: Final = 2


# --- scoring ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Section:
    number: int  # the source's 1-based position: what ``[n]`` cites
    title: str
    blocks: list[Block]
    unit_terms: list[list[frozenset[str]]]
    title_terms: frozenset[str]
    scores: list[list[float]] = field(default_factory=list)
    best: tuple[int, int] = (0, 0)
    best_score: float = 0.0
    score: float = 0.0
    terms: frozenset[str] = frozenset()  # the question terms its title and best unit hold
    named: frozenset[str] = frozenset()  # a how-to question's names: what its answer leads with


def read_section(number: int, source: GroundedSource) -> Section:
    blocks = parse_blocks(source.excerpt)
    held = [[unit_terms(unit) for unit in block.units] for block in blocks]
    return Section(number, source.title, blocks, held, term_set(source.title))


def _rarity(wanted: Sequence[str], sections: Sequence[Section]) -> dict[str, float]:
    units = [terms for section in sections for block in section.unit_terms for terms in block]
    total = len(units) + 1
    return {
        term: math.log(1 + total / (1 + sum(1 for terms in units if term in terms)))
        for term in wanted
    }


def _share(block: Block, unit: int) -> float:
    """How much a unit's terms count: less in code, and less in a label (a paragraph of a few
    words and no sentence: an admonition's or a figure's title), which says what follows
    without saying anything itself."""
    if block.kind == "code":
        return _CODE_SHARE
    if block.kind == "para" and len(block.units) == 1:
        text = block.units[0].rstrip()
        if text and text[-1] not in ".!?:" and len(text.split()) <= _LABEL_WORDS:
            return _LABEL_SHARE
    return 1.0


def _held(terms: frozenset[str], wanted: Sequence[str], weight: dict[str, float]) -> float:
    """The summed rarity of the ``wanted`` terms a unit holds; saying no counts only beside a
    term of the question (a "not" alone answers nothing)."""
    value = sum(weight[t] for t in wanted if t in terms and t != SAYS_NO)
    if value and SAYS_NO in terms and SAYS_NO in weight:
        value += weight[SAYS_NO]
    return value


def _score(section: Section, wanted: Sequence[str], weight: dict[str, float]) -> None:
    section.scores = [
        [
            _held(terms, wanted, weight) * _share(section.blocks[b], u)
            for u, terms in enumerate(block)
        ]
        for b, block in enumerate(section.unit_terms)
    ]
    best = (0, 0)
    best_score = 0.0
    for b, block_scores in enumerate(section.scores):
        for u, value in enumerate(block_scores):
            if value > best_score:
                best, best_score = (b, u), value
    section.best, section.best_score = best, best_score
    # What the section's answer says: the title and its best unit.
    held = set(section.title_terms)
    if best_score > 0:
        held |= section.unit_terms[best[0]][best[1]]
    section.terms = frozenset(t for t in wanted if t in held and t != SAYS_NO)
    in_title = sum(weight[t] for t in wanted if t in section.title_terms)
    prior = 1 / (1 + _RANK_DECAY * (section.number - 1))
    section.score = (best_score + _TITLE_SHARE * in_title) * prior if best_score > 0 else 0.0


def scored(parsed: Sequence[Section], terms: Sequence[str]) -> list[Section]:
    """Fresh copies of the parsed sections, scored for ``terms``, best first (those holding
    none of them left out)."""
    sections = [replace(section) for section in parsed]
    weight = _rarity(terms, sections)
    for section in sections:
        _score(section, terms, weight)
    return sorted((s for s in sections if s.best_score > 0), key=lambda s: (-s.score, s.number))


def choose(ranked: Sequence[Section], limit: int) -> list[Section]:
    if not ranked:
        return []
    chosen = [ranked[0]]
    covered = set(ranked[0].terms)
    for section in ranked[1:]:
        if len(chosen) == limit:
            break
        if section.score < FURTHER_SECTION * chosen[0].score:
            break
        if section.terms - covered:
            chosen.append(section)
            covered |= section.terms
    return chosen


def command_leads(ranked: list[Section], names: Collection[str]) -> list[Section]:
    """``ranked`` for a how-to question: when the best section shows no code, the first source
    leads instead when its code holds one of the question's ``names`` (``PostgreSQL``: the
    thing to do it with) and it scores at least half as well: search put the command naming
    the thing first; its answer then leads with that code (``named``). A word any code may
    hold ("reply", "stream") moves nothing."""
    if not ranked or any(block.kind == "code" for block in ranked[0].blocks):
        return ranked
    things = set(names) - DOING_TERMS
    first = next((section for section in ranked if section.number == 1), None)
    if first is None or first.score < FURTHER_SECTION * ranked[0].score:
        return ranked
    code = (command_terms(block.units[0]) for block in first.blocks if block.kind == "code")
    if not any(held & things for held in code):
        return ranked
    # Chosen for its code naming the thing: that code leads its answer.
    led = replace(first, named=frozenset(things))
    return [led, *(section for section in ranked if section is not first)]


def second_topics(chosen: list[tuple[Section, bool]]) -> list[tuple[Section, bool]]:
    """``chosen`` when its first section is shown whole: a further section stays only when it
    brings two question terms or more (a second topic: "… and which origins are allowed?"),
    not one word beside the answer ("quickly", "minor"), which would only pad it."""
    covered = {term.lstrip("#") for term in chosen[0][0].terms}
    kept = chosen[:1]
    for section, doing in chosen[1:]:
        new = {term.lstrip("#") for term in section.terms} - covered
        if len(new) >= _SECOND_TOPIC:
            kept.append((section, doing))
            covered |= new
    return kept


def merged(sections: list[Section], hrefs: Sequence[str]) -> list[Section]:
    """``sections`` with the parts of one long section (sources with one link) joined into
    the first of them, in their order: a list is not cut from the sentence introducing it."""
    first: dict[str, Section] = {}
    kept: list[Section] = []
    for section, href in zip(sections, hrefs, strict=True):
        earlier = first.get(href)
        if earlier is None:
            first[href] = section
            kept.append(section)
            continue
        earlier.blocks = [*earlier.blocks, *section.blocks]
        earlier.unit_terms = [*earlier.unit_terms, *section.unit_terms]
    return kept


def best_for(ranked: Sequence[Section], taken: set[int]) -> Section | None:
    """The best of ``ranked`` (scored for one part): one not ``taken`` by an earlier part when
    it is at least half as good."""
    if not ranked:
        return None
    for section in ranked:
        if section.number not in taken and section.score >= FURTHER_SECTION * ranked[0].score:
            return section
    return ranked[0]
