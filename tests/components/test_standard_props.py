"""The standard components' props: every bound at its limit and one past, strictness, URLs."""

from __future__ import annotations

import contextlib
import math
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from agentskit_chat.components import (
    STANDARD_COMPONENT_CATALOG,
    STANDARD_COMPONENT_KEYS,
    ButtonGroupButton,
    ChoiceListProps,
    FormProps,
    ProgressProps,
    TableProps,
    ToolCallProps,
)
from agentskit_chat.protocol import Decoded, decode_component_frame
from agentskit_chat.protocol._types import WireModel
from agentskit_chat.protocol.fixtures import STANDARD_COMPONENT_FRAME_FIXTURES
from tests._strategies import deep, json_values
from tests.components._standard_support import DEFINITIONS, DROP, VALID_PROPS, changed, props, s

EMOJI = "\U0001f600"


def wire(model: BaseModel) -> Any:
    assert isinstance(model, WireModel)
    return model.to_wire()


def accepts(key: str, value: Any) -> bool:
    model = DEFINITIONS[key].props_schema
    try:
        model.model_validate(value)
    except ValidationError:
        return False
    return True


def _items(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"id": f"i{i}", "label": "x", **extra} for i in range(n)]


def _options(n: int) -> list[dict[str, str]]:
    return [{"id": f"o{i}", "label": "x"} for i in range(n)]


def _fields(n: int) -> list[dict[str, str]]:
    return [{"id": f"f{i}", "label": "x", "type": "text"} for i in range(n)]


def _sources(n: int) -> list[dict[str, str]]:
    return [{"id": f"s{i}", "title": "x"} for i in range(n)]


def _columns(n: int) -> list[dict[str, str]]:
    return [{"key": f"c{i}", "label": "x"} for i in range(n)]


_LABEL = [(s(256), s(257)), (s(1), ""), (s(256, EMOJI), s(257, EMOJI))]
_TEXT = [(s(4096), s(4097)), (s(1), ""), (s(4096, EMOJI), s(4097, EMOJI))]
_ID = [("a" * 128, "a" * 129), ("a", ""), ("A.b_c:d-1", "-a"), ("a1", "a b")]
_URL = [("/" + s(2047), "/" + s(2048)), ("https://example.com/" + s(2028), "//evil.example")]


def _label_cases(key: str, path: tuple[str | int, ...], pairs: list[tuple[Any, Any]]) -> list[Any]:
    name = "/".join(str(p) for p in path)
    return [
        pytest.param(key, path, ok, bad, id=f"{key}:{name}:{i}")
        for i, (ok, bad) in enumerate(pairs)
    ]


def _one(key: str, path: tuple[str | int, ...], ok: Any, bad: Any, label: str) -> Any:
    return pytest.param(key, path, ok, bad, id=f"{key}:{'/'.join(map(str, path))}:{label}")


