"""Cited answers over a folder of Markdown: every answer shows the sections it came from.

The chat searches the folder (SQLite full-text search, kept to the sections relevant enough to
answer from) and answers with a source list: the answer, then each cited section with a quote.
A question the folder does not cover is refused with "No grounded sources were found for this
question." By default it answers from the example's own ``docs/`` (a fictional note-taking app,
Lumen Notes); ``--docs DIR`` answers from yours.

Run it (no API key needed: without a model the answer quotes the best section)::

    python examples/rag/app.py                              # the page at http://127.0.0.1:8000
    python examples/rag/app.py --docs ../my-docs --docs-url https://docs.example.org
    agentskit-chat serve examples/rag/app.py:chat           # AGENTSKIT_RAG_DOCS, AGENTSKIT_MODEL
    agentskit-chat chat examples/rag/app.py:chat
    python examples/rag/app.py --model openai:gpt-4o-mini   # a model writes the answer
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from agentskit_chat import serve
from agentskit_chat.components import SourceListProps
from agentskit_chat.conversation import ChatDefinition, ChatPage, define_chat
from agentskit_chat.protocol import create_assistant_content_encoder
from agentskit_chat.retrieval import (
    RelevantRetriever,
    RetrievedChunk,
    SQLiteFTSRetriever,
    TermWeights,
    load_markdown_corpus,
)
from agentskit_chat.runtime import AdapterCapabilities, AdapterRequest, ChatConfig, StreamChunk

__all__ = [
    "DEFAULT_DOCS",
    "NO_SAFE_SOURCES",
    "NO_SOURCES",
    "RETRIEVAL_FAILED",
    "Answerer",
    "RagAdapter",
    "Searcher",
    "build_rag_chat",
    "chat",
    "main",
    "open_rag_chat",
    "quote_answer",
]

#: The example's own docs folder.
DEFAULT_DOCS: Final = Path(__file__).parent / "docs"
NO_SOURCES: Final = "No grounded sources were found for this question."
NO_SAFE_SOURCES: Final = "No safe grounded sources were found for this question."
#: The one error an answer can end with (never the cause: it may hold a path or a secret).
RETRIEVAL_FAILED: Final = "Grounded retrieval is temporarily unavailable."
_MAX_SOURCES: Final = 50
#: The longest answer kept, in characters (a text part holds at most 16,384 UTF-16 units).
_MAX_ANSWER: Final = 4096
_MAX_SUMMARY: Final = 4096
_CHUNK: Final = 64
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._:-]+")
_INSTRUCTIONS: Final = (
    "Answer the question in one or two short sentences (under 250 characters), using only the "
    "numbered sources. If they do not answer it, say so."
)

#: ``relevant(question)`` → the sections to cite, best first.
Searcher = Callable[[str], Awaitable[list[RetrievedChunk]]]
#: ``(question, sections)`` → the answer text (at most 256 characters are shown).
Answerer = Callable[[str, Sequence[RetrievedChunk]], Awaitable[str]]


async def quote_answer(question: str, sections: Sequence[RetrievedChunk]) -> str:
    """The model-free answer: the question, and the opening of the best section."""
    return f"Grounded answer for “{question}”: {' '.join(sections[0].text.split())}"


def _safe_id(prefix: str, identity: str) -> str:
    return _UNSAFE.sub("-", f"{prefix}-{identity}")[:128]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _sources(sections: Sequence[RetrievedChunk], with_urls: bool) -> list[dict[str, Any]]:
    """The first 50 sections as source-list entries; a duplicate or an invalid one is left
    out (each is checked as a one-source list)."""
    accepted: list[dict[str, Any]] = []
    seen: set[str] = set()
    for section in sections[:_MAX_SOURCES]:
        source: dict[str, Any] = {
            "id": section.id[:128],
            "title": _cut(section.title, 256),
            "snippet": _cut(section.text, 4096),
        }
        if with_urls and section.href.startswith(("https://", "http://", "/")):
            source["url"] = section.href
        if source["id"] in seen:
            continue
        try:
            SourceListProps.model_validate({"label": "check", "sources": [source]})
        except ValidationError:
            continue
        seen.add(source["id"])
        accepted.append(source)
    return accepted


@dataclass(frozen=True, slots=True)
class _Answer:
    """One turn's text: a source-list frame, a refusal, or the failure."""

    text: str
    failed: bool = False


class _RagSource:
    __slots__ = ("_aborted", "_adapter", "_request")

    def __init__(self, adapter: RagAdapter, request: AdapterRequest) -> None:
        self._adapter = adapter
        self._request = request
        self._aborted = False

    def abort(self) -> None:
        self._aborted = True

    async def stream(self) -> AsyncIterator[StreamChunk]:
        if self._aborted:
            return
        try:
            answer = await self._adapter.answer(self._request)
        except Exception:
            answer = _Answer(RETRIEVAL_FAILED, failed=True)
        if self._aborted:
            return
        if answer.failed:
            yield StreamChunk("error", content=answer.text)
            return
        for start in range(0, len(answer.text), _CHUNK):
            yield StreamChunk("text", content=answer.text[start : start + _CHUNK])
        yield StreamChunk("done")


