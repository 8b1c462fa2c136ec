"""The retrieval package's public surface is curated: this test pins every exported name."""

from __future__ import annotations

from agentskit_chat import retrieval

NAMES = [
    "CHUNKER_VERSION",
    "DEFAULT_CHUNK_TABLE",
    "DEFAULT_RRF_K",
    "DEFAULT_TOP_K",
    "MAX_CHUNK_CHARS",
    "MAX_TOP_K",
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
    "RetrievedChunk",
    "SQLiteFTSRetriever",
    "build_index",
    "chunk_markdown",
    "github_slug",
    "load_markdown_corpus",
    "query_terms",
    "reciprocal_rank_fusion",
]


def test_exported_names_are_pinned() -> None:
    assert retrieval.__all__ == NAMES
    assert all(hasattr(retrieval, name) for name in NAMES)


def test_public_names_are_documented() -> None:
    for name in NAMES:
        value = getattr(retrieval, name)
        if callable(value):
            assert value.__doc__, name


def test_importing_needs_no_database_driver() -> None:
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = (
        "import sys, agentskit_chat.retrieval; "
        "print(sorted(m for m in ('psycopg', 'psycopg_pool', 'agentskit_chat.ask') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
