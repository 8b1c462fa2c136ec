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

A best hit whose code names the thing may still not do what is asked: ``pip install
'app[server,redis]'`` writes every word of "How do I run the server with Redis?", and installs.
So the command the question asks for is a **code line** holding the thing and another of the
question's words (or a word sharing its stem's start, four letters or more: ``serve`` and
"server"), and no action verb (install, run, start, deploy) the question does not ask
(:func:`uses_thing`). When the first hit shows no such line, the first relevant hit that does
leads; when none of the hits does, the corpus's sections with such a line are looked at
(:class:`CommandSections`): search ranks by how often a section writes the question's words, and
a short section holding only the command writes few of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Final, Protocol

from agentskit_chat._terms import DOING_TERMS, asks_how_to, command_terms, content_terms

from ._results import RetrievedChunk

__all__ = ["CommandSections", "code_terms", "commands_first", "named_thing", "uses_thing"]

#: A fenced code block of a chunk's text: its opening fence, info string and body.
_FENCED: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n(.*?)^ {0,3}\1", re.MULTILINE | re.DOTALL)


def code_terms(text: str) -> frozenset[str]:
    """The terms of the fenced code in ``text``, without comments."""
    return command_terms("\n".join(match.group(2) for match in _FENCED.finditer(text)))


#: Verbs of a command line that do one thing rather than another: a line installing something
#: does not run it.
ACTION_TERMS: Final = frozenset(content_terms("install run start deploy"))
#: A code word and a question word are related when one's stem starts the other's and the
#: shorter has at least this many letters (``serv`` of ``serve`` and ``server``).
_RELATED_LETTERS: Final = 4


def _related(word: str, terms: Collection[str]) -> bool:
    return any(
        word == term
        or (
            min(len(word), len(term)) >= _RELATED_LETTERS
            and (word.startswith(term) or term.startswith(word))
        )
        for term in terms
    )


def uses_thing(text: str, thing: Collection[str], terms: Collection[str]) -> bool:
    r"""Whether a line of the fenced code in ``text`` (without its comment) holds one of the
    ``thing`` terms and another of the question's ``terms`` (or a related word: see the module
    documentation), and no action verb that ``terms`` do not hold: the command the question
    asks for, not one installing what it names.

    >>> asked = ("run", "server", "redi")
    >>> uses_thing("```sh\nserve docs --store redis://db\n```", {"redi"}, asked)
    True
    >>> uses_thing("```sh\npip install 'app[server,redis]'\n```", {"redi"}, asked)
    False
    """
    return _use(text, thing, terms) > 0


def _use(text: str, thing: Collection[str], terms: Collection[str]) -> int:
    """How many of the question's other terms the best line of code using ``thing`` for what
    is asked relates to (0: no such line; see :func:`uses_thing`)."""
    others = [term for term in terms if term not in thing]
    foreign = ACTION_TERMS - set(terms)
    best = 0
    for match in _FENCED.finditer(text):
        for line in match.group(2).split("\n"):
            held = command_terms(line)
            if not held & set(thing) or held & foreign:
                continue
            related = sum(1 for term in others if _related(term, held - set(thing)))
            best = max(best, related)
    return best


def named_thing(
    question: str, terms: Sequence[str], names: Collection[str], weight: Callable[[str], float]
) -> frozenset[str]:
    """The thing a how-to question asks to do something with: its rarest terms beside the
    doing verbs, when they are written as names (none for other questions)."""
    if not asks_how_to(question):
        return frozenset()
    things = [term for term in terms if term not in DOING_TERMS]
    if not things:
        return frozenset()
    rarest = max(weight(term) for term in things)
    return frozenset(term for term in things if weight(term) >= rarest) & frozenset(names)


class _Section(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def href(self) -> str: ...
    @property
    def text(self) -> str: ...


class CommandSections:
    """The corpus's sections holding fenced code, looked up for the command a how-to question
    names its thing in (see the module documentation).

    Args:
        sections: Every section (chunk) of the corpus, in document order.
    """

    def __init__(self, sections: Iterable[_Section]) -> None:
        self._sections = tuple(
            RetrievedChunk(section.id, section.title, section.href, section.text, 0.0)
            for section in sections
            if "```" in section.text or "~~~" in section.text
        )
        self._folded: tuple[str, ...] | None = None

    def _candidates(self, thing: Collection[str]) -> list[RetrievedChunk]:
        """The sections whose code writes each of ``thing`` (as the start of a word, as stems
        mostly are): a cheap filter before reading their lines."""
        if self._folded is None:
            # Folded once, on the first how-to question naming a thing: no cost at start.
            self._folded = tuple(
                "\n".join(m.group(2) for m in _FENCED.finditer(section.text)).casefold()
                for section in self._sections
            )
        return [
            section
            for section, code in zip(self._sections, self._folded, strict=True)
            if all(term in code for term in thing)
        ]

    def leading(
        self,
        question: str,
        asked: tuple[Sequence[str], Collection[str], Callable[[str], float]],
        hits: Sequence[RetrievedChunk],
        relevant: Callable[[RetrievedChunk], bool],
    ) -> list[RetrievedChunk]:
        """``hits`` with the first relevant one whose code uses the thing a how-to question
        names for what it asks first (:func:`uses_thing`), or, when none does, the corpus's
        first relevant section that does (with the first hit's score); ``hits`` as they are
        when the first does, or the question names no thing (:func:`named_thing`).

        Args:
            question: The question.
            asked: Its content terms (without the site's name), its names, and how rare a
                term is in the corpus.
            hits: The selected hits, best first.
            relevant: Whether a section is relevant to the question.
        """
        terms, names, weight = asked
        thing = named_thing(question, terms, names, weight)
        kept = list(hits)
        if not kept or not thing or uses_thing(kept[0].text, thing, terms):
            return kept
        found = next(
            (hit for hit in kept[1:] if uses_thing(hit.text, thing, terms) and relevant(hit)), None
        )
        if found is None:
            # The one using the thing with the most of the question's other words; the first
            # in the corpus's order of equals.
            held = {hit.id for hit in kept}
            uses = [
                (use, at, section)
                for at, section in enumerate(self._candidates(thing))
                if section.id not in held
                and (use := _use(section.text, thing, terms)) > 0
                and relevant(section)
            ]
            if uses:
                section = min(uses, key=lambda found: (-found[0], found[1]))[2]
                found = RetrievedChunk(
                    section.id, section.title, section.href, section.text, kept[0].score
                )
        if found is None:
            return kept
        return [found, *(hit for hit in kept if hit.id != found.id)]


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
    named = named_thing(question, terms, names, weight)
    if not named:
        return kept
    shown = [
        (hit, covers) for hit, relevant, covers in hits if relevant and code_terms(hit.text) & named
    ]
    first = [hit for hit, _ in sorted(shown, key=lambda found: -found[1])]
    moved = {hit.id for hit in first}
    return [*first, *(hit for hit in kept if hit.id not in moved)]
