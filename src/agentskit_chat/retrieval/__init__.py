"""Retrieval: the docs folder, Markdown corpora, heading-aware chunks, and retrievers.

- :func:`read_docs_folder` is the one reader of a folder of Markdown, for the artifact producer
  and the corpus alike; :func:`write_artifact_build` writes a built artifact beside it.
- :func:`load_markdown_corpus` reads a folder of Markdown into citable chunks (title, heading
  path, safe link with a GitHub-style anchor, stable safe id).
- :class:`SQLiteFTSRetriever` is the embedded default: SQLite FTS5 with BM25, a persistent index
  file and incremental re-indexing by content hash.
- :class:`PostgresFTSRetriever` is the shared one: PostgreSQL full-text search (extra
  ``postgres``, imported when built).
- :class:`FederatedRetriever` fans out to several retrievers under one deadline and fuses their
  rankings by reciprocal rank fusion.
- :class:`LangChainRetriever` and :class:`LlamaIndexRetriever` put a LangChain or LlamaIndex
  retriever behind the same port (extras ``langchain`` / ``llamaindex``, imported when built).
- :class:`RelevantRetriever` keeps only sections relevant enough to answer from
  (:class:`RelevanceRule`), so a question the docs do not cover is refused.

Each implements the :class:`~agentskit_chat.service.Retriever` port. See ``docs/retrieval.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentskit_chat._lazy import lazy_attribute as _lazy_attribute

from ._corpus import (
    CHUNKER_VERSION,
    MAX_CHUNK_CHARS,
    TITLE_SEPARATOR,
    MarkdownChunk,
    MarkdownCorpus,
    MarkdownDocument,
    chunk_markdown,
    github_slug,
    load_markdown_corpus,
)
from ._docs_folder import SYMLINK_LEFT_OUT, read_docs_folder, write_artifact_build
from ._page_kinds import about_changes, guides_first, is_change_log
from ._query import query_phrases, query_terms
from ._relevance import (
    Relevance,
    RelevanceRule,
    RelevantRetriever,
    Searcher,
    TermWeights,
    content_terms,
)
from ._results import DEFAULT_TOP_K, MAX_TOP_K, IndexReport, RetrievedChunk
from ._sqlite_fts import SQLiteFTSRetriever, build_index

if TYPE_CHECKING:
    from ._adapters import AdapterReport
    from ._federated import (
        DEFAULT_RRF_K,
        FederatedResult,
        FederatedRetriever,
        FusedSource,
        reciprocal_rank_fusion,
    )
    from ._langchain import LangChainRetriever
    from ._llamaindex import LlamaIndexRetriever
    from ._page_html import render_page_html
    from ._postgres_fts import DEFAULT_CHUNK_TABLE, PostgresFTSRetriever

#: The names of the retrievers a docs folder's assistant does not use (federation, PostgreSQL,
#: the LangChain and LlamaIndex adapters) and of the page renderer, imported when first used:
#: ``agentskit-chat ask`` starts without them.
_LAZY = {
    "AdapterReport": "._adapters",
    "DEFAULT_RRF_K": "._federated",
    "FederatedResult": "._federated",
    "FederatedRetriever": "._federated",
    "FusedSource": "._federated",
    "reciprocal_rank_fusion": "._federated",
    "LangChainRetriever": "._langchain",
    "LlamaIndexRetriever": "._llamaindex",
    "render_page_html": "._page_html",
    "DEFAULT_CHUNK_TABLE": "._postgres_fts",
    "PostgresFTSRetriever": "._postgres_fts",
}


def __getattr__(name: str) -> Any:
    return _lazy_attribute(__name__, _LAZY, globals(), name)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CHUNKER_VERSION",
    "DEFAULT_CHUNK_TABLE",
    "DEFAULT_RRF_K",
    "DEFAULT_TOP_K",
    "MAX_CHUNK_CHARS",
    "MAX_TOP_K",
    "SYMLINK_LEFT_OUT",
    "TITLE_SEPARATOR",
    "AdapterReport",
    "FederatedResult",
    "FederatedRetriever",
    "FusedSource",
    "IndexReport",
    "LangChainRetriever",
    "LlamaIndexRetriever",
    "MarkdownChunk",
    "MarkdownCorpus",
    "MarkdownDocument",
    "PostgresFTSRetriever",
    "Relevance",
    "RelevanceRule",
    "RelevantRetriever",
    "RetrievedChunk",
    "SQLiteFTSRetriever",
    "Searcher",
    "TermWeights",
    "about_changes",
    "build_index",
    "chunk_markdown",
    "content_terms",
    "github_slug",
    "guides_first",
    "is_change_log",
    "load_markdown_corpus",
    "query_phrases",
    "query_terms",
    "read_docs_folder",
    "reciprocal_rank_fusion",
    "render_page_html",
    "write_artifact_build",
]
