"""The pydantic-ai chat adapter, driven by ``FunctionModel`` (no network)."""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ApprovalRequired, RunContext
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.function import (
    DeltaThinkingPart,
)

from agentskit_chat.agents import RUN_FAILED_MESSAGE, PydanticAIChatAdapter, from_pydantic_ai
from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import (
    ChatAdapter,
    ChatConfig,
    ChatController,
    ChatMessage,
    ChatState,
    StreamChunk,
)
from agentskit_chat.storage import SQLiteChatMemory
from tests._loop import no_blocking
from tests.agents._pydantic_ai_fakes import (
    T0,
    Script,
    assistant,
    call,
    calls_of,
    collect,
    ids,
    kinds,
    placeholder,
    request,
    summary,
    tool_call,
    user,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Tools:
    """Tools with run counters: ``add`` (plain), ``delete`` (needs approval), ``boom``."""

    runs: dict[str, int] = field(default_factory=dict)

    def install(self, agent: Agent[None, str]) -> None:
        @agent.tool_plain
        def add(a: int, b: int) -> int:
            self.runs["add"] = self.runs.get("add", 0) + 1
            return a + b

        @agent.tool_plain(requires_approval=True)
        def delete(path: str) -> str:
            self.runs["delete"] = self.runs.get("delete", 0) + 1
            return f"deleted {path}"

        @agent.tool
        def maybe(ctx: RunContext[None], path: str) -> dict[str, Any]:
            if not ctx.tool_call_approved:
                raise ApprovalRequired()
            self.runs["maybe"] = self.runs.get("maybe", 0) + 1
            return {"path": path, "ok": True}

        @agent.tool_plain
        def boom() -> str:
            raise RuntimeError("secret tool failure")


def agent_for(script: Script, tools: Tools | None = None) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(script.model())
    (tools or Tools()).install(agent)
    return agent


# --- construction ---------------------------------------------------------------------------------


def test_from_pydantic_ai_returns_a_chat_adapter() -> None:
    adapter = from_pydantic_ai(Agent(Script([["hi"]]).model()))
    assert isinstance(adapter, PydanticAIChatAdapter)
    assert isinstance(adapter, ChatAdapter)
    assert adapter.capabilities.streaming


@pytest.mark.parametrize("agent", [None, "openai:gpt-4.1-mini", object()])
def test_from_pydantic_ai_rejects_what_is_not_an_agent(agent: Any) -> None:
    with pytest.raises(TypeError):
        from_pydantic_ai(agent)


def test_missing_llm_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    with pytest.raises(ImportError, match=r"'llm' extra"):
        from_pydantic_ai(object())  # type: ignore[arg-type]


# --- streaming ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (["Hel", "lo, ", "world"], ["Hel", "lo, ", "world"]),
        (["one"], ["one"]),
        (["a", "", "b"], ["a", "b"]),
    ],
)
async def test_text_arrives_as_ordered_text_chunks_then_usage_and_done(
    pieces: list[str], expected: list[str]
) -> None:
    script = Script([list(pieces)])
    adapter = from_pydantic_ai(agent_for(script))
    async with no_blocking():
        chunks = await collect(adapter.create_source(request(user("hi"), placeholder())))
    assert [chunk.content for chunk in chunks if chunk.type == "text"] == expected
    assert kinds(chunks)[-2:] == ["usage", "done"]
    assert kinds(chunks).count("done") == 1


async def test_thinking_is_streamed_as_reasoning_chunks() -> None:
    script = Script([[{0: DeltaThinkingPart(content="let me think")}, "answer"]])
    chunks = await collect(
        from_pydantic_ai(agent_for(script)).create_source(request(user("q"), placeholder()))
    )
    assert [chunk.content for chunk in chunks if chunk.type == "reasoning"] == ["let me think"]
    assert [chunk.content for chunk in chunks if chunk.type == "text"] == ["answer"]


async def test_usage_chunk_reports_the_runs_token_counts() -> None:
    # FunctionModel estimates 50 input tokens per request and one output token per word.
    script = Script([[tool_call(0, "add", '{"a": 1, "b": 2}', "c1")], ["three is ", "the sum"]])
    chunks = await collect(
        from_pydantic_ai(agent_for(script)).create_source(request(user("add"), placeholder()))
    )
    usage = [chunk.usage for chunk in chunks if chunk.type == "usage"]
    assert len(usage) == 1 and usage[0] is not None
    assert usage[0].prompt_tokens == 100
    assert usage[0].completion_tokens > 0
    assert usage[0].total_tokens == usage[0].prompt_tokens + usage[0].completion_tokens


