"""The standard interaction validator, and the JavaScript number reading form fields use."""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.components import (
    STANDARD_COMPONENT_KEYS,
    FormProps,
    validate_standard_component_interaction,
)
from agentskit_chat.components._js_number import js_to_number
from agentskit_chat.protocol import Decoded, decode_component_frame
from agentskit_chat.protocol._text import JS_WHITESPACE
from tests._strategies import json_values
from tests.components._standard_support import changed, props

#: The test's own "leave the value out" marker: the validator is called without ``value``.
NO_VALUE: Final = object()


def allowed(key: str, data: Any, event: str, value: Any = NO_VALUE) -> bool:
    if value is NO_VALUE:
        return validate_standard_component_interaction(key, data, event)
    return validate_standard_component_interaction(key, data, event, value)


def case(key: str, event: str, value: Any, expected: bool, label: str, *, data: Any = None) -> Any:
    return pytest.param(
        key, props(key) if data is None else data, event, value, expected, id=f"{key}:{label}"
    )


_NOT_REQUIRED_NAME = changed("form", ("fields", 0, "required"), False)
_REQUIRED_AGREE = changed("form", ("fields", 3, "required"), True)

CASES: list[Any] = [
    # button-group
    case("button-group", "select", "save", True, "select-enabled"),
    case("button-group", "select", "delete", False, "select-disabled"),
    case("button-group", "select", "missing", False, "select-missing"),
    case("button-group", "submit", {}, False, "submit-undeclared"),
    case("button-group", "select", NO_VALUE, False, "select-absent"),
    case("button-group", "select", None, False, "select-null"),
    case("button-group", "select", "save", False, "invalid-props", data={"label": ""}),
    case(
        "button-group",
        "select",
        "delete",
        True,
        "select-disabled-false",
        data=changed("button-group", ("buttons", 1, "disabled"), False),
    ),
    # choice-list selects through a selection event, never an interaction
    case("choice-list", "select", "docs", False, "select"),
    case("choice-list", "select", NO_VALUE, False, "select-absent"),
    # form
    case("form", "submit", {"name": "Ada"}, True, "required-only"),
    case("form", "submit", {}, False, "required-missing"),
    case("form", "submit", {"name": ""}, False, "required-empty"),
    case("form", "submit", {"name": None}, False, "text-null"),
    case("form", "submit", {"name": 5}, False, "text-number"),
    case("form", "submit", {}, True, "nothing-required", data=_NOT_REQUIRED_NAME),
    case("form", "submit", {"name": "Ada", "extra": 1}, False, "extra-key"),
    case("form", "submit", {"name": "Ada", "email": "not an email"}, True, "email-any-string"),
    case("form", "submit", {"name": "Ada", "email": ["a"]}, False, "email-list"),
    case("form", "submit", {"name": "Ada", "age": 42}, True, "number"),
    case("form", "submit", {"name": "Ada", "age": -1.5}, True, "number-float"),
    case("form", "submit", {"name": "Ada", "age": 10**400}, False, "number-infinite"),
    case("form", "submit", {"name": "Ada", "age": math.nan}, False, "number-nan"),
    case("form", "submit", {"name": "Ada", "age": True}, False, "number-bool"),
    case("form", "submit", {"name": "Ada", "age": ""}, True, "number-empty"),
    case("form", "submit", {"name": "Ada", "age": "  "}, False, "number-blank"),
    case("form", "submit", {"name": "Ada", "age": " 0x10 "}, True, "number-hex"),
    case("form", "submit", {"name": "Ada", "age": "1e3"}, True, "number-exponent"),
    case("form", "submit", {"name": "Ada", "age": "1_000"}, False, "number-separator"),
    case("form", "submit", {"name": "Ada", "age": "Infinity"}, False, "number-infinity"),
    case("form", "submit", {"name": "Ada", "age": "1e400"}, False, "number-overflow"),
    case("form", "submit", {"name": "Ada", "age": "abc"}, False, "number-text"),
    case("form", "submit", {"name": "Ada", "agree": True}, True, "checkbox"),
    case("form", "submit", {"name": "Ada", "agree": "true"}, False, "checkbox-string"),
    case("form", "submit", {"name": "Ada", "agree": 1}, False, "checkbox-number"),
    case("form", "submit", {"name": "Ada"}, False, "checkbox-required", data=_REQUIRED_AGREE),
    case("form", "submit", {"name": "A", "agree": False}, True, "false", data=_REQUIRED_AGREE),
    case("form", "submit", {"name": "Ada", "color": "red"}, True, "select"),
    case("form", "submit", {"name": "Ada", "color": "Red"}, False, "select-label"),
    case("form", "submit", {"name": "Ada", "color": "green"}, False, "select-missing"),
    case("form", "submit", {"name": "Ada", "color": ""}, True, "select-empty"),
    case("form", "submit", ["Ada"], False, "value-list"),
    case("form", "submit", NO_VALUE, False, "value-absent"),
    case("form", "submit", None, False, "value-null"),
    case("form", "select", {"name": "Ada"}, False, "undeclared"),
    case("form", "submit", {"name": "Ada"}, False, "invalid-props", data={"fields": []}),
    # confirmation: its props are not looked at
    case("confirmation", "confirm", NO_VALUE, True, "confirm"),
    case("confirmation", "cancel", NO_VALUE, True, "cancel"),
    case("confirmation", "confirm", None, False, "confirm-null"),
    case("confirmation", "cancel", "x", False, "cancel-value"),
    case("confirmation", "approve", NO_VALUE, False, "undeclared"),
    case("confirmation", "confirm", NO_VALUE, True, "props-unchecked", data={}),
    # progress, tool-call and table emit nothing
    case("progress", "select", "x", False, "select"),
    case("progress", "open", NO_VALUE, False, "open"),
    case("tool-call", "approve", NO_VALUE, False, "approve"),
    case("table", "select", "name", False, "select"),
    # source-list
    case("source-list", "open", "docs", True, "open-with-url"),
    case("source-list", "open", "book", False, "open-without-url"),
    case("source-list", "open", "missing", False, "open-missing"),
    case("source-list", "open", "/docs", False, "open-url-not-id"),
    case("source-list", "select", "docs", False, "undeclared"),
    # link-card
    case("link-card", "open", "https://example.com/guide", True, "open-href"),
    case("link-card", "open", "/unrelated", False, "open-unrelated"),
    case("link-card", "open", NO_VALUE, False, "open-absent"),
    case("link-card", "select", "https://example.com/guide", False, "undeclared"),
    # error-notice
    case("error-notice", "retry", NO_VALUE, True, "retry"),
    case("error-notice", "retry", None, False, "retry-null"),
    case(
        "error-notice",
        "retry",
        NO_VALUE,
        False,
        "retry-without-label",
        data={k: v for k, v in props("error-notice").items() if k != "retryLabel"},
    ),
    case("error-notice", "dismiss", NO_VALUE, False, "undeclared"),
    # approval-request
    case("approval-request", "approve", NO_VALUE, True, "approve"),
    case("approval-request", "deny", NO_VALUE, True, "deny"),
    case("approval-request", "approve", True, False, "approve-value"),
    case("approval-request", "confirm", NO_VALUE, False, "undeclared"),
    # file-attachment
    case("file-attachment", "open", "/report.pdf", True, "open-url"),
    case("file-attachment", "open", "/other.pdf", False, "open-other"),
    case(
        "file-attachment",
        "open",
        "/report.pdf",
        False,
        "open-without-url",
        data={k: v for k, v in props("file-attachment").items() if k != "url"},
    ),
    case("file-attachment", "download", "/report.pdf", False, "undeclared"),
    # anything else
    case(
        "button-group", "select", "save", False, "props-from-another-component", data=props("form")
    ),
]


