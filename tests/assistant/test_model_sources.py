"""The docs assistant with a model (writer and analyst, driven by ``FunctionModel``): the model's
prompt carries exactly the sources the relevance rule keeps, numbered as the answer's citations,
and a question nothing relevant answers never reaches the model."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio.to_thread
import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentskit_chat.assistant import (
    NO_GROUNDED_SOURCES,
    AnswerOutcome,
    DocsAgent,
    DocsAssistant,
    create_docs_assistant,
)
from agentskit_chat.protocol import EscalationAnswer, ExactAnswer, GroundedSource
from agentskit_chat.retrieval import (
    DEFAULT_TOP_K,
    MarkdownCorpus,
    RelevantRetriever,
    RetrievedChunk,
    TermWeights,
    read_docs_folder,
)
from tests.agents.test_analyst_generator import commit

from ._support import clock, write_docs

pytestmark = pytest.mark.anyio

AGENTS: tuple[DocsAgent, ...] = ("writer", "analyst")

#: ``keys.md`` answers the question, ``tokens.md`` answers it in one section only, and the
#: other two pages have nothing to do with it.
DOCS: Mapping[str, str] = {
    "keys.md": """\
# Signing keys

Signing keys sign every session token. Rotate the signing keys regularly.

## Rotating the signing keys

Run `keyctl rotate` to rotate the signing keys. Rotation creates a new signing key and keeps
the previous key for one day, so tokens signed before the rotation stay valid.
""",
    "tokens.md": """\
# Session tokens

A session token proves who the caller is.

## Token lifetime

A session token expires one hour after it is signed. Expired tokens are refused.

## Verifying tokens after key rotation

After you rotate the signing keys, tokens are verified against both the new and the previous
signing key.
""",
    "billing.md": """\
# Billing

## Paying an invoice

Invoices are sent on the first day of each month. Pay them by card or by bank transfer.

## Changing the plan

Upgrade or downgrade the plan from the account page; the change applies next month.

## Refunds

Ask support for a refund within thirty days of a payment.

## Tax receipts

Download a tax receipt for each payment from the invoices page.
""",
    "themes.md": """\
# Themes

## Choosing colours

The dashboard ships a light palette and a dark palette. Press the arrow keys to switch
between them.

## Fonts

The dashboard uses the system font. A larger font size is set under Appearance.

## Layout

Drag the panels of the dashboard to rearrange them; the layout is saved per browser.
""",
}

#: Sentences of the irrelevant pages: none may reach the model.
IRRELEVANT = (
    "Invoices are sent on the first day of each month.",
    "Upgrade or downgrade the plan from the account page",
    "The dashboard ships a light palette and a dark palette.",
    "Press the arrow keys to switch",
)

QUESTION = "How do I rotate the signing keys?"

_SOURCE = re.compile(r'<source number="(\d+)" title="([^"]*)">\n(.*?)\n</source>', re.DOTALL)
# How the fake model cites a source: its title in guillemets, then its number.
_CITED = re.compile(r"«([^»]+)» \[(\d+)\]")
_MARKER = re.compile(r"\[(\d+)\]")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _answer_commit_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTSKIT_ANSWER_COMMIT", raising=False)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return write_docs(tmp_path / "docs", DOCS)


def prompt_of(messages: list[ModelMessage]) -> str:
    """The one user prompt of a request (the assistant keeps no history without a store)."""
    (prompt,) = [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]
    assert isinstance(prompt, str)
    return prompt


def instructions_of(messages: list[ModelMessage]) -> str:
    final = messages[-1]
    assert isinstance(final, ModelRequest) and final.instructions is not None
    return final.instructions


def listed(prompt: str) -> list[tuple[int, str, str]]:
    """The prompt's sources as ``(number, title, excerpt)``, in the order they are listed."""
    return [
        (int(number), html.unescape(title), excerpt)
        for number, title, excerpt in _SOURCE.findall(prompt)
    ]


