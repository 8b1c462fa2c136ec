"""Routes whose response is an ``async`` function: awaited in the turn, cancellable, replayed."""

from __future__ import annotations

import inspect
from typing import Any

import anyio
import pytest

from agentskit_chat.conversation import ConversationTrace, Route, RouteContext, create_chat_session

from ._support import (
    ROUTE_ERROR,
    SECRET,
    ModelAdapter,
    Traces,
    collect,
    decisions_of,
    definition,
    reply,
    request,
    state_of,
    states,
    user,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Lookup:
    """An async response that looks an order up: counts calls, can wait on an event or fail."""

    def __init__(self, answer: Any = "Order 42 has shipped.", *, fail: bool = False) -> None:
        self.answer = answer
        self.fail = fail
        self.calls = 0
        self.finished = 0
        self.gate: anyio.Event | None = None
        self.seen: list[tuple[str, str | None]] = []

    async def __call__(self, text: str, context: RouteContext) -> Any:
        self.calls += 1
        self.seen.append((text, context.message_id))
        if self.gate is not None:
            await self.gate.wait()
        await anyio.sleep(0)
        if self.fail:
            raise RuntimeError(SECRET)
        self.finished += 1
        return self.answer


def order_route(response: Any) -> Route:
    return Route(id="order", event="lookup", match=lambda t: t == "/order", response=response)


def session_for(response: Any, traces: Traces | None = None) -> Any:
    declared = definition(
        ModelAdapter(),
        states=states(idle={"lookup": "shown"}, shown={}),
        routes=(order_route(response),),
        traces=traces,
    )
    return create_chat_session(declared)


async def test_an_async_response_is_awaited_and_its_reply_streamed() -> None:
    lookup, traces = Lookup(), Traces()
    session = session_for(lookup, traces)
    source = session.chat.adapter.create_source(request(user("/order", "u-1")))
    # Nothing has run or moved yet: the response is awaited when the turn streams.
    assert (lookup.calls, state_of(session)) == (0, "idle")
    assert await collect(source) == reply("Order 42 has shipped.")
    assert state_of(session) == "shown"
    assert lookup.seen == [("/order", "u-1")]
    assert traces.seen == [ConversationTrace("deterministic", "idle", "shown", "order")]
    [decision] = decisions_of(session)
    assert (decision.route_id, decision.content) == ("order", "Order 42 has shipped.")


async def test_a_replayed_turn_reuses_the_recorded_reply_without_awaiting_again() -> None:
    lookup = Lookup()
    session = session_for(lookup)
    first = await collect(session.chat.adapter.create_source(request(user("/order", "u-1"))))
    again = await collect(session.chat.adapter.create_source(request(user("/order", "u-1"))))
    assert first == again == reply("Order 42 has shipped.")
    assert lookup.finished == 1


@pytest.mark.parametrize("answer", ["fail", 42, "x" * 65537])
async def test_a_failing_or_invalid_async_response_is_a_route_error(answer: Any) -> None:
    lookup = Lookup(fail=True) if answer == "fail" else Lookup(answer)
    traces = Traces()
    session = session_for(lookup, traces)
    chunks = await collect(session.chat.adapter.create_source(request(user("/order"))))
    assert chunks == ROUTE_ERROR
    assert state_of(session) == "idle"
    assert decisions_of(session) == ()
    assert traces.seen == []


async def test_stopping_the_turn_cancels_the_response_and_changes_nothing() -> None:
    lookup = Lookup()
    lookup.gate = anyio.Event()
    session = session_for(lookup)
    source = session.chat.adapter.create_source(request(user("/order")))
    with anyio.move_on_after(0.05):
        await collect(source)  # waits on the gate until the turn is stopped
    source.abort()
    lookup.gate.set()
    assert lookup.finished == 0
    assert state_of(session) == "idle"
    assert decisions_of(session) == ()
    # Aborted after the cancellation, the source streams nothing more.
    assert await collect(source) == []


async def test_a_source_aborted_before_it_streams_closes_its_coroutine() -> None:
    lookup = Lookup()
    created: list[Any] = []

    def response(text: str, context: RouteContext) -> Any:
        created.append(lookup(text, context))
        return created[-1]

    session = session_for(response)
    source = session.chat.adapter.create_source(request(user("/order")))
    [coroutine] = created
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED
    source.abort()
    # Closed, so it is never reported as "never awaited" and never runs later.
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED
    assert await collect(source) == []
    assert (lookup.calls, state_of(session)) == (0, "idle")
