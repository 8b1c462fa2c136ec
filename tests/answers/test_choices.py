"""Choice-submission reservations: single use, session scope, bounds, races."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentskit_chat.answers import (
    CHOICE_UNAVAILABLE,
    MAX_CHOICE_SESSIONS,
    MAX_SESSION_CHOICES,
    ChoiceReservation,
    ChoiceReservationStore,
)
from agentskit_chat.protocol import ComponentFrame, decode_component_frame

VALUES = {"docs-agentskit": "agentskit docs", "docs-registry": "registry docs"}


def frame(instance_id: str = "deterministic-choices-user-1", **props: Any) -> ComponentFrame:
    wire = {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": "choice-list",
        "instanceId": instance_id,
        "props": props
        or {
            "prompt": "Pick one.",
            "choices": [
                {"id": key, "label": key, "description": value} for key, value in VALUES.items()
            ],
        },
        "fallback": {"kind": "choice-list", "summary": "Pick one."},
    }
    result = decode_component_frame(wire)
    assert result.ok
    return result.value


def reserve(store: ChoiceReservationStore, session: str, f: ComponentFrame | None = None) -> Any:
    return store.resolve(f or frame(), "docs-agentskit", session_id=session)


def test_single_use_release_and_commit() -> None:
    store = ChoiceReservationStore()
    assert store.remember("s", frame(), VALUES)
    assert store.resolve(frame(), "not-offered", session_id="s") is CHOICE_UNAVAILABLE
    reservation = reserve(store, "s")
    assert isinstance(reservation, ChoiceReservation)
    assert reservation.value == "agentskit docs"
    assert reserve(store, "s") is CHOICE_UNAVAILABLE  # claimed
    reservation.release()
    assert reservation.settled
    again = reserve(store, "s")
    assert isinstance(again, ChoiceReservation)
    again.commit()
    assert reserve(store, "s") is CHOICE_UNAVAILABLE  # consumed
    assert store.resolve(frame(), "docs-registry", session_id="s") is CHOICE_UNAVAILABLE


def test_commit_and_release_share_one_settled_flag() -> None:
    store = ChoiceReservationStore()
    store.remember("s", frame(), VALUES)
    first = reserve(store, "s")
    first.commit()
    first.release()  # no effect: already settled
    assert reserve(store, "s") is CHOICE_UNAVAILABLE
    store.remember("s", frame(), VALUES)
    second = reserve(store, "s")
    second.release()
    second.commit()  # no effect: already released, so the choice stays usable
    second.release()
    assert isinstance(reserve(store, "s"), ChoiceReservation)


def test_commit_of_the_last_choice_forgets_the_session() -> None:
    store = ChoiceReservationStore()
    store.remember("s", frame(), VALUES)
    reserve(store, "s").commit()
    assert len(store) == 0


def test_forged_or_altered_frames_are_unavailable() -> None:
    store = ChoiceReservationStore()
    store.remember("s", frame(), VALUES)
    forged = frame("deterministic-choices-forged")
    assert reserve(store, "s", forged) is CHOICE_UNAVAILABLE
    altered = frame(
        prompt="Pick one.",
        choices=[{"id": "docs-agentskit", "label": "x", "description": "registry docs"}],
    )
    assert reserve(store, "s", altered) is CHOICE_UNAVAILABLE
    # Same props, other key order: compared as serialized text, so unavailable too.
    reordered = frame(
        choices=[{"id": key, "label": key, "description": value} for key, value in VALUES.items()],
        prompt="Pick one.",
    )
    assert reserve(store, "s", reordered) is CHOICE_UNAVAILABLE
    assert isinstance(reserve(store, "s"), ChoiceReservation)


def test_frames_given_as_wire_mappings_work() -> None:
    store = ChoiceReservationStore()
    store.remember("s", frame(), VALUES)
    reservation = store.resolve(frame().to_wire(), "docs-registry", session_id="s")
    assert isinstance(reservation, ChoiceReservation)
    assert reservation.value == "registry docs"


@pytest.mark.parametrize(
    ("submitted", "expected"),
    [
        ({"instanceId": "deterministic-choices-x"}, CHOICE_UNAVAILABLE),
        ({"instanceId": "destination-choice"}, None),
        ({}, None),
        ("not a frame", None),
    ],
)
def test_invalid_frames(submitted: Any, expected: Any) -> None:
    store = ChoiceReservationStore()
    store.remember("s", frame(), VALUES)
    assert store.resolve(submitted, "docs-agentskit", session_id="s") is expected


def test_non_deterministic_frames_are_not_ours() -> None:
    store = ChoiceReservationStore()
    assert store.resolve(frame("destination-choice"), "docs", session_id="s") is None
    assert reserve(store, "unknown") is CHOICE_UNAVAILABLE


def test_sessions_are_isolated() -> None:
    store = ChoiceReservationStore()
    store.remember("session-a", frame(), VALUES)
    store.remember("session-b", frame(), VALUES)
    assert reserve(store, "session-c") is CHOICE_UNAVAILABLE
    a = reserve(store, "session-a")
    b = reserve(store, "session-b")
    assert isinstance(a, ChoiceReservation)
    assert isinstance(b, ChoiceReservation)
    a.commit()
    assert reserve(store, "session-a") is CHOICE_UNAVAILABLE
    b.release()
    assert isinstance(reserve(store, "session-b"), ChoiceReservation)


def test_claimed_reservation_survives_260_abandoned_sessions() -> None:
    store = ChoiceReservationStore()
    store.remember("protected-session", frame(), VALUES)
    protected = reserve(store, "protected-session")
    assert isinstance(protected, ChoiceReservation)
    for i in range(260):
        assert store.remember(f"abandoned-{i}", frame(), VALUES)
    assert len(store) == MAX_CHOICE_SESSIONS
    assert reserve(store, "abandoned-0") is CHOICE_UNAVAILABLE  # evicted
    assert reserve(store, "abandoned-3") is CHOICE_UNAVAILABLE  # evicted
    protected.release()
    usable = reserve(store, "protected-session")
    assert isinstance(usable, ChoiceReservation)
    usable.release()
    store.release_session("protected-session")
    assert reserve(store, "protected-session") is CHOICE_UNAVAILABLE


def test_no_evictable_session_means_nothing_is_remembered() -> None:
    store = ChoiceReservationStore(max_sessions=2)
    for session in ("a", "b"):
        store.remember(session, frame(), VALUES)
        assert isinstance(reserve(store, session), ChoiceReservation)
    assert not store.remember("c", frame(), VALUES)
    assert reserve(store, "c") is CHOICE_UNAVAILABLE
    assert len(store) == 2


def test_empty_sessions_are_evictable() -> None:
    store = ChoiceReservationStore(max_sessions=2)
    store.remember("a", frame(), VALUES)
    reserve(store, "a").commit()  # "a" is now gone entirely
    store.remember("b", frame(), VALUES)
    store.remember("c", frame(), VALUES)
    store.remember("d", frame(), VALUES)
    assert reserve(store, "b") is CHOICE_UNAVAILABLE
    assert isinstance(reserve(store, "d"), ChoiceReservation)


def test_a_successful_claim_makes_the_session_most_recent() -> None:
    store = ChoiceReservationStore(max_sessions=2)
    store.remember("a", frame(), VALUES)
    store.remember("b", frame(), VALUES)
    reserve(store, "a").release()  # touch "a"
    store.remember("c", frame(), VALUES)  # evicts "b", the least recently used
    assert reserve(store, "b") is CHOICE_UNAVAILABLE
    assert isinstance(reserve(store, "a"), ChoiceReservation)


def test_per_session_bound_evicts_the_oldest_unclaimed_frame() -> None:
    store = ChoiceReservationStore(max_choices=3)
    for i in range(3):
        store.remember("s", frame(f"deterministic-choices-{i}"), VALUES)
    claimed = reserve(store, "s", frame("deterministic-choices-0"))
    assert isinstance(claimed, ChoiceReservation)
    assert store.remember("s", frame("deterministic-choices-3"), VALUES)
    assert reserve(store, "s", frame("deterministic-choices-1")) is CHOICE_UNAVAILABLE
    for i in (2, 3):
        held = reserve(store, "s", frame(f"deterministic-choices-{i}"))
        assert isinstance(held, ChoiceReservation)
    assert not store.remember("s", frame("deterministic-choices-4"), VALUES)
    assert reserve(store, "s", frame("deterministic-choices-4")) is CHOICE_UNAVAILABLE


def test_default_bounds() -> None:
    assert (MAX_CHOICE_SESSIONS, MAX_SESSION_CHOICES) == (256, 256)
    store = ChoiceReservationStore()
    for i in range(MAX_SESSION_CHOICES + 1):
        store.remember("s", frame(f"deterministic-choices-{i}"), VALUES)
    assert reserve(store, "s", frame("deterministic-choices-0")) is CHOICE_UNAVAILABLE
    last = frame(f"deterministic-choices-{MAX_SESSION_CHOICES}")
    assert isinstance(reserve(store, "s", last), ChoiceReservation)


def test_invalid_bounds_raise() -> None:
    with pytest.raises(ValueError, match="positive"):
        ChoiceReservationStore(max_sessions=0)


def test_a_claimed_frame_is_never_overwritten() -> None:
    store = ChoiceReservationStore()
    store.remember("s", frame(), VALUES)
    claimed = reserve(store, "s")
    assert not store.remember("s", frame(), {"docs-agentskit": "changed"})
    claimed.release()
    assert reserve(store, "s").value == "agentskit docs"


def test_an_unclaimed_frame_is_replaced_in_place() -> None:
    store = ChoiceReservationStore(max_choices=2)
    store.remember("s", frame("deterministic-choices-a"), VALUES)
    store.remember("s", frame("deterministic-choices-b"), VALUES)
    store.remember("s", frame("deterministic-choices-a"), {"docs-agentskit": "new"})
    store.remember("s", frame("deterministic-choices-c"), VALUES)  # evicts a, still oldest
    assert reserve(store, "s", frame("deterministic-choices-a")) is CHOICE_UNAVAILABLE
    assert isinstance(reserve(store, "s", frame("deterministic-choices-b")), ChoiceReservation)


def test_late_commit_cannot_touch_a_recreated_session() -> None:
    store = ChoiceReservationStore()
    store.remember("s", frame(), VALUES)
    old = reserve(store, "s")
    store.release_session("s")
    store.remember("s", frame(), VALUES)
    old.commit()
    assert len(store) == 1
    fresh = reserve(store, "s")
    assert isinstance(fresh, ChoiceReservation)


# --- races ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_one_thousand_concurrent_submissions_commit_once() -> None:
    store = ChoiceReservationStore()
    store.remember("s", frame(), VALUES)
    commits: list[str] = []
    unavailable = 0

    async def submit() -> None:
        nonlocal unavailable
        await anyio.lowlevel.checkpoint()
        reservation = reserve(store, "s")
        if reservation is CHOICE_UNAVAILABLE:
            unavailable += 1
            return
        await anyio.lowlevel.checkpoint()  # the send happens here
        reservation.commit()
        commits.append(reservation.value)

    async with anyio.create_task_group() as group:
        for _ in range(1000):
            group.start_soon(submit)
    assert commits == ["agentskit docs"]
    assert unavailable == 999


@pytest.mark.anyio
async def test_cross_session_submissions_never_succeed() -> None:
    store = ChoiceReservationStore()
    store.remember("owner", frame(), VALUES)
    successes = 0

    async def submit(i: int) -> None:
        nonlocal successes
        await anyio.lowlevel.checkpoint()
        if isinstance(reserve(store, f"intruder-{i % 7}"), ChoiceReservation):
            successes += 1

    async with anyio.create_task_group() as group:
        for i in range(1000):
            group.start_soon(submit, i)
    assert successes == 0
    assert isinstance(reserve(store, "owner"), ChoiceReservation)


@pytest.mark.anyio
async def test_concurrent_claims_and_releases_keep_exactly_one_holder() -> None:
    store = ChoiceReservationStore()
    store.remember("s", frame(), VALUES)
    holders = 0
    most = 0
    committed = 0

    async def submit(i: int) -> None:
        nonlocal holders, most, committed
        for _ in range(5):
            reservation = reserve(store, "s")
            if isinstance(reservation, ChoiceReservation):
                holders += 1
                most = max(most, holders)
                await anyio.lowlevel.checkpoint()
                holders -= 1
                if i == 999:
                    reservation.commit()
                    committed += 1
                else:
                    reservation.release()
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        for i in range(1000):
            group.start_soon(submit, i)
    assert most == 1
    assert committed <= 1
    after = reserve(store, "s")
    assert (after is CHOICE_UNAVAILABLE) == (committed == 1)