def test_every_standard_component_has_cases() -> None:
    assert {param.values[0] for param in CASES} == set(STANDARD_COMPONENT_KEYS)


@pytest.mark.parametrize(("key", "data", "event", "value", "expected"), CASES)
def test_the_standard_interaction_rules(
    key: str, data: Any, event: str, value: Any, expected: bool
) -> None:
    assert allowed(key, data, event, value) is expected


def test_unknown_keys_never_interact() -> None:
    assert not allowed("future-component", props("button-group"), "select", "save")
    assert not allowed(None, props("button-group"), "select", "save")  # type: ignore[arg-type]
    assert not allowed("button-group", props("button-group"), None, "save")  # type: ignore[arg-type]


def test_props_may_be_frozen_frame_props_or_a_validated_model() -> None:
    frame = {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": "form",
        "instanceId": "contact",
        "props": props("form"),
        "fallback": {"kind": "form", "summary": "Contact form."},
    }
    decoded = decode_component_frame(frame)
    assert isinstance(decoded, Decoded)
    assert allowed("form", decoded.value.props, "submit", {"name": "Ada"})
    assert allowed("form", decoded.value.props, "submit", MappingProxyType({"name": "Ada"}))
    model = FormProps.model_validate(props("form"))
    assert allowed("form", model, "submit", {"name": "Ada"})
    assert not allowed("form", model, "submit", {})


