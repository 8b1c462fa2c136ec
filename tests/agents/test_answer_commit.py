"""``answer_commit`` in pydantic-ai agents, driven by ``FunctionModel`` (no network)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import AgentRunResultEvent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset

from agentskit_chat.agents._answer_commit import (
    ANSWER_COMMIT_ENV,
    ANSWER_COMMIT_INSTRUCTIONS,
    ANSWER_PROSE_INSTRUCTIONS,
    answer_commit_enabled,
    committed_answer,
    create_agent,
    mask_answer_commits,
)
from agentskit_chat.answer_commit import ANSWER_COMMIT_TOOL_NAME, render_answer
from agentskit_chat.errors import AnswerCommitError, ConfigurationError
from tests._loop import no_blocking

BASIS = "All files of acme/api, one row per file, from files.path."
VALID = {"fields": [{"label": "Repository", "value": "acme/api"}], "basis": BASIS}
RENDERED = f"{BASIS}\n\n**Answer:** Repository: acme/api"
INVALID = {"fields": [{"label": "Repository", "value": ""}], "basis": BASIS}
OFF = {ANSWER_COMMIT_ENV: "0"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def lookup(path: str) -> str:
    """Look a file up.

    Args:
        path: The file's path.
    """
    return f"{len(path)} copies"


Step = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


def commit(args: dict[str, Any]) -> Step:
    return lambda messages, info: ModelResponse(parts=[ToolCallPart(ANSWER_COMMIT_TOOL_NAME, args)])


def call(name: str, args: dict[str, Any]) -> Step:
    return lambda messages, info: ModelResponse(parts=[ToolCallPart(name, args)])


def say(text: str) -> Step:
    return lambda messages, info: ModelResponse(parts=[TextPart(text)])


def structured(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"count": 3})])


@dataclass
class Script:
    """A FunctionModel that plays ``steps`` in order and records what each request offered."""

    steps: list[Step]
    seen: list[AgentInfo] = field(default_factory=list)
    requests: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(info)
        self.requests.append(list(messages))
        return self.steps[len(self.seen) - 1](messages, info)

    async def stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        response = self(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(name=part.tool_name, json_args=part.args_as_json_str())}

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(self, stream_function=self.stream)

    def output_tools(self, request: int = 0) -> list[str]:
        return [tool.name for tool in self.seen[request].output_tools]

    def function_tools(self, request: int = 0) -> list[str]:
        return [tool.name for tool in self.seen[request].function_tools]


class Count(BaseModel):
    count: int


# --- who sees the tool ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "analyst", "sees"),
    [
        ("analyst", None, True),
        ("Analyst", None, True),
        ("data-bot", True, True),
        ("builder", None, False),
        ("plan", None, False),
        ("data-explorer", None, False),
        ("analyst-2", None, False),
        ("analyst", False, False),
    ],
)
def test_analyst_sees_the_tool_and_other_agents_do_not(
    name: str, analyst: bool | None, sees: bool
) -> None:
    script = Script([commit(VALID) if sees else say("prose")])
    agent = create_agent(
        script.model, name=name, analyst=analyst, tools=[lookup], instructions="You analyse."
    )
    result = agent.run_sync("Which repository?")
    info = script.seen[0]
    assert (ANSWER_COMMIT_TOOL_NAME in script.output_tools()) is sees
    assert script.function_tools() == ["lookup"]
    assert info.instructions is not None
    assert info.instructions.startswith("You analyse.")
    assert (ANSWER_COMMIT_INSTRUCTIONS in info.instructions) is sees
    assert result.output == (RENDERED if sees else "prose")


def test_the_tool_schema_is_the_payload_schema_and_text_stays_allowed() -> None:
    script = Script([commit(VALID)])
    create_agent(script.model, name="analyst").run_sync("q")
    (tool,) = script.seen[0].output_tools
    schema = tool.parameters_json_schema
    assert schema["required"] == ["basis"]
    assert set(schema["properties"]) == {
        "fields",
        "rows",
        "unresolved",
        "basis",
        "answer_only",
        "readings",
    }
    assert "one field per item the request asks for" in (tool.description or "")
    assert script.seen[0].allow_text_output


# --- the reserved name ---------------------------------------------------------------------------


def _answer_commit_tool() -> Any:
    def Answer_Commit(text: str) -> str:
        return text

    return Answer_Commit


@pytest.mark.parametrize(
    "tools",
    [
        pytest.param({"tools": [_answer_commit_tool()]}, id="function"),
        pytest.param({"tools": [Tool(lookup, name="ANSWER_COMMIT")]}, id="tool-upper"),
        pytest.param({"tools": [Tool(lookup, name="answer_commit")]}, id="tool-exact"),
        pytest.param({"tools": [Tool(lookup, name="ａｎｓｗｅｒ_ｃｏｍｍｉｔ")]}, id="full-width"),
        pytest.param(
            {"toolsets": [FunctionToolset([Tool(lookup, name="Answer_commit")])]}, id="plugin"
        ),
    ],
)
@pytest.mark.parametrize("name", ["analyst", "builder"])
def test_reserved_name_collision_is_rejected_when_the_agent_is_built(
    tools: dict[str, Any], name: str
) -> None:
    with pytest.raises(ConfigurationError, match="reserved") as caught:
        create_agent(Script([]).model, name=name, **tools)
    assert caught.value.code == "AK_CONFIG_INVALID"


def test_reserved_name_collision_from_an_mcp_like_toolset_is_rejected_at_run_time() -> None:
    # A toolset built per run (as an MCP server lists its tools) is only known when a run starts.
    def listed(ctx: Any) -> FunctionToolset[Any]:
        return FunctionToolset([Tool(lookup, name="Answer_Commit")])

    script = Script([commit(VALID)])
    agent = create_agent(script.model, name="analyst", toolsets=[listed])
    with pytest.raises(ConfigurationError, match="reserved"):
        agent.run_sync("q")
    assert script.seen == []


# --- the toggle ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "enabled"),
    [("0", False), ("false", False), (" OFF ", False), ("no", False), ("1", True), ("", True)],
)
def test_answer_commit_enabled_reads_the_toggle(value: str, enabled: bool) -> None:
    assert answer_commit_enabled({ANSWER_COMMIT_ENV: value}) is enabled


def test_toggle_off_removes_the_tool_and_falls_back_to_prose_instructions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ANSWER_COMMIT_ENV, "0")
    script = Script([say("**Answer:** acme/api")])
    agent = create_agent(script.model, name="analyst", tools=[lookup])
    assert agent.run_sync("Which repository?").output == "**Answer:** acme/api"
    assert script.output_tools() == []
    assert script.function_tools() == ["lookup"]
    instructions = script.seen[0].instructions or ""
    assert ANSWER_PROSE_INSTRUCTIONS in instructions
    assert ANSWER_COMMIT_TOOL_NAME not in instructions


def test_toggle_off_still_reserves_the_name() -> None:
    with pytest.raises(ConfigurationError):
        create_agent(Script([]).model, name="analyst", environ=OFF, tools=[_answer_commit_tool()])


# --- commits and repairs -------------------------------------------------------------------------


def test_invalid_then_valid_commit_ends_with_the_valid_rendering() -> None:
    script = Script([commit(INVALID), commit(VALID)])
    agent = create_agent(script.model, name="analyst", tools=[lookup])
    result = agent.run_sync("Which repository?")
    assert result.output == RENDERED
    assert len(script.seen) == 2
    # The failed commit went back as a retry: the one-line reason and the example.
    (retry,) = script.requests[1][-1].parts
    assert isinstance(retry, ToolReturnPart)
    assert retry.outcome == "retried"
    with pytest.raises(AnswerCommitError) as caught:
        render_answer(INVALID)
    assert retry.content == str(caught.value)
    assert retry.content.startswith("fields[0].value is empty")
    # ... and the model kept every tool to repair it.
    assert script.function_tools(1) == ["lookup"]
    assert script.output_tools(1) == [ANSWER_COMMIT_TOOL_NAME]


def test_success_then_failed_retry_keeps_tools() -> None:
    first = Script([commit(VALID)])
    agent = create_agent(first.model, name="analyst", tools=[lookup])
    earlier = agent.run_sync("Which repository?")
    assert earlier.output == RENDERED

    second_answer = {
        "fields": [{"label": "Copies", "value": 7}],
        "basis": BASIS,
        "answer_only": "true",
    }
    script = Script([commit(INVALID), call("lookup", {"path": "a.py"}), commit(second_answer)])
    result = agent.run_sync(
        "And how many copies?", message_history=earlier.all_messages(), model=script.model
    )
    assert result.output == "7"
    for request in range(3):
        assert script.function_tools(request) == ["lookup"]
        assert script.output_tools(request) == [ANSWER_COMMIT_TOOL_NAME]
    # A text run keeps the earlier commit as it was: a call of the tool it still offers.
    history = script.requests[0]
    assert any(
        isinstance(p, ToolCallPart) and p.tool_name == ANSWER_COMMIT_TOOL_NAME
        for m in history
        for p in m.parts
    )


def test_retries_run_out_after_the_configured_number_of_failed_commits() -> None:
    script = Script([commit(INVALID)] * 3)
    agent = create_agent(script.model, name="analyst", retries=2)
    with pytest.raises(Exception, match="Exceeded maximum output retries"):
        agent.run_sync("q")
    assert len(script.seen) == 3


def test_a_100_token_output_cap_still_yields_the_full_rendered_table() -> None:
    table = {
        "columns": ["path", "copies"],
        "data": [[f"src/module_{n}.py", n] for n in range(300)],
        "format": "csv",
    }
    payload = {"rows": table, "basis": BASIS, "answer_only": True}

    def capped(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert info.model_settings is not None
        assert info.model_settings.get("max_tokens") == 100
        return ModelResponse(parts=[ToolCallPart(ANSWER_COMMIT_TOOL_NAME, payload)])

    agent = create_agent(
        FunctionModel(capped), name="analyst", model_settings=ModelSettings(max_tokens=100)
    )
    result = agent.run_sync("List every file with its copies as CSV.")
    expected = "path,copies\n" + "\n".join(f"src/module_{n}.py,{n}" for n in range(300))
    assert result.output == expected
    assert len(result.output.split()) > 100


@pytest.mark.anyio
async def test_a_streamed_run_delivers_the_committed_text_once_without_blocking() -> None:
    rows = [[f"row {n} " + "|" * 40, n * 1.5] for n in range(400)]
    payload = {"rows": {"columns": ["name", "value"], "data": rows}, "basis": BASIS}
    assert len(render_answer(payload)) > 35_000
    looking: Step = lambda m, i: ModelResponse(  # noqa: E731
        parts=[TextPart("Looking."), ToolCallPart("lookup", {"path": "a.py"})]
    )
    script = Script([looking, commit(payload)])
    agent = create_agent(script.model, name="analyst", tools=[lookup])
    outputs: list[str] = []
    streamed: list[str] = []
    async with no_blocking(), agent.run_stream_events("Table please") as events:
        async for event in events:
            if isinstance(event, AgentRunResultEvent):
                outputs.append(event.result.output)
            elif isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                streamed.append(event.part.content)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                streamed.append(event.delta.content_delta)
    assert outputs == [render_answer(payload)]
    assert "".join(streamed) == "Looking."


# --- structured output ---------------------------------------------------------------------------


def test_structured_output_agents_never_see_the_tool() -> None:
    script = Script([structured])
    agent = create_agent(script.model, name="analyst", output_type=Count, tools=[lookup])
    assert agent.run_sync("How many?").output == Count(count=3)
    assert ANSWER_COMMIT_TOOL_NAME not in script.output_tools()
    assert ANSWER_COMMIT_TOOL_NAME not in (script.seen[0].instructions or "")
    assert not script.seen[0].allow_text_output


def test_structured_output_runs_never_see_the_tool_and_earlier_commits_are_masked() -> None:
    first = Script([commit(INVALID), commit(VALID)])
    agent = create_agent(first.model, name="analyst", tools=[lookup])
    earlier = agent.run_sync("Which repository?")

    script = Script([structured])
    result = agent.run_sync(
        "How many files?",
        output_type=Count,
        message_history=earlier.all_messages(),
        model=script.model,
    )
    assert result.output == Count(count=3)
    assert script.output_tools() == ["final_result"]
    assert ANSWER_COMMIT_TOOL_NAME not in (script.seen[0].instructions or "")
    sent = script.requests[0]
    assert [(type(m).__name__, [type(p).__name__ for p in m.parts]) for m in sent] == [
        ("ModelRequest", ["UserPromptPart"]),
        ("ModelResponse", ["TextPart"]),
        ("ModelRequest", ["UserPromptPart"]),
    ]
    masked = sent[1].parts[0]
    assert isinstance(masked, TextPart)
    assert masked.content == RENDERED
    # Masking is for the request only: the stored history keeps the calls.
    assert (
        sum(
            isinstance(p, ToolCallPart) and p.tool_name == ANSWER_COMMIT_TOOL_NAME
            for m in result.all_messages()
            for p in m.parts
        )
        == 2
    )


def test_a_text_question_after_a_structured_run_sees_the_tool_again() -> None:
    script = Script([structured, commit(VALID)])
    agent = create_agent(script.model, name="analyst")
    first = agent.run_sync("Count the files as JSON matching this schema.", output_type=Count)
    second = agent.run_sync("Which repository?", message_history=first.all_messages())
    assert ANSWER_COMMIT_TOOL_NAME not in script.output_tools(0)
    assert script.output_tools(1) == [ANSWER_COMMIT_TOOL_NAME]
    assert second.output == RENDERED


# --- metadata and history ------------------------------------------------------------------------


def test_readings_ledger_goes_to_metadata_never_to_the_text() -> None:
    readings = [{"clause": "most copied", "reading": "by copy count", "decision": "kept"}]
    script = Script([commit(INVALID), commit({**VALID, "readings": readings})])
    result = create_agent(script.model, name="analyst").run_sync("q")
    committed = committed_answer(result.new_messages())
    assert committed is not None
    assert committed.text == result.output == RENDERED
    assert committed.metadata() == {"shape": "fields", "answer_only": False, "readings": readings}
    assert "most copied" not in result.output


def test_committed_answer_is_none_when_the_run_ended_in_prose() -> None:
    script = Script([commit(INVALID), say("I could not commit.")])
    result = create_agent(script.model, name="analyst").run_sync("q")
    assert result.output == "I could not commit."
    assert committed_answer(result.new_messages()) is None


def test_mask_answer_commits_turns_calls_into_text_and_keeps_history_well_formed() -> None:
    messages: Sequence[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("q")]),
        ModelResponse(parts=[TextPart("Checking."), ToolCallPart(ANSWER_COMMIT_TOOL_NAME, {})]),
        ModelRequest(parts=[ToolReturnPart(ANSWER_COMMIT_TOOL_NAME, "bad", tool_call_id="1")]),
        ModelResponse(parts=[ToolCallPart(ANSWER_COMMIT_TOOL_NAME, VALID)]),
        ModelRequest(parts=[ToolReturnPart(ANSWER_COMMIT_TOOL_NAME, "done", tool_call_id="2")]),
        ModelRequest(parts=[UserPromptPart("next")]),
    ]
    masked = mask_answer_commits(messages)
    assert [[getattr(p, "content", None) for p in m.parts] for m in masked] == [
        ["q"],
        ["Checking.", RENDERED],
        ["next"],
    ]
    assert isinstance(masked[1], ModelResponse)