#: (component, field path, a value at the bound, a value one past it)
BOUNDS: list[Any] = [
    *_label_cases("button-group", ("label",), _LABEL),
    _one("button-group", ("buttons",), _items(12), _items(13), "max"),
    _one("button-group", ("buttons",), _items(1), [], "min"),
    _one("button-group", ("buttons",), _items(2), [*_items(1), *_items(1)], "unique"),
    *_label_cases("button-group", ("buttons", 0, "id"), _ID),
    *_label_cases("button-group", ("buttons", 0, "label"), _LABEL),
    _one("button-group", ("buttons", 0, "disabled"), False, "true", "bool"),
    _one("button-group", ("buttons", 0, "disabled"), True, None, "null"),
    _one("button-group", ("buttons", 0, "variant"), "secondary", "Danger", "enum"),
    *_label_cases("choice-list", ("prompt",), _TEXT),
    _one("choice-list", ("choices",), _items(20), _items(21), "max"),
    _one("choice-list", ("choices",), _items(1), [], "min"),
    _one("choice-list", ("choices",), _items(2), [*_items(1), *_items(1)], "unique"),
    *_label_cases("choice-list", ("choices", 0, "id"), _ID),
    *_label_cases("choice-list", ("choices", 0, "label"), _LABEL),
    *_label_cases("choice-list", ("choices", 0, "description"), _TEXT),
    _one("choice-list", ("choices", 0, "action"), DROP, None, "null"),
    *_label_cases("choice-list", ("choices", 0, "action", "name"), _ID),
    _one("choice-list", ("choices", 0, "action", "input"), {s(128): 1}, {s(129): 1}, "key"),
    _one("choice-list", ("choices", 0, "action", "input"), {}, [], "object"),
    _one("choice-list", ("choices", 0, "action", "input"), {"a": deep(19)}, {"a": deep(20)}, "d"),
    _one("choice-list", ("choices", 0, "action"), {"name": "a", "input": {}}, {"name": "a"}, "in"),
    *_label_cases("form", ("title",), _LABEL),
    _one("form", ("title",), DROP, None, "null"),
    _one("form", ("fields",), _fields(30), _fields(31), "max"),
    _one("form", ("fields",), _fields(1), [], "min"),
    _one("form", ("fields",), _fields(2), [*_fields(1), *_fields(1)], "unique"),
    *_label_cases("form", ("fields", 0, "id"), _ID),
    *_label_cases("form", ("fields", 0, "label"), _LABEL),
    _one("form", ("fields", 0, "type"), "email", "password", "enum"),
    _one("form", ("fields", 0, "required"), False, 1, "bool"),
    _one("form", ("fields", 0, "placeholder"), s(256), s(257), "max"),
    _one("form", ("fields", 0, "placeholder"), "", None, "empty"),
    _one("form", ("fields", 4, "options"), _options(50), _options(51), "max"),
    _one("form", ("fields", 4, "options"), _options(1), [], "min"),
    _one("form", ("fields", 4, "options"), _options(1), DROP, "select-needs-options"),
    _one("form", ("fields", 4, "options"), _options(1), None, "options-null"),
    _one("form", ("fields", 0, "options"), DROP, _options(1), "text-refuses-options"),
    *_label_cases("form", ("fields", 4, "options", 0, "id"), _ID),
    *_label_cases("form", ("fields", 4, "options", 0, "label"), _LABEL),
    *_label_cases("form", ("submitLabel",), _LABEL),
    *_label_cases("confirmation", ("title",), _LABEL),
    *_label_cases("confirmation", ("message",), _TEXT),
    *_label_cases("confirmation", ("confirmLabel",), _LABEL),
    *_label_cases("confirmation", ("cancelLabel",), _LABEL),
    *_label_cases("progress", ("label",), _LABEL),
    _one("progress", ("value",), 100, 100.000001, "max"),
    _one("progress", ("value",), 0, -0.000001, "min"),
    _one("progress", ("value",), -0.0, "42", "string"),
    _one("progress", ("value",), 42.5, True, "bool"),
    _one("progress", ("value",), 1e-7, math.inf, "finite"),
    _one("progress", ("value",), 42.0, None, "null"),
    *_label_cases("progress", ("status",), _TEXT),
    *_label_cases("source-list", ("label",), _LABEL),
    _one("source-list", ("sources",), _sources(50), _sources(51), "max"),
    _one("source-list", ("sources",), _sources(1), [], "min"),
    _one("source-list", ("sources",), _sources(2), [*_sources(1), *_sources(1)], "unique"),
    *_label_cases("source-list", ("sources", 0, "id"), _ID),
    *_label_cases("source-list", ("sources", 0, "title"), _LABEL),
    *_label_cases("source-list", ("sources", 0, "url"), _URL),
    *_label_cases("source-list", ("sources", 0, "snippet"), _TEXT),
    *_label_cases("link-card", ("title",), _LABEL),
    *_label_cases("link-card", ("description",), _TEXT),
    *_label_cases("link-card", ("href",), _URL),
    _one("link-card", ("href",), "/", DROP, "required"),
    *_label_cases("link-card", ("label",), _LABEL),
    *_label_cases("error-notice", ("title",), _LABEL),
    *_label_cases("error-notice", ("message",), _TEXT),
    _one("error-notice", ("code",), s(128), s(129), "max"),
    _one("error-notice", ("code",), "", None, "empty"),
    *_label_cases("error-notice", ("retryLabel",), _LABEL),
    *_label_cases("tool-call", ("name",), _LABEL),
    _one("tool-call", ("status",), "error", "failed", "enum"),
    _one("tool-call", ("status",), "pending", DROP, "required"),
    _one("tool-call", ("arguments",), {s(128): 1}, {s(129): 1}, "key"),
    _one("tool-call", ("arguments",), {}, None, "null"),
    _one("tool-call", ("result",), deep(20), deep(21), "bounded"),
    _one("tool-call", ("result",), None, math.nan, "finite"),
    *_label_cases("approval-request", ("title",), _LABEL),
    *_label_cases("approval-request", ("description",), _TEXT),
    *_label_cases("approval-request", ("approveLabel",), _LABEL),
    *_label_cases("approval-request", ("denyLabel",), _LABEL),
    *_label_cases("table", ("caption",), _LABEL),
    _one("table", ("columns",), _columns(30), _columns(31), "max"),
    _one("table", ("columns",), _columns(1), [], "min"),
    _one("table", ("columns",), _columns(2), [*_columns(1), *_columns(1)], "unique"),
    *_label_cases("table", ("columns", 0, "key"), _ID),
    *_label_cases("table", ("columns", 0, "label"), _LABEL),
    _one("table", ("rows",), [{}] * 1000, [{}] * 1001, "max"),
    _one("table", ("rows",), [], {}, "array"),
    _one("table", ("rows", 0, "name"), s(4096), s(4097), "cell"),
    _one("table", ("rows", 0, "name"), False, {"a": 1}, "cell-object"),
    _one("table", ("rows", 0, "name"), -1.5, [1], "cell-array"),
    _one("table", ("rows", 0), {"anything": None}, ["Ada"], "row"),
    *_label_cases("file-attachment", ("name",), _LABEL),
    _one("file-attachment", ("mimeType",), s(256), s(257), "max"),
    _one("file-attachment", ("mimeType",), s(1), "", "min"),
    _one("file-attachment", ("sizeBytes",), 9007199254740991, 9007199254740992, "max"),
    _one("file-attachment", ("sizeBytes",), 0, -1, "min"),
    _one("file-attachment", ("sizeBytes",), 1024.0, 1024.5, "integer"),
    _one("file-attachment", ("sizeBytes",), 1, True, "bool"),
    _one("file-attachment", ("sizeBytes",), 1, "1", "string"),
    *_label_cases("file-attachment", ("url",), _URL),
]


