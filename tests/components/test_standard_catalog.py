"""The standard catalog: order, events, accessibility, capabilities and fallback texts."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentskit_chat.components import (
    BUTTON_GROUP_COMPONENT,
    CHOICE_LIST_COMPONENT,
    CHOICE_LIST_COMPONENT_KEY,
    STANDARD_COMPONENT_CATALOG,
    STANDARD_COMPONENT_KEYS,
    ChoiceListProps,
    ComponentAccessibility,
    ComponentEventSpec,
    LiveRegion,
)
from agentskit_chat.protocol.fixtures import STANDARD_COMPONENT_FRAME_FIXTURES
from tests.components._standard_support import DEFINITIONS, DROP, changed, props

ORDER = [
    "button-group",
    "choice-list",
    "form",
    "confirmation",
    "progress",
    "source-list",
    "link-card",
    "error-notice",
    "tool-call",
    "approval-request",
    "table",
    "file-attachment",
]


def test_the_catalog_is_in_order_and_the_keys_follow_it() -> None:
    assert [d.key for d in STANDARD_COMPONENT_CATALOG] == ORDER
    assert list(STANDARD_COMPONENT_KEYS) == ORDER
    assert CHOICE_LIST_COMPONENT_KEY == "choice-list"
    assert CHOICE_LIST_COMPONENT.key == CHOICE_LIST_COMPONENT_KEY
    assert CHOICE_LIST_COMPONENT.props_schema is ChoiceListProps


#: key -> (events, role, keyboard, live, capabilities)
METADATA: dict[str, tuple[list[tuple[str, str]], str, bool, LiveRegion, list[str]]] = {
    "button-group": ([("select", "id")], "group", True, "none", ["display", "selection"]),
    "choice-list": ([("select", "id")], "group", True, "none", ["display", "selection"]),
    "form": ([("submit", "form")], "form", True, "none", ["display", "input"]),
    "confirmation": (
        [("confirm", "none"), ("cancel", "none")],
        "group",
        True,
        "none",
        ["display", "action"],
    ),
    "progress": ([], "progressbar", False, "polite", ["display", "progress"]),
    "source-list": ([("open", "id")], "list", True, "none", ["display", "navigation"]),
    "link-card": ([("open", "url")], "link", True, "none", ["display", "navigation"]),
    "error-notice": ([("retry", "none")], "alert", True, "none", ["display", "action"]),
    "tool-call": ([], "status", False, "polite", ["display"]),
    "approval-request": (
        [("approve", "none"), ("deny", "none")],
        "group",
        True,
        "none",
        ["display", "action"],
    ),
    "table": ([], "table", False, "none", ["display"]),
    "file-attachment": ([("open", "url")], "link", True, "none", ["display", "download"]),
}


@pytest.mark.parametrize("key", ORDER)
def test_each_definition_declares_its_events_accessibility_and_capabilities(key: str) -> None:
    events, role, keyboard, live, capabilities = METADATA[key]
    definition = DEFINITIONS[key]
    assert [(e.name, e.value) for e in definition.events] == events
    assert definition.accessibility == ComponentAccessibility(role, keyboard=keyboard, live=live)
    assert list(definition.capabilities) == capabilities
    assert definition.fallback is not None


def test_definitions_and_their_parts_are_immutable() -> None:
    definition = BUTTON_GROUP_COMPONENT
    assert isinstance(definition.events, tuple)
    assert isinstance(definition.capabilities, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        definition.key = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        definition.events[0].name = "other"  # type: ignore[misc]
    assert definition.accessibility is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        definition.accessibility.role = "other"  # type: ignore[misc]
    assert definition.event("select") == ComponentEventSpec("select", "id")


def fallback(key: str, data: Any) -> str:
    definition = DEFINITIONS[key]
    assert definition.fallback is not None
    return definition.fallback(definition.props_schema.model_validate(data))


def fb(key: str, data: Any, expected: str, label: str) -> Any:
    return pytest.param(key, data, expected, id=f"{key}:{label}")


FALLBACKS = [
    fb("button-group", props("button-group"), "Actions: Save, Delete.", "labels"),
    fb(
        "choice-list",
        {
            "prompt": "Where should we go?",
            "choices": [{"id": "docs", "label": "Documentation"}, {"id": "demo", "label": "Demo"}],
        },
        "Where should we go? Documentation, Demo.",
        "spec",
    ),
    fb("form", props("form"), "Contact: Name, Email, Age, Agree, Color.", "title"),
    fb("form", changed("form", ("title",), DROP), "Form: Name, Email, Age, Agree, Color.", "none"),
    fb("confirmation", props("confirmation"), "Delete?: This cannot be undone.", "text"),
    fb("progress", {"label": "Upload", "value": 42}, "Upload: 42%.", "int"),
    fb("progress", {"label": "Upload", "value": 42.5}, "Upload: 42.5%.", "fraction"),
    fb("progress", {"label": "Upload", "value": 42.0}, "Upload: 42%.", "integral-float"),
    fb("progress", {"label": "Upload", "value": -0.0}, "Upload: 0%.", "negative-zero"),
    fb("progress", {"label": "Upload", "value": 1e-7}, "Upload: 1e-7%.", "exponent"),
    fb("progress", {"label": "Upload", "value": 0.1 + 0.2}, "Upload: 0.30000000000000004%.", "f"),
    fb("source-list", props("source-list"), "Sources: Documentation, A book.", "titles"),
    fb("link-card", props("link-card"), "Guide: Read the guide.", "description"),
    fb(
        "link-card",
        changed("link-card", ("description",), DROP),
        "Guide: https://example.com/guide",
        "href",
    ),
    fb("error-notice", props("error-notice"), "Failed: Try again.", "text"),
    fb("tool-call", props("tool-call"), "Search: complete.", "status"),
    fb("approval-request", props("approval-request"), "Approve send?: Send the email.", "text"),
    fb("table", props("table"), "Users: 2 rows.", "two"),
    fb("table", changed("table", ("rows",), [{"name": "Ada"}]), "Users: 1 rows.", "one"),
    fb("table", changed("table", ("rows",), []), "Users: 0 rows.", "none"),
    fb("file-attachment", props("file-attachment"), "report.pdf (application/pdf).", "name"),
]


def test_every_component_has_a_fallback_case() -> None:
    assert {param.values[0] for param in FALLBACKS} == set(ORDER)


@pytest.mark.parametrize(("key", "data", "expected"), FALLBACKS)
def test_fallback_texts(key: str, data: Any, expected: str) -> None:
    assert fallback(key, data) == expected


def test_the_fixture_frames_have_fallback_texts() -> None:
    texts = [fallback(f["componentKey"], f["props"]) for f in STANDARD_COMPONENT_FRAME_FIXTURES]
    assert texts[4] == "Upload: 42%."
    assert texts[1] == "Where should we go? Documentation, Demo."
    assert texts[10] == "Users: 1 rows."
    assert len(texts) == 12