class RagAdapter:
    """A chat adapter that answers each question from the sections ``search`` finds.

    Args:
        search: Finds the sections to cite.
        answerer: Writes the answer from them (:func:`quote_answer` by default).
        with_urls: Whether sources link to their section (only when the docs are published
            somewhere the reader can open).
    """

    capabilities: Final = AdapterCapabilities(streaming=True, structured_output=True)

    def __init__(
        self, search: Searcher, answerer: Answerer = quote_answer, *, with_urls: bool = False
    ) -> None:
        self._search = search
        self._answerer = answerer
        self._with_urls = with_urls

    def create_source(self, request: AdapterRequest) -> _RagSource:
        """A source answering the request's newest user message."""
        return _RagSource(self, request)

    async def answer(self, request: AdapterRequest) -> _Answer:
        """The turn's text (raises when retrieval or the answerer failed)."""
        question = next(
            (m.content for m in reversed(request.messages) if m.role == "user"), ""
        ).strip()
        sections = await self._search(question) if question else []
        if not sections:
            return _Answer(NO_SOURCES)
        sources = _sources(sections, self._with_urls)
        if not sources:
            return _Answer(NO_SAFE_SOURCES)
        answer = _cut((await self._answerer(question, sections)).strip(), _MAX_ANSWER)
        if not answer:
            raise ValueError("the answerer wrote nothing")
        # The answer is text and its sources a list under it (a list's label is its heading).
        props = SourceListProps.model_validate({"label": "Sources", "sources": sources})
        titles = ", ".join(source["title"] for source in sources)
        last = request.messages[-1].id if request.messages else "answer"
        frame = {
            "protocol": "agentskit.chat.component",
            "version": 1,
            "type": "render",
            "componentKey": "source-list",
            "instanceId": _safe_id("rag", last),
            "props": props.model_dump(mode="json", by_alias=True, exclude_none=True),
            "fallback": {
                "kind": "source-list",
                "summary": _cut(f"Sources: {titles}.", _MAX_SUMMARY),
            },
        }
        encoder = create_assistant_content_encoder()
        return _Answer(
            encoder.encode({"kind": "text", "text": answer})
            + encoder.encode({"kind": "component", "frame": frame})
        )


def _model_answerer(model: str) -> Answerer:
    from pydantic_ai import Agent  # noqa: PLC0415 - only with a model

    from agentskit_chat.agents import resolve_model  # noqa: PLC0415

    agent: Agent[None, str] = Agent(resolve_model(model), instructions=_INSTRUCTIONS)

    async def answer(question: str, sections: Sequence[RetrievedChunk]) -> str:
        numbered = "\n\n".join(
            f"[{n}] {section.title}\n{section.text}" for n, section in enumerate(sections, 1)
        )
        result = await agent.run(f"Sources:\n\n{numbered}\n\nQuestion: {question}")
        return result.output

    return answer


def build_rag_chat(
    search: Searcher, *, answerer: Answerer = quote_answer, with_urls: bool = False
) -> ChatDefinition:
    """The cited-answers chat over ``search``."""
    return define_chat(
        id="rag-reference",
        chat=ChatConfig(adapter=RagAdapter(search, answerer, with_urls=with_urls)),
        page=ChatPage(
            title="Lumen Notes help",
            subtitle="Answers from the docs folder, each with the sections it came from.",
            suggestions=(
                "How often do devices sync?",
                "What happens to my notes when I cancel?",
            ),
            placeholder="Ask about the docs",
            logo="LN",
        ),
    )


@contextlib.asynccontextmanager
async def open_rag_chat(
    docs: Path = DEFAULT_DOCS, *, docs_url: str | None = None, model: str | None = None
) -> AsyncIterator[ChatDefinition]:
    """The chat over the folder ``docs``, its index open while the chat is served.

    Args:
        docs: The folder of Markdown.
        docs_url: Where the folder is published (an ``https://`` origin); sources then link
            to their sections.
        model: A pydantic-ai model string that writes the answers; the quote by default.
    """
    corpus = load_markdown_corpus(docs, href_prefix=docs_url or "/docs")
    weights = TermWeights.from_texts(f"{c.title}\n{c.text}" for c in corpus.chunks)
    index = await SQLiteFTSRetriever.open(":memory:", corpus=corpus)
    try:
        relevant = RelevantRetriever(index, weights)
        answerer = _model_answerer(model) if model else quote_answer
        yield build_rag_chat(relevant.relevant, answerer=answerer, with_urls=docs_url is not None)
    finally:
        await index.aclose()


def chat() -> contextlib.AbstractAsyncContextManager[ChatDefinition]:
    """The demo chat: ``AGENTSKIT_RAG_DOCS`` (this example's ``docs/`` by default),
    ``AGENTSKIT_RAG_DOCS_URL`` and ``AGENTSKIT_MODEL``, if set."""
    folder = os.environ.get("AGENTSKIT_RAG_DOCS")
    return open_rag_chat(
        Path(folder) if folder else DEFAULT_DOCS,
        docs_url=os.environ.get("AGENTSKIT_RAG_DOCS_URL") or None,
        model=os.environ.get("AGENTSKIT_MODEL") or None,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """``python examples/rag/app.py [--docs DIR] [--docs-url URL] [--model M] [--port N]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, default=DEFAULT_DOCS, help="A folder of Markdown.")
    parser.add_argument("--docs-url", help="Where the folder is published (https://...).")
    parser.add_argument("--model", help="A pydantic-ai model, e.g. openai:gpt-4o-mini.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--store", default="memory:", help="memory:, sqlite:///rag.db, ...")
    options = parser.parse_args(argv)
    if not options.docs.is_dir():
        raise SystemExit(f"{options.docs}: not a folder of Markdown")
    model = options.model or os.environ.get("AGENTSKIT_MODEL") or None
    serve(
        lambda: open_rag_chat(options.docs, docs_url=options.docs_url, model=model),
        port=options.port,
        store=options.store,
    )


if __name__ == "__main__":
    main()