def test_every_component_has_bound_cases() -> None:
    covered = {param.values[0] for param in BOUNDS}
    assert covered == set(STANDARD_COMPONENT_KEYS)


@pytest.mark.parametrize(("key", "path", "ok", "bad"), BOUNDS)
def test_a_bound_holds_at_its_limit_and_fails_one_past(
    key: str, path: tuple[str | int, ...], ok: Any, bad: Any
) -> None:
    assert accepts(key, changed(key, path, ok))
    assert not accepts(key, changed(key, path, bad))


@pytest.mark.parametrize("key", STANDARD_COMPONENT_KEYS)
def test_the_valid_props_validate_and_read_back_unchanged(key: str) -> None:
    model = DEFINITIONS[key].props_schema.model_validate(props(key))
    assert wire(model) == VALID_PROPS[key]


@pytest.mark.parametrize("key", STANDARD_COMPONENT_KEYS)
@pytest.mark.parametrize("value", [None, [], "props", 1, True, MappingProxyType({})])
def test_props_that_are_not_an_object_are_refused(key: str, value: Any) -> None:
    assert not accepts(key, value)


@pytest.mark.parametrize("key", STANDARD_COMPONENT_KEYS)
def test_unknown_keys_are_refused(key: str) -> None:
    assert not accepts(key, {**props(key), "extra": 1})
    assert not accepts(key, {**props(key), "__proto__": {}})


NESTED_EXTRA = [
    ("button-group", ("buttons", 0, "extra")),
    ("choice-list", ("choices", 0, "extra")),
    ("choice-list", ("choices", 0, "action", "extra")),
    ("form", ("fields", 0, "extra")),
    ("form", ("fields", 4, "options", 0, "extra")),
    ("source-list", ("sources", 0, "extra")),
    ("table", ("columns", 0, "extra")),
]


@pytest.mark.parametrize(("key", "path"), NESTED_EXTRA)
def test_unknown_keys_of_items_are_refused(key: str, path: tuple[str | int, ...]) -> None:
    assert not accepts(key, changed(key, path, 1))


SNAKE_CASE = [
    ("form", "submitLabel", "submit_label"),
    ("confirmation", "confirmLabel", "confirm_label"),
    ("confirmation", "cancelLabel", "cancel_label"),
    ("error-notice", "retryLabel", "retry_label"),
    ("approval-request", "approveLabel", "approve_label"),
    ("approval-request", "denyLabel", "deny_label"),
    ("file-attachment", "mimeType", "mime_type"),
    ("file-attachment", "sizeBytes", "size_bytes"),
]


@pytest.mark.parametrize(("key", "wire", "python"), SNAKE_CASE)
def test_wire_fields_are_read_by_their_camel_case_name_only(
    key: str, wire: str, python: str
) -> None:
    data = props(key)
    data[python] = data.pop(wire)
    assert not accepts(key, data)


UNSAFE_URLS = [
    "//evil.example",
    "javascript:alert(1)",
    "JAVASCRIPT:alert(1)",
    "data:text/html,x",
    "mailto:a@b.example",
    "ftp://example.com/x",
    "/docs\\x",
    "https://example.com\\evil",
    "/a\nb",
    "/a\tb",
    "/a\x00b",
    "/a\x7fb",
    "https://example.com/\x1f",
    "https://user:pass@example.com/",
    "https://user@example.com/",
    "http://:p@example.com/",
    "https://example.com@evil.example/",
    "https://example.com:99999/",
    "https://",
    "docs/x",
    "./x",
    "#frag",
    "?q",
    " /docs",
    " https://example.com/",
    "",
]
SAFE_URLS = [
    "/",
    "/docs",
    "/a:b",
    "/ spaced",
    "https://example.com/guide",
    "HTTPS://EXAMPLE.COM/",
    "http://example.com:8080/x?q=1#f",
    "http:example.com",
    "https://example.com/a b",
]
URL_FIELDS = [
    ("link-card", ("href",)),
    ("source-list", ("sources", 0, "url")),
    ("file-attachment", ("url",)),
]


