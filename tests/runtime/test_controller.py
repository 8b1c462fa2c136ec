"""The chat controller's lifecycle: send, stop, retry, regenerate, edit, chunks, memory."""

from __future__ import annotations

import anyio
import pytest

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import TokenUsage, ToolCall
from agentskit_chat.runtime import (
    ChatConfig,
    ChatController,
    ChatState,
    ChatTool,
    StreamChunk,
)

from ._controller_fakes import (
    DONE,
    HANG,
    MARKER,
    RAISE,
    START,
    Late,
    ScriptedAdapter,
    Step,
    config,
    controller_for,
    message,
    reply,
    text,
    wait_until,
    watched,
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- state and subscribe -------------------------------------------------------------------------


def test_initial_state_holds_the_initial_messages_and_zero_usage() -> None:
    first = message("u0", "user")
    controller, _ = controller_for(initial_messages=(first,))
    assert controller.state == ChatState(messages=(first,))
    assert controller.state.usage == TokenUsage(
        prompt_tokens=0, completion_tokens=0, total_tokens=0
    )


@pytest.mark.anyio
async def test_subscribe_sees_every_change_and_unsubscribe_stops_it() -> None:
    controller, _ = controller_for(reply("a", "b"))
    seen: list[ChatState] = []

    def broken(state: ChatState) -> None:
        raise RuntimeError("listener bug")

    controller.subscribe(broken)
    unsubscribe = controller.subscribe(seen.append)
    async with watched():
        await controller.send("hi")
    assert [s.status for s in seen] == ["streaming", "streaming", "streaming", "idle"]
    assert [s.messages[-1].content for s in seen] == ["", "a", "ab", "ab"]
    assert seen[-1] is controller.state
    unsubscribe()
    unsubscribe()
    controller.set_input("draft")
    assert controller.state.input == "draft"
    assert len(seen) == 4


# --- send ----------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("blank", ["", " ", "\n\t ", "\u00a0\u3000", "\ufeff", "\u2003\u2029"])
async def test_send_ignores_blank_text(blank: str) -> None:
    controller, adapter = controller_for()
    controller.set_input("kept")
    async with watched():
        await controller.send(blank)
    assert controller.state == ChatState(input="kept")
    assert adapter.sources == []


@pytest.mark.anyio
async def test_send_appends_user_and_placeholder_and_requests_the_whole_history() -> None:
    earlier = (message("u0", "user", "before"), message("a0", "assistant", "answer"))
    controller, adapter = controller_for(
        reply("Hel", "lo"), initial_messages=earlier, system_prompt="Be brief."
    )
    controller.set_input("question")
    async with watched():
        await controller.send("question")
    (request,) = adapter.requests
    assert [m.id for m in request.messages] == ["u0", "a0", "m1", "m2"]
    user, placeholder = request.messages[-2:]
    assert (user.role, user.content, user.status) == ("user", "question", "complete")
    assert (placeholder.role, placeholder.content, placeholder.status) == (
        "assistant",
        "",
        "streaming",
    )
    assert user.created_at > START and placeholder.created_at > user.created_at
    assert request.context.system_prompt == "Be brief."
    state = controller.state
    assert [m.id for m in state.messages] == ["u0", "a0", "m1", "m2"]
    assert (state.messages[-1].content, state.messages[-1].status) == ("Hello", "complete")
    assert (state.status, state.error, state.input) == ("idle", None, "")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("script", "content", "message_status", "status", "error"),
    [
        (reply("a", "b"), "ab", "complete", "idle", None),
        ([text("a"), DONE, text("late"), DONE], "a", "complete", "idle", None),
        ([text("a"), text("")], "a", "complete", "idle", None),
        (
            [text("a"), StreamChunk("error", content="boom"), text("x")],
            "a",
            "error",
            "error",
            "boom",
        ),
        ([text("a"), StreamChunk("error")], "a", "error", "error", "The assistant turn failed."),
        ([text("a"), RAISE], "a", "error", "error", "The chat adapter failed."),
        ([StreamChunk("reasoning", content="hmm"), text("a"), DONE], "a", "complete", "idle", None),
    ],
    ids=["done", "first-done-ends", "no-done", "error-chunk", "empty-error", "raises", "reasoning"],
)
async def test_send_folds_the_stream(
    script: list[Step], content: str, message_status: str, status: str, error: str | None
) -> None:
    controller, adapter = controller_for(script)
    async with watched():
        await controller.send("q")  # never raises, even when the turn failed
    last = controller.state.messages[-1]
    assert (last.content, last.status) == (content, message_status)
    assert (controller.state.status, controller.state.error) == (status, error)
    assert MARKER not in repr(controller.state)
    assert adapter.sources[0].aclose_calls == 1


