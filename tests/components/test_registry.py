"""The closed manifest: frames resolve only for registered components with valid props."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError

from agentskit_chat.components import (
    CHOICE_LIST_COMPONENT,
    STANDARD_COMPONENT_CATALOG,
    STANDARD_COMPONENT_MANIFEST,
    ComponentDefinition,
    ComponentEventSpec,
    PresentedComponent,
    PresentedDiagnostic,
    PresentedFallback,
    PresentedText,
    ResolvedComponent,
    UnresolvedComponent,
    create_component_interaction,
    define_component_manifest,
    parse_semantic_fallback,
    present_chat_message,
    resolve_choice_action,
    resolve_choice_list_frame,
    resolve_component_fallback,
    resolve_component_frame,
    select_choice,
)
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import create_assistant_content_encoder
from agentskit_chat.protocol.fixtures.component import (
    INVALID_CHOICE_LIST_PROPS_FRAME,
    INVALID_COMPONENT_FRAME_FIXTURES,
    STANDARD_COMPONENT_FRAME_FIXTURES,
    UNKNOWN_COMPONENT_FRAME,
    VALID_CHOICE_LIST_FRAME,
)
from agentskit_chat.runtime import ChatMessage
from tests._strategies import json_values

AT = datetime(2026, 7, 11, tzinfo=UTC)


class GaugeProps(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    label: str
    level: int


GAUGE = ComponentDefinition(
    key="gauge",
    props_schema=GaugeProps,
    events=(
        ComponentEventSpec("reset"),
        ComponentEventSpec("pick", "id"),
        ComponentEventSpec("follow", "url"),
        ComponentEventSpec("fill", "form"),
    ),
    fallback=lambda props: f"{props.label}: {props.level}.",
)
MANIFEST = define_component_manifest([*STANDARD_COMPONENT_CATALOG, GAUGE])


def gauge_frame(**props: Any) -> dict[str, Any]:
    return {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": "gauge",
        "instanceId": "gauge-1",
        "props": {"label": "Load", "level": 3, **props},
        "fallback": {"kind": "gauge", "summary": "Load is 3."},
    }


# --- the manifest --------------------------------------------------------------------------------


def test_the_standard_manifest_holds_the_twelve_catalog_definitions() -> None:
    assert len(STANDARD_COMPONENT_MANIFEST) == 12
    assert list(STANDARD_COMPONENT_MANIFEST.values()) == list(STANDARD_COMPONENT_CATALOG)


LOOKALIKE = ComponentDefinition(key="choice-list", props_schema=GaugeProps)


@pytest.mark.parametrize(
    "components",
    [
        [ComponentDefinition(key="Bad", props_schema=GaugeProps)],
        [ComponentDefinition(key="", props_schema=GaugeProps)],
        [ComponentDefinition(key="a" * 65, props_schema=GaugeProps)],
        [GAUGE, GAUGE],
        [LOOKALIKE],
        {"other": GAUGE},
        ["gauge"],
        7,
    ],
)
def test_invalid_manifests(components: Any) -> None:
    with pytest.raises(ConfigurationError) as error:
        define_component_manifest(components)
    assert error.value.message == (
        "Component manifest keys must be non-empty, unique, and must not override standard "
        "catalog keys."
    )


@pytest.mark.parametrize("key", ["constructor", "__class__", "__proto__", "get", "keys"])
def test_nothing_is_registered_by_inheritance(key: str) -> None:
    frame = {**gauge_frame(), "componentKey": key}
    resolution = resolve_component_frame(frame, MANIFEST)
    assert isinstance(resolution, UnresolvedComponent)
    assert resolution.diagnostic.code in {"COMPONENT_UNKNOWN", "COMPONENT_INVALID_FRAME"}


# --- frames --------------------------------------------------------------------------------------


def test_every_standard_fixture_frame_resolves() -> None:
    assert len(STANDARD_COMPONENT_FRAME_FIXTURES) == 12
    for frame in STANDARD_COMPONENT_FRAME_FIXTURES:
        resolution = resolve_component_frame(json.dumps(frame), STANDARD_COMPONENT_MANIFEST)
        assert isinstance(resolution, ResolvedComponent), frame["componentKey"]
        assert resolution.definition.key == frame["componentKey"]


def test_unknown_and_invalid_frames_are_inert_diagnostics() -> None:
    unknown = resolve_component_frame(UNKNOWN_COMPONENT_FRAME, STANDARD_COMPONENT_MANIFEST)
    assert isinstance(unknown, UnresolvedComponent)
    assert unknown.diagnostic.to_wire() == {
        "code": "COMPONENT_UNKNOWN",
        "message": "Component is not registered.",
        "retryable": False,
    }
    invalid = resolve_component_frame(INVALID_CHOICE_LIST_PROPS_FRAME, STANDARD_COMPONENT_MANIFEST)
    assert isinstance(invalid, UnresolvedComponent)
    assert invalid.diagnostic.code == "COMPONENT_INVALID_PROPS"
    assert invalid.diagnostic.message == "Component props are invalid."
    cases = list(INVALID_COMPONENT_FRAME_FIXTURES)
    assert cases
    for case in cases:
        name, frame, code = case.name, case.input, case.code
        resolution = resolve_component_frame(frame, STANDARD_COMPONENT_MANIFEST)
        assert isinstance(resolution, UnresolvedComponent), name
        assert resolution.diagnostic.code == code
    assert not resolve_component_frame(gauge_frame(), STANDARD_COMPONENT_MANIFEST).ok
    assert not resolve_component_frame(gauge_frame(level="3"), MANIFEST).ok  # no coercion
    assert not resolve_component_frame(gauge_frame(extra=1), MANIFEST).ok
    assert resolve_component_frame(gauge_frame(), MANIFEST).ok


def test_choice_list_resolution_selection_and_actions() -> None:
    assert resolve_choice_list_frame(VALID_CHOICE_LIST_FRAME, MANIFEST).ok
    not_choice = resolve_choice_list_frame(gauge_frame(), MANIFEST)
    assert isinstance(not_choice, UnresolvedComponent)
    assert not_choice.diagnostic.message == "Component is not a ChoiceList."
    event = select_choice(VALID_CHOICE_LIST_FRAME, "docs")
    assert event.to_json() == (
        '{"protocol":"agentskit.chat.component","version":1,"type":"select",'
        '"componentKey":"choice-list","instanceId":"destination-choice","choiceId":"docs"}'
    )
    with pytest.raises(ConfigurationError, match="not present in the ChoiceList"):
        select_choice(VALID_CHOICE_LIST_FRAME, "missing")
    with pytest.raises(ConfigurationError, match="Selection frame is not a ChoiceList"):
        select_choice(gauge_frame(), "x")
    with pytest.raises(ValidationError):
        select_choice(INVALID_CHOICE_LIST_PROPS_FRAME, "docs")
    assert resolve_choice_action(VALID_CHOICE_LIST_FRAME, "docs") is None
    actionable = json.loads(json.dumps(VALID_CHOICE_LIST_FRAME))
    actionable["props"]["choices"][1]["action"] = {"name": "open-demo", "input": {"at": 1}}
    action = resolve_choice_action(actionable, "demo")
    assert action is not None
    assert (action.name, dict(action.input)) == ("open-demo", {"at": 1})


def test_fallbacks() -> None:
    assert resolve_component_fallback(VALID_CHOICE_LIST_FRAME, MANIFEST) == (
        "Where should we go? Documentation, Demo."
    )
    assert resolve_component_fallback(gauge_frame(), MANIFEST) == "Load: 3."
    assert resolve_component_fallback(UNKNOWN_COMPONENT_FRAME, MANIFEST) is None
    fallback = parse_semantic_fallback({"kind": "chart", "summary": "Revenue rose 12%.", "x": 1})
    assert (fallback.kind, fallback.summary) == ("chart", "Revenue rose 12%.")
    for bad in ({"kind": "", "summary": "s"}, {"kind": "k" * 65, "summary": "s"}, None):
        with pytest.raises(ValidationError):
            parse_semantic_fallback(bad)


# --- interactions --------------------------------------------------------------------------------

BUTTONS = STANDARD_COMPONENT_FRAME_FIXTURES[0]


@pytest.mark.parametrize(
    ("frame", "event", "value", "ok"),
    [
        (BUTTONS, "select", "save", True),
        (BUTTONS, "select", "missing", False),
        (BUTTONS, "submit", {}, False),
        (VALID_CHOICE_LIST_FRAME, "select", "docs", False),  # choice lists select instead
        (gauge_frame(), "reset", None, False),  # null is a value; "none" takes no value
        (gauge_frame(), "pick", "ok-id", True),
        (gauge_frame(), "pick", "not an id", False),
        (gauge_frame(), "follow", "/docs", True),
        (gauge_frame(), "follow", "https://example.com/a", True),
        (gauge_frame(), "follow", "//evil.example", False),
        (gauge_frame(), "follow", "javascript:alert(1)", False),
        (gauge_frame(), "follow", "https://user:pw@example.com/", False),
        (gauge_frame(), "follow", "/a\\b", False),
        (gauge_frame(), "fill", {"a": 1}, True),
        (gauge_frame(), "fill", {"a": float("nan")}, False),  # not JSON
        (gauge_frame(), "undeclared", "x", False),
        (UNKNOWN_COMPONENT_FRAME, "select", "docs", False),
    ],
)
def test_interactions(frame: Any, event: str, value: Any, ok: bool) -> None:
    if ok:
        created = create_component_interaction(frame, MANIFEST, event, value)
        assert created.event == event
        return
    with pytest.raises(ConfigurationError) as error:
        create_component_interaction(frame, MANIFEST, event, value)
    assert error.value.message == "Component interaction is not declared by the resolved component."


def test_an_interaction_without_a_value_omits_it() -> None:
    created = create_component_interaction(gauge_frame(), MANIFEST, "reset")
    assert '"value"' not in created.to_json()


# --- presentation --------------------------------------------------------------------------------


def assistant(content: str) -> ChatMessage:
    return ChatMessage(id="a1", role="assistant", content=content, created_at=AT)


def test_presentation_of_ordered_content_keeps_unregistered_frames_away_from_renderers() -> None:
    encoder = create_assistant_content_encoder()
    content = (
        encoder.encode({"kind": "text", "text": "Here "})
        + encoder.encode({"kind": "text", "text": "you go."})
        + encoder.encode({"kind": "component", "frame": VALID_CHOICE_LIST_FRAME})
        + encoder.encode({"kind": "component", "frame": UNKNOWN_COMPONENT_FRAME})
        + encoder.encode({"kind": "text", "text": "Bye."})
    )
    parts = present_chat_message(assistant(content), MANIFEST)
    assert [type(part) for part in parts] == [
        PresentedText,
        PresentedComponent,
        PresentedFallback,
        PresentedText,
    ]
    first, component, fallback, last = parts
    assert isinstance(first, PresentedText) and first.message.content == "Here you go."
    assert isinstance(component, PresentedComponent)
    assert component.definition is CHOICE_LIST_COMPONENT
    assert isinstance(fallback, PresentedFallback)
    assert fallback.text == "[unsupported visual: choice-list] Choose Documentation or Demo."
    assert fallback.diagnostic.code == "COMPONENT_UNKNOWN"
    assert isinstance(last, PresentedText) and last.message.content == "Bye."
    streaming = present_chat_message(assistant(content[: content.index("Bye") + 2]), MANIFEST)
    assert len(streaming) == 3  # only complete records while streaming


def test_presentation_of_plain_legacy_invalid_and_user_messages() -> None:
    assert present_chat_message(assistant("hello")) == (PresentedText(assistant("hello")),)
    (legacy,) = present_chat_message(assistant(json.dumps(VALID_CHOICE_LIST_FRAME)))
    assert isinstance(legacy, PresentedComponent)
    (broken,) = present_chat_message(assistant("\x1eagentskit.chat.content/1\nnot json\n"))
    assert isinstance(broken, PresentedDiagnostic)
    (typo,) = present_chat_message(assistant("\x1eagentskit.chat.kontent/1\n"))
    assert typo == PresentedDiagnostic(
        "ASSISTANT_CONTENT_INVALID_RECORD", "Assistant content envelope is invalid."
    )
    user = ChatMessage(
        id="u1", role="user", content=json.dumps(VALID_CHOICE_LIST_FRAME), created_at=AT
    )
    assert present_chat_message(user) == (PresentedText(user),)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_resolution_never_raises(value: Any) -> None:
    resolve_component_frame(value, MANIFEST)
    resolve_component_frame(json.dumps(value), MANIFEST)
    resolve_component_fallback(value, MANIFEST)
    if isinstance(value, dict):
        resolve_component_frame({**gauge_frame(), "props": value}, MANIFEST)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_presentation_never_raises(text: str) -> None:
    present_chat_message(assistant(text), MANIFEST)
    present_chat_message(assistant("\x1eagentskit.chat.content/1\n" + text), MANIFEST)
