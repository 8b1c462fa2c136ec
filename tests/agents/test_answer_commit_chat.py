"""The committed answer through the pydantic-ai chat adapter (``FunctionModel``, no network)."""

from __future__ import annotations

import json
import string
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent, Tool
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.settings import ModelSettings

from agentskit_chat.agents import (
    ANSWER_COMMIT_ENV,
    ANSWER_COMMIT_METADATA_KEY,
    RUN_FAILED_MESSAGE,
    PydanticAIChatAdapter,
    create_agent,
    from_pydantic_ai,
)
from agentskit_chat.answer_commit import ANSWER_COMMIT_TOOL_NAME, render_answer
from agentskit_chat.errors import AnswerCommitError
from agentskit_chat.runtime import (
    AdapterContext,
    AdapterRequest,
    ChatConfig,
    ChatController,
    ChatMessage,
    ChatState,
    ChatTool,
    InMemoryChatMemory,
    StreamChunk,
)
from tests._loop import no_blocking

T0 = datetime(2026, 7, 13, 9, 0, tzinfo=UTC)
BASIS = "All files of acme/api, one row per file, from files.path."
VALID: dict[str, Any] = {"fields": [{"label": "Repository", "value": "acme/api"}], "basis": BASIS}
RENDERED = f"{BASIS}\n\n**Answer:** Repository: acme/api"
INVALID: dict[str, Any] = {"fields": [{"label": "Repository", "value": ""}], "basis": BASIS}
READINGS = [
    {"clause": "most copied", "reading": "by copy count", "result": "a.py", "decision": "kept"}
]
OFF = {ANSWER_COMMIT_ENV: "0"}

Item = str | DeltaToolCalls
Step = list[Item] | BaseException


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- helpers -------------------------------------------------------------------------------------


def commit(payload: dict[str, Any], index: int = 1) -> DeltaToolCalls:
    return {index: DeltaToolCall(name=ANSWER_COMMIT_TOOL_NAME, json_args=json.dumps(payload))}


def tool(name: str, args: dict[str, Any], index: int = 1) -> DeltaToolCalls:
    return {index: DeltaToolCall(name=name, json_args=json.dumps(args))}


def lookup(path: str) -> str:
    """Look a file up.

    Args:
        path: The file's path.
    """
    return f"{len(path)} copies"


