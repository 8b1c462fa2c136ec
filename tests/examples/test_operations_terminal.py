"""The operations example in the terminal, by key presses: ``/operations``, its first choice
("Read status") by its number, ``a`` to approve, and the status shows; nothing restarts."""

from __future__ import annotations

import pytest

from agentskit_chat.tui import TerminalChatApp, local_chat_server
from agentskit_chat.tui._render import ChoicePrompt, PendingConfirmation
from examples.operations import app as operations
from tests.tui._support import ask, idle, until

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _reads(traces: operations.TraceCapture) -> list[str]:
    """The status each completed read reported, oldest first."""
    return [
        str(record["detail"]["status"])
        for record in traces.records
        if record["category"] == "lifecycle" and record["detail"]["action"] == operations.READ_TOOL
    ]


async def test_reading_the_status_by_key_presses() -> None:
    service = operations.InMemoryOperationsService()
    traces = operations.TraceCapture()
    chat = operations.build_operations_chat(service=service, traces=traces)
    async with local_chat_server(chat) as url:
        app = TerminalChatApp(starting="Starting the chat…")
        async with app.run_test(size=(110, 50)) as pilot:
            app.connect(url)
            await until(pilot, lambda: app.title == "Operations desk", "the chat's title")
            await ask(pilot, app, "/operations")
            await until(
                pilot, lambda: isinstance(app.keyboard_owner, ChoicePrompt), "the choice list"
            )
            assert "1. Read status" in app.message_texts()[-1]
            await pilot.press("1", "enter")
            await idle(pilot, app)
            await until(
                pilot,
                lambda: isinstance(app.keyboard_owner, PendingConfirmation),
                "the read waiting for approval",
            )
            owner = app.keyboard_owner
            assert isinstance(owner, PendingConfirmation)
            assert owner.name == operations.READ_TOOL
            assert _reads(traces) == []  # picking it only proposed it
            await pilot.press("a")
            await idle(pilot, app)
            assert app.keyboard_owner is None
            assert "checkout-api is healthy at revision 1." in app.message_texts()[-1]
            assert app.notice == ""
    assert _reads(traces) == ["healthy"]
    assert service.restarts == []
