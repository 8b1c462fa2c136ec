"""The extractive generator: grounded, cited, bounded, deterministic, and honest when it
finds nothing."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.generation import NO_GROUNDED_ANSWER, ExtractiveGenerator
from agentskit_chat.protocol import AskMessage, AskUsage, BackendSiteConfig, GroundedSource
from agentskit_chat.service import AskService, GenerationRequest, TextDelta, UsageReport

pytestmark = pytest.mark.anyio

SITE = BackendSiteConfig.model_validate(
    {
        "protocol": "agentskit.chat.backend-site",
        "version": 1,
        "siteId": "docs",
        "assistant": {"id": "docs-guide", "name": "Docs", "suggestions": []},
        "corpus": {"id": "docs-public", "mode": "local"},
        "components": [],
        "actions": [],
        "limits": {
            "requestTimeoutMs": 5000,
            "retrievalTimeoutMs": 1000,
            "generationTimeoutMs": 5000,
            "maxSources": 5,
        },
        "persistence": {"mode": "disabled"},
    }
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def source(n: int, excerpt: str) -> GroundedSource:
    return GroundedSource(id=f"s{n}", title=f"Source {n}", href=f"/docs/s{n}", excerpt=excerpt)


SERVING = source(
    1,
    "# Serving\n\nRun `make serve` to start the server. The server listens on port 8000 by "
    "default.\nIt reloads when files change.\n\n- Pass --port to choose another port.\n",
)
STORAGE = source(
    2,
    "Sessions are stored in SQLite by default. PostgreSQL and Redis stores are available "
    "for shared deployments.\n\n```python\nstore = open_store('redis://localhost')\n```\n",
)
LIMITS = source(3, "Each site has a request timeout. Retrieval has its own timeout too.")


def request(query: str, *sources: GroundedSource) -> GenerationRequest:
    return GenerationRequest(
        query=query,
        messages=(AskMessage(role="user", content=query),),
        site=SITE,
        sources=tuple(sources),
    )


async def run(generator: ExtractiveGenerator, req: GenerationRequest) -> tuple[str, AskUsage]:
    text: list[str] = []
    usage: list[Any] = []
    async for chunk in generator.generate(req):
        if isinstance(chunk, TextDelta):
            text.append(chunk.delta)
        else:
            usage.append(chunk.usage)
    assert len(usage) == 1
    return "".join(text), usage[0]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "Which port does the server listen on?",
            "The server listens on port 8000 by default [1].",
        ),
        ("Where are sessions stored?", "Sessions are stored in SQLite by default [2]."),
        ("What is the retrieval timeout?", "Retrieval has its own timeout too [3]."),
    ],
)
def test_the_best_sentence_leads_with_its_source_number(query: str, expected: str) -> None:
    answer = ExtractiveGenerator().compose(query, [SERVING, STORAGE, LIMITS])
    assert answer.startswith(expected)


def test_several_sentences_each_cited_best_first() -> None:
    answer = ExtractiveGenerator(min_relative_score=0).compose(
        "How do I start the server and choose a port?", [STORAGE, SERVING]
    )
    pieces = re.findall(r"(.+?) \[(\d)\][.!?]", answer)
    assert len(pieces) == 3
    assert {number for _, number in pieces} == {"2"}
    assert pieces[0][0] == "Run `make serve` to start the server"


@pytest.mark.parametrize(
    "query",
    ["How do I bake bread?", "What is it?", "   ", "¿?"],
    ids=["unrelated", "only-stop-words", "blank", "punctuation"],
)
def test_no_overlap_says_no_grounded_sources(query: str) -> None:
    assert ExtractiveGenerator().compose(query, [SERVING, STORAGE]) == NO_GROUNDED_ANSWER


def test_markdown_markers_and_code_are_not_quoted() -> None:
    answer = ExtractiveGenerator(min_relative_score=0, max_sentences=8).compose(
        "serving port store redis", [SERVING, STORAGE]
    )
    assert "#" not in answer
    assert "- Pass" not in answer
    assert "open_store" not in answer
    assert "Pass --port to choose another port [1]." in answer


def test_normalization_matches_inflections_and_case() -> None:
    text = source(1, "Configuring the SERVERS happens in one file.")
    answer = ExtractiveGenerator().compose("how is a server configured", [text])
    assert answer == "Configuring the SERVERS happens in one file [1]."


def test_the_answer_length_and_sentence_count_are_bounded() -> None:
    long = source(1, " ".join(f"Alpha beta gamma number {i}." for i in range(100)))
    generator = ExtractiveGenerator(max_sentences=4, max_answer_chars=90, min_relative_score=0)
    answer = generator.compose("alpha gamma", [long])
    assert len(answer) <= 90
    assert 1 <= answer.count("[1]") <= 4
    too_long = source(2, "alpha " * 120 + ".")
    assert generator.compose("alpha", [too_long]) == NO_GROUNDED_ANSWER


def test_duplicate_sentences_are_quoted_once() -> None:
    twice = [source(1, "Tokens expire after one hour."), source(2, "Tokens expire after one hour.")]
    assert ExtractiveGenerator().compose("When do tokens expire?", twice) == (
        "Tokens expire after one hour [1]."
    )


WORD = st.sampled_from(
    ["server", "port", "token", "session", "store", "redis", "the", "a", "runs", "stored", "is"]
)
SENTENCE = st.lists(WORD, min_size=1, max_size=8).map(lambda ws: " ".join(ws).capitalize() + ".")
EXCERPT = st.lists(SENTENCE, min_size=1, max_size=6).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(
    query=st.lists(WORD, min_size=1, max_size=5).map(" ".join),
    excerpts=st.lists(EXCERPT, min_size=1, max_size=5),
    max_sentences=st.integers(1, 4),
    max_chars=st.integers(40, 400),
)
def test_answers_are_extractive_cited_bounded_and_deterministic(
    query: str, excerpts: list[str], max_sentences: int, max_chars: int
) -> None:
    sources = [source(n, text) for n, text in enumerate(excerpts, 1)]
    generator = ExtractiveGenerator(max_sentences=max_sentences, max_answer_chars=max_chars)
    answer = generator.compose(query, sources)
    assert answer == generator.compose(query, sources)
    if answer == NO_GROUNDED_ANSWER:
        return
    assert len(answer) <= max_chars
    pieces = re.findall(r"(.+?) \[(\d+)\]\. ?", answer)
    assert "".join(f"{text} [{n}]. " for text, n in pieces).strip() == answer
    assert 1 <= len(pieces) <= max_sentences
    for text, number in pieces:
        assert 1 <= int(number) <= len(sources)
        assert text + "." in excerpts[int(number) - 1]


async def test_deltas_are_words_and_usage_is_reported() -> None:
    generator = ExtractiveGenerator()
    chunks = [chunk async for chunk in generator.generate(request("server port", SERVING))]
    *texts, usage = chunks
    assert all(isinstance(chunk, TextDelta) for chunk in texts)
    deltas = [chunk.delta for chunk in texts if isinstance(chunk, TextDelta)]
    assert all(re.fullmatch(r"\S+\s*", delta) for delta in deltas)
    assert "".join(deltas) == generator.compose("server port", [SERVING])
    assert isinstance(usage, UsageReport)
    assert isinstance(usage.usage, AskUsage)
    assert usage.usage.model == "extractive"
    assert usage.usage.output_tokens == len(deltas)
    assert usage.usage.cost_usd == 0
    total = usage.usage.total_tokens
    assert total == (usage.usage.input_tokens or 0) + len(deltas)


async def test_closing_the_stream_early_stops_it() -> None:
    stream = ExtractiveGenerator().generate(request("server port", SERVING))
    first = await stream.__anext__()
    assert isinstance(first, TextDelta)
    await stream.aclose()  # type: ignore[attr-defined]
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


async def test_through_the_service_the_answer_is_cited_and_model_free() -> None:
    class Retriever:
        async def retrieve(self, request: Any) -> list[GroundedSource]:
            return [STORAGE, SERVING]

    service = AskService(
        resolve_site=lambda context: SITE,
        resolve_subject_id=lambda context: "user-1",
        retrievers={"local": Retriever()},
        generator=ExtractiveGenerator(),
        create_id=lambda: "r1",
    )
    body = b'{"messages":[{"role":"user","content":"Which port does the server use?"}]}'
    events = [event.to_wire() async for event in (await service.stream({}, body)).events()]
    text = "".join(e["delta"] for e in events if e["type"] == "text")
    assert text.startswith("The server listens on port 8000 by default [2].")
    assert events[-2]["args"]["sources"][1] == {"id": "s1", "title": "Source 1", "path": "/docs/s1"}
    assert events[-1] == {"type": "done", "model": "extractive"}


@pytest.mark.parametrize(
    "options",
    [
        {"max_sentences": 0},
        {"max_answer_chars": -1},
        {"max_sentence_chars": True},
        {"min_relative_score": 1.5},
        {"model": "  "},
    ],
)
def test_invalid_options_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        ExtractiveGenerator(**options)


@pytest.mark.parametrize(("size", "threaded"), [(1, False), (3, True)])
async def test_large_excerpts_are_scored_off_the_event_loop(size: int, threaded: bool) -> None:
    threads: list[int] = []

    class Probe(ExtractiveGenerator):
        def compose(self, query: str, sources: Sequence[GroundedSource]) -> str:
            threads.append(threading.get_ident())
            return super().compose(query, sources)

    big = [source(n, ("The server port is set here. " * 100)[:2000]) for n in range(1, size + 1)]
    text, _ = await run(Probe(), request("server port", *big))
    assert text == ExtractiveGenerator().compose("server port", big)
    assert (threads[0] != threading.get_ident()) is threaded