async def test_system_prompt_is_sent_as_instructions() -> None:
    script = Script([["ok"]])
    await collect(
        from_pydantic_ai(agent_for(script)).create_source(
            request(user("q"), placeholder(), system_prompt="Answer in French.")
        )
    )
    assert script.infos[0].instructions == "Answer in French."


class Weather(BaseModel):
    city: str
    celsius: int


async def test_structured_output_is_shown_as_compact_json_text() -> None:
    script = Script([[tool_call(0, "final_result", '{"city": "Oslo", "celsius": 4}', "o1")]])
    agent: Agent[None, Weather] = Agent(script.model(), output_type=Weather)
    chunks = await collect(
        from_pydantic_ai(agent).create_source(request(user("weather?"), placeholder()))
    )
    assert [chunk.content for chunk in chunks if chunk.type == "text"] == [
        '{"city":"Oslo","celsius":4}'
    ]
    assert calls_of(chunks) == []


# --- tools ----------------------------------------------------------------------------------------


async def test_plain_tool_call_is_reported_running_then_complete() -> None:
    tools = Tools()
    script = Script([[tool_call(0, "add", '{"a": 1, "b": 2}', "c1")], ["done"]])
    chunks = await collect(
        from_pydantic_ai(agent_for(script, tools)).create_source(request(user("go"), placeholder()))
    )
    assert calls_of(chunks) == [("tool_call", "c1", "running"), ("tool_result", "c1", "complete")]
    finished = chunks[kinds(chunks).index("tool_result")].tool_call
    assert finished is not None
    assert finished.result == "3"
    assert finished.name == "add"
    assert dict(finished.args) == {"a": 1, "b": 2}
    assert tools.runs == {"add": 1}
    assert kinds(chunks)[-3:] == ["text", "usage", "done"]


async def test_a_raising_tool_ends_the_turn_with_the_fixed_error() -> None:
    script = Script([[tool_call(0, "boom", "{}", "c1")], ["never"]])
    chunks = await collect(
        from_pydantic_ai(agent_for(script)).create_source(request(user("go"), placeholder()))
    )
    assert calls_of(chunks) == [("tool_call", "c1", "running"), ("tool_result", "c1", "error")]
    assert chunks[-1] == StreamChunk("error", content=RUN_FAILED_MESSAGE)
    assert not any("secret" in (chunk.content or "") for chunk in chunks)
    assert not any("secret" in str(chunk.tool_call) for chunk in chunks)


@pytest.mark.parametrize(
    "failure",
    [
        ModelHTTPError(status_code=500, model_name="m", body="provider secret"),
        RuntimeError("provider secret"),
    ],
    ids=["http", "runtime"],
)
async def test_a_provider_failure_is_one_error_chunk_with_the_fixed_text(
    failure: Exception,
) -> None:
    script = Script([["partial "]], fail=failure)
    chunks = await collect(
        from_pydantic_ai(agent_for(script)).create_source(request(user("q"), placeholder()))
    )
    assert kinds(chunks) == ["text", "error"]
    assert chunks[-1].content == RUN_FAILED_MESSAGE
    assert "secret" not in RUN_FAILED_MESSAGE


@pytest.mark.parametrize("tool", ["delete", "maybe"])
async def test_approval_required_tool_pauses_with_requires_confirmation_then_done(
    tool: str,
) -> None:
    tools = Tools()
    script = Script([["Deleting. ", tool_call(1, tool, '{"path": "a.txt"}', "c1")]])
    adapter = from_pydantic_ai(agent_for(script, tools))
    async with no_blocking():
        chunks = await collect(adapter.create_source(request(user("delete a.txt"), placeholder())))
    assert [chunk.content for chunk in chunks if chunk.type == "text"] == ["Deleting. "]
    assert calls_of(chunks)[-1] == ("tool_call", "c1", "requires_confirmation")
    assert kinds(chunks)[-2:] == ["usage", "done"]
    assert tools.runs == {}
    assert len(script.seen) == 1


async def test_approval_and_plain_call_in_one_response() -> None:
    tools = Tools()
    both = {
        **tool_call(0, "add", '{"a": 2, "b": 2}', "c1"),
        **tool_call(1, "delete", '{"path": "x"}', "c2"),
    }
    script = Script([[both]])
    chunks = await collect(
        from_pydantic_ai(agent_for(script, tools)).create_source(
            request(user("both"), placeholder())
        )
    )
    final = {chunk.tool_call.id: chunk.tool_call.status for chunk in chunks if chunk.tool_call}
    assert final == {"c1": "complete", "c2": "requires_confirmation"}
    assert tools.runs == {"add": 1}


