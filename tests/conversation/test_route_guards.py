"""Route guards: a route answers only when its guard allows it in this conversation, and a
route (or the interaction hook) reads the conversation from its context."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentskit_chat.conversation import (
    ChatDefinition,
    ConversationDefinition,
    ConversationStateDefinition,
    RouteContext,
    command_route,
    create_chat_session,
    define_chat,
)
from agentskit_chat.runtime import ChatConfig, ChatController, reply_adapter

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 7, 11, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _said(context: RouteContext, text: str) -> bool:
    return any(m.role == "user" and m.content == text for m in context.messages)


def _definition(seen: list[RouteContext]) -> ChatDefinition:
    def ready(context: RouteContext) -> bool:
        seen.append(context)
        return _said(context, "ready")

    return define_chat(
        id="guarded",
        chat=ChatConfig(adapter=reply_adapter(lambda text, request: f"model: {text}")),
        conversation=ConversationDefinition(
            initial="waiting",
            states={
                "waiting": ConversationStateDefinition(on={"go": "done"}),
                "done": ConversationStateDefinition(),
            },
            routes=(
                command_route(
                    command="/go",
                    id="go",
                    event="go",
                    guard=ready,
                    response=lambda text, context: f"went after {len(context.messages)}",
                ),
            ),
        ),
    )


async def test_a_refusing_guard_lets_the_adapter_answer_and_keeps_the_state() -> None:
    seen: list[RouteContext] = []
    session = create_chat_session(_definition(seen), session_id="s1")
    controller = ChatController(session.chat.with_changes(clock=lambda: NOW))
    await controller.send("/go")
    assert controller.state.messages[-1].content == "model: /go"
    snapshot = session.get_conversation_snapshot()
    assert snapshot is not None and snapshot.state == "waiting"
    await controller.send("ready")
    await controller.send("/go")
    assert controller.state.messages[-1].content == "went after 6"
    snapshot = session.get_conversation_snapshot()
    assert snapshot is not None and snapshot.state == "done"
    # The guard saw the whole conversation, ending with the answer being written.
    assert [len(context.messages) for context in seen] == [2, 6]
    assert seen[-1].messages[-2].content == "/go"
    assert seen[-1].messages[-1].role == "assistant"
    assert seen[-1].message_id == seen[-1].messages[-2].id


async def test_a_guard_that_raises_fails_the_turn() -> None:
    def broken(context: RouteContext) -> bool:
        raise RuntimeError("guard failed")

    definition = define_chat(
        id="broken",
        chat=ChatConfig(adapter=reply_adapter(lambda text, request: "model")),
        conversation=ConversationDefinition(
            initial="a",
            states={"a": ConversationStateDefinition(on={"go": "a"})},
            routes=(
                command_route(
                    command="/go",
                    id="go",
                    event="go",
                    guard=broken,
                    response=lambda text, context: "went",
                ),
            ),
        ),
    )
    controller = ChatController(create_chat_session(definition, session_id="s1").chat)
    await controller.send("/go")
    assert controller.state.status == "error"
