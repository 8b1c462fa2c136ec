"""JavaScript-compatible JSON: parsing like JSON.parse, writing like JSON.stringify."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.protocol._json import (
    JsonSyntaxError,
    _parse_slow,
    js_number,
    js_stringify,
    parse_json_text,
    utf8_len,
)
from tests._strategies import json_texts, json_values
from tests._vectors import as_doubles


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (1e16, "10000000000000000"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (0.1, "0.1"),
        (123.456, "123.456"),
        (-1.5e300, "-1.5e+300"),
        (1.2345678901234568e29, "1.2345678901234568e+29"),
        (100000000000000000000, "100000000000000000000"),
        (12345678901234567890, "12345678901234567000"),
        (5e-324, "5e-324"),
        (2**53 - 1, "9007199254740991"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.00001234, "0.00001234"),
        (123e-20, "1.23e-18"),
        (float("inf"), "null"),
    ],
)
def test_js_number(value: float, text: str) -> None:
    assert js_number(value) == text


def test_stringify_escapes_like_javascript() -> None:
    value = '"\\\b\f\n\r\t\x00\x1f\x7f\u2028\u2029/<>é😀\ud800x\udc00'
    assert js_stringify(value) == (
        '"\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f\x7f\u2028\u2029/<>é😀\\ud800x\\udc00"'
    )
    # A surrogate pair held as two code points is one astral character in JavaScript.
    assert js_stringify("\ud83d\ude00") == '"😀"'


def test_stringify_orders_array_index_keys_first() -> None:
    value = {"b": 1, "2": 1, "a": 1, "1": 1, "01": 1, "4294967294": 1, "4294967295": 1, "-1": 1}
    assert js_stringify(value) == (
        '{"1":1,"2":1,"4294967294":1,"b":1,"a":1,"01":1,"4294967295":1,"-1":1}'
    )


def test_stringify_rejects_non_json() -> None:
    with pytest.raises(TypeError):
        js_stringify({"a": object()})


@pytest.mark.parametrize(
    "text",
    [
        "\ufeff{}",
        "NaN",
        "Infinity",
        "1.",
        ".5",
        "01",
        "-",
        "1e",
        "[1,]",
        '"\x1f"',
        "[1 2]",
        '"\\x41"',
        "'a'",
        "tru",
        "-01",
        '"\\u00"',
        "\f1",
        "\u00a01",
        "[]]",
        '{"a":1,}',
        "",
        " ",
        '{"a" 1}',
        "[",
        "{",
    ],
)
def test_parse_rejects_what_javascript_rejects(text: str) -> None:
    with pytest.raises(JsonSyntaxError):
        parse_json_text(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('"\\ud800"', "\ud800"),
        ("1e400", math.inf),
        ("-1e400", -math.inf),
        ("123456789012345678901234567890", 1.2345678901234568e29),
        ('{"a":1,"b":2,"a":3}', {"a": 3, "b": 2}),
        (" 1 ", 1),
        ('"\u2028"', "\u2028"),
        ("1E+2", 100),
    ],
)
def test_parse_accepts_what_javascript_accepts(text: str, value: Any) -> None:
    assert as_doubles(parse_json_text(text)) == as_doubles(value)


def test_parse_has_no_depth_limit() -> None:
    value = parse_json_text("[" * 100_000 + "]" * 100_000)
    depth = 0
    while value:
        value = value[0]
        depth += 1
    assert depth == 99_999
    assert parse_json_text('{"a":' * 5000 + '"\\ud800"' + "}" * 5000) is not None


def _stdlib(text: str) -> Any:
    def no_constants(_: str) -> Any:
        raise ValueError("constant")

    return json.loads(text, parse_constant=no_constants)


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_texts, json_values.map(lambda v: json.dumps(v, default=str))))
def test_slow_parser_agrees_with_the_standard_library(text: str) -> None:
    # The standard library follows JSON.parse except for NaN/Infinity (refused here) and depth.
    try:
        expected = _stdlib(text)
    except RecursionError:
        return
    except ValueError:
        with pytest.raises(JsonSyntaxError):
            _parse_slow(text)
        with pytest.raises(JsonSyntaxError):
            parse_json_text(text)
        return
    assert as_doubles(_parse_slow(text)) == as_doubles(expected)
    assert as_doubles(parse_json_text(text)) == as_doubles(expected)


@settings(max_examples=200, deadline=None)
@given(json_values.filter(lambda v: "inf" not in repr(v) and "10000000000" not in repr(v)))
def test_stringify_parses_back(value: Any) -> None:
    assert as_doubles(parse_json_text(js_stringify(value))) == as_doubles(value)


def test_utf8_len_counts_lone_surrogates_as_three() -> None:
    assert utf8_len("a") == 1
    assert utf8_len("é") == 2
    assert utf8_len("😀") == 4
    assert utf8_len("\ud800") == 3
