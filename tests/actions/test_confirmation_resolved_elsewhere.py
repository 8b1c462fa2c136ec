"""A decision that loses the race to another client is told by its type, not by its text."""

from __future__ import annotations

from typing import Any

import pytest

from agentskit_chat.actions import CONFIRMATION_HINT, ConfirmationRecord, create_action_confirmation
from agentskit_chat.errors import ConfigurationError, ConfirmationResolvedElsewhereError

from ._support import TOOL, ScriptedChat

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def refuse(record: ConfirmationRecord, status: str) -> Any:
    """A claim hook whose store says another client changed the record first."""
    return False


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_a_refused_claim_raises_the_typed_race_error_and_runs_nothing(decision: str) -> None:
    chat = ScriptedChat()
    confirmation = create_action_confirmation(
        session_id="s", chat=chat, create_id=lambda: "c", claim_status=refuse
    )
    record = await confirmation.propose(name=TOOL, input={})
    with pytest.raises(ConfirmationResolvedElsewhereError) as raised:
        await getattr(confirmation, decision)(record.token, "s")
    # Still a ConfigurationError with its fixed message, for callers that catch that.
    assert isinstance(raised.value, ConfigurationError)
    assert raised.value.message == "Action confirmation was already resolved by another client."
    assert raised.value.hint == CONFIRMATION_HINT
    assert chat.approved == []
    assert chat.denied == []


async def test_an_unknown_token_is_not_a_lost_race() -> None:
    confirmation = create_action_confirmation(
        session_id="s", chat=ScriptedChat(), create_id=lambda: "c", claim_status=refuse
    )
    with pytest.raises(ConfigurationError) as raised:
        await confirmation.approve("confirm-unknown", "s")
    assert not isinstance(raised.value, ConfirmationResolvedElsewhereError)
