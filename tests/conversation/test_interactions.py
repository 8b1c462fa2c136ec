"""``ChatDefinition.on_interaction``: the hook answers the user message that stands for a
component interaction, in front of the routes and the adapter, on every path a session's
adapter takes (a send, a retry, a follow-up after a tool call)."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest

from agentskit_chat.conversation import (
    INTERACTION_FAILED_MESSAGE,
    RouteContext,
    create_chat_session,
    interaction_metadata,
    message_interaction,
)
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import (
    ComponentInteractEvent,
    ToolCall,
    create_component_interaction_event,
)
from agentskit_chat.runtime import ChatMessage

from ._support import (
    CREATED,
    ModelAdapter,
    assistant,
    collect,
    command,
    definition,
    reply,
    request,
    states,
)

pytestmark = pytest.mark.anyio

FRAME: dict[str, Any] = {
    "protocol": "agentskit.chat.component",
    "version": 1,
    "type": "render",
    "componentKey": "button-group",
    "instanceId": "next-step",
    "props": {"label": "Next?", "buttons": [{"id": "save", "label": "Save draft"}]},
    "fallback": {"kind": "button-group", "summary": "Save draft."},
}
EVENT = create_component_interaction_event(FRAME, "select", "save")
TEXT = "Save draft"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def clicked(message_id: str = "user-1", text: str = TEXT) -> ChatMessage:
    return ChatMessage(
        id=message_id,
        role="user",
        content=text,
        created_at=CREATED,
        metadata=interaction_metadata(EVENT, TEXT),
    )


class Hook:
    def __init__(self, answer: Any = "Saved.") -> None:
        self.answer = answer
        self.seen: list[tuple[ComponentInteractEvent, RouteContext]] = []

    def __call__(self, event: ComponentInteractEvent, context: RouteContext) -> Any:
        self.seen.append((event, context))
        return self.answer


def session_with(hook: Any, model: ModelAdapter, **fields: Any) -> Any:
    base = definition(model, **fields)
    return create_chat_session(dataclasses.replace(base, on_interaction=hook), session_id="s1")


async def test_the_hook_answers_the_message_that_stands_for_an_interaction() -> None:
    hook, model = Hook(), ModelAdapter()
    session = session_with(hook, model)
    chunks = await collect(session.chat.adapter.create_source(request(clicked())))
    assert chunks == reply("Saved.")
    assert model.calls == 0
    ((event, context),) = hook.seen
    assert event == EVENT
    assert context == RouteContext("s1", "user-1")
    assert [m.id for m in context.messages] == ["user-1", "placeholder"]  # the conversation


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(clicked(text="Actually, wait"), id="edited"),
        pytest.param(
            ChatMessage(id="u", role="user", content=TEXT, created_at=CREATED), id="plain text"
        ),
        pytest.param(
            ChatMessage(
                id="u",
                role="user",
                content=TEXT,
                created_at=CREATED,
                metadata={"agentskit.chat.interaction": {"event": {"event": "x"}, "text": TEXT}},
            ),
            id="a marker that is not an event",
        ),
    ],
)
async def test_anything_else_goes_to_the_chat(message: ChatMessage) -> None:
    hook, model = Hook(), ModelAdapter()
    session = session_with(hook, model)
    chunks = await collect(session.chat.adapter.create_source(request(message)))
    assert chunks == reply("model reply")
    assert hook.seen == []
    assert message_interaction(message) is None


async def test_a_tool_call_follow_up_answers_the_model_not_the_interaction() -> None:
    hook, model = Hook(), ModelAdapter()
    session = session_with(hook, model)
    call = ToolCall(id="c1", name="lookup", args={}, status="complete", result="ok")
    answered = dataclasses.replace(assistant(""), tool_calls=(call,))
    await collect(session.chat.adapter.create_source(request(clicked(), answered)))
    assert hook.seen == []
    assert model.calls == 1


async def test_the_hook_stands_in_front_of_the_routes_and_none_hands_over_to_them() -> None:
    model = ModelAdapter()
    routes = {"routes": [command("go", "Going.")], "states": states(idle={"go": "idle"})}
    answering = session_with(Hook(), model, **routes)
    assert await collect(answering.chat.adapter.create_source(request(clicked()))) == reply(
        "Saved."
    )
    passing = session_with(Hook(answer=None), model, **routes)
    routed = clicked(text="/go")
    routed = dataclasses.replace(routed, metadata=interaction_metadata(EVENT, "/go"))
    assert await collect(passing.chat.adapter.create_source(request(routed))) == reply("Going.")
    assert model.calls == 0


@pytest.mark.parametrize(
    "answer", [pytest.param(42, id="not text"), pytest.param("x" * 65537, id="too long")]
)
async def test_a_hook_answer_that_is_not_a_reply_fails_the_turn(answer: Any) -> None:
    session = session_with(Hook(answer=answer), ModelAdapter())
    chunks = await collect(session.chat.adapter.create_source(request(clicked())))
    assert chunks == [("error", INTERACTION_FAILED_MESSAGE)]


async def test_stopping_an_async_hook_drops_its_answer() -> None:
    gate = anyio.Event()
    finished: list[str] = []

    async def slow(event: ComponentInteractEvent, context: RouteContext) -> str:
        await gate.wait()
        finished.append("late")
        return "Too late."

    session = session_with(slow, ModelAdapter())
    source = session.chat.adapter.create_source(request(clicked()))
    chunks: list[str] = []

    async def consume() -> None:
        async for chunk in source.stream():
            chunks.append(chunk.type)

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await anyio.sleep(0.05)
        source.abort()
        gate.set()
    assert finished == ["late"]
    assert chunks == []  # the awaited answer arrived after the abort and was dropped

    unstarted = session.chat.adapter.create_source(request(clicked()))
    unstarted.abort()
    assert [chunk async for chunk in unstarted.stream()] == []


def test_a_hook_that_cannot_be_called_is_refused_when_a_session_is_made() -> None:
    with pytest.raises(ConfigurationError, match=r"Chat interaction handler must be callable\."):
        session_with("not a function", ModelAdapter())
