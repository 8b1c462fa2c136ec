"""A heading's exact answer, and a picked choice, show the section, not a pointer to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentskit_chat.answers import create_deterministic_answer_adapter
from agentskit_chat.assistant import DocsAssistant, create_docs_assistant
from agentskit_chat.protocol import ChoicesAnswer, ExactAnswer
from agentskit_chat.runtime import AdapterRequest, ChatMessage

from ._support import clock, write_docs

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def assistant(tmp_path: Path) -> AsyncIterator[DocsAssistant]:
    async with create_docs_assistant(write_docs(tmp_path / "docs"), now=clock) as opened:
        yield opened


async def test_a_heading_question_shows_the_section(assistant: DocsAssistant) -> None:
    reply = await assistant.ask("Logging")
    assert isinstance(reply, ExactAnswer)
    assert reply.confidence.basis == "exact"
    assert reply.answer.markdown == "Set `log_level` to `debug` to see every render in the log [1]."
    assert [c.href for c in reply.answer.citations] == ["/docs/reference/options#logging"]


async def test_a_picked_choice_shows_the_chosen_section(assistant: DocsAssistant) -> None:
    # Both pages have a "Configuring the cache" section: the artifact offers a choice.
    choices = assistant.resolver.resolve("Configuring the cache")
    assert isinstance(choices, ChoicesAnswer)
    picked = [s for s in choices.suggestions if "options" in s.id]
    assert picked
    pointer = assistant.resolver.resolve_choice(picked[0].id, "Configuring the cache")
    assert isinstance(pointer, ExactAnswer)
    assert pointer.answer.markdown.startswith("See ")  # what the artifact holds, unchanged
    shown = assistant.expand_answer(pointer)
    assert "`cache_ttl` option sets how many seconds" in shown.answer.markdown
    assert shown.answer.citations == pointer.answer.citations
    assert shown.provenance == pointer.provenance


async def test_other_exact_answers_are_shown_as_built(assistant: DocsAssistant) -> None:
    reply = assistant.resolver.resolve("pip install widget")
    assert isinstance(reply, ExactAnswer)
    assert assistant.expand_answer(reply) == reply


async def test_the_chat_adapter_shows_the_section_of_a_heading(assistant: DocsAssistant) -> None:
    build = assistant.artifact_build
    adapter = create_deterministic_answer_adapter(
        artifact=build.artifact,
        expected_content_hash=build.site_config.artifact.content_hash,
        expected_site_id=assistant.site_id,
        fallback_mode="disabled",
        expand_answer=assistant.expand_answer,
    )
    created = clock()
    message = ChatMessage(id="u1", role="user", content="Logging", created_at=created)
    source = adapter.create_source(AdapterRequest(messages=(message,)))
    chunks = [chunk async for chunk in source.stream()]
    answer = chunks[0].metadata["answer"] if chunks[0].metadata else None
    assert isinstance(answer, ExactAnswer)
    assert answer.answer.markdown.startswith("Set `log_level`")
