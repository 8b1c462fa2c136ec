"""The component catalog page: Markdown generated from the component definitions.

Everything on the page comes from code: the one-line purpose and the props table from each
props model's JSON Schema, the events, accessibility and capabilities from the definition, and
the example and its fallback text from the conformance fixture frame of each standard
component. The output is the same bytes on every run, so a checked-in copy can be compared
with a fresh rendering to tell whether it is current.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any, Final

from agentskit_chat.protocol import SemanticFallback
from agentskit_chat.protocol._json import js_number
from agentskit_chat.protocol._types import SAFE_ID_PATTERN, thaw
from agentskit_chat.protocol.fixtures.component import STANDARD_COMPONENT_FRAME_FIXTURES

from ._definition import ComponentDefinition, EventValueKind, LiveRegion
from ._fields import PORTABLE_URL_PATTERN
from ._standard import CHOICE_LIST_COMPONENT_KEY, STANDARD_COMPONENT_CATALOG

__all__ = ["COMPONENT_CATALOG_COMMAND", "render_component_catalog_page"]

#: The command that writes the checked-in page.
COMPONENT_CATALOG_COMMAND: Final = (
    "agentskit-chat components catalog --output docs/components-catalog.md"
)

_TITLE: Final = "Component catalog"
_FIXTURES: Final[Mapping[str, Mapping[str, Any]]] = {
    frame["componentKey"]: frame for frame in STANDARD_COMPONENT_FRAME_FIXTURES
}
# Which prop gives each standard component its accessible name, as the renderers set it.
_ACCESSIBLE_NAME: Final[Mapping[str, str]] = {
    "button-group": "the `label` prop (the group's label)",
    "choice-list": "the `prompt` prop (the legend of its fieldset)",
    "form": 'the `title` prop, or "Form" without one',
    "confirmation": "the `title` prop (the group's label)",
    "progress": "the `label` prop (the text the bar is labelled by)",
    "source-list": "the `label` prop (the list's label)",
    "link-card": "its text: the `title`, `description` and `label` props",
    "error-notice": "its text: the `title` and `message` props",
    "tool-call": "the `name` and `status` props",
    "approval-request": "the `title` prop (the group's label)",
    "table": "the `caption` prop (the table's caption)",
    "file-attachment": "the `name` prop (the link's text)",
}
_EVENT_VALUES: Final[Mapping[EventValueKind, str]] = {
    "none": "no value",
    "id": "a safe identifier",
    "form": "an object of the submitted values, keyed by field id",
    "url": "a portable URL (root-relative, or http(s) without credentials)",
}
_LIVE: Final[Mapping[LiveRegion, str]] = {
    "none": "none",
    "polite": "polite (changes are announced when the reader is idle)",
    "assertive": "assertive (changes are announced at once)",
}
_KNOWN_PATTERNS: Final[Mapping[str, str]] = {
    SAFE_ID_PATTERN: f"safe identifier (`{SAFE_ID_PATTERN}`)",
    PORTABLE_URL_PATTERN: "portable URL: root-relative (never `//`), or http(s) without "
    "credentials; no control characters or backslashes",
}
_STANDARD_SUBJECT: Final = (
    "the {count} standard components, the ones a chat renders when it declares no manifest of "
    "its own"
)
_OTHER_SUBJECT: Final = "the {count} components of this catalog"
_INTRO: Final = (
    "This page lists {subject}, in catalog order. For each one it gives what the component is"
    " for, its props (generated from the props model's JSON Schema, the same schema a tool-"
    "calling model is given), the events it can send back, how assistive technology sees it, "
    "what it can do, and an example frame with the plain text shown in its place wherever it "
    "cannot be drawn. Props are strict: unknown keys are refused, nothing is coerced, and an "
    "optional prop is left out rather than set to `null`. Lengths count UTF-16 code units, as"
    " JavaScript does. See [Components](components.md) for how frames are registered and "
    "resolved."
)
_GENERATED: Final = (
    "This page is generated from the component definitions; do not edit it by hand. "
    "Regenerate it with:"
)


_WORDS: Final = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_TEENS: Final = ("ten", "eleven", "twelve")


def _count(n: int) -> str:
    if n < len(_WORDS):
        return _WORDS[n]
    if n - 10 < len(_TEENS):
        return _TEENS[n - 10]
    return str(n)


def _paragraph(text: str) -> str:
    return textwrap.fill(text, width=100, break_long_words=False, break_on_hyphens=False)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _number(value: Any) -> str:
    if type(value) is int:
        return f"{value:,}"
    return js_number(value)


def _range(lo: Any, hi: Any, noun: str) -> str | None:
    suffix = f" {noun}" if noun else ""
    if lo is not None and hi is not None:
        return f"{_number(lo)} to {_number(hi)}{suffix}"
    if hi is not None:
        return f"at most {_number(hi)}{suffix}"
    if lo is not None:
        return f"at least {_number(lo)}{suffix}"
    return None


def _resolve(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"), {})
        return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _type(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    schema = _resolve(schema, defs)
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        return f"array of {_type(items, defs)}" if isinstance(items, Mapping) else "array"
    if isinstance(kind, list):
        names = [str(name) for name in kind]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    if isinstance(kind, str):
        return kind
    return "any JSON"


def _bounds(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> list[str]:
    schema = _resolve(schema, defs)
    found: list[str] = []
    if "enum" in schema:
        found.append("one of " + ", ".join(f"`{value}`" for value in schema["enum"]))
    length = _range(schema.get("minLength"), schema.get("maxLength"), "characters")
    if length is not None:
        found.append(length if schema.get("type") == "string" else f"strings {length}")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        found.append(_KNOWN_PATTERNS.get(pattern, f"pattern `{pattern}`"))
    items = _range(schema.get("minItems"), schema.get("maxItems"), "items")
    if items is not None:
        found.append(items)
    numbers = _range(schema.get("minimum"), schema.get("maximum"), "")
    if numbers is not None:
        found.append(numbers)
    names = schema.get("propertyNames")
    if isinstance(names, Mapping):
        key_length = _range(names.get("minLength"), names.get("maxLength"), "characters")
        if key_length is not None:
            found.append(f"keys {key_length}")
    values = schema.get("additionalProperties")
    if isinstance(values, Mapping):
        inner = _bounds(values, defs)
        detail = f" ({'; '.join(inner)})" if inner else ""
        found.append(f"values {_type(values, defs)}{detail}")
    item = schema.get("items")
    if isinstance(item, Mapping) and "properties" not in _resolve(item, defs):
        found.extend(f"each item: {bound}" for bound in _bounds(item, defs))
    return found


def _object_of(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    schema = _resolve(schema, defs)
    if schema.get("type") == "array" and isinstance(schema.get("items"), Mapping):
        return _object_of(schema["items"], defs)
    return schema if isinstance(schema.get("properties"), Mapping) else None


def _prop_rows(
    schema: Mapping[str, Any], defs: Mapping[str, Any], prefix: str, depth: int
) -> list[str]:
    rows: list[str] = []
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        resolved = _resolve(prop, defs)
        bounds = "; ".join(_bounds(prop, defs)) or "—"
        cells = (
            f"`{path}`",
            _type(prop, defs),
            "yes" if name in required else "no",
            bounds,
            str(resolved.get("description", "")),
        )
        rows.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
        nested = _object_of(prop, defs)
        if nested is not None and depth < 4:
            suffix = "[]." if resolved.get("type") == "array" else "."
            rows.extend(_prop_rows(nested, defs, f"{path}{suffix}", depth + 1))
    return rows


def _purpose(schema: Mapping[str, Any]) -> str:
    description = str(schema.get("description", "")).strip()
    return " ".join(description.split("\n\n")[0].split())


def _props_section(schema: Mapping[str, Any]) -> list[str]:
    defs = schema.get("$defs", {})
    rows = _prop_rows(schema, defs, "", 0)
    if not rows:
        return ["**Props:** none."]
    return [
        "**Props:**",
        "",
        "| Prop | Type | Required | Bounds | Description |",
        "|---|---|---|---|---|",
        *rows,
    ]


def _events_section(definition: ComponentDefinition, choice_list: bool) -> list[str]:
    if not definition.events:
        return ["**Events:** none."]
    lines = ["**Events:**", ""]
    lines.extend(
        f"- `{event.name}`: {_EVENT_VALUES.get(event.value, event.value)}"
        for event in definition.events
    )
    if choice_list:
        lines.extend(
            [
                "",
                "A choice list is picked with `select_choice(frame, choice_id)`: a selection "
                "event naming the choice, never an interaction.",
            ]
        )
    return lines


def _accessibility_section(definition: ComponentDefinition, standard: bool) -> list[str]:
    access = definition.accessibility
    if access is None:
        return ["**Accessibility:** not declared."]
    lines = ["**Accessibility:**", "", f"- Role: `{access.role}`"]
    if standard and definition.key in _ACCESSIBLE_NAME:
        lines.append(f"- Accessible name: {_ACCESSIBLE_NAME[definition.key]}")
    keyboard = "operable by keyboard alone" if access.keyboard else "no keyboard interaction"
    lines.extend([f"- Keyboard: {keyboard}", f"- Live region: {_LIVE[access.live]}"])
    return lines


def _example_section(definition: ComponentDefinition) -> list[str]:
    frame = _FIXTURES.get(definition.key)
    if frame is None:
        return []
    try:
        props = definition.props_schema.model_validate(thaw(frame["props"]))
        fallback = SemanticFallback.model_validate(frame["fallback"])
        summary = definition.fallback(props) if definition.fallback is not None else None
    except Exception:
        # A custom definition under a fixture's key may reject the fixture; it has no example.
        return []
    example = json.dumps(frame["props"], indent=2, ensure_ascii=False, sort_keys=False)
    lines = ["**Example props:**", "", "```json", *example.splitlines(), "```", ""]
    if summary is not None:
        lines.extend([f"**Fallback text** (built from these props): `{summary}`", ""])
    lines.append(
        "Where the component is not registered, the frame's own fallback is shown: "
        f"`[unsupported visual: {fallback.kind}] {fallback.summary}`"
    )
    return lines


def _section(definition: ComponentDefinition, standard: bool) -> list[str]:
    schema = definition.props_schema.model_json_schema(by_alias=True)
    capabilities = ", ".join(f"`{c}`" for c in definition.capabilities) or "none declared"
    lines = [f"## `{definition.key}`", ""]
    purpose = _purpose(schema)
    if purpose:
        lines.extend([purpose, ""])
    lines.extend(_props_section(schema))
    lines.append("")
    choice_list = standard and definition.key == CHOICE_LIST_COMPONENT_KEY
    lines.extend(_events_section(definition, choice_list))
    lines.append("")
    lines.extend(_accessibility_section(definition, standard))
    lines.extend(["", f"**Capabilities:** {capabilities}."])
    example = _example_section(definition) if standard else []
    if example:
        lines.extend(["", *example])
    return lines


def _summary(definitions: list[ComponentDefinition]) -> list[str]:
    lines = ["| Component | For | Events | Capabilities |", "|---|---|---|---|"]
    for definition in definitions:
        purpose = _purpose(definition.props_schema.model_json_schema(by_alias=True))
        events = ", ".join(f"`{e.name}`" for e in definition.events) or "—"
        capabilities = ", ".join(f"`{c}`" for c in definition.capabilities) or "—"
        link = f"[`{definition.key}`](#{definition.key})"
        cells = (link, purpose, events, capabilities)
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return lines


def render_component_catalog_page(
    catalog: Iterable[ComponentDefinition] = STANDARD_COMPONENT_CATALOG,
) -> str:
    """The Markdown catalog page of ``catalog``: an introduction, a summary table and one
    section per component, in the order given.

    Each section holds the component's purpose (the first paragraph of its props model's
    docstring), a props table generated from the model's JSON Schema (nested objects as
    ``parent[].child`` rows, with lengths, item counts, ranges, patterns and enums), its events
    and the kind of value each carries, its accessibility and capabilities, and, for a standard
    component, its conformance fixture's props with the fallback text built from them.

    The result is deterministic (the same bytes on every run), has no trailing spaces and ends
    with exactly one newline.

    Example:
        >>> page = render_component_catalog_page()
        >>> page.splitlines()[0]
        '# Component catalog'
        >>> "## `choice-list`" in page
        True
    """
    definitions = list(catalog)
    standard_ids = {id(definition) for definition in STANDARD_COMPONENT_CATALOG}
    is_standard = tuple(definitions) == STANDARD_COMPONENT_CATALOG
    subject = _STANDARD_SUBJECT if is_standard else _OTHER_SUBJECT
    lines = [
        f"# {_TITLE}",
        "",
        _paragraph(_INTRO.format(subject=subject.format(count=_count(len(definitions))))),
        "",
        _paragraph(_GENERATED),
        "",
        "```sh",
        COMPONENT_CATALOG_COMMAND,
        "```",
        "",
        *_summary(definitions),
    ]
    for definition in definitions:
        lines.extend(["", *_section(definition, id(definition) in standard_ids)])
    return "\n".join(line.rstrip() for line in lines).rstrip("\n") + "\n"
