"""The turn lease one chat request claimed, given back or released when the store fails.

A request claims its session's turn lease through the storage's compare-and-set before a
controller runs. A turn that never ran gives the lease back (bounded), so the same turn may be
submitted again. When the store fails while giving it back or releasing it, the lease is
released after the response instead, retried from a freshly loaded session until the lease
would have expired anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import anyio

from agentskit_chat.conversation import ChatDefinition, ChatSession, SessionStorage
from agentskit_chat.conversation import resume_chat_session as _resume

from ._observe import TurnEvents

__all__ = ["Lease", "give_back", "release_late"]


@dataclass(slots=True)
class Lease:
    """The lease a request claimed, for a release retried after the response when the store
    failed while releasing it (``outcome`` ``None``: give it back, the turn never ran)."""

    definition: ChatDefinition
    storage: SessionStorage
    session_id: str
    turn_id: str
    expires_at: float
    outcome: Literal["completed", "indeterminate"] | None = None
    unreleased: bool = False


async def give_back(
    session: ChatSession, turn_id: str, before: object, lease: Lease | None, *, bound: float
) -> None:
    """Clear a lease this request claimed for a turn that never ran (within ``bound``
    seconds); when the store fails, ``lease`` is given back after the response."""
    active = session.active_turn
    if active is None or active is before or active.turn_id != turn_id:
        return
    given = False
    with anyio.CancelScope(shield=True), anyio.move_on_after(bound):
        try:
            await session.abandon_turn(turn_id)
            given = True
        except Exception:
            pass
    if not given and lease is not None:
        lease.outcome = None
        lease.unreleased = True


async def release_late(
    lease: Lease, *, bound: float, now: Callable[[], datetime], watch: TurnEvents
) -> None:
    """Release ``lease`` once the store answers again (retried from a freshly loaded
    session, every half second at most), until the lease would have expired anyway."""
    if not lease.unreleased:
        return
    start = anyio.current_time()
    attempts = 0
    pause = 0.1
    while True:
        attempts += 1
        try:
            with anyio.fail_after(bound):
                released = await _release_stored(lease, now)
        except Exception:
            if anyio.current_time() + pause >= lease.expires_at:
                watch.lease_released(
                    attempts=attempts, seconds=anyio.current_time() - start, released=False
                )
                return
            await anyio.sleep(pause)
            pause = min(pause * 2, 0.5)
            continue
        lease.unreleased = False
        if released:
            watch.lease_released(
                attempts=attempts, seconds=anyio.current_time() - start, released=True
            )
        return


async def _release_stored(lease: Lease, now: Callable[[], datetime]) -> bool:
    """Release ``lease`` in the stored session, if it still holds it (an earlier write
    whose answer was lost may have released it already)."""
    session = await _resume(
        lease.definition, session_id=lease.session_id, storage=lease.storage, now=now
    )
    active = session.active_turn
    if active is None or active.turn_id != lease.turn_id:
        return False
    if lease.outcome is None:
        await session.abandon_turn(lease.turn_id)
    else:
        await session.release_turn(lease.turn_id, lease.outcome)
    return True