def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: The file's path.
    """
    return f"deleted {path}"


@dataclass
class Script:
    """A streaming FunctionModel: request ``n`` plays step ``n`` (items, or an exception).

    ``gate``, when set, makes the last step wait for it before its last item.
    """

    steps: list[Step]
    gate: anyio.Event | None = None
    infos: list[AgentInfo] = field(default_factory=list)

    @property
    def model(self) -> FunctionModel:
        def unused(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            raise AssertionError("the adapter streams")

        return FunctionModel(unused, stream_function=self.stream)

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Item]:
        self.infos.append(info)
        step = self.steps[len(self.infos) - 1]
        if isinstance(step, BaseException):
            raise step
        for position, item in enumerate(step):
            if self.gate is not None and position == len(step) - 1:
                await self.gate.wait()
            yield item


def analyst(script: Script, **options: Any) -> Agent[Any, Any]:
    options.setdefault("tools", [lookup])
    return create_agent(script.model, name="analyst", **options)


def request(text: str = "Which repository?") -> AdapterRequest:
    messages = (
        ChatMessage(id="u1", role="user", content=text, created_at=T0),
        ChatMessage(id="p1", role="assistant", content="", created_at=T0, status="streaming"),
    )
    return AdapterRequest(messages=messages, context=AdapterContext())


async def collect(adapter: PydanticAIChatAdapter, text: str = "q") -> list[StreamChunk]:
    return [chunk async for chunk in adapter.create_source(request(text)).stream()]


def texts(chunks: Sequence[StreamChunk]) -> list[str | None]:
    return [chunk.content for chunk in chunks if chunk.type == "text"]


def ids() -> Callable[[], str]:
    counter = iter(range(1, 1000))
    return lambda: f"m{next(counter)}"


def controller_for(agent: Agent[Any, Any], **options: Any) -> ChatController:
    config = ChatConfig(adapter=from_pydantic_ai(agent), id_factory=ids(), clock=lambda: T0)
    return ChatController(config.with_changes(**options))


def contents_seen(controller: ChatController) -> list[str]:
    """Every content the newest assistant message had, in order, as subscribers saw it."""
    seen: list[str] = []

    def listen(state: ChatState) -> None:
        last = state.messages[-1] if state.messages else None
        if last is not None and last.role == "assistant" and (not seen or seen[-1] != last.content):
            seen.append(last.content)

    controller.subscribe(listen)
    return seen


# --- detection -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "holds"),
    [
        pytest.param(lambda m: create_agent(m, name="analyst"), True, id="analyst"),
        pytest.param(lambda m: create_agent(m, name="bot", analyst=True), True, id="marked"),
        pytest.param(lambda m: create_agent(m, name="builder"), False, id="builder"),
        pytest.param(lambda m: create_agent(m, name="analyst", environ=OFF), False, id="off"),
        pytest.param(lambda m: create_agent(m, name="analyst", output_type=int), False, id="int"),
        pytest.param(Agent, False, id="plain-agent"),
    ],
)
def test_the_adapter_holds_text_only_for_agents_that_offer_answer_commit(
    build: Callable[[FunctionModel], Agent[Any, Any]], holds: bool
) -> None:
    assert from_pydantic_ai(build(Script([]).model)).answer_commit is holds


# --- the committed answer, delivered once ---------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "preamble",
    [["Looking."], ["Look", "ing", "."], []],
    ids=["one-delta", "three-deltas", "none"],
)
async def test_preamble_text_then_commit_delivers_exactly_the_rendered_answer_once(
    preamble: list[str],
) -> None:
    script = Script([[*preamble, tool("lookup", {"path": "a.py"})], ["Done:", commit(VALID)]])
    adapter = from_pydantic_ai(analyst(script))
    async with no_blocking():
        chunks = await collect(adapter)
    assert texts(chunks) == [RENDERED]
    assert [chunk.type for chunk in chunks] == ["tool_call", "tool_result", "text", "usage", "done"]
    # Tool calls still stream; the commit itself is the answer, not a tool call on the message.
    assert all(chunk.tool_call.name == "lookup" for chunk in chunks if chunk.tool_call is not None)
    answer = next(chunk for chunk in chunks if chunk.type == "text")
    assert answer.metadata == {
        ANSWER_COMMIT_METADATA_KEY: {"shape": "fields", "answer_only": False, "readings": []}
    }


@pytest.mark.anyio
async def test_through_the_controller_the_message_is_the_rendered_answer_and_nothing_else() -> None:
    rows = [[f"row {n} " + "|" * 40, n * 1.5] for n in range(400)]
    payload = {"rows": {"columns": ["name", "value"], "data": rows}, "basis": BASIS}
    rendered = render_answer(payload)
    assert len(rendered) > 35_000
    script = Script([["Looking.", tool("lookup", {"path": "a.py"})], ["Done:", commit(payload)]])
    memory = InMemoryChatMemory()
    controller = controller_for(analyst(script), memory=memory)
    seen = contents_seen(controller)
    async with no_blocking():
        await controller.send("Table please")
    state = controller.state
    assert state.status == "idle"
    assert [m.role for m in state.messages] == ["user", "assistant"]
    message = state.messages[-1]
    assert message.content == rendered
    assert message.status == "complete"
    assert [(c.name, c.status) for c in message.tool_calls or ()] == [("lookup", "complete")]
    # Never "Looking." or "Done:", not even for a moment: the answer arrived whole, once.
    assert [content for content in seen if content] == [rendered]
    assert (message.metadata or {})[ANSWER_COMMIT_METADATA_KEY]["shape"] == "rows"
    (_, saved) = await memory.load()
    assert saved.to_wire() == message.to_wire()


@pytest.mark.anyio
async def test_invalid_then_valid_commit_delivers_the_valid_rendering_only() -> None:
    script = Script([["Trying.", commit(INVALID)], ["Fixed.", commit(VALID)]])
    chunks = await collect(from_pydantic_ai(analyst(script)))
    assert texts(chunks) == [RENDERED]
    assert len(script.infos) == 2
    # The model kept every tool to repair its commit.
    assert [t.name for t in script.infos[1].function_tools] == ["lookup"]
    assert [t.name for t in script.infos[1].output_tools] == [ANSWER_COMMIT_TOOL_NAME]


@pytest.mark.anyio
async def test_a_100_token_output_cap_still_delivers_the_full_rendered_table() -> None:
    table = {
        "columns": ["path", "copies"],
        "data": [[f"src/module_{n}.py", n] for n in range(300)],
        "format": "csv",
    }
    payload = {"rows": table, "basis": BASIS, "answer_only": True}
    script = Script([["Here it is:", commit(payload)]])
    adapter = from_pydantic_ai(analyst(script), model_settings=ModelSettings(max_tokens=100))
    chunks = await collect(adapter, "List every file with its copies as CSV.")
    assert script.infos[0].model_settings is not None
    assert script.infos[0].model_settings.get("max_tokens") == 100
    expected = "path,copies\n" + "\n".join(f"src/module_{n}.py,{n}" for n in range(300))
    assert texts(chunks) == [expected]
    assert len(expected.split()) > 100


@pytest.mark.anyio
async def test_the_readings_ledger_goes_to_metadata_and_is_never_rendered() -> None:
    script = Script([["Reading.", commit({**VALID, "answer_only": True, "readings": READINGS})]])
    controller = controller_for(analyst(script))
    await controller.send("Which repository?")
    message = controller.state.messages[-1]
    assert message.content == "acme/api"
    assert (message.metadata or {})[ANSWER_COMMIT_METADATA_KEY] == {
        "shape": "fields",
        "answer_only": True,
        "readings": READINGS,
    }
    for reading in READINGS[0].values():
        assert reading not in message.content


# --- runs that do not commit ---------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda m: create_agent(m, name="builder"), id="builder"),
        pytest.param(lambda m: create_agent(m, name="analyst", environ=OFF), id="analyst-off"),
        pytest.param(Agent, id="plain-agent"),
    ],
)
async def test_other_agents_still_stream_text_live_in_several_chunks(
    build: Callable[[FunctionModel], Agent[Any, Any]],
) -> None:
    gate = anyio.Event()
    script = Script([["Hel", "lo ", "there"]], gate=gate)
    source = from_pydantic_ai(build(script.model)).create_source(request())
    chunks: list[StreamChunk] = []
    with anyio.fail_after(10):  # a hang guard: held text would never open the gate
        async with no_blocking():
            async for chunk in source.stream():
                chunks.append(chunk)
                if texts(chunks) == ["Hel", "lo "]:
                    gate.set()  # the last delta is sent only after two arrived
    assert texts(chunks) == ["Hel", "lo ", "there"]
    assert all(chunk.metadata is None for chunk in chunks)


@pytest.mark.anyio
async def test_an_analyst_answering_in_prose_sends_its_held_text_in_one_chunk() -> None:
    script = Script([["Which ", "year ", "do you mean?"]])
    chunks = await collect(from_pydantic_ai(analyst(script)))
    assert texts(chunks) == ["Which year do you mean?"]
    assert [chunk.type for chunk in chunks] == ["text", "usage", "done"]
    assert chunks[0].metadata is None


@pytest.mark.anyio
async def test_an_analyst_giving_up_on_commits_sends_its_prose() -> None:
    script = Script([["Trying.", commit(INVALID)], ["I could not commit."]])
    chunks = await collect(from_pydantic_ai(analyst(script)))
    assert texts(chunks) == ["Trying.I could not commit."]
    assert all(chunk.metadata is None for chunk in chunks)


@pytest.mark.anyio
async def test_an_analyst_paused_for_approval_shows_its_text_then_commits_on_resume() -> None:
    script = Script(
        [["Deleting first.", tool("delete", {"path": "a.txt"})], ["Done:", commit(VALID)]]
    )
    agent = analyst(script, tools=[Tool(delete, requires_approval=True)])
    controller = controller_for(agent)
    async with no_blocking():
        await controller.send("Delete a.txt, then tell me the repository.")
        paused = controller.state.messages[-1]
        assert paused.content == "Deleting first."
        (call,) = paused.tool_calls or ()
        assert call.status == "requires_confirmation"
        await controller.approve(call.id)
    state = controller.state
    assert [m.role for m in state.messages] == ["user", "assistant", "assistant"]
    assert state.messages[-1].content == RENDERED
    assert ANSWER_COMMIT_METADATA_KEY in (state.messages[-1].metadata or {})
    (done,) = state.messages[1].tool_calls or ()
    assert (done.status, done.result) == ("complete", "deleted a.txt")


# --- provider failures and retries ---------------------------------------------------------------


@pytest.mark.anyio
async def test_a_provider_retry_after_an_error_still_delivers_the_committed_text_once() -> None:
    # pydantic-ai retries a failed provider through FallbackModel (here: the same model again).
    failure = ModelHTTPError(status_code=503, model_name="m", body="overloaded")
    script = Script([failure, ["Looking.", commit(VALID)]])
    retried = FallbackModel(script.model, script.model)
    agent = create_agent(retried, name="analyst", tools=[lookup])
    chunks = await collect(from_pydantic_ai(agent))
    assert len(script.infos) == 2
    assert texts(chunks) == [RENDERED]
    assert [chunk.type for chunk in chunks] == ["text", "usage", "done"]


@pytest.mark.anyio
async def test_a_retried_turn_after_a_failed_stream_delivers_the_committed_text_once() -> None:
    failure = ModelHTTPError(status_code=500, model_name="m", body="provider secret")
    script = Script([failure, ["Looking.", commit(VALID)]])
    controller = controller_for(analyst(script))
    async with no_blocking():
        await controller.send("Which repository?")
        assert controller.state.status == "error"
        assert controller.state.error == RUN_FAILED_MESSAGE
        await controller.retry()
    state = controller.state
    assert state.status == "idle"
    assert [m.role for m in state.messages] == ["user", "assistant"]
    assert state.messages[-1].content == RENDERED
    assert state.messages[-1].content.count("**Answer:**") == 1


@pytest.mark.anyio
async def test_a_run_failing_after_held_text_shows_that_text_then_the_error() -> None:
    script = Script([["Looking.", tool("lookup", {"path": "a.py"})], RuntimeError("secret")])
    chunks = await collect(from_pydantic_ai(analyst(script)))
    assert [chunk.type for chunk in chunks] == ["tool_call", "tool_result", "text", "error"]
    assert texts(chunks) == ["Looking."]
    assert chunks[-1].content == RUN_FAILED_MESSAGE


# --- the reserved name ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_chat_tools_never_reach_the_agent_so_none_can_take_the_reserved_name() -> None:
    # The adapter does not hand the chat's tools to the agent (the controller runs them), so a
    # chat tool named answer_commit cannot shadow the analyst's tool.
    script = Script([[commit(VALID, index=0)]])
    reserved = ChatTool(name="Answer_Commit", description="Not the real one.")
    controller = controller_for(analyst(script), tools=(reserved,))
    await controller.send("Which repository?")
    (info,) = script.infos
    assert [t.name for t in info.function_tools] == ["lookup"]
    assert [t.name for t in info.output_tools] == [ANSWER_COMMIT_TOOL_NAME]
    assert controller.state.messages[-1].content == RENDERED


# --- property ------------------------------------------------------------------------------------

_WORDS = st.text(alphabet=string.ascii_letters + string.digits + " .,:", min_size=1, max_size=30)
_VALUES = st.one_of(_WORDS, st.integers(min_value=-(10**12), max_value=10**12), st.booleans())
_FIELDS = st.lists(
    st.fixed_dictionaries({"label": _WORDS, "value": _VALUES}), min_size=1, max_size=4
)


@settings(max_examples=30, deadline=None)
@given(
    preamble=st.lists(_WORDS, max_size=4),
    fields=_FIELDS,
    answer_only=st.booleans(),
)
def test_any_preamble_and_any_valid_commit_give_exactly_its_rendering(
    preamble: list[str], fields: list[dict[str, Any]], answer_only: bool
) -> None:
    payload = {"fields": fields, "basis": BASIS, "answer_only": answer_only}
    try:
        expected = render_answer(payload)
    except AnswerCommitError:
        assume(False)
        raise
    script = Script([[*preamble, commit(payload)]])

    async def run() -> list[StreamChunk]:
        return await collect(from_pydantic_ai(analyst(script)))

    chunks = anyio.run(run)
    assert texts(chunks) == [expected]