@pytest.mark.anyio
async def test_a_failing_create_source_ends_the_turn_in_error() -> None:
    class Broken(ScriptedAdapter):
        def create_source(self, request: object) -> object:  # type: ignore[override]
            raise RuntimeError(MARKER)

    controller = ChatController(config(Broken()))
    async with watched():
        await controller.send("q")
    assert controller.state.status == "error"
    assert controller.state.messages[-1].status == "error"
    assert MARKER not in repr(controller.state)


@pytest.mark.anyio
async def test_a_new_send_clears_the_previous_error() -> None:
    controller, _ = controller_for([StreamChunk("error", content="boom")], reply("fine"))
    async with watched():
        await controller.send("one")
        assert controller.state.status == "error"
        await controller.send("two")
    assert (controller.state.status, controller.state.error) == ("idle", None)


@pytest.mark.anyio
async def test_usage_tool_calls_results_and_metadata_are_folded() -> None:
    call = ToolCall(id="c1", name="lookup", args={"q": 1}, status="running")
    script: list[Step] = [
        StreamChunk(
            "usage", usage=TokenUsage(prompt_tokens=3, completion_tokens=2, total_tokens=5)
        ),
        StreamChunk("tool_call", tool_call=call),
        StreamChunk(
            "tool_result",
            tool_call=ToolCall(id="c1", name="other", args={}, status="complete", result="42"),
        ),
        StreamChunk("tool_result", tool_call=ToolCall(id="c9", name="x", args={}, status="error")),
        StreamChunk("text", content="a", metadata={"k": (1, 2), "bad": object()}),
        StreamChunk("done", metadata={"k": "final"}),
    ]
    usage = StreamChunk(
        "usage", usage=TokenUsage(prompt_tokens=1, completion_tokens=1, total_tokens=2)
    )
    controller, _ = controller_for(script, [usage, DONE])
    async with watched():
        await controller.send("q")
        await controller.send("again")
    first_reply = controller.state.messages[1]
    assert first_reply.tool_calls is not None
    recorded, orphan = first_reply.tool_calls
    assert recorded.to_wire() == {
        "id": "c1",
        "name": "lookup",
        "args": {"q": 1},
        "status": "complete",
        "result": "42",
    }
    assert (orphan.id, orphan.status) == ("c9", "error")
    assert first_reply.metadata == {"k": "final"}
    first_reply.to_record()  # still a valid wire record
    assert controller.state.usage == TokenUsage(
        prompt_tokens=4, completion_tokens=3, total_tokens=7
    )


@pytest.mark.anyio
async def test_wire_models_in_chunk_metadata_are_kept_as_wire_json() -> None:
    envelope_json = {"k": ["a", {"b": None}]}
    call = ToolCall(id="c1", name="n", args={"a": [1]}, status="complete")
    controller, _ = controller_for(
        [StreamChunk("done", metadata={"call": call, "j": envelope_json})]
    )
    async with watched():
        await controller.send("q")
    metadata = controller.state.messages[-1].metadata
    assert metadata == {"call": call.to_wire(), "j": envelope_json}


# --- stop and cancellation -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_stop_ends_the_stream_within_one_chunk_and_closes_the_source() -> None:
    controller, adapter = controller_for([text("a"), text("b"), HANG, text("never"), DONE])
    async with watched(), anyio.create_task_group() as group:
        group.start_soon(controller.send, "q")
        await wait_until(lambda: bool(adapter.sources) and adapter.sources[0].blocked)
        streaming = controller.state
        controller.stop()
        # stop() is synchronous: the state is final before the consumer even wakes up.
        stopped = controller.state
    assert (streaming.status, stopped.status) == ("streaming", "idle")
    assert stopped.messages[-1].status == "complete"
    (source,) = adapter.sources
    assert controller.state == stopped
    assert controller.state.messages[-1].content == "ab"
    assert (source.abort_calls, source.aclose_calls, source.produced) == (1, 1, 2)


