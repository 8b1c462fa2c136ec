"""What the term weights and the vocabulary count in a corpus's sections, counted per batch.

A section's text is its title and its text (``f"{title}\\n{text}"``). For each stemmed term,
:attr:`SectionCounts.terms` counts the sections that hold it (what
:meth:`~agentskit_chat.retrieval.TermWeights.from_texts` counts); :attr:`SectionCounts.words`
counts every folded word written (the vocabulary that misspelled words of a question are
corrected to). Counted page by page as the pages are read (in child processes too, for a large
folder) and added up in page order, they equal the counts of the whole corpus at once, words
in the order they are first written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from agentskit_chat._terms import stem, words

__all__ = ["SectionCounts", "count_sections"]


@dataclass(slots=True)
class SectionCounts:
    """Term and word counts of some sections (see the module documentation)."""

    sections: int = 0
    terms: Counter[str] = field(default_factory=Counter)
    words: Counter[str] = field(default_factory=Counter)
    #: The stem of each word (what a process that did not count them can take as known).
    stems: dict[str, str] = field(default_factory=dict)

    def add(self, other: SectionCounts) -> None:
        """Add ``other``'s counts (of the sections after these: words keep their order)."""
        self.sections += other.sections
        self.terms.update(other.terms)
        self.words.update(other.words)
        self.stems.update(other.stems)


def count_sections(texts: Iterable[str]) -> SectionCounts:
    """The counts of the sections whose texts (title, newline, text) are ``texts``."""
    counts = SectionCounts()
    terms, written, stems = counts.terms, counts.words, counts.stems
    for text in texts:
        found = words(text)
        written.update(found)
        held: set[str] = set()
        for word in set(found):
            term = stems.get(word)
            if term is None:
                term = stems[word] = stem(word)
            held.add(term)
        terms.update(held)
        counts.sections += 1
    return counts
