"""A how-to question naming a thing is answered by a command that holds it, not by prose.

"How do I run the server with PostgreSQL?" shares every word with a page telling how the fault
tests stop a PostgreSQL server, and search ranks that page first; the section a reader wants
shows ``serve docs --store postgresql://…``. So, when a question asks how to do something
(:func:`~agentskit_chat._terms.asks_how_to`), its rarest term beside the doing verbs is a name
(``PostgreSQL``, ``OpenAI``: the thing it asks to do it with), and the best hit shows no code
holding a term of the question, the relevant hits whose code holds that name come first, those
covering more of the question before the others (the PostgreSQL retriever's example holds a
``postgresql://`` URL too, but says nothing of a server). Words in a ``#`` comment are prose
(:func:`~agentskit_chat._terms.command_terms`): ``pip install x  # for PostgreSQL`` does not
run anything with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from typing import Final

from agentskit_chat._terms import DOING_TERMS, asks_how_to, command_terms

from ._results import RetrievedChunk

__all__ = ["code_terms", "commands_first"]

#: A fenced code block of a chunk's text: its opening fence, info string and body.
_FENCED: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n(.*?)^ {0,3}\1", re.MULTILINE | re.DOTALL)


def code_terms(text: str) -> frozenset[str]:
    """The terms of the fenced code in ``text``, without comments."""
    return command_terms("\n".join(match.group(2) for match in _FENCED.finditer(text)))


def commands_first(
    question: str,
    terms: Sequence[str],
    names: Collection[str],
    weight: Callable[[str], float],
    hits: Sequence[tuple[RetrievedChunk, bool, float]],
) -> list[RetrievedChunk]:
    """``hits`` (each with whether it is relevant and its coverage), the relevant ones whose
    code holds the thing a how-to question names first (see the module documentation).

    Args:
        question: The question.
        terms: Its content terms (without the site's name).
        names: Its terms written as names.
        weight: How rare a term is in the corpus.
        hits: The kept hits, best first, each with whether it is relevant and its coverage.
    """
    kept = [hit for hit, _, _ in hits]
    if not kept or not asks_how_to(question) or code_terms(kept[0].text) & set(terms):
        return kept
    things = [term for term in terms if term not in DOING_TERMS]
    if not things:
        return kept
    rarest = max(weight(term) for term in things)
    named = {term for term in things if weight(term) >= rarest} & set(names)
    if not named:
        return kept
    shown = [
        (hit, covers) for hit, relevant, covers in hits if relevant and code_terms(hit.text) & named
    ]
    first = [hit for hit, _ in sorted(shown, key=lambda found: -found[1])]
    moved = {hit.id for hit in first}
    return [*first, *(hit for hit in kept if hit.id not in moved)]
