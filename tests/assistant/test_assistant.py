"""The docs assistant in process: exact answers, choices, grounded answers and refusals."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentskit_chat.assistant import (
    NO_GROUNDED_SOURCES,
    DocsAssistant,
    create_docs_assistant,
)
from agentskit_chat.errors import AskServiceError, BuildError, ConfigurationError
from agentskit_chat.generation import NO_GROUNDED_ANSWER
from agentskit_chat.protocol import (
    BackendProvenance,
    ChoicesAnswer,
    EscalationAnswer,
    ExactAnswer,
    decode_answer_response,
    is_safe_href,
)
from agentskit_chat.service import GenerationRequest, InMemoryRateLimiter, SessionKey, TextDelta
from agentskit_chat.storage import MemoryAskSessionStore

from ._support import DOC_SENTENCES, clock, write_docs

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return write_docs(tmp_path / "docs")


@pytest.fixture
async def assistant(docs: Path) -> AsyncIterator[DocsAssistant]:
    async with create_docs_assistant(docs, now=clock) as opened:
        yield opened


class ScriptedGenerator:
    """Streams fixed text, or raises, in place of a model."""

    def __init__(self, text: str, *, fail: bool = False) -> None:
        self.text = text
        self.fail = fail
        self.requests: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest) -> AsyncIterator[TextDelta]:
        self.requests.append(request)
        if self.fail:
            raise RuntimeError("the model broke: secret prompt details")
        yield TextDelta(self.text)


def _cited_numbers(markdown: str) -> set[int]:
    return {int(n) for n in re.findall(r"\[(\d+)\]", markdown)}


async def test_exact_answer_comes_from_the_artifact(assistant: DocsAssistant) -> None:
    envelope = await assistant.ask("Setup guide")
    assert isinstance(envelope, ExactAnswer)
    assert envelope.provenance.source == "local"
    assert (envelope.confidence.level, envelope.confidence.basis) == ("high", "exact")
    assert [c.href for c in envelope.answer.citations] == ["/docs/guide"]


async def test_command_is_an_exact_answer(assistant: DocsAssistant) -> None:
    envelope = await assistant.ask("pip install widget")
    assert isinstance(envelope, ExactAnswer)
    assert "pip install widget" in envelope.answer.markdown
    assert envelope.answer.citations[0].href == "/docs/guide#installing-the-widget"


async def test_shared_heading_offers_choices(assistant: DocsAssistant) -> None:
    envelope = await assistant.ask("  configuring THE cache ")
    assert isinstance(envelope, ChoicesAnswer)
    assert len(envelope.suggestions) == 2
    assert (envelope.confidence.level, envelope.confidence.basis) == ("medium", "ambiguous")


@pytest.mark.parametrize(
    ("question", "page", "fact"),
    [
        ("How do I set the cache size?", "/docs/guide#configuring-the-cache", "cache_size"),
        ("Which license is the widget released under?", "/docs/faq#licensing", "MIT license"),
        ("How do I enable debug logging?", "/docs/reference/options#logging", "log_level"),
        ("Which themes does the widget ship?", "/docs/faq#themes", "dark theme"),
        (
            "How long does a cached page stay in the cache?",
            "/docs/reference/options#configuring-the-cache",
            "cache_ttl",
        ),
    ],
)
async def test_grounded_answer_cites_the_page_that_answers(
    assistant: DocsAssistant, question: str, page: str, fact: str
) -> None:
    envelope = await assistant.ask(question)
    assert isinstance(envelope, ExactAnswer), envelope
    assert envelope.provenance == BackendProvenance(
        source="backend", provider="agentskit-chat", model="extractive"
    )
    assert (envelope.confidence.level, envelope.confidence.basis) == ("high", "backend")
    assert envelope.query == question
    citations = envelope.answer.citations
    assert citations[0].href == page
    assert 1 <= len(citations) <= 8
    assert all(is_safe_href(c.href) and c.href.startswith("/docs/") for c in citations)
    assert fact in envelope.answer.markdown
    # Every [n] of the text is the n-th citation.
    assert _cited_numbers(envelope.answer.markdown) <= set(range(1, len(citations) + 1))
    assert decode_answer_response(envelope.to_json()).ok


async def test_a_grounded_answer_shows_a_command_as_code_never_as_prose(
    assistant: DocsAssistant,
) -> None:
    envelope = await assistant.ask("How do I put the widget on my machine with pip?")
    assert isinstance(envelope, ExactAnswer), envelope
    assert envelope.answer.citations[0].href == "/docs/guide#installing-the-widget"
    markdown = envelope.answer.markdown
    assert markdown.startswith("Run the installer")
    # The command is shown as the page writes it: a fenced block, not a sentence.
    assert "```sh\npip install widget\n```" in markdown  # with the language its fence named
    assert markdown.count("pip install widget") == 1


async def test_unrelated_question_is_refused(assistant: DocsAssistant) -> None:
    envelope = await assistant.ask("What is the capital of France?")
    assert isinstance(envelope, EscalationAnswer)
    assert envelope.reason == "miss"
    assert envelope.message == NO_GROUNDED_SOURCES
    assert (envelope.confidence.level, envelope.confidence.basis) == ("low", "miss")
    assert envelope.query == "What is the capital of France?"


@pytest.mark.parametrize(
    "question",
    [
        "What is the weather forecast for the cache conference in Paris?",
        "Is there a Windows installer for the widget?",
        "Which license covers the cache of the weather station?",
        "Can the widget render pages on a smartwatch?",
    ],
)
async def test_refusal_never_contains_weakly_related_text(
    assistant: DocsAssistant, question: str
) -> None:
    # Each question shares words with the docs, and search does find those sections.
    assert await assistant.retrieve(question)
    envelope = await assistant.ask(question)
    assert isinstance(envelope, EscalationAnswer)
    assert envelope.message == NO_GROUNDED_SOURCES
    text = envelope.to_json()
    assert "/docs/" not in text
    assert not any(sentence in text for sentence in DOC_SENTENCES)


async def test_retrieve_returns_chunks_best_first(assistant: DocsAssistant) -> None:
    hits = await assistant.retrieve("cache size pages", top_k=2)
    assert len(hits) == 2
    assert hits[0].score >= hits[1].score
    assert hits[0].href == "/docs/guide#configuring-the-cache"
    assert hits[0].title == "Setup guide › Configuring the cache"
    assert "cache_size" in hits[0].text
    assert await assistant.retrieve("?!") == []


async def test_generator_no_grounded_sentence_becomes_a_refusal(docs: Path) -> None:
    generator = ScriptedGenerator(NO_GROUNDED_ANSWER)
    async with create_docs_assistant(docs, generator=generator, now=clock) as assistant:
        envelope = await assistant.ask("How do I set the cache size?")
    assert isinstance(envelope, EscalationAnswer)
    assert envelope.message == NO_GROUNDED_SOURCES
    assert generator.requests  # the generator did run over relevant sources


async def test_generator_sees_only_relevant_sources_and_the_escalation(docs: Path) -> None:
    generator = ScriptedGenerator("Set it [1].")
    async with create_docs_assistant(docs, generator=generator, now=clock) as assistant:
        envelope = await assistant.ask("How do I set the cache size?")
        site = assistant.site
    assert isinstance(envelope, ExactAnswer)
    assert envelope.answer.markdown == "Set it [1]."
    assert isinstance(envelope.provenance, BackendProvenance)
    assert envelope.provenance.model is None  # the generator reported no model
    (request,) = generator.requests
    assert [s.href for s in request.sources] == [c.href for c in envelope.answer.citations]
    assert all("cache" in s.title.lower() for s in request.sources)
    assert request.site == site
    assert (site.site_id, site.assistant.id, site.corpus.id) == ("docs", "docs-guide", "docs")
    assert site.persistence.mode == "disabled"


async def test_generator_failure_raises_the_fixed_diagnostic(docs: Path) -> None:
    generator = ScriptedGenerator("", fail=True)
    async with create_docs_assistant(docs, generator=generator, now=clock) as assistant:
        with pytest.raises(AskServiceError) as caught:
            await assistant.ask("How do I set the cache size?")
    assert (caught.value.code, caught.value.message) == ("ASK_INTERNAL", "The Ask request failed.")
    assert "secret" not in str(caught.value)


async def test_blank_question_is_an_invalid_request(assistant: DocsAssistant) -> None:
    with pytest.raises(AskServiceError) as caught:
        await assistant.ask("   ")
    assert (caught.value.status, caught.value.code) == (400, "ASK_INVALID_REQUEST")


async def test_in_process_questions_are_never_rate_limited(docs: Path) -> None:
    limiter = InMemoryRateLimiter(capacity=1, refill_per_second=0.001)
    async with create_docs_assistant(docs, rate_limiter=limiter, now=clock) as assistant:
        for _ in range(3):
            assert isinstance(await assistant.ask("How do I set the cache size?"), ExactAnswer)


async def test_session_store_keeps_the_conversation(docs: Path) -> None:
    store = MemoryAskSessionStore()
    async with create_docs_assistant(docs, session_store=store, now=clock) as assistant:
        assert assistant.site.persistence.mode == "required"
        await assistant.ask("How do I set the cache size?", session_id="s-1")
        await assistant.ask("Which license is the widget released under?", session_id="s-1")
        # Without a session id, each question is a conversation of its own.
        await assistant.ask("Which themes does the widget ship?")
    record = await store.load(SessionKey("docs", "local", "s-1"))
    assert record is not None
    assert record.revision == 2
    assert [m.role for m in record.messages] == ["user", "assistant", "user", "assistant"]
    assert record.messages[2].content == "Which license is the widget released under?"


async def test_persistent_index_is_updated_incrementally(docs: Path, tmp_path: Path) -> None:
    index = tmp_path / "state" / "index.sqlite3"
    async with create_docs_assistant(docs, index_path=index, now=clock) as first:
        report = first.index_report
        assert report is not None
        assert len(report.added) == 3
    (docs / "faq.md").write_text("# FAQ\n\n## Support\n\nWrite to the mailing list.\n", "utf-8")
    async with create_docs_assistant(docs, index_path=index, now=clock) as second:
        report = second.index_report
        assert report is not None
        assert (report.added, report.updated, report.unchanged) == ((), ("faq.md",), 2)
        envelope = await second.ask("Which license is the widget released under?")
    assert isinstance(envelope, EscalationAnswer)


async def test_model_from_environment_builds_a_pydantic_ai_generator(
    docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pydantic_ai")
    # pydantic-ai's built-in "test" model answers locally, with no network.
    monkeypatch.setenv("AGENTSKIT_MODEL", "test")
    async with create_docs_assistant(docs, now=clock) as assistant:
        envelope = await assistant.ask("How do I set the cache size?")
    assert isinstance(envelope, ExactAnswer)
    assert isinstance(envelope.provenance, BackendProvenance)
    assert envelope.provenance.model == "test"
    assert envelope.answer.citations[0].href == "/docs/guide#configuring-the-cache"


async def test_assistant_must_be_open(docs: Path) -> None:
    assistant = create_docs_assistant(docs, now=clock)
    assert not assistant.is_open
    with pytest.raises(ConfigurationError):
        await assistant.ask("Setup guide")
    async with assistant:
        assert assistant.is_open
        assert await assistant.ready()
    assert not assistant.is_open
    assert not await assistant.ready()


@pytest.mark.parametrize(
    "options",
    [
        {"site_id": "not safe!"},
        {"model": "test", "generator": ScriptedGenerator("x")},
        {"api_key": "two words"},
        {"api_key": ""},
        {"max_sources": 9},
    ],
)
def test_invalid_options_are_refused(docs: Path, options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        create_docs_assistant(docs, **options)  # type: ignore[arg-type]


async def test_missing_docs_folder_fails_on_open(tmp_path: Path) -> None:
    with pytest.raises(BuildError):
        async with create_docs_assistant(tmp_path / "nowhere", now=clock):
            pass


# --- the analyst agent (answer_commit) -----------------------------------------------------------


def _analyst_model(payload: dict[str, object]) -> FunctionModel:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert [tool.name for tool in info.output_tools] == ["answer_commit"]
        return ModelResponse(parts=[ToolCallPart("answer_commit", payload)])

    return FunctionModel(reply, model_name="analyst-model")


_ANALYST_PAYLOAD: dict[str, object] = {
    "fields": [{"label": "Option", "value": "cache_size [1]"}],
    "basis": "The cache section of the setup guide [1][9].",
}
_ANALYST_TEXT = "The cache section of the setup guide [1].\n\n**Answer:** Option: cache_size [1]"


async def test_the_analyst_agent_answers_with_the_rendered_commit(
    docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTSKIT_AGENT", raising=False)
    model = _analyst_model(_ANALYST_PAYLOAD)
    async with create_docs_assistant(docs, model=model, agent="analyst", now=clock) as assistant:
        envelope = await assistant.ask("How do I set the cache size?")
    assert isinstance(envelope, ExactAnswer)
    assert envelope.answer.markdown == _ANALYST_TEXT
    assert envelope.answer.citations[0].href == "/docs/guide#configuring-the-cache"
    assert isinstance(envelope.provenance, BackendProvenance)
    assert envelope.provenance.model == "analyst-model"


async def test_the_analyst_agent_can_come_from_the_environment(
    docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTSKIT_AGENT", "Analyst")
    model = _analyst_model(_ANALYST_PAYLOAD)
    async with create_docs_assistant(docs, model=model, now=clock) as assistant:
        envelope = await assistant.ask("How do I set the cache size?")
    assert isinstance(envelope, ExactAnswer)
    assert envelope.answer.markdown == _ANALYST_TEXT


@pytest.mark.parametrize("source", ["argument", "environment"])
async def test_the_analyst_agent_without_a_model_is_a_configuration_error(
    docs: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.delenv("AGENTSKIT_MODEL", raising=False)
    if source == "environment":
        monkeypatch.setenv("AGENTSKIT_AGENT", "analyst")
        assistant = create_docs_assistant(docs, now=clock)
    else:
        monkeypatch.delenv("AGENTSKIT_AGENT", raising=False)
        assistant = create_docs_assistant(docs, agent="analyst", now=clock)
    with pytest.raises(ConfigurationError, match="The analyst agent needs a model"):
        await assistant.open()
    assert not assistant.is_open


async def test_the_writer_agent_keeps_the_extractive_path_without_a_model(
    docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTSKIT_MODEL", raising=False)
    monkeypatch.setenv("AGENTSKIT_AGENT", "writer")
    async with create_docs_assistant(docs, now=clock) as assistant:
        envelope = await assistant.ask("How do I set the cache size?")
    assert isinstance(envelope, ExactAnswer)
    assert envelope.provenance == BackendProvenance(
        source="backend", provider="agentskit-chat", model="extractive"
    )


async def test_an_unknown_agent_in_the_environment_is_refused(
    docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTSKIT_AGENT", "poet")
    with pytest.raises(ConfigurationError, match="AGENTSKIT_AGENT"):
        await create_docs_assistant(docs, model="test", now=clock).open()


@pytest.mark.parametrize(
    "options",
    [
        {"agent": "poet"},
        {"agent": "analyst", "generator": ScriptedGenerator("x")},
        {"agent": "writer", "generator": ScriptedGenerator("x")},
    ],
)
def test_invalid_agent_options_are_refused(docs: Path, options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        create_docs_assistant(docs, **options)  # type: ignore[arg-type]


async def test_how_to_answer_shows_the_command_of_a_long_sections_other_part(
    tmp_path: Path,
) -> None:
    # A long section is cut into two parts: the command in the first, and in the second what
    # it prints, which is all search finds for "run the drill".
    filler = " ".join(
        f"Lamp {n} of the harbour stays steady while the crews rest." for n in range(20)
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "operations.md").write_text(
        "# Operations\n\n## The drill\n\n```sh\nmake drill\n```\n\n"
        f"{filler}\n\n{filler}\n\n"
        "When the drill runs it prints the lamp count and exits with 1 if a lamp failed.\n",
        "utf-8",
    )
    (docs / "license.md").write_text("# License\n\nThe harbour widget is MIT licensed.\n", "utf-8")
    async with create_docs_assistant(docs, now=clock) as assistant:
        envelope = await assistant.ask("How do I run the drill?")
    assert isinstance(envelope, ExactAnswer), envelope
    assert [c.href for c in envelope.answer.citations] == ["/docs/operations#the-drill"]
    assert "```sh\nmake drill\n```" in envelope.answer.markdown
