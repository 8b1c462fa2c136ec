"""Deterministic dispatch: rebuild, replay, route selection, decisions, traces.

A :class:`Dispatcher` holds one session's conversation: its current state and its decision
cache (user message id → :class:`~agentskit_chat.protocol.Decision`, in insertion order).

Limits are checked where data enters, so a snapshot can always be built (a limit failing later,
inside snapshot building, would lose the whole save):

- a user turn whose decision could not be stored (its message id is not a safe identifier,
  its input is longer than 16,384 UTF-16 units, or 1,000 decisions are already cached) is not
  routed: it goes to the adapter like any unknown input (``agentic`` trace, state unchanged);
- a route reply longer than 65,536 UTF-16 units is a route failure.

A stored decision that no longer replays (its route is gone, or the statechart no longer takes
it from the state it was made in) is dropped and reported as a ``repaired`` trace, both when a
snapshot is restored and when a request's history is rebuilt, so both paths agree on the state.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Final

from agentskit_chat.protocol import ConversationState, Decision
from agentskit_chat.protocol._text import utf16_len
from agentskit_chat.protocol._types import is_safe_id
from agentskit_chat.runtime import AdapterRequest, ChatMessage, ChatSource
from agentskit_chat.runtime._sources import TextReplySource

from ._compile import CompiledConversation
from ._definition import ConversationTrace, Route, RouteContext
from ._sources import AwaitedRouteSource, Flush, RouteErrorSource, SavingSource

__all__ = [
    "MAX_DECISIONS",
    "MAX_INPUT_UNITS",
    "MAX_REPLY_UNITS",
    "Dispatcher",
]

#: The most decisions a session keeps (the snapshot's bound).
MAX_DECISIONS: Final = 1000
#: The longest input a decision can record, in UTF-16 units.
MAX_INPUT_UNITS: Final = 16384
#: The longest route reply, in UTF-16 units.
MAX_REPLY_UNITS: Final = 65536


def _answered_already(messages: Sequence[ChatMessage], user: ChatMessage) -> bool:
    """Whether anything but the empty answer being written follows ``user`` in ``messages``."""
    position = max(index for index, message in enumerate(messages) if message is user)
    later = messages[position + 1 :]
    if later and later[-1].role == "assistant" and not later[-1].content:
        later = later[:-1] if not later[-1].tool_calls else later
    return len(later) > 0


class Dispatcher:
    """One session's conversation state and decision cache, and the dispatch over them.

    Args:
        compiled: The compiled conversation.
        session_id: The session (for route identity context).
        schedule: Marks the session for saving (called synchronously).
        flush: Saves the session if it was marked; never raises (run by the sources).
    """

    __slots__ = ("_compiled", "_flush", "_schedule", "_session_id", "decisions", "state")

    def __init__(
        self,
        compiled: CompiledConversation,
        *,
        session_id: str,
        schedule: Callable[[], None],
        flush: Flush,
    ) -> None:
        self._compiled = compiled
        self._session_id = session_id
        self._schedule = schedule
        self._flush = flush
        self.state: str = compiled.initial
        self.decisions: dict[str, Decision] = {}

    @property
    def compiled(self) -> CompiledConversation:
        """The compiled conversation."""
        return self._compiled

    # --- replaying decisions ---------------------------------------------------------------

    def _transition_decision(self, state: str, decision: Decision) -> str | None:
        if decision.from_state != state:
            return None
        route = self._compiled.routes_by_id.get(decision.route_id)
        if route is None or (route.states is not None and state not in route.states):
            return None
        target = self._compiled.statechart.transition(state, route.event)
        return target if target is not None and target == decision.to_state else None

    def _repaired(self, decision: Decision, state: str) -> None:
        self._compiled.emit(ConversationTrace("repaired", state, state, decision.route_id))

    def restore(self, conversation: ConversationState) -> None:
        """Replay stored decisions from the initial state.

        A decision that no longer replays is dropped with a ``repaired`` trace; the state
        becomes the replayed one. When every decision replayed but the stored state differs,
        the replayed state wins too, with one ``repaired`` trace (no route) from the stored
        state to it. Neither matchers nor responses are called.
        """
        state = self._compiled.initial
        kept: dict[str, Decision] = {}
        dropped = False
        for decision in conversation.decisions:
            target = self._transition_decision(state, decision)
            if target is None:
                dropped = True
                self._repaired(decision, state)
                continue
            kept[decision.message_id] = decision
            state = target
        if not dropped and conversation.state != state:
            self._compiled.emit(ConversationTrace("repaired", conversation.state, state))
        self.state = state
        self.decisions = kept

    def _rebuild(self, earlier: Sequence[ChatMessage]) -> str:
        state = self._compiled.initial
        for message in earlier:
            decision = self.decisions.get(message.id)
            if decision is None or decision.input != message.content:
                continue
            target = self._transition_decision(state, decision)
            if target is None:
                del self.decisions[message.id]
                self._repaired(decision, state)
                continue
            state = target
        return state

    # --- dispatch ----------------------------------------------------------------------------

    def _error(self) -> ChatSource:
        self._schedule()
        return RouteErrorSource(self._flush)

    def _reply(self, content: str) -> ChatSource:
        self._schedule()
        return TextReplySource(content, before=self._flush)

    def _select(self, state: str, text: str, context: RouteContext) -> Route | None:
        statechart = self._compiled.statechart
        for route in self._compiled.routes:
            if route.states is not None and state not in route.states:
                continue
            if statechart.transition(state, route.event) is None:
                continue
            if route.match(text) and (route.guard is None or route.guard(context) is True):
                return route
        return None

    def _recordable(self, user: ChatMessage | None) -> bool:
        if user is None:
            return True
        return (
            is_safe_id(user.id)
            and utf16_len(user.content) <= MAX_INPUT_UNITS
            and len(self.decisions) < MAX_DECISIONS
        )

    def dispatch(
        self, request: AdapterRequest, fallback: Callable[[AdapterRequest], ChatSource]
    ) -> ChatSource:
        """Answer ``request`` by replay or route, or hand it to ``fallback`` unchanged.

        Never raises for a failing matcher or response (the route error source is returned).
        ``fallback`` failures propagate, as the adapter's own would.
        """
        users = [message for message in request.messages if message.role == "user"]
        present = {message.id for message in users}
        for message_id in [key for key in self.decisions if key not in present]:
            del self.decisions[message_id]
        user = users[-1] if users else None
        text = "" if user is None else user.content
        if user is not None and _answered_already(request.messages, user):
            # A follow-up after a tool call (the user message was answered, then a call it
            # offered was decided): the adapter answers it, from the state that answer left.
            state = self._rebuild(users)
            self.state = state
            self._compiled.emit(ConversationTrace("agentic", state, state))
            self._schedule()
            return SavingSource(fallback(request), self._flush)
        state = self._rebuild(users[:-1])
        self.state = state

        if user is not None:
            cached = self.decisions.get(user.id)
            if cached is not None and cached.input == text and cached.from_state == state:
                target = self._transition_decision(state, cached)
                if target is None:
                    del self.decisions[user.id]
                    return self._error()
                self.state = target
                self._compiled.emit(ConversationTrace(cached.kind, state, target, cached.route_id))
                return self._reply(cached.content)
            self.decisions.pop(user.id, None)

        route: Route | None = None
        context = RouteContext(
            self._session_id, None if user is None else user.id, tuple(request.messages)
        )
        if self._recordable(user):
            try:
                route = self._select(state, text, context)
            except Exception:
                return self._error()
        if route is None:
            self._compiled.emit(ConversationTrace("agentic", state, state))
            self._schedule()
            return SavingSource(fallback(request), self._flush)

        try:
            content = route.response(text, context)
        except Exception:
            return self._error()
        if inspect.isawaitable(content):
            # An async response runs inside the turn's stream, so stopping the turn cancels it;
            # the conversation changes only once it has answered.
            return AwaitedRouteSource(
                content,
                lambda value: self._finish(route, user, text, state, value),
                self._error,
            )
        return self._finish(route, user, text, state, content)

    def _finish(
        self, route: Route, user: ChatMessage | None, text: str, state: str, content: object
    ) -> ChatSource:
        """Take the route's transition and record its decision, or fail the route."""
        if not isinstance(content, str) or utf16_len(content) > MAX_REPLY_UNITS:
            return self._error()
        target = self._compiled.statechart.transition(state, route.event)
        if target is None:
            return self._error()
        self.state = target
        if user is not None:
            self.decisions[user.id] = Decision(
                message_id=user.id,
                input=text,
                route_id=route.id,
                kind=route.trace_kind,
                content=content,
                from_state=state,
                to_state=target,
            )
        self._compiled.emit(ConversationTrace(route.trace_kind, state, target, route.id))
        return self._reply(content)

    def conversation_state(self) -> ConversationState:
        """The state and decisions, as stored in a session snapshot."""
        return ConversationState(state=self.state, decisions=tuple(self.decisions.values()))
