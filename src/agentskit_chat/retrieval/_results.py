"""What the retrievers return, and the bookkeeping they share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import GroundedSource

__all__ = [
    "DEFAULT_TOP_K",
    "MAX_TOP_K",
    "IndexReport",
    "RetrievedChunk",
    "check_top_k",
    "check_weight",
    "diff_manifests",
    "spread_pages",
    "to_sources",
]

#: How many candidates ``retrieve`` returns by default: the protocol's most sources per answer.
DEFAULT_TOP_K = 8

#: The largest ``top_k`` a search accepts.
MAX_TOP_K = 100

_EXCERPT_UNITS = 4096


@dataclass(frozen=True, slots=True)
class RetrievedChunk:
    """One search hit, best first in a result list.

    Attributes:
        id: The chunk's safe identifier.
        title: ``Document › Heading`` title.
        href: Safe link to the page and heading.
        text: The chunk's plain text.
        score: Relevance, higher is better. The scale is the backend's own (negated BM25 for
            SQLite, ``ts_rank_cd`` for PostgreSQL, the fused score for federation): compare
            scores within one backend only.
    """

    id: str
    title: str
    href: str
    text: str
    score: float

    def to_source(self) -> GroundedSource | None:
        """This hit as a grounded source (excerpt = the chunk text), or ``None`` if invalid."""
        try:
            return GroundedSource(
                id=self.id, title=self.title, href=self.href, excerpt=_clip(self.text)
            )
        except ValidationError:
            return None


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What one indexing pass changed, by document path.

    Attributes:
        added: Documents that were not indexed before.
        updated: Documents whose content hash changed.
        removed: Documents no longer in the corpus.
        unchanged: How many documents were left untouched.
        chunks: How many chunks the index holds afterwards.
        rebuilt: Whether everything was re-indexed because the chunker or link settings changed.
    """

    added: tuple[str, ...]
    updated: tuple[str, ...]
    removed: tuple[str, ...]
    unchanged: int
    chunks: int
    rebuilt: bool = False

    @property
    def touched(self) -> tuple[str, ...]:
        """Every document path this pass wrote or deleted, sorted."""
        return tuple(sorted((*self.added, *self.updated, *self.removed)))


def check_top_k(top_k: int) -> int:
    """``top_k`` if it is an integer in 1..:data:`MAX_TOP_K`.

    Raises:
        ConfigurationError: otherwise.
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise ConfigurationError(f"top_k must be an integer from 1 to {MAX_TOP_K}")
    return top_k


def check_weight(weight: float) -> float:
    """``weight`` as a float if it is a number above 0 and at most 1000.

    Raises:
        ConfigurationError: otherwise.
    """
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= 1000:
        raise ConfigurationError("rank weights must be numbers above 0 and at most 1000")
    return float(weight)


def diff_manifests(
    stored: Mapping[str, str], wanted: Mapping[str, str]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], int]:
    """``(added, updated, removed, unchanged)`` going from ``stored`` to ``wanted`` hashes."""
    added = tuple(sorted(p for p in wanted if p not in stored))
    updated = tuple(sorted(p for p in wanted if p in stored and stored[p] != wanted[p]))
    removed = tuple(sorted(p for p in stored if p not in wanted))
    unchanged = sum(1 for p in wanted if stored.get(p) == wanted[p])
    return added, updated, removed, unchanged


def to_sources(hits: Sequence[RetrievedChunk]) -> list[GroundedSource]:
    """The valid hits as grounded sources, in order."""
    return [source for hit in hits if (source := hit.to_source()) is not None]


def spread_pages(hits: Sequence[RetrievedChunk], per_page: int) -> list[RetrievedChunk]:
    """``hits`` with at most ``per_page`` sections of one page before every other page's.

    Order is kept otherwise: a page's further sections move behind the others, so five hits
    show five answers where a corpus repeats one page's words in every section.
    """
    kept: list[RetrievedChunk] = []
    later: list[RetrievedChunk] = []
    seen: dict[str, int] = {}
    for hit in hits:
        page = hit.href.partition("#")[0]
        count = seen.get(page, 0)
        (kept if count < per_page else later).append(hit)
        seen[page] = count + 1
    return kept + later


def _clip(text: str) -> str:
    if len(text) * 2 <= _EXCERPT_UNITS:
        return text
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > _EXCERPT_UNITS:
            return text[:index]
    return text
