"""Several retrievers as one: a concurrent fan-out under one deadline, fused by rank.

Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009) needs no comparable scores: a
source at rank ``r`` (1-based) of a member's list earns ``1 / (k + r)``, and a source's fused
score is the sum over the members that returned it. A member that fails or is still running at
the deadline is left out; the call fails only when every member did.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio

from agentskit_chat.errors import ConfigurationError, RetrievalError
from agentskit_chat.protocol import GroundedSource, decode_grounded_source

from ._results import DEFAULT_TOP_K, MAX_TOP_K, check_top_k

if TYPE_CHECKING:
    # Only for annotations: the Ask service may import retrievers, never the other way round.
    from agentskit_chat.service import RetrievalRequest, Retriever, SourceCandidate

__all__ = [
    "DEFAULT_RRF_K",
    "FederatedResult",
    "FederatedRetriever",
    "FusedSource",
    "reciprocal_rank_fusion",
]

#: The usual reciprocal rank fusion constant: it damps the weight of the very first ranks.
DEFAULT_RRF_K = 60

#: Without an explicit timeout, members get this share of the site's retrieval deadline, so
#: the fused answer is ready before the service's own deadline fires.
_SHARE_OF_SITE_DEADLINE = 0.8


@dataclass(frozen=True, slots=True)
class FusedSource:
    """One fused source.

    Attributes:
        source: The source, as returned by the member that ranked it best.
        score: ``Σ 1 / (k + rank)`` over the rankings that contain it; higher is better.
        ranks: Its 1-based rank in each ranking, ``None`` where it is absent.
    """

    source: GroundedSource
    score: float
    ranks: tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class FederatedResult:
    """The outcome of one federated retrieval.

    Attributes:
        sources: The fused sources, best first (at most ``top_k``).
        failed: Names of the members that raised.
        timed_out: Names of the members still running at the deadline.
    """

    sources: tuple[FusedSource, ...]
    failed: tuple[str, ...]
    timed_out: tuple[str, ...]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[GroundedSource]],
    *,
    k: float = DEFAULT_RRF_K,
    dedupe: Literal["id", "href"] = "id",
) -> list[FusedSource]:
    """Fuse best-first rankings into one by reciprocal rank fusion.

    Sources are the same when their ``id`` (or ``href``, with ``dedupe="href"``) is equal;
    within one ranking only the first occurrence counts, and ranks count distinct sources.
    Ties are broken by the best rank any ranking gave, then by the earlier ranking, then by
    first appearance, so the result is deterministic.

    Example:
        >>> a, b, c = (GroundedSource(id=x, title=x, href="/" + x, excerpt=x) for x in "abc")
        >>> [f.source.id for f in reciprocal_rank_fusion([[a, b], [b, c]], k=60)]
        ['b', 'a', 'c']
    """
    _check_k(k)
    scores: dict[str, float] = {}
    best: dict[str, tuple[int, int, int]] = {}  # key -> (best rank, ranking index, appearance)
    chosen: dict[str, GroundedSource] = {}
    ranks: dict[str, list[int | None]] = {}
    appearance = 0
    for index, ranking in enumerate(rankings):
        seen: set[str] = set()
        for source in ranking:
            key = source.id if dedupe == "id" else source.href
            if key in seen:
                continue
            seen.add(key)
            rank = len(seen)
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            ranks.setdefault(key, [None] * len(rankings))[index] = rank
            if key not in best or (rank, index) < best[key][:2]:
                order = best[key][2] if key in best else appearance
                best[key] = (rank, index, order)
                chosen[key] = source
            appearance += 1
    ordered = sorted(scores, key=lambda key: (-scores[key], *best[key]))
    return [FusedSource(chosen[key], scores[key], tuple(ranks[key])) for key in ordered]


class FederatedRetriever:
    """Fans a retrieval out to several retrievers at once and fuses their rankings.

    Implements the :class:`~agentskit_chat.service.Retriever` port. All members start together and
    share one deadline: 80% of the site's ``retrievalTimeoutMs`` (so the fused result is ready
    before the service's own deadline), or ``timeout`` seconds if that is shorter. A member that
    raises, returns
    something that is not a list of sources, or is still running at the deadline is dropped;
    invalid candidates are dropped too. Only when every member is dropped does the call
    raise.

    Args:
        retrievers: The members, as a list or as a ``name → retriever`` mapping (names appear
            in :class:`FederatedResult`, never in errors).
        k: The fusion constant (``1 / (k + rank)``).
        timeout: Seconds the members may take, at most.
        top_k: How many fused sources :meth:`retrieve` returns.
        dedupe: Whether sources are the same when their ``id`` or their ``href`` is equal.

    Raises:
        ConfigurationError: no members, or ``k``, ``timeout`` or ``top_k`` out of range.

    Example:
        >>> federated = FederatedRetriever({"docs": sqlite_retriever, "wiki": pg_retriever})
        ... # doctest: +SKIP
    """

    def __init__(
        self,
        retrievers: Sequence[Retriever] | Mapping[str, Retriever],
        *,
        k: float = DEFAULT_RRF_K,
        timeout: float | None = None,
        top_k: int = DEFAULT_TOP_K,
        dedupe: Literal["id", "href"] = "id",
    ) -> None:
        members = (
            list(retrievers.items())
            if isinstance(retrievers, Mapping)
            else [(str(index), member) for index, member in enumerate(retrievers)]
        )
        if not members:
            raise ConfigurationError("a federated retriever needs at least one retriever")
        _check_k(k)
        if timeout is not None and not (
            isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0
        ):
            raise ConfigurationError("timeout must be a positive number of seconds")
        if dedupe not in ("id", "href"):
            raise ConfigurationError("dedupe must be 'id' or 'href'")
        self._members = members
        self._k = k
        self._timeout = timeout
        self._top_k = check_top_k(top_k)
        self._dedupe: Literal["id", "href"] = dedupe

    async def retrieve(self, request: RetrievalRequest) -> list[GroundedSource]:
        """The ``Retriever`` port: the fused sources, best first.

        Raises:
            RetrievalError: every member failed or timed out.
        """
        result = await self.retrieve_fused(request)
        return [fused.source for fused in result.sources]

    async def retrieve_fused(self, request: RetrievalRequest) -> FederatedResult:
        """Like :meth:`retrieve`, with the fused scores and which members were dropped.

        Raises:
            RetrievalError: every member failed or timed out.
        """
        count = len(self._members)
        rankings: list[list[GroundedSource] | None] = [None] * count
        failed: list[bool] = [False] * count

        async def run(index: int, member: Retriever) -> None:
            try:
                rankings[index] = _valid_sources(await member.retrieve(request))
            except Exception:
                # A member's error text may echo the query or its backend; it stays here.
                failed[index] = True

        with anyio.move_on_after(self._deadline(request)):
            async with anyio.create_task_group() as group:
                for index, (_, member) in enumerate(self._members):
                    group.start_soon(run, index, member)
        answered = [ranking for ranking in rankings if ranking is not None]
        if not answered:
            raise RetrievalError("Every federated retriever failed.")
        fused = reciprocal_rank_fusion(answered, k=self._k, dedupe=self._dedupe)
        names = [name for name, _ in self._members]
        return FederatedResult(
            sources=tuple(fused[: self._top_k]),
            failed=tuple(names[i] for i in range(count) if failed[i]),
            timed_out=tuple(
                names[i] for i in range(count) if rankings[i] is None and not failed[i]
            ),
        )

    def _deadline(self, request: RetrievalRequest) -> float:
        site_share = request.site.limits.retrieval_timeout_ms / 1000 * _SHARE_OF_SITE_DEADLINE
        return site_share if self._timeout is None else min(self._timeout, site_share)


def _check_k(k: float) -> None:
    if isinstance(k, bool) or not isinstance(k, int | float) or not math.isfinite(k) or k < 0:
        raise ConfigurationError("k must be a finite number of at least 0")


def _valid_sources(candidates: Sequence[SourceCandidate]) -> list[GroundedSource]:
    if isinstance(candidates, str | bytes | Mapping):
        raise TypeError("a retriever must return a sequence of sources")
    valid = []
    for candidate in candidates:
        decoded = decode_grounded_source(candidate)
        if decoded.ok:
            valid.append(decoded.value)
            if len(valid) >= MAX_TOP_K:
                break
    return valid