@given(
    st.sampled_from([*STANDARD_COMPONENT_KEYS, "other"]),
    st.one_of(json_values, st.sampled_from([props(k) for k in STANDARD_COMPONENT_KEYS])),
    st.one_of(st.sampled_from(["select", "submit", "open", "retry", "confirm"]), st.text()),
    st.one_of(json_values, st.just(NO_VALUE)),
)
def test_the_validator_never_raises(key: str, data: Any, event: str, value: Any) -> None:
    assert allowed(key, data, event, value) in (True, False)


@given(st.dictionaries(st.sampled_from(["name", "email", "age", "agree", "color"]), json_values))
def test_random_form_values_never_raise(values: dict[str, Any]) -> None:
    assert allowed("form", props("form"), "submit", values) in (True, False)


# --- JavaScript numbers --------------------------------------------------------------------------

NUMBERS = [
    ("", 0.0),
    ("  ", 0.0),
    ("\u00a0\ufeff\u3000", 0.0),
    ("42", 42.0),
    (" 42 ", 42.0),
    ("\t\n42\u2028", 42.0),
    ("\u180e42", None),
    ("\x1c42", None),
    ("+42", 42.0),
    ("-42", -42.0),
    ("-0", -0.0),
    ("00012", 12.0),
    ("1.5", 1.5),
    (".5", 0.5),
    ("5.", 5.0),
    ("+.5e-3", 0.0005),
    ("1e3", 1000.0),
    ("1E+3", 1000.0),
    ("1e-7", 1e-7),
    ("1e400", math.inf),
    ("-1e400", -math.inf),
    ("1e-400", 0.0),
    ("Infinity", math.inf),
    ("+Infinity", math.inf),
    ("-Infinity", -math.inf),
    ("0x10", 16.0),
    ("0X1f", 31.0),
    ("0o17", 15.0),
    ("0O17", 15.0),
    ("0b101", 5.0),
    ("0B1", 1.0),
    ("0x" + "f" * 300, math.inf),
    ("0x1fffffffffffff", 9007199254740991.0),
    ("0x20000000000001", 9007199254740992.0),
    ("1_000", None),
    ("0x1_0", None),
    ("-0x10", None),
    ("+0x10", None),
    ("0x", None),
    ("0b102", None),
    ("0o8", None),
    ("0xg", None),
    (".", None),
    ("e3", None),
    ("1e", None),
    ("1e+", None),
    ("1.2.3", None),
    ("--1", None),
    ("+", None),
    ("infinity", None),
    ("inf", None),
    ("nan", None),
    ("NaN", None),
    ("1 2", None),
    ("\u0661\u0662", None),
    ("\uff11", None),
    ("12px", None),
    ("0.1f", None),
]


@pytest.mark.parametrize(("text", "expected"), NUMBERS)
def test_js_to_number_reads_strings_as_javascript_does(text: str, expected: float | None) -> None:
    result = js_to_number(text)
    if expected is None:
        assert result is None
    else:
        assert result == expected
        assert result is not None
        assert math.copysign(1, result) == math.copysign(1, expected)


@given(st.floats(allow_nan=False, allow_infinity=False), st.text(JS_WHITESPACE, max_size=3))
def test_js_to_number_reads_every_finite_double_back(value: float, padding: str) -> None:
    assert js_to_number(padding + repr(value) + padding) == value


@given(st.integers(min_value=0, max_value=2**80))
def test_js_to_number_reads_non_decimal_integers(value: int) -> None:
    for text in (hex(value), oct(value), bin(value)):
        assert js_to_number(text) == float(value)


@given(st.text(max_size=30))
def test_js_to_number_never_raises(text: str) -> None:
    result = js_to_number(text)
    assert result is None or isinstance(result, float)


@given(st.from_regex(r"\A[0-9]+_[0-9]+\Z"))
def test_numeric_separators_are_never_numbers(text: str) -> None:
    assert js_to_number(text) is None
