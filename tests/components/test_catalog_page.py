"""The generated component catalog page: current in docs/, complete, bounded by the schemas."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from agentskit_chat.components import (
    CHOICE_LIST_COMPONENT,
    STANDARD_COMPONENT_CATALOG,
    STANDARD_COMPONENT_KEYS,
    ComponentAccessibility,
    ComponentDefinition,
    ComponentEventSpec,
    render_component_catalog_page,
)

ROOT = Path(__file__).parents[2]
CHECKED_IN = ROOT / "docs" / "components-catalog.md"
PAGE = render_component_catalog_page()
REGENERATE = "agentskit-chat components catalog --output docs/components-catalog.md"


def sections(page: str) -> dict[str, str]:
    """Each ``## `key``` section's text, by key."""
    found: dict[str, str] = {}
    parts = re.split(r"^## `([a-z][a-z0-9-]*)`\n", page, flags=re.MULTILINE)
    for key, body in zip(parts[1::2], parts[2::2], strict=True):
        found[key] = body
    return found


SECTIONS = sections(PAGE)


def props_row(key: str, prop: str) -> list[str]:
    for line in SECTIONS[key].splitlines():
        if line.startswith(f"| `{prop}` |"):
            return [cell.strip() for cell in line.strip("|").split(" | ")]
    raise AssertionError(f"{key} has no props row for {prop}")


def test_the_checked_in_page_is_current() -> None:
    # The CI check: docs/components-catalog.md is exactly what the definitions render to.
    assert CHECKED_IN.read_bytes() == PAGE.encode("utf-8"), f"out of date; run: {REGENERATE}"


def test_rendering_is_deterministic_and_tidy() -> None:
    assert render_component_catalog_page() == PAGE
    assert render_component_catalog_page(STANDARD_COMPONENT_CATALOG) == PAGE
    assert PAGE.endswith("\n")
    assert not PAGE.endswith("\n\n")
    lines = PAGE.split("\n")
    assert lines
    assert [n for n, line in enumerate(lines) if line != line.rstrip()] == []
    assert "\t" not in PAGE


def test_the_page_has_a_title_an_intro_and_the_command_that_regenerates_it() -> None:
    head = PAGE.split("\n## ", 1)[0]
    assert head.startswith("# Component catalog\n\nThis page lists the twelve standard components")
    assert f"```sh\n{REGENERATE}\n```" in head
    assert "(components.md)" in head


def test_every_standard_component_has_one_non_empty_section_in_catalog_order() -> None:
    assert len(STANDARD_COMPONENT_KEYS) == 12
    assert list(SECTIONS) == list(STANDARD_COMPONENT_KEYS)
    for key in STANDARD_COMPONENT_KEYS:
        body = SECTIONS[key]
        assert body.strip(), key
        for label in ("**Props:**", "**Accessibility:**", "**Capabilities:**", "**Fallback text**"):
            assert label in body, (key, label)
        assert f"[`{key}`](#{key})" in PAGE


@pytest.mark.parametrize(
    ("key", "prop", "expected"),
    [
        ("choice-list", "choices", ["array of object", "yes", "1 to 20 items"]),
        ("button-group", "buttons", ["array of object", "yes", "1 to 12 items"]),
        ("form", "fields[].options", ["array of object", "no", "1 to 50 items"]),
        ("table", "columns", ["array of object", "yes", "1 to 30 items"]),
        ("progress", "value", ["number", "yes", "0 to 100"]),
        ("file-attachment", "sizeBytes", ["integer", "no", "0 to 9,007,199,254,740,991"]),
        ("choice-list", "prompt", ["string", "yes", "1 to 4,096 characters"]),
        ("error-notice", "code", ["string", "no", "at most 128 characters"]),
        ("tool-call", "result", ["any JSON", "no", "—"]),
        ("choice-list", "choices[].action.input", ["object", "yes", "keys at most 128 characters"]),
    ],
)
def test_props_rows_carry_the_schema_type_requiredness_and_bounds(
    key: str, prop: str, expected: list[str]
) -> None:
    assert props_row(key, prop)[1:4] == expected


def test_patterns_and_enums_are_named() -> None:
    assert (
        "safe identifier (`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)"
        in props_row("button-group", "buttons[].id")[3]
    )
    assert "portable URL" in props_row("link-card", "href")[3]
    assert props_row("tool-call", "status")[3] == (
        "one of `pending`, `running`, `complete`, `error`"
    )
    assert "values string, number, boolean or null" in props_row("table", "rows")[3]


def test_events_accessibility_capabilities_and_fallbacks_come_from_the_definitions() -> None:
    form = SECTIONS["form"]
    assert "- `submit`: an object of the submitted values, keyed by field id" in form
    assert "- Role: `form`" in form
    assert "**Capabilities:** `display`, `input`." in form
    progress = SECTIONS["progress"]
    assert "**Events:** none." in progress
    assert "- Live region: polite" in progress
    assert "- Keyboard: no keyboard interaction" in progress
    assert "**Fallback text** (built from these props): `Upload: 42%.`" in progress
    choice = SECTIONS["choice-list"]
    assert "`Where should we go? Documentation, Demo.`" in choice
    assert "`[unsupported visual: choice-list] Choose Documentation or Demo.`" in choice
    assert "- Accessible name: the `prompt` prop" in choice
    assert "`select_choice(frame, choice_id)`" in choice


class _GaugeProps(BaseModel):
    """A gauge from 0 to 10.

    Longer text that is not the purpose line.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    label: str = Field(min_length=1, max_length=64, description="What | is measured.")
    level: int = Field(ge=0, le=10)


GAUGE = ComponentDefinition(
    key="gauge",
    props_schema=_GaugeProps,
    events=(ComponentEventSpec("reset"),),
    accessibility=ComponentAccessibility("meter"),
    capabilities=("display",),
    fallback=lambda props: f"{props.label}: {props.level}.",
)


def test_a_custom_catalog_renders_from_its_own_schema_without_an_example() -> None:
    page = render_component_catalog_page([CHOICE_LIST_COMPONENT, GAUGE])
    found = sections(page)
    assert list(found) == ["choice-list", "gauge"]
    assert "This page lists the two components of this catalog" in page
    gauge = found["gauge"]
    assert gauge.startswith("\nA gauge from 0 to 10.\n")
    assert r"| `label` | string | yes | 1 to 64 characters | What \| is measured. |" in gauge
    assert "| `level` | integer | yes | 0 to 10 |" in gauge
    assert "- `reset`: no value" in gauge
    assert "Accessible name" not in gauge
    assert "**Example props:**" not in gauge
    assert "**Example props:**" in found["choice-list"]
    assert page.endswith("\n") and not page.endswith("\n\n")