# --- resuming a paused turn -----------------------------------------------------------------------


def fold(message_id: str, chunks: Sequence[StreamChunk]) -> ChatMessage:
    """The assistant message a controller would build from ``chunks``."""
    text = "".join(chunk.content or "" for chunk in chunks if chunk.type == "text")
    calls: dict[str, ToolCall] = {}
    for chunk in chunks:
        if chunk.tool_call is not None:
            calls[chunk.tool_call.id] = chunk.tool_call
    return assistant(text, message_id, list(calls.values()) or None)


def decide(message: ChatMessage, call_id: str, **changes: Any) -> ChatMessage:
    calls = tuple(
        item.model_copy(update=changes) if item.id == call_id else item
        for item in message.tool_calls or ()
    )
    return ChatMessage(
        id=message.id,
        role="assistant",
        content=message.content,
        created_at=message.created_at,
        tool_calls=calls,
    )


async def paused_turn(tools: Tools, script: Script) -> tuple[PydanticAIChatAdapter, ChatMessage]:
    adapter = from_pydantic_ai(agent_for(script, tools))
    chunks = await collect(adapter.create_source(request(user("delete a.txt"), placeholder("a1"))))
    message = fold("a1", chunks)
    assert message.tool_calls is not None
    assert message.tool_calls[0].status == "requires_confirmation"
    return adapter, message


async def test_resume_after_approve_runs_the_tool_once_and_continues() -> None:
    tools = Tools()
    script = Script([["Deleting. ", tool_call(1, "delete", '{"path": "a.txt"}', "c1")], ["Done."]])
    adapter, paused = await paused_turn(tools, script)
    approved = decide(paused, "c1", status="running")
    async with no_blocking():
        chunks = await collect(
            adapter.create_source(request(user("delete a.txt"), approved, placeholder("a2")))
        )
    assert tools.runs == {"delete": 1}
    assert calls_of(chunks) == [("tool_result", "c1", "complete")]
    result = chunks[0].tool_call
    assert result is not None
    assert result.result == "deleted a.txt"
    assert [chunk.content for chunk in chunks if chunk.type == "text"] == ["Done."]
    assert kinds(chunks)[-2:] == ["usage", "done"]
    assert summary(script.seen[-1]) == [
        ("request", "user:delete a.txt"),
        ("response", "text:Deleting. ", 'call:c1:delete:{"path":"a.txt"}'),
        ("request", "return:c1:success:deleted a.txt"),
    ]


@pytest.mark.parametrize(
    "error", ["Permission denied: user denied access", "Permission denied: not today"]
)
async def test_resume_after_deny_sends_the_denial_to_the_model(error: str) -> None:
    tools = Tools()
    script = Script(
        [["Deleting. ", tool_call(1, "delete", '{"path": "a.txt"}', "c1")], ["Understood."]]
    )
    adapter, paused = await paused_turn(tools, script)
    denied = decide(paused, "c1", status="error", error=error)
    chunks = await collect(
        adapter.create_source(request(user("delete a.txt"), denied, placeholder("a2")))
    )
    assert tools.runs == {}
    assert calls_of(chunks) == [("tool_result", "c1", "error")]
    assert chunks[0].tool_call is not None
    assert chunks[0].tool_call.error == error
    assert summary(script.seen[-1])[-1] == ("request", f"return:c1:denied:{error}")
    assert [chunk.content for chunk in chunks if chunk.type == "text"] == ["Understood."]


async def test_resume_waits_while_a_call_of_the_turn_is_undecided() -> None:
    script = Script([["never"]])
    waiting = assistant(
        "",
        "a1",
        [
            call("c1", "delete", "running", {"path": "a"}),
            call("c2", "delete", "requires_confirmation", {"path": "b"}),
        ],
    )
    chunks = await collect(
        from_pydantic_ai(agent_for(script)).create_source(
            request(user("q"), waiting, placeholder())
        )
    )
    assert chunks == [StreamChunk("done")]
    assert script.seen == []


@pytest.mark.parametrize(
    "messages",
    [(), (placeholder(),), (user("q"), assistant("answered", "a1"), placeholder("a2"))],
    ids=["empty", "placeholder-only", "answered"],
)
async def test_nothing_to_run_is_just_done(messages: tuple[ChatMessage, ...]) -> None:
    script = Script([["never"]])
    chunks = await collect(from_pydantic_ai(agent_for(script)).create_source(request(*messages)))
    assert chunks == [StreamChunk("done")]
    assert script.seen == []


