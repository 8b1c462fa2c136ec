"""Federated retrieval: reciprocal rank fusion and a fan-out that survives bad members."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ConfigurationError, RetrievalError
from agentskit_chat.protocol import GroundedSource
from agentskit_chat.retrieval import (
    FederatedRetriever,
    MarkdownCorpus,
    SQLiteFTSRetriever,
    reciprocal_rank_fusion,
)
from agentskit_chat.service import RetrievalRequest, Retriever, SourceCandidate

from ._support import CORPUS, request


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _source(key: str, href: str | None = None) -> GroundedSource:
    return GroundedSource(id=key, title=f"Title {key}", href=href or f"/{key}", excerpt=key)


A, B, C, D = (_source(key) for key in "abcd")


class Fixed:
    """A member that returns a fixed ranking."""

    def __init__(self, ranking: Sequence[SourceCandidate] | Any) -> None:
        self.ranking = ranking
        self.calls = 0

    async def retrieve(self, request: RetrievalRequest) -> Sequence[SourceCandidate]:
        self.calls += 1
        await anyio.sleep(0)
        return self.ranking


class Failing:
    """A member whose backend is down; its message must not escape."""

    async def retrieve(self, request: RetrievalRequest) -> Sequence[SourceCandidate]:
        raise ConnectionError(f"backend down while answering {request.query}")


class Hanging:
    """A member that never answers; it must be cancelled, not awaited forever."""

    def __init__(self) -> None:
        self.cancelled = False

    async def retrieve(self, request: RetrievalRequest) -> Sequence[SourceCandidate]:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


def test_scores_are_reciprocal_rank_sums() -> None:
    fused = reciprocal_rank_fusion([[A, B, C], [C, A], [D]], k=60)
    scores = {f.source.id: f.score for f in fused}
    assert math.isclose(scores["a"], 1 / 61 + 1 / 62)
    assert math.isclose(scores["b"], 1 / 62)
    assert math.isclose(scores["c"], 1 / 63 + 1 / 61)
    assert math.isclose(scores["d"], 1 / 61)
    assert [f.source.id for f in fused] == ["a", "c", "d", "b"]
    assert {f.source.id: f.ranks for f in fused} == {
        "a": (1, 2, None),
        "b": (2, None, None),
        "c": (3, 1, None),
        "d": (None, None, 1),
    }


@pytest.mark.parametrize(
    ("rankings", "k", "order"),
    [
        # Equal scores: the better best rank wins, then the earlier ranking.
        ([[A, B], [B, A]], 60, ["a", "b"]),
        ([[A], [B]], 60, ["a", "b"]),
        ([[B], [A]], 60, ["b", "a"]),
        # k = 0 is plain 1/rank: two second places (1/2 + 1/2) tie one win, and the win's
        # better best rank breaks the tie.
        ([[A, B], [C, B], [A]], 0, ["a", "c", "b"]),
        # A duplicate inside one ranking counts once, and ranks count distinct sources.
        ([[A, A, B], [B]], 60, ["b", "a"]),
        ([], 60, []),
    ],
)
def test_ties_and_duplicates(
    rankings: list[list[GroundedSource]], k: int, order: list[str]
) -> None:
    assert [f.source.id for f in reciprocal_rank_fusion(rankings, k=k)] == order


def test_dedupe_by_href_keeps_the_best_ranked_copy() -> None:
    first = _source("one", "/docs/page")
    second = _source("two", "/docs/page")
    fused = reciprocal_rank_fusion([[B, first], [second]], dedupe="href")
    assert [f.source.id for f in fused] == ["two", "b"]
    assert fused[0].ranks == (2, 1)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=8), max_size=5),
    st.integers(min_value=0, max_value=100),
)
def test_fusion_is_a_sorted_union(rankings: list[list[str]], k: int) -> None:
    sources = [[_source(key) for key in ranking] for ranking in rankings]
    fused = reciprocal_rank_fusion(sources, k=k)
    assert sorted(f.source.id for f in fused) == sorted({key for r in rankings for key in r})
    assert [f.score for f in fused] == sorted((f.score for f in fused), reverse=True)
    for item in fused:
        distinct = [list(dict.fromkeys(r)) for r in rankings]
        expected = sum(
            1 / (k + r.index(item.source.id) + 1) for r in distinct if item.source.id in r
        )
        assert math.isclose(item.score, expected)


@pytest.mark.anyio
async def test_members_are_fused() -> None:
    federated = FederatedRetriever({"x": Fixed([A, B, C]), "y": Fixed([C, A])})
    assert isinstance(federated, Retriever)
    assert [s.id for s in await federated.retrieve(request("q"))] == ["a", "c", "b"]


@pytest.mark.anyio
async def test_a_failing_member_is_dropped() -> None:
    federated = FederatedRetriever({"good": Fixed([A, B]), "bad": Failing()})
    result = await federated.retrieve_fused(request("secret question"))
    assert [f.source.id for f in result.sources] == ["a", "b"]
    assert (result.failed, result.timed_out) == (("bad",), ())


@pytest.mark.anyio
async def test_a_hanging_member_is_dropped_at_the_deadline() -> None:
    hanging = Hanging()
    federated = FederatedRetriever({"good": Fixed([A]), "slow": hanging}, timeout=0.05)
    result = await federated.retrieve_fused(request("q"))
    assert [f.source.id for f in result.sources] == ["a"]
    assert (result.failed, result.timed_out) == ((), ("slow",))
    assert hanging.cancelled


@pytest.mark.anyio
async def test_without_a_timeout_the_site_deadline_bounds_members() -> None:
    # 80% of the site's 100 ms retrieval deadline, so the service's own deadline never fires.
    federated = FederatedRetriever([Fixed([B]), Hanging()])
    result = await federated.retrieve_fused(request("q", retrievalTimeoutMs=100))
    assert [f.source.id for f in result.sources] == ["b"]
    assert result.timed_out == ("1",)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "members",
    [
        [Failing(), Failing()],
        [Failing(), Hanging()],
        [Hanging()],
        [Fixed(None), Fixed("not a list"), Fixed({"id": "a"})],
    ],
)
async def test_all_members_failing_is_an_error(members: list[Retriever]) -> None:
    federated = FederatedRetriever(members, timeout=0.05)
    with pytest.raises(RetrievalError) as caught:
        await federated.retrieve(request("secret question"))
    assert "secret" not in str(caught.value)


@pytest.mark.anyio
async def test_empty_answers_are_not_failures() -> None:
    federated = FederatedRetriever([Fixed([]), Failing()])
    result = await federated.retrieve_fused(request("q"))
    assert (result.sources, result.failed) == ((), ("1",))


@pytest.mark.anyio
async def test_invalid_candidates_are_dropped_before_fusion() -> None:
    candidates: list[Any] = [
        {"id": "evil", "title": "x", "href": "javascript:alert(1)", "excerpt": "x"},
        {"id": "a", "title": "Title a", "href": "/a", "excerpt": "a"},
        {"id": "bad id!", "title": "x", "href": "/x", "excerpt": "x"},
        "not a source",
        B,
    ]
    federated = FederatedRetriever([Fixed(candidates)])
    result = await federated.retrieve_fused(request("q"))
    assert [(f.source.id, f.ranks) for f in result.sources] == [("a", (1,)), ("b", (2,))]


@pytest.mark.anyio
async def test_top_k_caps_the_fused_list() -> None:
    federated = FederatedRetriever([Fixed([A, B, C, D])], top_k=2)
    assert [s.id for s in await federated.retrieve(request("q"))] == ["a", "b"]


@pytest.mark.anyio
async def test_outer_cancellation_reaches_every_member() -> None:
    first, second = Hanging(), Hanging()
    federated = FederatedRetriever([first, second], timeout=30)
    with anyio.move_on_after(0.05) as scope:
        await federated.retrieve(request("q"))
    assert scope.cancelled_caught and first.cancelled and second.cancelled


@pytest.mark.anyio
async def test_two_real_indexes_fuse() -> None:
    items = sorted(CORPUS.items())
    left = await SQLiteFTSRetriever.open(corpus=MarkdownCorpus.from_texts(dict(items[:3])))
    right = await SQLiteFTSRetriever.open(corpus=MarkdownCorpus.from_texts(dict(items[3:])))
    async with left, right:
        federated = FederatedRetriever({"left": left, "right": right})
        sources = await federated.retrieve(request("How can I change the font size?"))
        same = FederatedRetriever([left, left])
        doubled = await same.retrieve_fused(request("pip"))
    assert sources[0].href == "/docs/theming#fonts"
    assert len({s.id for s in sources}) == len(sources)
    # The same index twice: every source once, each ranked by both.
    assert doubled.sources and all(f.ranks[0] == f.ranks[1] for f in doubled.sources)


@pytest.mark.parametrize(
    "options",
    [{"k": -1}, {"k": math.inf}, {"timeout": 0}, {"timeout": math.nan}, {"top_k": 0}],
)
def test_invalid_options_are_refused(options: Mapping[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        FederatedRetriever([Fixed([])], **options)


def test_at_least_one_member_is_needed() -> None:
    with pytest.raises(ConfigurationError):
        FederatedRetriever([])
