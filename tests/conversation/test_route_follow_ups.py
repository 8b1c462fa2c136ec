"""A routed message whose action was approved is not routed again: the adapter answers the
follow-up (with the tool's outcome in view), and the state the route left stays."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from agentskit_chat.actions import ConfirmationRecord
from agentskit_chat.conversation import (
    ConversationDefinition,
    ConversationStateDefinition,
    command_route,
    create_chat_session,
    define_chat,
)
from agentskit_chat.runtime import (
    AdapterRequest,
    ChatConfig,
    ChatController,
    ChatTool,
    reply_adapter,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_follow_up_of_an_approved_action_is_answered_by_the_adapter() -> None:
    ran: list[Mapping[str, Any]] = []
    seen: list[int] = []

    async def run(args: Mapping[str, Any]) -> str:
        ran.append(dict(args))
        return "done"

    def reply(text: str, request: AdapterRequest) -> str:
        seen.append(len(request.messages))
        results = [c.result for m in request.messages for c in m.tool_calls or () if c.result]
        return f"adapter saw {results}"

    definition = define_chat(
        id="follow-up",
        chat=ChatConfig(
            adapter=reply_adapter(reply),
            tools=(ChatTool(name="act", execute=run, requires_confirmation=True),),
        ),
        conversation=ConversationDefinition(
            initial="idle",
            states={
                "idle": ConversationStateDefinition(on={"offer": "offered"}),
                "offered": ConversationStateDefinition(),
            },
            routes=(
                command_route(
                    command="/offer",
                    id="offer",
                    event="offer",
                    response=lambda text, context: "Offered.",
                ),
            ),
        ),
    )
    session = create_chat_session(definition, session_id="s1")
    controller = ChatController(session.chat)
    await controller.send("/offer")
    confirmation = session.create_confirmation(chat=controller, create_id=lambda: "one")
    record: ConfirmationRecord = await confirmation.propose(name="act", input={})
    await confirmation.approve(record.token, "s1")
    contents = [m.content for m in controller.state.messages if m.role == "assistant"]
    assert contents == ["Offered.", "", "adapter saw ['done']"]
    assert ran == [{}]
    assert seen == [4]
    snapshot = session.get_conversation_snapshot()
    assert snapshot is not None and snapshot.state == "offered"
    # Retrying the follow-up asks the adapter again; the route is not replayed.
    await controller.retry()
    assert controller.state.messages[-1].content == "adapter saw ['done']"
    assert [m.content for m in controller.state.messages].count("Offered.") == 1