@pytest.mark.parametrize(("key", "path"), URL_FIELDS)
@pytest.mark.parametrize("url", UNSAFE_URLS)
def test_unsafe_urls_are_refused(key: str, path: tuple[str | int, ...], url: str) -> None:
    assert not accepts(key, changed(key, path, url))


@pytest.mark.parametrize(("key", "path"), URL_FIELDS)
@pytest.mark.parametrize("url", SAFE_URLS)
def test_portable_urls_are_accepted_verbatim(
    key: str, path: tuple[str | int, ...], url: str
) -> None:
    data = changed(key, path, url)
    model = DEFINITIONS[key].props_schema.model_validate(data)
    assert wire(model) == data


def test_the_protocol_fixture_frames_cover_the_catalog_in_order() -> None:
    keys = [frame["componentKey"] for frame in STANDARD_COMPONENT_FRAME_FIXTURES]
    assert keys == list(STANDARD_COMPONENT_KEYS)
    assert [d.key for d in STANDARD_COMPONENT_CATALOG] == keys


@pytest.mark.parametrize(
    "frame", STANDARD_COMPONENT_FRAME_FIXTURES, ids=lambda f: str(f["componentKey"])
)
def test_the_props_of_every_decoded_fixture_frame_validate(frame: dict[str, Any]) -> None:
    decoded = decode_component_frame(frame)
    assert isinstance(decoded, Decoded)
    # A decoded frame holds its props frozen (read-only mappings and tuples).
    assert isinstance(decoded.value.props, MappingProxyType)
    model = DEFINITIONS[frame["componentKey"]].props_schema.model_validate(decoded.value.props)
    assert wire(model) == frame["props"]


def test_the_invalid_choice_list_fixture_props_are_refused() -> None:
    assert not accepts("choice-list", {"prompt": "", "choices": []})


def test_props_models_are_frozen_and_hold_arrays_and_records_read_only() -> None:
    model = ChoiceListProps.model_validate(props("choice-list"))
    assert isinstance(model.choices, tuple)
    action = model.choices[0].action
    assert action is not None
    assert isinstance(action.input, MappingProxyType)
    with pytest.raises(ValidationError):
        model.prompt = "changed"  # type: ignore[misc]
    table = TableProps.model_validate(props("table"))
    assert isinstance(table.rows[0], MappingProxyType)


def test_absent_optionals_stay_absent_on_the_wire() -> None:
    minimal = {"label": "Upload", "value": 42}
    assert ProgressProps.model_validate(minimal).to_wire() == minimal
    assert ProgressProps.model_validate(minimal).status is None


def test_a_tool_call_result_may_be_null_and_is_told_apart_from_absent() -> None:
    running = {"name": "Search", "status": "running"}
    with_null = ToolCallProps.model_validate({**running, "result": None})
    without = ToolCallProps.model_validate(running)
    assert with_null.has_result
    assert not without.has_result
    assert with_null.to_wire()["result"] is None
    assert "result" not in without.to_wire()


def test_python_code_builds_props_by_the_wire_names() -> None:
    button = ButtonGroupButton(id="save", label="Save")
    form = FormProps.model_validate(
        {"fields": [{"id": "q", "label": "Q", "type": "text"}], "submitLabel": "Go"}
    )
    assert button.disabled is None
    assert form.submit_label == "Go"
    assert form.title is None


def test_a_shared_reference_in_a_record_is_refused() -> None:
    shared: dict[str, Any] = {"a": 1}
    data = changed("tool-call", ("arguments",), {"x": shared, "y": shared})
    assert not accepts("tool-call", data)


_models: list[type[BaseModel]] = [d.props_schema for d in STANDARD_COMPONENT_CATALOG]


@given(st.sampled_from(_models), json_values)
def test_random_json_never_raises_anything_but_a_validation_error(
    model: type[BaseModel], value: Any
) -> None:
    with contextlib.suppress(ValidationError):
        model.model_validate(value)


_paths = st.sampled_from([(param.values[0], param.values[1]) for param in BOUNDS])


@given(_paths, json_values)
def test_random_json_in_any_field_never_raises_anything_but_a_validation_error(
    where: tuple[str, tuple[str | int, ...]], value: Any
) -> None:
    key, path = where
    accepts(key, changed(key, path, value))