@pytest.mark.anyio
async def test_a_chunk_produced_after_stop_is_never_applied() -> None:
    controller, adapter = controller_for([text("a"), Late(text("LATE")), text("later"), DONE])
    states: list[ChatState] = []
    async with watched(), anyio.create_task_group() as group:
        group.start_soon(controller.send, "q")
        await wait_until(lambda: bool(adapter.sources) and adapter.sources[0].blocked)
        controller.stop()
        controller.subscribe(states.append)
        adapter.sources[0].release.set()
    (source,) = adapter.sources
    assert source.produced_after_abort == 1  # the late chunk did arrive ...
    assert states == []  # ... and changed nothing
    assert controller.state.messages[-1].content == "a"
    assert (source.abort_calls, source.aclose_calls) == (1, 1)


@pytest.mark.anyio
async def test_stop_without_a_turn_changes_nothing() -> None:
    async with watched():
        controller, _ = controller_for()
        seen: list[ChatState] = []
        controller.subscribe(seen.append)
        controller.stop()
        assert seen == []


@pytest.mark.anyio
async def test_stop_from_a_listener_before_the_source_opens_never_opens_it() -> None:
    controller, adapter = controller_for([text("never"), DONE])

    def stop_at_once(state: ChatState) -> None:
        if state.status == "streaming":
            controller.stop()

    controller.subscribe(stop_at_once)
    async with watched():
        await controller.send("q")
    assert adapter.sources == []
    assert [(m.role, m.content, m.status) for m in controller.state.messages] == [
        ("user", "q", "complete"),
        ("assistant", "", "complete"),
    ]
    assert controller.state.status == "idle"


@pytest.mark.anyio
async def test_cancelling_the_sender_stops_the_turn_and_closes_the_source() -> None:
    controller, adapter = controller_for([text("a"), HANG])
    async with watched():
        with anyio.move_on_after(0.05):
            await controller.send("q")
    (source,) = adapter.sources
    assert (source.abort_calls, source.aclose_calls) == (1, 1)
    assert controller.state.status == "idle"
    assert controller.state.messages[-1].status == "complete"


@pytest.mark.anyio
async def test_send_from_another_task_stops_the_first_turn() -> None:
    controller, adapter = controller_for([text("first"), HANG], reply("second"))
    async with watched(), anyio.create_task_group() as group:
        group.start_soon(controller.send, "one")
        await wait_until(lambda: bool(adapter.sources) and adapter.sources[0].blocked)
        await controller.send("two")
    first, second = adapter.sources
    assert (first.abort_calls, first.aclose_calls) == (1, 1)
    assert second.aclose_calls == 1
    assert [(m.role, m.content, m.status) for m in controller.state.messages] == [
        ("user", "one", "complete"),
        ("assistant", "first", "complete"),
        ("user", "two", "complete"),
        ("assistant", "second", "complete"),
    ]
    # The second request saw the first turn as it was stopped.
    assert [m.content for m in second.request.messages] == ["one", "first", "two", ""]


@pytest.mark.anyio
async def test_aclose_stops_the_turn_in_flight() -> None:
    controller, adapter = controller_for([HANG])
    async with watched(), anyio.create_task_group() as group:
        group.start_soon(controller.send, "q")
        await wait_until(lambda: bool(adapter.sources) and adapter.sources[0].blocked)
        await controller.aclose()
        assert adapter.sources[0].aclose_calls == 1
    assert controller.state.status == "idle"


# --- configuration -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_update_config_takes_effect_on_the_next_run() -> None:
    controller, first = controller_for(reply("one"))
    second = ScriptedAdapter(scripts=[reply("two")])
    async with watched():
        await controller.send("a")
        controller.update_config(controller.config.with_changes(adapter=second))
        await controller.send("b")
    assert (len(first.sources), len(second.sources)) == (1, 1)
    assert controller.state.messages[-1].content == "two"


def test_update_config_with_invalid_tools_keeps_the_current_config() -> None:
    controller, _ = controller_for()
    before = controller.config
    bad = before.with_changes(tools=(ChatTool(name="t"), ChatTool(name="t")))
    with pytest.raises(ConfigurationError):
        controller.update_config(bad)
    assert controller.config is before


def test_default_ids_and_clock_are_unique_and_aware() -> None:
    adapter = ScriptedAdapter()
    controller = ChatController(ChatConfig(adapter=adapter))

    async def run() -> None:
        async with watched():
            await controller.send("a")
            await controller.send("b")

    anyio.run(run)
    ids = [m.id for m in controller.state.messages]
    assert len(set(ids)) == 4 and all(len(i) == 32 for i in ids)
    assert all(m.created_at.utcoffset() is not None for m in controller.state.messages)
