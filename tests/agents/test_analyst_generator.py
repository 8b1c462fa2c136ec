"""The analyst generator, driven by ``FunctionModel`` (no network): committed answers, rendered
by code, through the citation filter, alone and behind the Ask service."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentskit_chat.agents import ANALYST_GROUNDING_RULES, AnalystGenerator
from agentskit_chat.answer_commit import render_answer
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import AskMessage, AskUsage, BackendSiteConfig, GroundedSource
from agentskit_chat.service import GenerationRequest, Generator, TextDelta, UsageReport
from tests._loop import no_blocking
from tests.service._support import LOCAL_SITE, body, make_service, read_all

pytestmark = pytest.mark.anyio

SITE = BackendSiteConfig.model_validate(LOCAL_SITE)
SOURCES = tuple(
    GroundedSource.model_validate(
        {"id": f"page-{n}", "title": f"Page {n}", "href": f"/docs/{n}", "excerpt": excerpt}
    )
    for n, excerpt in enumerate(
        ["Run the installer first.", "Set cache_size in config.", "Settings live in config."],
        start=1,
    )
)
BASIS = "The cache section of the setup guide [2]."

Reply = ModelResponse | Callable[[list[ModelMessage], AgentInfo], ModelResponse]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def request(
    question: str = "Which option sets the cache size?",
    *,
    sources: Sequence[GroundedSource] = SOURCES,
    history: Sequence[tuple[str, str]] = (),
) -> GenerationRequest:
    messages = tuple(
        AskMessage.model_validate({"role": role, "content": content})
        for role, content in (*history, ("user", question))
    )
    return GenerationRequest(query=question, messages=messages, site=SITE, sources=tuple(sources))


def commit(payload: dict[str, Any]) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("answer_commit", payload)])


@dataclass
class Script:
    """A FunctionModel answering each request with the next reply; records what it saw."""

    replies: Sequence[ModelResponse]
    seen: list[list[ModelMessage]] = field(default_factory=list)
    infos: list[AgentInfo] = field(default_factory=list)

    def model(self) -> FunctionModel:
        return FunctionModel(self._reply, model_name="fixture-model")

    def _reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(messages)
        self.infos.append(info)
        return self.replies[min(len(self.seen), len(self.replies)) - 1]


async def drain(
    generator: AnalystGenerator, req: GenerationRequest | None = None
) -> tuple[list[str], list[UsageReport]]:
    deltas: list[str] = []
    usage: list[UsageReport] = []
    async for chunk in generator.generate(req or request()):
        if isinstance(chunk, TextDelta):
            assert not usage, "text after usage"
            deltas.append(chunk.delta)
        else:
            usage.append(chunk)
    return deltas, usage


async def collect(
    generator: AnalystGenerator, req: GenerationRequest | None = None
) -> tuple[list[str], list[UsageReport]]:
    """``drain``, failing if the run held the event loop."""
    async with no_blocking():
        return await drain(generator, req)


def retry_texts(messages: Sequence[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.outcome == "retried"
    ]


# --- the rendered answer -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "count", "expected"),
    [
        (
            {"fields": [{"label": "Option", "value": "cache_size [2]"}], "basis": BASIS},
            3,
            f"{BASIS}\n\n**Answer:** Option: cache_size [2]",
        ),
        (
            {"fields": [{"label": "Option", "value": "cache_size [2][7]"}], "basis": BASIS},
            3,
            f"{BASIS}\n\n**Answer:** Option: cache_size [2]",
        ),
        (
            {"fields": [{"label": "Answer", "value": "cache_size [3]"}], "basis": "From [9] [1]."},
            2,
            "From [1].\n\n**Answer:** cache_size",
        ),
        (
            {
                "rows": {"columns": ["option", "source"], "data": [["cache_size", "[2]"]]},
                "basis": "Options [0].",
                "answer_only": True,
            },
            3,
            "| option | source |\n| --- | --- |\n| cache_size | [2] |",
        ),
        (
            {"unresolved": {"reason": "The docs do not cover it."}, "basis": "Pages [1][2]."},
            3,
            "Pages [1][2].\n\n**Unresolved:** The docs do not cover it.",
        ),
    ],
)
async def test_the_generator_yields_the_rendered_commit_with_valid_citations_only(
    payload: dict[str, Any], count: int, expected: str
) -> None:
    script = Script([commit(payload)])
    generator = AnalystGenerator(script.model())
    port: Generator = generator
    assert port is generator
    deltas, usage = await collect(generator, request(sources=SOURCES[:count]))
    assert deltas == [expected]
    assert len(usage) == 1
    assert len(script.seen) == 1


async def test_an_invalid_commit_is_repaired_and_the_valid_rendering_wins() -> None:
    valid = {"fields": [{"label": "Option", "value": "cache_size [2]"}], "basis": BASIS}
    script = Script([commit({"fields": [{"label": "Option", "value": ""}]}), commit(valid)])
    deltas, _ = await collect(AnalystGenerator(script.model()))
    assert deltas == [render_answer(valid)]
    assert len(script.seen) == 2
    (reason,) = retry_texts(script.seen[1])
    assert "Example:" in reason


async def test_usage_covers_every_request_of_the_run() -> None:
    valid = {"fields": [{"label": "Option", "value": "cache_size [2]"}], "basis": BASIS}
    _, (single,) = await collect(AnalystGenerator(Script([commit(valid)]).model()))
    repaired = Script([commit({"basis": BASIS}), commit(valid)])
    _, (double,) = await collect(AnalystGenerator(repaired.model()))
    for report in (single, double):
        assert isinstance(report.usage, AskUsage)
        assert report.usage.model == "fixture-model"
        assert report.usage.input_tokens is not None and report.usage.input_tokens > 0
        assert report.usage.output_tokens is not None and report.usage.output_tokens > 0
        assert report.usage.total_tokens == report.usage.input_tokens + report.usage.output_tokens
        assert report.usage.cost_usd is None  # a FunctionModel has no price
    assert isinstance(single.usage, AskUsage) and isinstance(double.usage, AskUsage)
    # Both commits of the repaired run count, not only the last (the same valid payload).
    assert single.usage.output_tokens is not None and double.usage.output_tokens is not None
    assert double.usage.output_tokens > single.usage.output_tokens


async def test_a_prose_answer_passes_through_the_citation_filter() -> None:
    script = Script([ModelResponse(parts=[TextPart("Which cache [1][5]: size or time?")])])
    deltas, _ = await collect(AnalystGenerator(script.model()))
    assert deltas == ["Which cache [1]: size or time?"]


async def test_an_answer_over_the_output_limit_goes_back_to_the_model() -> None:
    long_value = {"fields": [{"label": "Option", "value": "x" * 200}], "basis": BASIS}
    short = {"fields": [{"label": "Option", "value": "cache_size [2]"}], "basis": BASIS}
    script = Script([commit(long_value), commit(short)])
    deltas, _ = await collect(AnalystGenerator(script.model(), max_output_chars=100))
    assert deltas == [render_answer(short)]
    (reason,) = retry_texts(script.seen[1])
    assert "at most 100" in reason
    assert "x" * 10 not in reason


async def test_too_many_failed_commits_fail_the_generation() -> None:
    script = Script([commit({"basis": BASIS})])
    with pytest.raises(UnexpectedModelBehavior):
        await drain(AnalystGenerator(script.model(), retries=1))
    assert len(script.seen) == 2


# --- what the model sees -------------------------------------------------------------------------


async def test_the_model_sees_the_numbered_sources_and_the_commit_tool() -> None:
    valid = {"fields": [{"label": "Option", "value": "cache_size [2]"}], "basis": BASIS}
    script = Script([commit(valid)])
    history = (("user", "Hello?"), ("assistant", "Hi."))
    await collect(AnalystGenerator(script.model()), request(sources=SOURCES[:2], history=history))
    (messages,) = script.seen
    (info,) = script.infos
    assert [tool.name for tool in info.output_tools] == ["answer_commit"]
    final = messages[-1]
    assert isinstance(final, ModelRequest)
    (prompt,) = [part for part in final.parts if isinstance(part, UserPromptPart)]
    assert isinstance(prompt.content, str)
    assert '<source number="2" title="Page 2">' in prompt.content
    assert '<source number="3"' not in prompt.content
    assert prompt.content.endswith("Question: Which option sets the cache size?")
    assert final.instructions is not None
    assert "You are Docs Guide" in final.instructions
    assert ANALYST_GROUNDING_RULES.format(count=2) in final.instructions
    assert "answer_commit" in final.instructions
    assert len(messages) == 3  # the earlier exchange, then the question


async def test_custom_instructions_keep_the_grounding_rules() -> None:
    valid = {"fields": [{"label": "Option", "value": "cache_size [2]"}], "basis": BASIS}
    script = Script([commit(valid)])
    await collect(AnalystGenerator(script.model(), instructions="You are terse."))
    final = script.seen[0][-1]
    assert isinstance(final, ModelRequest) and final.instructions is not None
    assert final.instructions.startswith("You are terse.")
    assert ANALYST_GROUNDING_RULES.format(count=3) in final.instructions


async def test_with_answer_commit_off_the_analyst_answers_in_prose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTSKIT_ANSWER_COMMIT", "0")
    script = Script([ModelResponse(parts=[TextPart("Set cache_size [2].\n\n**Answer:** 64")])])
    deltas, _ = await collect(AnalystGenerator(script.model()))
    assert deltas == ["Set cache_size [2].\n\n**Answer:** 64"]
    assert script.infos[0].output_tools == []


# --- failures and cancellation -------------------------------------------------------------------


async def test_provider_errors_propagate_unchanged() -> None:
    def fail(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(503, "fixture-model", body="provider detail")

    with pytest.raises(ModelHTTPError) as caught:
        await drain(AnalystGenerator(FunctionModel(fail)))
    assert caught.value.status_code == 503


async def test_a_deadline_ends_the_run() -> None:
    ended = anyio.Event()

    async def hang(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        try:
            await anyio.sleep_forever()
        finally:
            ended.set()
        raise AssertionError("unreachable")

    received: list[object] = []
    with anyio.move_on_after(0.2) as scope:
        async for chunk in AnalystGenerator(FunctionModel(hang)).generate(request()):
            received.append(chunk)
    assert scope.cancelled_caught
    assert received == []
    assert ended.is_set()


# --- through the Ask service ---------------------------------------------------------------------


async def test_the_ask_service_streams_the_committed_answer() -> None:
    payload = {"fields": [{"label": "Option", "value": "cache_size [1][8]"}], "basis": "[1]."}
    service = make_service(generator=AnalystGenerator(Script([commit(payload)]).model()))
    async with no_blocking():
        events = await read_all(await service.stream({"subject": "user-1"}, body(), {}))
    assert [event["type"] for event in events] == ["text", "tool", "done"]
    assert events[0]["delta"] == "[1].\n\n**Answer:** Option: cache_size [1]"
    assert events[-1] == {"type": "done", "model": "fixture-model"}


async def test_a_provider_error_is_the_services_fixed_diagnostic() -> None:
    def fail(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(500, "fixture-model", body="secret provider detail")

    service = make_service(generator=AnalystGenerator(FunctionModel(fail)))
    events = await read_all(await service.stream({"subject": "user-1"}, body(), {}))
    assert events == [
        {
            "type": "error",
            "message": "The Ask request failed.",
            "code": "ASK_INTERNAL",
            "retryable": False,
        }
    ]


# --- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"max_output_chars": 0},
        {"max_output_chars": 1.5},
        {"max_history_messages": -1},
        {"instructions": "  "},
        {"retries": -1},
    ],
)
def test_bad_options_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        AnalystGenerator(Script([]).model(), **options)


def test_the_model_and_agent_are_exposed() -> None:
    generator = AnalystGenerator(Script([]).model())
    assert generator.model_name == "fixture-model"
    assert generator.agent.name == "analyst"


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    with pytest.raises(ImportError, match=r"agentskit-chat\[llm\]"):
        AnalystGenerator("openai:gpt-4.1-mini")