# --- history ----------------------------------------------------------------------------------


async def test_history_is_rebuilt_for_the_model() -> None:
    script = Script([["fine"]])
    history = (
        ChatMessage(id="s1", role="system", content="Be kind.", created_at=T0),
        user("add 2 and 2", "u1"),
        assistant(
            "It is 4.",
            "a1",
            [
                call("c1", "add", "complete", {"a": 2, "b": 2}, result="4"),
                call("c2", "boom", "error", error="it broke"),
                call("c3", "add", "running", {"a": 1, "b": 1}),
            ],
        ),
        ChatMessage(id="t1", role="tool", content="ignored", created_at=T0, tool_call_id="c1"),
        user("delete x", "u2"),
        assistant(
            "Deleting x.",
            "a2",
            [call("c4", "delete", "error", {"path": "x"}, error="Permission denied: no")],
        ),
        assistant("Understood.", "a3"),
        user("try again", "u3"),
        assistant("", "a4", [call("c5", "delete", "requires_confirmation", {"path": "x"})]),
        user("and now?", "u4"),
        placeholder("a5"),
    )
    await collect(from_pydantic_ai(agent_for(script)).create_source(request(*history)))
    assert summary(script.seen[0]) == [
        ("request", "system:Be kind.", "user:add 2 and 2"),
        (
            "response",
            'call:c1:add:{"a":2,"b":2}',
            "call:c2:boom:{}",
            'call:c3:add:{"a":1,"b":1}',
        ),
        (
            "request",
            "return:c1:success:4",
            "return:c2:failed:it broke",
            "return:c3:interrupted:The tool call did not finish.",
        ),
        ("response", "text:It is 4."),
        ("request", "user:delete x"),
        ("response", "text:Deleting x.", 'call:c4:delete:{"path":"x"}'),
        ("request", "return:c4:denied:Permission denied: no"),
        ("response", "text:Understood."),
        ("request", "user:try again"),
        ("response", 'call:c5:delete:{"path":"x"}'),
        (
            "request",
            "return:c5:denied:The user did not approve this tool call.",
            "user:and now?",
        ),
    ]


async def test_user_text_parts_stand_in_for_empty_content() -> None:
    script = Script([["ok"]])
    message = ChatMessage.from_record(
        {
            "id": "u1",
            "role": "user",
            "content": "",
            "status": "complete",
            "createdAt": "2026-07-13T09:00:00.000Z",
            "parts": [
                {"type": "text", "text": "look at"},
                {"type": "image", "source": "https://example.test/cat.png"},
                {"type": "text", "text": "this"},
            ],
        }
    )
    await collect(
        from_pydantic_ai(agent_for(script)).create_source(request(message, placeholder()))
    )
    assert summary(script.seen[0]) == [("request", "user:look at\nthis")]


# --- cancellation -----------------------------------------------------------------------------


async def test_abort_mid_stream_stops_the_model_stream() -> None:
    script = Script([["a", "b"]], hold=True)
    source = from_pydantic_ai(agent_for(script)).create_source(request(user("q"), placeholder()))
    seen: list[StreamChunk] = []
    two = anyio.Event()
    finished = anyio.Event()

    async def consume() -> None:
        async for chunk in source.stream():
            seen.append(chunk)
            if len(seen) == 2:
                two.set()
        finished.set()

    with anyio.fail_after(10):  # a hang guard, not a timing assertion
        async with no_blocking(), anyio.create_task_group() as group:
            group.start_soon(consume)
            await two.wait()
            # The consumer now waits on a model stream that never ends: only abort ends it.
            await anyio.sleep(0.05)
            source.abort()
            await finished.wait()
    assert [chunk.content for chunk in seen] == ["a", "b"]
    assert script.closed == 1


async def test_aclose_mid_stream_stops_the_model_stream() -> None:
    script = Script([["a", "b"]], hold=True)
    source = from_pydantic_ai(agent_for(script)).create_source(request(user("q"), placeholder()))
    stream = source.stream()
    assert isinstance(stream, AsyncGenerator)
    with anyio.fail_after(10):
        first = await stream.__anext__()
        await stream.aclose()
    assert first.content == "a"
    assert script.closed == 1


