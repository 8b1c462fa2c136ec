"""The cited-answers example over a real socket: sources from the folder, or a refusal."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentskit_chat.components import SourceListProps
from agentskit_chat.retrieval import RetrievedChunk
from agentskit_chat.runtime import AdapterContext, AdapterRequest, ChatMessage
from agentskit_chat.server import create_app
from examples.rag import app as rag
from tests.assistant._support import serve
from tests.examples._support import Client

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_question_is_answered_with_sources_from_the_folder() -> None:
    async with serve(create_app(rag.chat)) as url:
        turn = await Client(url).send("How often do devices sync?")
    frame = turn.frame()
    assert frame["componentKey"] == "source-list"
    assert frame["instanceId"].startswith("rag-")
    assert turn.text().startswith("Grounded answer for “How often do devices sync?”")
    props = SourceListProps.model_validate(frame["props"])
    assert props.label == "Sources"
    assert props.sources
    assert props.sources[0].title == "Sync and offline use › How often devices sync"
    assert "every 30 seconds" in (props.sources[0].snippet or "")
    assert all(source.url is None for source in props.sources)  # the docs are not published
    summary = frame["fallback"]["summary"]
    assert "Sources: Sync and offline use › How often devices sync" in summary


async def test_a_question_the_folder_does_not_cover_is_refused(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "faq.md").write_text("# Gardening\n\nWater tomatoes every morning.\n", "utf-8")
    async with (
        rag.open_rag_chat(docs, docs_url="https://docs.example.org") as definition,
        serve(create_app(definition)) as url,
    ):
        client = Client(url)
        refused = await client.send("What is the refund policy for enterprise contracts?")
        answered = await client.send("When should I water tomatoes?")
    assert refused.answer == rag.NO_SOURCES
    (source,) = SourceListProps.model_validate(answered.frame()["props"]).sources
    assert source.url == "https://docs.example.org/faq"


def _chunk(chunk_id: str, href: str, text: str = "Some text.") -> RetrievedChunk:
    return RetrievedChunk(id=chunk_id, title=f"Title {chunk_id}", href=href, text=text, score=1)


async def test_only_safe_sources_are_cited_and_failures_say_nothing() -> None:
    async def unsafe(question: str) -> list[RetrievedChunk]:
        return [_chunk("bad id", "/docs/a"), _chunk("js", "javascript:alert(1)", text="")]

    async def broken(question: str) -> list[RetrievedChunk]:
        raise RuntimeError("private vector credential")

    async def many(question: str) -> list[RetrievedChunk]:
        return [_chunk(f"doc-{n % 50}", f"/docs/{n}") for n in range(51)]

    async def answer(question: str, sections: Sequence[RetrievedChunk]) -> str:
        return "Use one shared definition."

    when = datetime(2026, 7, 11, tzinfo=UTC)
    message = ChatMessage(id="u 1", role="user", content="question", created_at=when)
    request = AdapterRequest(messages=(message,), context=AdapterContext())
    assert (await rag.RagAdapter(unsafe).answer(request)).text == rag.NO_SAFE_SOURCES
    chunks = [chunk async for chunk in rag.RagAdapter(broken).create_source(request).stream()]
    assert [(c.type, c.content) for c in chunks] == [("error", rag.RETRIEVAL_FAILED)]
    made = await rag.RagAdapter(many, answer, with_urls=True).answer(request)
    assert '"instanceId":"rag-u-1"' in made.text  # the message id, sanitized
    assert made.text.count('"id":"doc-') == 50
    assert "Use one shared definition." in made.text