@dataclass
class CitingModel:
    """A FunctionModel citing every source of its prompt by title and number, plus one number
    that is no source; it records what each call saw.

    The writer streams prose; the analyst (a non-streamed agent run) commits one field per
    source through ``answer_commit``.
    """

    seen: list[list[ModelMessage]] = field(default_factory=list)

    def model(self) -> FunctionModel:
        return FunctionModel(self._commit, stream_function=self._prose, model_name="fixture-model")

    def _commit(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(messages)
        sources = listed(prompt_of(messages))
        fields = [
            {"label": f"Source {number}", "value": f"«{title}» [{number}]"}
            for number, title, _ in sources
        ]
        return commit({"fields": fields, "basis": f"The kept sections [1][{len(sources) + 1}]."})

    async def _prose(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        self.seen.append(messages)
        sources = listed(prompt_of(messages))
        for number, title, _ in sources:
            yield f"See «{title}» [{number}]. "
        yield f"Nothing else [{len(sources) + 1}]."


class _AssistantIndex:
    """The assistant's own index, searched through its public :meth:`DocsAssistant.retrieve`."""

    def __init__(self, assistant: DocsAssistant) -> None:
        self._assistant = assistant

    async def search(self, query: str, top_k: int | None = None) -> list[RetrievedChunk]:
        return await self._assistant.retrieve(query, top_k or DEFAULT_TOP_K)


async def kept_sources(assistant: DocsAssistant, docs: Path, question: str) -> list[GroundedSource]:
    """What the relevance rule keeps for ``question``, judged independently of the assistant's
    own retriever: the same index, term weights over the same sections, the same rule, and the
    site's source limit."""
    folder = await anyio.to_thread.run_sync(read_docs_folder, docs)
    corpus = MarkdownCorpus.from_documents(folder.documents, href_prefix="/docs", root=folder.root)
    weights = TermWeights.from_texts(f"{c.title}\n{c.text}" for c in corpus.chunks)
    retriever = RelevantRetriever(_AssistantIndex(assistant), weights, assistant.relevance)
    sources = [s for hit in await retriever.relevant(question) if (s := hit.to_source())]
    return sources[: assistant.site.limits.max_sources]


@dataclass
class Run:
    model: CitingModel
    kept: list[GroundedSource]
    hits: list[RetrievedChunk]
    outcome: AnswerOutcome


async def ask(docs: Path, agent: DocsAgent, question: str = QUESTION) -> Run:
    model = CitingModel()
    async with create_docs_assistant(
        docs, model=model.model(), agent=agent, now=clock
    ) as assistant:
        kept = await kept_sources(assistant, docs, question)
        hits = await assistant.retrieve(question, 20)
        outcome = await assistant.ask(question)
    return Run(model, kept, hits, outcome)


# --- the prompt ----------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
async def test_the_prompt_carries_exactly_the_kept_sources_numbered_in_order(
    docs: Path, agent: DocsAgent
) -> None:
    run = await ask(docs, agent)
    pages = [source.href.partition("#")[0] for source in run.kept]
    # The fixture's premise: the relevant page and the partly relevant one are kept, others not.
    assert "/docs/keys" in pages and "/docs/tokens" in pages
    assert not {"/docs/billing", "/docs/themes"} & set(pages)

    (messages,) = run.model.seen
    prompt = prompt_of(messages)
    assert listed(prompt) == [
        (number, source.title, source.excerpt) for number, source in enumerate(run.kept, start=1)
    ]
    assert prompt.count("<source ") == len(run.kept)
    assert prompt.endswith(f"Question: {QUESTION}")
    assert f"numbered [1] to [{len(run.kept)}]." in instructions_of(messages)

    kept_ids = {source.id for source in run.kept}
    dropped = [hit for hit in run.hits if hit.id not in kept_ids]
    # The search does find the irrelevant page ("arrow keys"); the rule drops it.
    assert any(hit.href.startswith("/docs/themes") for hit in dropped)
    for hit in dropped:
        assert hit.text not in prompt
    for sentence in IRRELEVANT:
        assert sentence not in prompt


# --- the citations -------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
async def test_the_citations_are_the_kept_sources_and_every_marker_points_at_one(
    docs: Path, agent: DocsAgent
) -> None:
    run = await ask(docs, agent)
    envelope = run.outcome
    assert isinstance(envelope, ExactAnswer)
    assert (envelope.confidence.level, envelope.confidence.basis) == ("high", "backend")
    citations = envelope.answer.citations
    assert [(c.id, c.title, c.href) for c in citations] == [
        (s.id, s.title, s.href) for s in run.kept
    ]

    markdown = envelope.answer.markdown
    markers = [int(number) for number in _MARKER.findall(markdown)]
    assert markers and all(1 <= number <= len(citations) for number in markers)
    assert f"[{len(run.kept) + 1}]" not in markdown  # the model's made-up source is gone
    # The model cited each source by the title and number its prompt gave: citation n of the
    # envelope is that very source.
    cited = [(title, int(number)) for title, number in _CITED.findall(markdown)]
    assert cited == [(source.title, number) for number, source in enumerate(run.kept, start=1)]
    for title, number in cited:
        assert citations[number - 1].title == title


# --- nothing relevant ----------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize(
    ("question", "searched_something"),
    [
        ("What is the capital of Mongolia?", False),
        # "dark" is on the themes page: the search finds it, the relevance rule drops it.
        ("Which dark chocolate brands pair with red wine?", True),
    ],
)
async def test_a_question_nothing_relevant_answers_never_calls_the_model(
    docs: Path, agent: DocsAgent, question: str, searched_something: bool
) -> None:
    run = await ask(docs, agent, question)
    assert bool(run.hits) is searched_something
    assert run.model.seen == []
    assert run.kept == []
    assert isinstance(run.outcome, EscalationAnswer)
    assert run.outcome.reason == "miss"
    assert run.outcome.message == NO_GROUNDED_SOURCES
