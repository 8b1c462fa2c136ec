"""The libraries' own retrievers for the adapter tests, and small subclasses of their bases.

The in-memory retrievers are LangChain's ``InMemoryVectorStore`` with a deterministic fake
embedding and LlamaIndex's ``VectorStoreIndex`` with ``MockEmbedding``; the subclasses of each
``BaseRetriever`` return exact documents, wait until cancelled, or fail.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever as LangChainBase
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import Document as LlamaDocument
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.retrievers import BaseRetriever as LlamaBase
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from agentskit_chat.retrieval import LangChainRetriever, LlamaIndexRetriever

Doc = tuple[dict[str, Any], str]  # (metadata, text)
Adapter = LangChainRetriever | LlamaIndexRetriever

#: Documents of a small wiki, each with a title and a safe link.
WIKI: list[Doc] = [
    (
        {"title": "Install", "href": "/wiki/install"},
        "Install the toolkit with pip install acme-widgets on Python 3.11.",
    ),
    (
        {"title": "Themes", "href": "https://wiki.example/themes"},
        "Themes change the accent colours of buttons.",
    ),
    ({"title": "Limits", "href": "/wiki/limits"}, "A token bucket limits every subject."),
    ({"title": "Storage", "href": "/wiki/storage"}, "Sessions are stored with compare-and-set."),
]

#: (name, metadata, text, kept?) — what the mapping keeps and drops, and why.
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("plain", {"title": "Guide", "href": "/docs/guide"}, "Run the installer.", "kept"),
    ("absolute", {"title": "Wiki", "href": "https://wiki.example/a"}, "A wiki page.", "kept"),
    ("no-title", {"href": "/docs/untitled"}, "A page without a title.", "kept"),
    ("padded-href", {"title": "Padded", "href": "  /docs/padded \n"}, "Padded link.", "kept"),
    ("javascript", {"title": "Bad", "href": "javascript:alert(1)"}, "Script link.", "unsafe"),
    ("protocol-relative", {"title": "Bad", "href": "//evil.example/x"}, "Evil.", "unsafe"),
    ("relative-path", {"title": "Bad", "href": "docs/guide.md"}, "A file path.", "unsafe"),
    ("credentials", {"title": "Bad", "href": "https://u:p@host.example/"}, "Creds.", "unsafe"),
    ("not-a-string", {"title": "Bad", "href": 42}, "A number link.", "unsafe"),
    ("no-href", {"title": "Orphan"}, "A page with no link.", "missing"),
    ("blank-href", {"title": "Orphan", "href": "  "}, "A blank link.", "missing"),
    ("blank-text", {"title": "Empty", "href": "/docs/empty"}, " \n\t ", "empty"),
]


# --- the libraries' retrievers -------------------------------------------------------------------


def langchain_store(docs: Sequence[Doc], k: int | None = None) -> LangChainBase:
    """LangChain's in-memory vector store over ``docs``, as a retriever returning ``k``."""
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents([Document(page_content=text, metadata=meta) for meta, text in docs])
    return store.as_retriever(search_kwargs={"k": k or len(docs)})


def llama_index(docs: Sequence[Doc], k: int | None = None) -> LlamaBase:
    """A LlamaIndex vector index over ``docs`` (its own mock embedding), as a retriever."""
    documents = [LlamaDocument(text=text, metadata=meta) for meta, text in docs]
    index = VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))
    return index.as_retriever(similarity_top_k=k or len(docs))


class FixedLangChain(LangChainBase):
    """A LangChain retriever returning exactly ``documents`` (sync only: LangChain threads it)."""

    documents: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return list(self.documents)


class SlowLangChain(LangChainBase):
    """A native-async LangChain retriever that waits until cancelled."""

    started: Any
    cancelled: bool = False

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        raise AssertionError("the async path must be used")

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


class FailingLangChain(LangChainBase):
    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        raise ConnectionError(f"password hunter2 while answering {query}")


class FixedLlama(LlamaBase):
    """A LlamaIndex retriever with only the synchronous ``_retrieve``, returning ``nodes``.

    With ``gate``, it first waits (in its thread) for the event loop to open the gate: if it
    ran on the loop's thread, the loop could never do so.
    """

    def __init__(self, nodes: Sequence[NodeWithScore], gate: threading.Event | None = None) -> None:
        super().__init__()
        self.nodes = list(nodes)
        self.gate = gate
        self.entered = threading.Event()
        self.gate_opened: bool | None = None

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.entered.set()
        if self.gate is not None:
            self.gate_opened = self.gate.wait(10)
        return list(self.nodes)


class SlowLlama(LlamaBase):
    """A native-async LlamaIndex retriever that waits until cancelled."""

    def __init__(self, started: anyio.Event) -> None:
        super().__init__()
        self.started = started
        self.cancelled = False

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise AssertionError("the async path must be used")

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


class FailingLlama(LlamaBase):
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise ConnectionError(f"password hunter2 while answering {query_bundle.query_str}")

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise AssertionError("the async path must be used")


def fixed_langchain(docs: Sequence[Doc], **options: Any) -> LangChainRetriever:
    documents = [Document(page_content=text, metadata=meta) for meta, text in docs]
    return LangChainRetriever(FixedLangChain(documents=documents), **options)


def fixed_llama(docs: Sequence[Doc], **options: Any) -> LlamaIndexRetriever:
    nodes = [
        NodeWithScore(node=TextNode(text=text, metadata=meta), score=1.0 / (1 + i))
        for i, (meta, text) in enumerate(docs)
    ]
    return LlamaIndexRetriever(FixedLlama(nodes), **options)


#: Adapters over exact documents, one per library.
EXACT: list[Callable[..., Adapter]] = [fixed_langchain, fixed_llama]
#: Adapters over each library's real in-memory vector retriever.
IN_MEMORY: list[Callable[[Sequence[Doc]], Adapter]] = [
    lambda docs: LangChainRetriever(langchain_store(docs)),
    lambda docs: LlamaIndexRetriever(llama_index(docs)),
]


def hrefs(sources: Sequence[Any]) -> list[str]:
    return [source.href for source in sources]
