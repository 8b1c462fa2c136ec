"""What a question asks: its parts, and whether it asks for a quantity.

A question with parts ("X, and Y?") is answered part by part (:func:`question_parts`). A
question (or part) asking for a quantity ("how many", "maximum", "which version", "which
status code") wants each of its terms stated with a number: a unit holds ``#term`` beside
``term`` when the term is within three words of a number (:func:`unit_terms`). A question
answered yes or no ("Can I …?", "Does it …?") also wants a unit that says no or sets a limit
("cannot", "not", "never", "only"): such a unit holds :data:`SAYS_NO`.
"""

from __future__ import annotations

import re
from typing import Final

from agentskit_chat._terms import content_terms, question_clauses, stem, words

__all__ = ["SAYS_NO", "part_terms", "question_parts", "unit_terms", "wanted_terms"]

#: A question that asks for a quantity: "how many", "how long", "maximum", "which version",
#: "which status code", "what compression level".
_ASKS_QUANTITY: Final = re.compile(
    r"\bhow\s+(?:many|much|long|big|large|old|often|far|high|low|small|fast)\b|"
    r"\b(?:max(?:imum)?|min(?:imum)?|limit|cap|ceiling|version|size|count|number|level|port"
    r"|timeout|threshold|status\s+code)s?\b",
    re.IGNORECASE,
)
_NUMBER_TEXT: Final = """
    one two three four five six seven eight nine ten eleven twelve twenty hundred thousand million
    once twice
"""
#: Words that write a number (digits do too).
_NUMBER_WORDS: Final = frozenset(_NUMBER_TEXT.split())
#: A word this close to a number (in words) is stated with it: "16 aliases", "Ink 7.1+".
_NUMBER_WINDOW: Final = 3
#: A unit holds ``#term`` beside ``term`` when it states the term with a number.
_WITH_NUMBER: Final = "#"
#: A question answered yes or no: "Can I …?", "Does it …?", "Is it OK to …?".
_YES_NO: Final = re.compile(
    r"\s*(?:can|could|does|do|did|is|are|was|will|would|should|may|must|has|have)\b",
    re.IGNORECASE,
)
_NEGATION_TEXT: Final = "no not never cannot nor neither only don doesn isn aren won wasn"
#: Words that say no, or set a limit ("only"): a unit holding one holds :data:`SAYS_NO`.
_NEGATIONS: Final = frozenset(_NEGATION_TEXT.split())
#: What a yes-or-no question looks for beside its terms: the docs' "no" is written with a
#: negation ("cannot be loaded at the same time", "only files ending with .whl").
SAYS_NO: Final = "!no"


def unit_terms(unit: str) -> frozenset[str]:
    """The stems of ``unit``, and ``#stem`` for each word within ``_NUMBER_WINDOW`` words of a
    number (what a question asking for a quantity looks for)."""
    found = words(unit)
    terms = {stem(word) for word in found}
    if any(word in _NEGATIONS for word in found):
        terms.add(SAYS_NO)
    for at, word in enumerate(found):
        if word in _NUMBER_WORDS or any(char.isdigit() for char in word):
            near = found[max(0, at - _NUMBER_WINDOW) : at + _NUMBER_WINDOW + 1]
            terms.update(_WITH_NUMBER + stem(other) for other in near)
    return frozenset(terms)


def wanted_terms(text: str, terms: tuple[str, ...]) -> tuple[str, ...]:
    """``terms``, and when ``text`` asks for a quantity, each of them stated with a number;
    when it asks yes or no, :data:`SAYS_NO`."""
    if _YES_NO.match(text) is not None:
        terms = (*terms, SAYS_NO)
    if _ASKS_QUANTITY.search(text) is None:
        return terms
    return (*terms, *(_WITH_NUMBER + term for term in terms if term != SAYS_NO))


def question_parts(query: str) -> list[tuple[str, ...]]:
    """The content terms of each part of a question that has parts, in order.

    A question has parts when clauses are joined by ``, and`` (``but``, ``or``), ``and then``,
    ``;`` or a second question mark: "What is the default deadline, and what does the client's
    deadline cover?" has two. What comes before a colon or a dash is context ("Angular: which
    peers ..., and which versions ...?"); it lends its terms only to a part with none of its
    own. A part with no content term is dropped; a question without parts is one part.

    >>> question_parts("Angular: which peers go in, and which versions work?")
    [('peer',), ('version',)]
    >>> question_parts("Angular: which peers, and which?")
    [('peer',), ('angular',)]
    """
    context, clauses = question_clauses(query)
    parts: list[tuple[str, ...]] = []
    for piece in clauses:
        terms = content_terms(piece) or content_terms(f"{context} {piece}")
        if terms and terms not in parts:
            parts.append(terms)
    return parts or [content_terms(query)]


def part_terms(query: str) -> list[tuple[str, ...]]:
    """:func:`question_parts`, with what a part asking for a quantity wants beside its terms."""
    context, clauses = question_clauses(query)
    parts: list[tuple[str, ...]] = []
    for piece in clauses:
        terms = content_terms(piece) or content_terms(f"{context} {piece}")
        terms = wanted_terms(piece, terms)
        if terms and terms not in parts:
            parts.append(terms)
    return parts
