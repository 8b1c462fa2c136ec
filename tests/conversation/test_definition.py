"""Chat definitions, conversation compilation and the statechart."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.conversation import (
    ChatDefinition,
    ConversationDefinition,
    ConversationSnapshot,
    ConversationStateDefinition,
    Route,
    _compile,
    command_route,
    create_chat_session,
    define_chat,
)
from agentskit_chat.conversation._statechart import StatechartError, define_statechart
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol._text import js_trim
from agentskit_chat.runtime import ChatConfig

from ._support import ModelAdapter, definition, onboarding, respond, states


def test_define_chat_returns_the_same_definition_and_chat() -> None:
    chat = ChatConfig(adapter=ModelAdapter())
    declared = ChatDefinition(id="support", chat=chat)
    assert define_chat(declared) is declared
    assert define_chat(declared).chat is chat
    assert declared.revision == 1


def test_define_chat_builds_a_definition_from_its_fields() -> None:
    chat = ChatConfig(adapter=ModelAdapter())
    declared = define_chat(id="support", chat=chat, revision=2)
    assert declared == ChatDefinition(id="support", chat=chat, revision=2)
    assert declared.chat is chat
    with pytest.raises(TypeError):
        define_chat(declared, id="other")  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        define_chat()  # type: ignore[call-overload]


def test_define_chat_does_not_validate() -> None:
    broken = ChatDefinition(
        id="support",
        chat=ChatConfig(adapter=ModelAdapter()),
        revision=0,
        conversation=ConversationDefinition(initial="missing", states={}),
    )
    assert define_chat(broken) is broken
    with pytest.raises(ConfigurationError):
        create_chat_session(broken)


def test_command_route_matches_exactly_and_case_sensitively() -> None:
    route = command_route(command="/start", id="start", event="go", response=respond("ok"))
    assert [route.match(text) for text in ("/start", "/Start", " /start", "/start ", "")] == [
        True,
        False,
        False,
        False,
        False,
    ]
    assert route.id == "start"
    assert route.event == "go"
    assert route.states is None
    assert route.trace_kind == "deterministic"


def test_command_route_rejects_an_empty_command() -> None:
    with pytest.raises(ConfigurationError) as caught:
        command_route(command="", id="start", event="go", response=respond("ok"))
    assert caught.value.message == "Conversation command cannot be empty."
    assert caught.value.code == "AK_CONFIG_INVALID"


def _route(route_id: str = "r", event: str = "go", **extra: Any) -> Route:
    return Route(id=route_id, event=event, match=lambda _t: True, response=respond("x"), **extra)


IDLE_TO_DONE = {"idle": {"go": "done"}, "done": {}}

COMPILE_ERRORS = [
    ("initial-not-a-state", "missing", IDLE_TO_DONE, (), 'initial state "missing" is not defined'),
    ("empty-initial", "", IDLE_TO_DONE, (), "initial state must be a non-empty string"),
    ("blank-initial", "  ", IDLE_TO_DONE, (), "initial state must be a non-empty string"),
    ("no-states", "idle", {}, (), "statechart states must be a non-empty mapping"),
    ("empty-state-name", "idle", {"idle": {}, "": {}}, (), "state names must be non-empty strings"),
    (
        "unknown-target",
        "idle",
        {"idle": {"go": "missing"}},
        (),
        'transition "idle.go" targets unknown state "missing"',
    ),
    ("empty-event", "idle", {"idle": {"": "idle"}}, (), 'state "idle" has an empty event name'),
    (
        "route-empty-id",
        "idle",
        IDLE_TO_DONE,
        (_route(""),),
        "Conversation route identity is invalid.",
    ),
    (
        "route-empty-event",
        "idle",
        IDLE_TO_DONE,
        (_route(event=""),),
        "Conversation route identity is invalid.",
    ),
    (
        "route-unsafe-id",
        "idle",
        IDLE_TO_DONE,
        (_route("has space"),),
        "Conversation route identity is invalid.",
    ),
    (
        "duplicate-route-ids",
        "idle",
        IDLE_TO_DONE,
        (_route("a"), _route("a")),
        "Conversation route ids must be unique.",
    ),
    (
        "route-unknown-state",
        "idle",
        IDLE_TO_DONE,
        (_route(states=("nowhere",)),),
        "Conversation route state is unknown.",
    ),
    (
        "state-name-too-long",
        "idle",
        {"idle": {"go": "x" * 129}, "x" * 129: {}},
        (),
        "Conversation state names must be at most 128 characters.",
    ),
]


@pytest.mark.parametrize(
    ("initial", "on", "routes", "message"),
    [case[1:] for case in COMPILE_ERRORS],
    ids=[case[0] for case in COMPILE_ERRORS],
)
def test_invalid_conversations_are_rejected_when_a_session_is_created(
    initial: str, on: dict[str, dict[str, str]], routes: tuple[Route, ...], message: str
) -> None:
    declared = definition(
        ModelAdapter(),
        initial=initial,
        states={name: ConversationStateDefinition(on=value) for name, value in on.items()},
        routes=routes,
    )
    with pytest.raises(ConfigurationError) as caught:
        create_chat_session(declared)
    assert caught.value.message == message


def test_a_route_whose_event_no_state_declares_is_legal() -> None:
    declared = definition(ModelAdapter(), states=states(idle={}), routes=(_route(event="never"),))
    assert create_chat_session(declared).get_conversation_snapshot() == ConversationSnapshot(
        "idle", (), ()
    )


def test_terminal_and_unreachable_states_are_legal() -> None:
    declared = definition(
        ModelAdapter(), states=states(idle={"go": "done"}, done={}, island={"back": "idle"})
    )
    assert create_chat_session(declared).get_conversation_snapshot() is not None


@pytest.mark.parametrize(
    ("revision", "message"),
    [
        (0, "Chat definition revision is invalid."),
        (-1, "Chat definition revision is invalid."),
        (True, "Chat definition revision is invalid."),
        (1.5, "Chat definition revision is invalid."),
        (2**53, "Chat definition revision is invalid."),
    ],
)
def test_the_revision_must_be_a_positive_safe_integer(revision: Any, message: str) -> None:
    declared = ChatDefinition(id="support", chat=ChatConfig(adapter=ModelAdapter()))
    object.__setattr__(declared, "revision", revision)
    with pytest.raises(ConfigurationError) as caught:
        create_chat_session(declared)
    assert caught.value.message == message


def test_snapshot_of_initial_state_lists_events_in_definition_order_and_actions() -> None:
    declared = definition(
        ModelAdapter(),
        states={
            "idle": ConversationStateDefinition(
                on={"start": "collecting", "help": "idle", "abort": "idle"}, actions=("begin",)
            ),
            "collecting": ConversationStateDefinition(),
        },
    )
    snapshot = create_chat_session(declared).get_conversation_snapshot()
    assert snapshot == ConversationSnapshot("idle", ("start", "help", "abort"), ("begin",))


def test_without_a_conversation_there_is_no_snapshot() -> None:
    assert create_chat_session(definition(ModelAdapter())).get_conversation_snapshot() is None


def test_onboarding_starts_idle() -> None:
    snapshot = create_chat_session(onboarding(ModelAdapter())).get_conversation_snapshot()
    assert snapshot == ConversationSnapshot("idle", ("start",), ("begin",))


# --- the statechart wrapper --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"id": " "}, "statechart id must be a non-empty string"),
        ({"version": ""}, "statechart version must be a non-empty string"),
    ],
)
def test_statechart_identity_must_not_be_blank(kwargs: dict[str, str], message: str) -> None:
    arguments: dict[str, Any] = {
        "id": "c",
        "version": "1",
        "initial": "idle",
        "states": {"idle": {}},
    }
    with pytest.raises(StatechartError) as caught:
        define_statechart(**{**arguments, **kwargs})
    assert caught.value.message == message


def test_statechart_transition_is_pure_and_never_raises() -> None:
    chart = define_statechart(
        id="c", version="1", initial="idle", states={"idle": {"go": "done"}, "done": {}}
    )
    assert chart.transition("idle", "go") == "done"
    assert chart.transition("done", "go") is None
    assert chart.transition("nowhere", "go") is None
    assert chart.transition("idle", "unknown") is None
    assert chart.allowed_events("nowhere") == ()


# Blank by the definition's own rule (JavaScript's trim: U+FEFF too), not Python's strip().
NAMES = st.text(min_size=1, max_size=6).filter(lambda s: js_trim(s) != "")


@st.composite
def charts(draw: st.DrawFn) -> tuple[str, dict[str, dict[str, str]], list[tuple[str, str]]]:
    names = draw(st.lists(NAMES, min_size=1, max_size=5, unique=True))
    events = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    table = {
        name: draw(st.dictionaries(st.sampled_from(events), st.sampled_from(names), max_size=3))
        for name in names
    }
    probes = draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(events)), max_size=10))
    return draw(st.sampled_from(names)), table, probes


@settings(max_examples=60)
@given(charts())
def test_the_transition_table_agrees_with_its_definition(
    chart_spec: tuple[str, dict[str, dict[str, str]], list[tuple[str, str]]],
) -> None:
    initial, table, probes = chart_spec
    chart = define_statechart(id="c", version="1", initial=initial, states=table)
    declared = {name: dict(on) for name, on in table.items()}
    for on in table.values():
        on.clear()  # the chart keeps its own copy
    assert chart.initial == initial
    assert chart.states == tuple(declared)
    for state, event in probes:
        assert chart.transition(state, event) == declared[state].get(event)
        assert chart.allowed_events(state) == tuple(declared[state])


def test_a_route_trace_kind_outside_the_three_is_rejected() -> None:
    declared = definition(
        ModelAdapter(),
        states=states(idle={"go": "idle"}),
        routes=(_route(trace_kind="agentic"),),
    )
    with pytest.raises(ConfigurationError) as caught:
        create_chat_session(declared)
    assert caught.value.message == "Conversation route trace kind is invalid."


def test_a_failure_other_than_a_statechart_error_has_the_generic_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(**_kwargs: Any) -> Any:
        raise RuntimeError("library refused")

    monkeypatch.setattr(_compile, "define_statechart", refuse)
    with pytest.raises(ConfigurationError) as caught:
        create_chat_session(onboarding(ModelAdapter()))
    assert caught.value.message == "Conversation statechart definition is invalid."


def test_statechart_rejects_transitions_that_are_not_a_mapping() -> None:
    with pytest.raises(StatechartError) as caught:
        define_statechart(id="c", version="1", initial="idle", states={"idle": ["go"]})  # type: ignore[dict-item]
    assert caught.value.message == 'state "idle" transitions must be a mapping'


def test_statechart_lookups_know_only_declared_states_and_events() -> None:
    chart = define_statechart(
        id="c", version="1", initial="idle", states={"idle": {"go": "done"}, "done": {}}
    )
    assert chart.states == ("idle", "done")
    assert chart.has_state("done")
    assert not chart.has_state("nowhere")
    assert chart.allowed_events("idle") == ("go",)
    assert chart.allowed_events("done") == ()
    assert chart.transition("idle", "go") == "done"
    assert chart.transition("idle", "unknown") is None
    assert chart.transition("nowhere", "go") is None


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("cannot print")


def test_a_definition_that_fails_to_read_has_the_generic_message() -> None:
    broken = ConversationStateDefinition(on={"go": _Unprintable()})  # type: ignore[dict-item]
    declared = definition(ModelAdapter(), states={"idle": broken})
    with pytest.raises(ConfigurationError) as caught:
        create_chat_session(declared)
    assert caught.value.message == "Conversation statechart definition is invalid."
    assert caught.value.__cause__ is None
