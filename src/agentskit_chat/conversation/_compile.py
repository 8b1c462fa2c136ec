"""Conversation compilation: routes checked, states compiled into a statechart.

Every error surfaces here, when a session is created, before any dispatch. Names that end up in
session snapshots are also checked against the snapshot's bounds now (route ids are safe
identifiers, state names at most 128 UTF-16 units), so a snapshot can always be built later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from agentskit_chat._observers import notify
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol._text import utf16_len
from agentskit_chat.protocol._types import is_safe_id

from ._definition import ChatDefinition, ConversationDefinition, ConversationTrace, Route
from ._statechart import Statechart, StatechartError, define_statechart

__all__ = ["CompiledConversation", "compile_conversation"]

_MAX_STATE_UNITS: Final = 128
_TRACE_KINDS: Final = frozenset({"deterministic", "repaired", "fallback"})


@dataclass(frozen=True, slots=True)
class CompiledConversation:
    """A conversation ready for dispatch.

    Attributes:
        definition: What it was compiled from.
        statechart: The compiled states and transitions.
        routes: The routes in precedence order.
        routes_by_id: The same routes by id.
    """

    definition: ConversationDefinition
    statechart: Statechart
    routes: tuple[Route, ...]
    routes_by_id: Mapping[str, Route]

    @property
    def initial(self) -> str:
        """The state every session starts in."""
        return self.statechart.initial

    def actions(self, state: str) -> tuple[str, ...]:
        """The informational actions of ``state`` (empty for an unknown state)."""
        declared = self.definition.states.get(state)
        return () if declared is None else tuple(declared.actions)

    def emit(self, trace: ConversationTrace) -> None:
        """Tell the ``on_trace`` observer, isolated: its errors never reach dispatch, and an
        awaitable it returns is closed without being awaited."""
        notify(self.definition.on_trace, trace)


def _check_routes(conversation: ConversationDefinition) -> dict[str, Route]:
    by_id: dict[str, Route] = {}
    for route in conversation.routes:
        if not isinstance(route.id, str) or route.id == "":
            raise ConfigurationError("Conversation route identity is invalid.")
        if not isinstance(route.event, str) or route.event == "":
            raise ConfigurationError("Conversation route identity is invalid.")
        if route.id in by_id:
            raise ConfigurationError("Conversation route ids must be unique.")
        # Route ids are stored in session snapshots, which accept only safe identifiers.
        if not is_safe_id(route.id):
            raise ConfigurationError("Conversation route identity is invalid.")
        if route.states is not None:
            for state in route.states:
                if not isinstance(state, str) or state not in conversation.states:
                    raise ConfigurationError("Conversation route state is unknown.")
        if route.trace_kind not in _TRACE_KINDS:
            raise ConfigurationError("Conversation route trace kind is invalid.")
        by_id[route.id] = route
    return by_id


def compile_conversation(definition: ChatDefinition) -> CompiledConversation | None:
    """Compile ``definition.conversation``, or return ``None`` when it has none.

    Raises:
        ConfigurationError: a route is invalid ("Conversation route identity is invalid.",
            "Conversation route ids must be unique.", "Conversation route state is unknown."),
            the statechart is invalid (its own message, such as ``initial state "missing" is
            not defined``), a state name is longer than 128 UTF-16 units, or reading the
            statechart failed otherwise ("Conversation statechart definition is invalid.").
    """
    conversation = definition.conversation
    if conversation is None:
        return None
    routes_by_id = _check_routes(conversation)
    states: dict[object, object] = {}
    for name, state in conversation.states.items():
        states[name] = getattr(state, "on", None)
    try:
        statechart = define_statechart(
            id=f"{definition.id}.conversation",
            version=str(definition.revision),
            initial=conversation.initial,
            states=states,  # type: ignore[arg-type]
        )
    except StatechartError as error:
        raise ConfigurationError(error.message) from None
    except Exception:
        # Definitions are host data of any shape: a transitions mapping that fails when read,
        # or a target whose ``__str__`` raises while the error message is built. The host still
        # gets a configuration error, and nothing of the failure leaks.
        raise ConfigurationError("Conversation statechart definition is invalid.") from None
    for name in statechart.states:
        if utf16_len(name) > _MAX_STATE_UNITS:
            raise ConfigurationError("Conversation state names must be at most 128 characters.")
    return CompiledConversation(
        definition=conversation,
        statechart=statechart,
        routes=conversation.routes,
        routes_by_id=routes_by_id,
    )
