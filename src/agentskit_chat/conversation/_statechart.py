"""The statechart behind a conversation: validated once, then an immutable transition table.

A conversation's statechart is flat: named states, each mapping events to a target state. That
needs no state-machine library. Validation gives the messages hosts see for a bad definition
(``initial state "missing" is not defined``, ``transition "idle.go" targets unknown state
"missing"``), and dispatch, which asks for transitions many times per request (a rebuild
replays every earlier turn), does a dictionary lookup that never raises.

A conversation may have terminal states (no ``on``) and states no route reaches; neither is an
error here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from agentskit_chat.protocol._text import js_trim

__all__ = ["Statechart", "StatechartError", "define_statechart"]


class StatechartError(Exception):
    """A statechart definition is invalid; ``message`` says how (it names states and events,
    which are definition data, never user input)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _blank(value: object) -> bool:
    return not isinstance(value, str) or js_trim(value) == ""


class Statechart:
    """A validated statechart: its states, their events in definition order, and transitions.

    Build it with :func:`define_statechart`.
    """

    __slots__ = ("_events", "_table", "id", "initial", "version")

    def __init__(
        self, *, id: str, version: str, initial: str, table: Mapping[str, Mapping[str, str]]
    ) -> None:
        self.id = id
        self.version = version
        self.initial = initial
        self._table = table
        self._events = {state: tuple(on) for state, on in table.items()}

    @property
    def states(self) -> tuple[str, ...]:
        """Every state name, in definition order."""
        return tuple(self._table)

    def has_state(self, state: str) -> bool:
        """Whether ``state`` is a state of this statechart."""
        return state in self._table

    def allowed_events(self, state: str) -> tuple[str, ...]:
        """The events ``state`` accepts, in definition order (empty for an unknown state)."""
        return self._events.get(state, ())

    def transition(self, state: str, event: str) -> str | None:
        """The target of ``event`` from ``state``, or ``None`` when it is not accepted.

        Pure; never raises.
        """
        on = self._table.get(state)
        return None if on is None else on.get(event)


def _validate(
    id: object, version: object, initial: object, states: object
) -> dict[str, dict[str, str]]:
    if _blank(id):
        raise StatechartError("statechart id must be a non-empty string")
    if _blank(version):
        raise StatechartError("statechart version must be a non-empty string")
    if _blank(initial):
        raise StatechartError("initial state must be a non-empty string")
    if not isinstance(states, Mapping) or not states:
        raise StatechartError("statechart states must be a non-empty mapping")
    for name in states:
        if _blank(name):
            raise StatechartError("state names must be non-empty strings")
    if initial not in states:
        raise StatechartError(f'initial state "{initial}" is not defined')
    table: dict[str, dict[str, str]] = {}
    for name, on in states.items():
        if not isinstance(on, Mapping):
            raise StatechartError(f'state "{name}" transitions must be a mapping')
        transitions: dict[str, str] = {}
        for event, target in on.items():
            if _blank(event):
                raise StatechartError(f'state "{name}" has an empty event name')
            if not isinstance(target, str) or target not in states:
                raise StatechartError(
                    f'transition "{name}.{event}" targets unknown state "{target}"'
                )
            transitions[event] = target
        table[name] = transitions
    return table


def define_statechart(
    *, id: str, version: str, initial: str, states: Mapping[str, Mapping[str, str]]
) -> Statechart:
    """Validate a statechart and freeze it into a transition table.

    Args:
        id: The statechart id (non-blank).
        version: Its version (non-blank).
        initial: The initial state; it must be one of ``states``.
        states: State name → its transitions (event → target state), in definition order.

    Raises:
        StatechartError: the definition is invalid; the message says how.
    """
    table = _validate(id, version, initial, states)
    return Statechart(
        id=id,
        version=version,
        initial=initial,
        table=MappingProxyType({name: MappingProxyType(on) for name, on in table.items()}),
    )
