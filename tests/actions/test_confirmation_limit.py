"""1,000 records at most: a proposal drops the oldest decided records, never an undecided one."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agentskit_chat.actions import (
    MAX_CONFIRMATIONS,
    ActionConfirmation,
    ConfirmationRecord,
    create_action_confirmation,
)
from agentskit_chat.actions._confirmation import EXPIRED_REASON
from agentskit_chat.errors import ConfigurationError, ConfirmationLimitError, ToolError
from agentskit_chat.protocol import Confirmation, ConfirmationStatus
from tests.actions._support import TOOL, Executor, ScriptedChat, controller

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def stored(statuses: Sequence[ConfirmationStatus]) -> list[Confirmation]:
    """Records ``r-0``, ``r-1``, ... with ``statuses``, oldest first."""
    return [
        Confirmation(
            token=f"confirm-r-{n}",
            action=TOOL,
            input={"n": n},
            tool_call_id=f"app-r-{n}",
            expires_at=10_000,
            status=status,
        )
        for n, status in enumerate(statuses)
    ]


def tokens(records: Sequence[ConfirmationRecord]) -> list[str]:
    return [record.token for record in records]


async def test_a_full_confirmation_drops_its_oldest_decided_record_and_keeps_undecided_ones() -> (
    None
):
    statuses: list[ConfirmationStatus] = ["pending", "approving", "expired", "approved"]
    statuses += ["rejected"] * (MAX_CONFIRMATIONS - len(statuses))
    saved: list[tuple[ConfirmationRecord, ...]] = []
    chat = controller(Executor())
    confirmation = create_action_confirmation(
        session_id="s",
        chat=chat,
        initial_records=stored(statuses),
        now=lambda: 5,
        create_id=lambda: "new",
        on_change=saved.append,
    )
    record = await confirmation.propose(name=TOOL, input={"to": "a@b.c"})
    held = tokens(confirmation.get_snapshot())
    assert len(held) == MAX_CONFIRMATIONS
    # r-2 (expired) was the oldest decided record; the pending and approving ones stay.
    assert held[:3] == ["confirm-r-0", "confirm-r-1", "confirm-r-3"]
    assert held[-1] == record.token == "confirm-new"
    assert confirmation.get_by_tool_call("app-r-2") is None
    assert [tokens(records) for records in saved] == [held]  # saved as it now stands
    # The next proposal drops the next oldest decided one.
    again = create_action_confirmation(
        session_id="s",
        chat=chat,
        initial_records=confirmation.get_snapshot(),
        now=lambda: 5,
        create_id=lambda: "newer",
    )
    await again.propose(name=TOOL, input={"to": "a@b.c"})
    assert tokens(again.get_snapshot())[:3] == ["confirm-r-0", "confirm-r-1", "confirm-r-4"]


async def test_a_confirmation_full_of_undecided_records_refuses_before_proposing() -> None:
    statuses: list[ConfirmationStatus] = ["approving", "rejecting", "expiring"]
    statuses += ["pending"] * (MAX_CONFIRMATIONS - len(statuses))
    chat = controller(Executor())
    confirmation = create_action_confirmation(
        session_id="s",
        chat=chat,
        initial_records=stored(statuses),
        now=lambda: 5,  # nothing is past its expiry
        create_id=lambda: "new",
    )
    before = confirmation.get_snapshot()
    with pytest.raises(ConfirmationLimitError) as error:
        await confirmation.propose(name=TOOL, input={"to": "a@b.c"})
    assert isinstance(error.value, ConfigurationError)
    assert error.value.message == "Action confirmation limit is reached."
    assert error.value.hint is not None
    assert confirmation.get_snapshot() == before
    assert chat.state.messages == ()  # the upstream was never asked


async def test_a_failed_save_keeps_the_record_it_would_have_dropped() -> None:
    statuses: list[ConfirmationStatus] = ["approved"]
    statuses += ["pending"] * (MAX_CONFIRMATIONS - 1)

    def fail(records: tuple[ConfirmationRecord, ...]) -> None:
        raise OSError("the store is down")

    confirmation = create_action_confirmation(
        session_id="s",
        chat=controller(Executor()),
        initial_records=stored(statuses),
        create_id=lambda: "new",
        on_change=fail,
    )
    before = confirmation.get_snapshot()
    with pytest.raises(OSError):
        await confirmation.propose(name=TOOL, input={"to": "a@b.c"})
    assert confirmation.get_snapshot() == before
    assert confirmation.get_by_tool_call("app-r-0") == before[0]
    assert confirmation.get_by_tool_call("app-new") is None


async def full_of_pending(upstream: ScriptedChat) -> ActionConfirmation:
    """1,000 pending records ``p-0`` ... ``p-999`` proposed at 0 ms, 1 ms, ... and expiring a
    second later; the clock then reads 1,000 ms: ``p-0`` alone is past its expiry."""
    clock = [0]
    ids = iter(f"p-{n}" for n in range(MAX_CONFIRMATIONS + 1))
    confirmation = create_action_confirmation(
        session_id="s",
        chat=upstream,
        now=lambda: clock[0],
        ttl_ms=1_000,
        create_id=lambda: next(ids),
    )
    for n in range(MAX_CONFIRMATIONS):
        clock[0] = n
        await confirmation.propose(name=TOOL, input={"n": n})
    clock[0] = 1_000
    return confirmation


async def test_a_full_confirmation_expires_overdue_pending_records_to_make_room() -> None:
    upstream = ScriptedChat()
    confirmation = await full_of_pending(upstream)  # p-0 is past its expiry
    record = await confirmation.propose(name=TOOL, input={"n": "new"})
    held = tokens(confirmation.get_snapshot())
    assert len(held) == MAX_CONFIRMATIONS
    assert held[0] == "confirm-p-1" and held[-1] == record.token == "confirm-p-1000"
    # p-0's call was denied upstream as expired (once), then its record made room.
    assert upstream.denied == [("app-p-0", EXPIRED_REASON)]
    assert upstream.approved == []
    assert {r.status for r in confirmation.get_snapshot()} == {"pending"}


async def test_a_full_confirmation_with_nothing_overdue_still_refuses() -> None:
    upstream = ScriptedChat()
    ids = iter(f"p-{n}" for n in range(MAX_CONFIRMATIONS + 1))
    confirmation = create_action_confirmation(
        session_id="s", chat=upstream, now=lambda: 0, ttl_ms=1_000, create_id=lambda: next(ids)
    )
    for n in range(MAX_CONFIRMATIONS):
        await confirmation.propose(name=TOOL, input={"n": n})
    with pytest.raises(ConfirmationLimitError):
        await confirmation.propose(name=TOOL, input={"n": "new"})
    assert upstream.denied == []
    assert len(confirmation.get_snapshot()) == MAX_CONFIRMATIONS


async def test_a_clock_that_steps_back_never_turns_making_room_into_an_approval() -> None:
    upstream = ScriptedChat()
    reads: list[int] = []
    ids = iter(f"p-{n}" for n in range(MAX_CONFIRMATIONS + 1))

    def clock() -> int:
        # Each proposal reads the clock at its number; then it reads 1,000 once (p-0 is past
        # its expiry) and 999 ever after, as a wall clock set back by NTP would.
        if len(reads) < MAX_CONFIRMATIONS:
            reads.append(len(reads))
        elif len(reads) == MAX_CONFIRMATIONS:
            reads.append(1_000)
        else:
            reads.append(999)
        return reads[-1]

    confirmation = create_action_confirmation(
        session_id="s", chat=upstream, now=clock, ttl_ms=1_000, create_id=lambda: next(ids)
    )
    for n in range(MAX_CONFIRMATIONS):
        await confirmation.propose(name=TOOL, input={"n": n})
    await confirmation.propose(name=TOOL, input={"n": "new"})
    assert upstream.approved == []
    assert upstream.denied == [("app-p-0", EXPIRED_REASON)]
    assert confirmation.get_by_tool_call("app-p-0") is None  # expired, then it made room


class RefusingUpstream(ScriptedChat):
    """An upstream that no longer knows the calls it is asked to deny."""

    async def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        self.denied.append((tool_call_id, reason))
        raise ToolError("AK_TOOL_NOT_FOUND", "Tool call is not known.")


async def test_an_overdue_record_the_upstream_will_not_deny_leaves_the_limit_error() -> None:
    upstream = RefusingUpstream()
    confirmation = await full_of_pending(upstream)
    with pytest.raises(ConfirmationLimitError):  # not the old record's ToolError
        await confirmation.propose(name=TOOL, input={"n": "new"})
    assert upstream.denied == [("app-p-0", EXPIRED_REASON)]
    kept = confirmation.get_by_tool_call("app-p-0")
    assert kept is not None and kept.status == "pending"  # put back, kept
