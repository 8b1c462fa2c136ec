"""The statechart behind a conversation, compiled into a python-statemachine ``StateMachine``.

Our own checks run first, so a bad definition fails with the spec's messages
(``initial state "missing" is not defined``, ``transition "idle.go" targets unknown state
"missing"``). The graph is then built as a ``StateMachine`` subclass (never ``StateChart``,
which ignores illegal events). State and event names are arbitrary text in a conversation, so
the class uses generated attribute and event ids and keeps the names as state values.

The library's extra graph checks are turned off: a conversation may have terminal states
(no ``on``) and states no route reaches, and neither is an error here.

Dispatch asks for transitions many times per request (a rebuild replays every earlier turn),
so the wrapper reads the compiled machine's transitions once into an immutable table:
:meth:`Statechart.transition` is a pure lookup that never raises. :meth:`Statechart.start`
gives a live machine in a stored state, which agrees with the table (a property test checks
it). Nothing from ``statemachine`` leaks into the public API.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from statemachine import State, StateMachine
from statemachine.exceptions import TransitionNotAllowed

from agentskit_chat.protocol._text import js_trim

__all__ = ["Statechart", "StatechartError", "define_statechart"]

_LIBRARY_CHECKS: Final = {
    "validate_disconnected_states": False,
    "validate_trap_states": False,
    "validate_final_reachability": False,
}


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

    __slots__ = ("_event_ids", "_events", "_machine", "_table", "id", "initial", "version")

    def __init__(
        self,
        *,
        id: str,
        version: str,
        initial: str,
        table: Mapping[str, Mapping[str, str]],
        machine: type[StateMachine],
        event_ids: Mapping[str, str],
    ) -> None:
        self.id = id
        self.version = version
        self.initial = initial
        self._table = table
        self._events = {state: tuple(on) for state, on in table.items()}
        self._machine = machine
        self._event_ids = event_ids

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

    def start(self, state: str | None = None) -> Any:
        """A live library machine in ``state`` (the initial state by default).

        Its ``send`` takes the generated event id of :meth:`event_id`.

        Raises:
            StatechartError: ``state`` is not a state of this statechart.
        """
        if state is not None and state not in self._table:
            raise StatechartError(f'state "{state}" is not defined')
        return self._machine(start_value=state)

    def event_id(self, event: str) -> str | None:
        """The library's id of ``event``, or ``None`` when no state declares it."""
        return self._event_ids.get(event)

    def send(self, machine: Any, event: str) -> bool:
        """Send ``event`` to a machine from :meth:`start`; whether it was accepted."""
        event_id = self._event_ids.get(event)
        if event_id is None:
            return False
        try:
            machine.send(event_id)
        except TransitionNotAllowed:
            return False
        return True


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


def _compile_machine(
    initial: str, table: Mapping[str, Mapping[str, str]]
) -> tuple[type[StateMachine], dict[str, str]]:
    states = {name: State(name=name, value=name, initial=name == initial) for name in table}
    event_ids: dict[str, str] = {}
    for name, on in table.items():
        for event, target in on.items():
            event_id = event_ids.setdefault(event, f"e{len(event_ids)}")
            states[name].to(states[target], event=event_id)
    namespace: dict[str, Any] = {f"s{i}": state for i, state in enumerate(states.values())}
    namespace.update(_LIBRARY_CHECKS)
    namespace["__module__"] = __name__
    machine = type("ConversationMachine", (StateMachine,), namespace)
    return machine, event_ids


def define_statechart(
    *, id: str, version: str, initial: str, states: Mapping[str, Mapping[str, str]]
) -> Statechart:
    """Validate a statechart and compile it.

    Args:
        id: The statechart id (non-blank).
        version: Its version (non-blank).
        initial: The initial state; it must be one of ``states``.
        states: State name → its transitions (event → target state), in definition order.

    Raises:
        StatechartError: the definition is invalid; the message says how.
        Exception: whatever the library raises for a graph it refuses (none is known after our
            own checks).
    """
    table = _validate(id, version, initial, states)
    machine, event_ids = _compile_machine(initial, table)
    frozen = MappingProxyType({name: MappingProxyType(on) for name, on in table.items()})
    return Statechart(
        id=id,
        version=version,
        initial=initial,
        table=frozen,
        machine=machine,
        event_ids=MappingProxyType(event_ids),
    )
