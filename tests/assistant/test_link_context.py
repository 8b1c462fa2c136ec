"""The docs assistant searches link context, from a cold start and from the start cache, and
never shows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.protocol import ExactAnswer
from agentskit_chat.retrieval._index_cache import CACHE_DIR_ENV
from tests.retrieval.test_link_context import PAGES

from ._support import NOW, write_docs

pytestmark = pytest.mark.anyio

SCRIPTS = "/docs/environments#scripts"
#: What ``why.md`` writes around its link to the scripts section, and the section never does.
LINK_WORDS = ("Philosophy", "define a test environment", "as long as you wish")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_link_context_finds_a_section_after_any_start_and_is_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    docs = write_docs(tmp_path / "docs", PAGES)
    for start in ("cold", "warm"):
        async with create_docs_assistant(docs, now=lambda: NOW) as assistant:
            report = assistant.index_report
            assert report is not None
            assert report.added == (tuple(sorted(PAGES)) if start == "cold" else ())
            # Found by the words another page links to it with, which it never writes.
            hits = await assistant.retrieve("How do I define a named command?", 5)
            assert SCRIPTS in [hit.href for hit in hits], start
            # Answered from its own words only.
            envelope = await assistant.ask("Which table maps a key to shell lines?")
            assert isinstance(envelope, ExactAnswer), envelope
            assert envelope.answer.citations[0].href == SCRIPTS
            assert [c.href for c in envelope.answer.citations] == [SCRIPTS]
            assert "maps a key to shell lines" in envelope.answer.markdown
            for words in LINK_WORDS:
                assert words not in envelope.answer.markdown
