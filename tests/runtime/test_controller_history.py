"""The chat controller's history operations (retry, regenerate, edit) and its memory."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.runtime import (
    ChatMessage,
    InMemoryChatMemory,
)

from ._controller_fakes import (
    HANG,
    MARKER,
    START,
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


# --- retry, regenerate, edit ---------------------------------------------------------------------


def history(*pairs: tuple[str, str]) -> tuple[ChatMessage, ...]:
    return tuple(message(id, role, f"{id}-text") for id, role in pairs)


@pytest.mark.anyio
async def test_retry_reruns_the_same_user_message_with_a_new_reply() -> None:
    start = history(("u1", "user"), ("a1", "assistant"), ("u2", "user"), ("a2", "assistant"))
    controller, adapter = controller_for(reply("again"), initial_messages=start)
    async with watched():
        await controller.retry()
    assert [m.id for m in controller.state.messages] == ["u1", "a1", "u2", "m1"]
    assert controller.state.messages[2] == start[2]
    assert controller.state.messages[-1].content == "again"
    assert [m.id for m in adapter.requests[0].messages] == ["u1", "a1", "u2", "m1"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "start",
    [
        history(),
        history(("u1", "user")),
        history(("a1", "assistant")),
        history(("a0", "assistant"), ("a1", "assistant")),
        history(("u1", "user"), ("a1", "assistant"), ("u2", "user")),
        history(("u1", "user"), ("s1", "system")),
    ],
    ids=["empty", "user", "assistant", "two-assistants", "ends-with-user", "ends-with-system"],
)
async def test_retry_needs_user_then_assistant_last(start: tuple[ChatMessage, ...]) -> None:
    controller, adapter = controller_for(initial_messages=start)
    async with watched():
        await controller.retry()
    assert controller.state.messages == start
    assert adapter.sources == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("target", "kept", "driver"),
    [
        (None, ["u1", "a1", "u2"], "u2"),
        ("a2", ["u1", "a1", "u2"], "u2"),
        ("a1", ["u1"], "u1"),
    ],
    ids=["last", "explicit-last", "earlier"],
)
async def test_regenerate_replaces_the_target_and_drops_what_follows(
    target: str | None, kept: list[str], driver: str
) -> None:
    start = history(("u1", "user"), ("a1", "assistant"), ("u2", "user"), ("a2", "assistant"))
    controller, adapter = controller_for(reply("new"), initial_messages=start)
    async with watched():
        await controller.regenerate(target)
    assert [m.id for m in controller.state.messages] == [*kept, "m1"]
    assert controller.state.messages[-1].content == "new"
    request_ids = [m.id for m in adapter.requests[0].messages]
    assert request_ids == [*kept, "m1"]
    nearest_user = [m for m in adapter.requests[0].messages if m.role == "user"][-1]
    assert nearest_user.id == driver


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("start", "target"),
    [
        (history(("u1", "user"), ("a1", "assistant"), ("u2", "user")), None),
        (history(("u1", "user"), ("a1", "assistant")), "u1"),
        (history(("u1", "user"), ("a1", "assistant")), "missing"),
        (history(("a0", "assistant"), ("u1", "user"), ("a1", "assistant")), "a0"),
        (history(), None),
    ],
    ids=["last-is-user", "target-is-user", "unknown", "no-user-before", "empty"],
)
async def test_regenerate_without_a_usable_target_does_nothing(
    start: tuple[ChatMessage, ...], target: str | None
) -> None:
    controller, adapter = controller_for(initial_messages=start)
    async with watched():
        await controller.regenerate(target)
    assert controller.state.messages == start
    assert adapter.sources == []


@pytest.mark.anyio
@pytest.mark.parametrize("rerun", [True, False])
async def test_editing_a_user_message_keeps_its_id_and_drops_what_follows(rerun: bool) -> None:
    start = history(("u1", "user"), ("a1", "assistant"), ("u2", "user"), ("a2", "assistant"))
    controller, adapter = controller_for(reply("edited answer"), initial_messages=start)
    async with watched():
        await controller.edit("u1", "changed", regenerate=rerun)
    messages = controller.state.messages
    assert (messages[0].id, messages[0].content, messages[0].created_at) == ("u1", "changed", START)
    if rerun:
        assert [m.id for m in messages] == ["u1", "m1"]
        assert messages[1].content == "edited answer"
        assert [m.content for m in adapter.requests[0].messages] == ["changed", ""]
    else:
        assert [m.id for m in messages] == ["u1"]
        assert adapter.sources == []


@pytest.mark.anyio
async def test_editing_an_assistant_message_changes_it_in_place_without_a_run() -> None:
    start = history(("u1", "user"), ("a1", "assistant"), ("u2", "user"), ("a2", "assistant"))
    controller, adapter = controller_for(initial_messages=start)
    async with watched():
        await controller.edit("a1", "fixed")
        await controller.edit("missing", "nothing")
    assert [m.id for m in controller.state.messages] == ["u1", "a1", "u2", "a2"]
    assert controller.state.messages[1].content == "fixed"
    assert adapter.sources == []


@pytest.mark.anyio
async def test_retry_during_a_stream_stops_it_and_reruns() -> None:
    controller, adapter = controller_for([text("partial"), HANG], reply("full"))
    async with watched(), anyio.create_task_group() as group:
        group.start_soon(controller.send, "q")
        await wait_until(lambda: bool(adapter.sources) and adapter.sources[0].blocked)
        await controller.retry()
    assert [(m.id, m.content) for m in controller.state.messages] == [("m1", "q"), ("m3", "full")]
    assert adapter.sources[0].aclose_calls == 1


# --- memory --------------------------------------------------------------------------------------


class RecordingMemory(InMemoryChatMemory):
    def __init__(self, messages: Sequence[ChatMessage] = (), *, fail: bool = False) -> None:
        super().__init__(messages)
        self.fail = fail
        self.saves: list[tuple[ChatMessage, ...]] = []

    async def save(self, messages: Sequence[ChatMessage]) -> None:
        self.saves.append(tuple(messages))
        if self.fail:
            raise RuntimeError(MARKER)
        await super().save(messages)


@pytest.mark.anyio
async def test_memory_round_trip() -> None:
    memory = InMemoryChatMemory()
    controller, _ = controller_for(reply("hello"), memory=memory)
    async with watched():
        await controller.load()
        await controller.send("hi")
        fresh, _ = controller_for(memory=memory)
        await fresh.load()
    assert fresh.state.messages == controller.state.messages
    assert [m.content for m in await memory.load()] == ["hi", "hello"]


@pytest.mark.anyio
@pytest.mark.parametrize("memory_holds", [(), None])
async def test_load_falls_back_to_initial_messages(memory_holds: tuple[()] | None) -> None:
    initial = (message("s1", "system", "You help."),)
    memory = None if memory_holds is None else InMemoryChatMemory(memory_holds)
    controller, _ = controller_for(memory=memory, initial_messages=initial)
    async with watched():
        await controller.load()
    assert controller.state.messages == initial


@pytest.mark.anyio
async def test_saves_happen_when_turns_end_never_mid_stream() -> None:
    memory = RecordingMemory()
    start = history(("u1", "user"), ("a1", "assistant"))
    controller, _ = controller_for(
        reply("a", "b", "c"), reply("d"), memory=memory, initial_messages=start
    )
    async with watched():
        await controller.send("q")
        await controller.edit("a1", "fixed")
        await controller.retry()
        await controller.edit("u1", "new", regenerate=False)
    assert len(memory.saves) == 4
    assert all(m.status != "streaming" for saved in memory.saves for m in saved)
    assert memory.saves[-1] == controller.state.messages


@pytest.mark.anyio
async def test_decision_12_a_failing_save_keeps_the_state_and_surfaces_the_error() -> None:
    memory = RecordingMemory(fail=True)
    controller, _ = controller_for(reply("kept"), reply("next"), memory=memory)
    async with watched():
        await controller.send("q")
        assert [m.content for m in controller.state.messages] == ["q", "kept"]
        assert controller.state.error == "The conversation could not be saved."
        assert controller.state.status == "idle"
        assert MARKER not in repr(controller.state)
        memory.fail = False
        await controller.send("again")
    assert controller.state.error is None
    assert [m.content for m in await memory.load()] == ["q", "kept", "again", "next"]


@pytest.mark.anyio
async def test_load_failure_propagates_and_keeps_the_state() -> None:
    async with watched():

        class Failing(InMemoryChatMemory):
            async def load(self) -> Sequence[ChatMessage]:
                raise ConfigurationError("broken store")

        start = history(("u1", "user"))
        controller, _ = controller_for(memory=Failing(), initial_messages=start)
        with pytest.raises(ConfigurationError):
            await controller.load()
        assert controller.state.messages == start