async def test_abort_before_iteration_never_calls_the_model() -> None:
    script = Script([["a"]])
    source = from_pydantic_ai(agent_for(script)).create_source(request(user("q"), placeholder()))
    source.abort()
    assert await collect(source) == []
    assert script.seen == []


async def test_a_source_streams_once() -> None:
    script = Script([["a"]])
    source = from_pydantic_ai(agent_for(script)).create_source(request(user("q"), placeholder()))
    assert kinds(await collect(source)) == ["text", "usage", "done"]
    assert await collect(source) == []
    assert len(script.seen) == 1


# --- end to end with the chat controller ------------------------------------------------------


@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_controller_approval_round_trip_with_sqlite_memory(
    decision: str, tmp_path: Path
) -> None:
    tools = Tools()
    script = Script(
        [
            ["Deleting. ", tool_call(1, "delete", '{"path": "a.txt"}', "c1")],
            ["All done."],
        ]
    )
    adapter = from_pydantic_ai(agent_for(script, tools))
    async with no_blocking(), SQLiteChatMemory(tmp_path / "chat.db", "conv") as memory:
        config = ChatConfig(
            adapter=adapter,
            memory=memory,
            id_factory=ids(),
            clock=lambda: T0,
        )
        controller = ChatController(config)
        await controller.send("delete a.txt")
        paused = controller.state.messages[-1]
        assert paused.content == "Deleting. "
        assert paused.tool_calls is not None
        assert [c.status for c in paused.tool_calls] == ["requires_confirmation"]
        assert tools.runs == {}

        if decision == "approve":
            await controller.approve("c1")
        else:
            await controller.deny("c1", "not today")

        state = controller.state
        assert state.status == "idle"
        assert [m.role for m in state.messages] == ["user", "assistant", "assistant"]
        assert state.messages[-1].content == "All done."
        final_call = state.messages[1].tool_calls
        assert final_call is not None and len(final_call) == 1
        if decision == "approve":
            assert tools.runs == {"delete": 1}
            assert (final_call[0].status, final_call[0].result) == ("complete", "deleted a.txt")
            assert summary(script.seen[-1])[-1] == ("request", "return:c1:success:deleted a.txt")
        else:
            assert tools.runs == {}
            assert final_call[0].status == "error"
            assert final_call[0].error == "Permission denied: not today"
            assert summary(script.seen[-1])[-1] == (
                "request",
                "return:c1:denied:Permission denied: not today",
            )
        assert state.usage.total_tokens > 0

        restored = ChatController(config)
        await restored.load()
        assert [m.to_wire() for m in restored.state.messages] == [
            m.to_wire() for m in state.messages
        ]


async def test_controller_stop_closes_the_model_stream() -> None:
    script = Script([["a", "b"]], hold=True)
    controller = ChatController(ChatConfig(adapter=from_pydantic_ai(agent_for(script))))
    streamed = anyio.Event()

    def listen(state: ChatState) -> None:
        if state.messages and state.messages[-1].content == "ab":
            streamed.set()

    controller.subscribe(listen)
    with anyio.fail_after(10):  # a hang guard, not a timing assertion
        async with no_blocking(), anyio.create_task_group() as group:
            group.start_soon(controller.send, "hi")
            await streamed.wait()
            controller.stop()
    assert script.closed == 1
    assert controller.state.status == "idle"
    assert controller.state.messages[-1].content == "ab"
    assert controller.state.messages[-1].status == "complete"


async def test_controller_resumes_only_once_every_approval_is_decided() -> None:
    tools = Tools()
    both = {
        **tool_call(0, "delete", '{"path": "a"}', "c1"),
        **tool_call(1, "delete", '{"path": "b"}', "c2"),
    }
    script = Script([[both], ["Both handled."]])
    adapter = from_pydantic_ai(agent_for(script, tools))
    controller = ChatController(ChatConfig(adapter=adapter, id_factory=ids(), clock=lambda: T0))
    async with no_blocking():
        await controller.send("delete a and b")
        await controller.approve("c1")
        assert tools.runs == {}
        assert len(script.seen) == 1
        await controller.deny("c2")
    assert tools.runs == {"delete": 1}
    assert len(script.seen) == 2
    assert summary(script.seen[-1])[-1] == (
        "request",
        "return:c1:success:deleted a",
        "return:c2:denied:Permission denied: user denied access",
    )
    assert controller.state.messages[-1].content == "Both handled."
    statuses = [c.status for c in controller.state.messages[1].tool_calls or ()]
    assert statuses == ["complete", "error"]
