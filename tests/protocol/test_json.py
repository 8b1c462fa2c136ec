"""JavaScript-compatible JSON: parsing like JSON.parse, writing like JSON.stringify."""

from __future__ import annotations

import json
import math
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.protocol import _json, decode_answer_response
from agentskit_chat.protocol._decode import NOT_JSON, TOO_DEEP, parse_candidate
from agentskit_chat.protocol._json import (
    MAX_JSON_DEPTH,
    JsonSyntaxError,
    _parse_slow,
    js_number,
    js_stringify,
    nests_deeper_than,
    parse_json_text,
    plain_json,
    utf8_len,
)
from agentskit_chat.protocol._types import freeze
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


def _depth_of(value: Any) -> int:
    """Nesting depth of a parsed value, without recursion (``[]`` is 1, a scalar 0)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            stack.extend(
                (child, depth + 1) for child in (node.values() if isinstance(node, dict) else node)
            )
    return deepest


@pytest.mark.parametrize(
    "nest",
    [
        lambda d: "[" * d + "]" * d,
        lambda d: '{"a":' * d + "0" + "}" * d,
        # A lone surrogate keeps orjson out at any depth: the fallback's own bound.
        lambda d: '{"a":' * (d - 1) + '["\\ud800"]' + "}" * (d - 1),
        lambda d: "[" * (d - 1) + '["\\ud800"]' + "]" * (d - 1),
    ],
    ids=["arrays", "objects", "objects-fallback", "arrays-fallback"],
)
def test_parse_accepts_nesting_at_the_bound_and_refuses_one_more(nest: Any) -> None:
    assert _depth_of(parse_json_text(nest(MAX_JSON_DEPTH))) == MAX_JSON_DEPTH
    with pytest.raises(JsonSyntaxError):
        parse_json_text(nest(MAX_JSON_DEPTH + 1))


def test_too_deep_text_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_run(text: str) -> Any:
        raise AssertionError("the parser ran")

    monkeypatch.setattr(_json, "_parse_slow", must_not_run)
    levels = (1 << 20) // 6  # a 1 MiB NDJSON line's worth of nested objects
    with pytest.raises(JsonSyntaxError):
        parse_json_text('{"n":' * levels + "0" + "}" * levels)


def test_brackets_in_strings_do_not_count_toward_the_bound() -> None:
    brackets = "[{" * MAX_JSON_DEPTH
    assert parse_json_text(f'["{brackets}", "\\"{brackets}", "\\\\", "\\ud800"]')[0] == brackets
    assert not nests_deeper_than(f'{{"k{brackets}": "\\\\\\"{brackets}"}}', 1)


def test_depth_scan_never_loops_over_unterminated_strings() -> None:
    # Every quote opens a string that never ends: one pass, not one per quote.
    text = '"\\"' * 300_000
    assert not nests_deeper_than(text, 0)
    with pytest.raises(JsonSyntaxError):
        parse_json_text(text)


@settings(max_examples=300, deadline=None)
@given(json_values, st.integers(min_value=0, max_value=12))
def test_depth_scan_is_exact_for_valid_json(value: Any, limit: int) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert nests_deeper_than(text, limit) is (_depth_of(value) > limit)


_SURROGATE_STRINGS = st.sampled_from(["\ud800", "a\udfff", "\udbff\udbff", "[{\ud800"])


def _with_surrogates(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=3) | _SURROGATE_STRINGS, children, max_size=4)
        ),
        max_leaves=20,
    )


@settings(max_examples=300, deadline=None)
@given(
    _with_surrogates(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=5)
        | _SURROGATE_STRINGS
    ),
    st.integers(min_value=0, max_value=300),
)
def test_fallback_paths_agree_with_each_other(value: Any, wrap: int) -> None:
    # Lone surrogates send the text past orjson; shallow text takes the C scanner and deep
    # text the iterative parser, and both must read it as JSON.parse does.
    text = "[" * wrap + js_stringify(value) + "]" * wrap
    assert as_doubles(parse_json_text(text)) == as_doubles(_parse_slow(text))


def test_stringify_at_the_bound_and_past_it() -> None:
    value: Any = 0
    for _ in range(MAX_JSON_DEPTH):
        value = [value]
    assert js_stringify(value) == "[" * MAX_JSON_DEPTH + "0" + "]" * MAX_JSON_DEPTH
    with pytest.raises(ValueError):
        js_stringify([value])


def test_stringify_refuses_a_cycle_instead_of_looping() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError):
        js_stringify(cyclic)
    with pytest.raises(ValueError):
        plain_json(cyclic)


def test_plain_json_at_the_bound_and_past_it() -> None:
    value: Any = "leaf"
    for level in range(MAX_JSON_DEPTH):
        value = (value,) if level % 2 else MappingProxyType({"k": value})
    assert _depth_of(plain_json(value)) == MAX_JSON_DEPTH
    with pytest.raises(ValueError):
        plain_json([value])


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_plain_json_copies_frozen_values_back(value: Any) -> None:
    frozen = freeze(value)
    copy = plain_json(frozen)
    assert as_doubles(copy) == as_doubles(value)
    assert js_stringify(copy) == js_stringify(value)


def _stringify_recursive(value: Any) -> str:
    """The plain recursive reading of JSON.stringify, as an oracle for the iterative writer."""
    if isinstance(value, dict):
        items = _json._ordered_items(value)
        return (
            "{" + ",".join(js_stringify(k) + ":" + _stringify_recursive(v) for k, v in items) + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(_stringify_recursive(v) for v in value) + "]"
    return js_stringify(value)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_iterative_stringify_matches_the_recursive_reading(value: Any) -> None:
    assert js_stringify(value) == _stringify_recursive(value)


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


def test_decoders_report_too_deep_text_as_the_wrong_shape() -> None:
    # No envelope nests that deep, so well-formed text that does is invalid, as the reference
    # says; it is just never parsed.
    assert isinstance(parse_candidate("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH), list)
    assert parse_candidate("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)) is TOO_DEEP
    assert parse_candidate("[" * MAX_JSON_DEPTH) is NOT_JSON
    deep = MAX_JSON_DEPTH + 1
    result = decode_answer_response("[" * deep + "]" * deep)
    assert result.diagnostic is not None
    assert result.diagnostic.message == "Deterministic payload is invalid."


@settings(max_examples=100, deadline=None)
@given(
    json_values.filter(lambda v: "inf" not in repr(v)), st.integers(min_value=201, max_value=600)
)
def test_deep_text_parsed_in_python_then_c_matches_the_standard_library(
    value: Any, levels: int
) -> None:
    # Past 200 levels the upper levels are parsed in Python and the lower ones by the C
    # scanner; the seam must not show.
    text = '{"k":[' * (levels // 2) + json.dumps(value) + "]}" * (levels // 2)
    assert as_doubles(_parse_slow(text)) == as_doubles(_stdlib(text))
    assert as_doubles(parse_json_text(text.replace('"k"', '"\\ud800"'))) == as_doubles(
        _stdlib(text.replace('"k"', '"\\ud800"'))
    )


@pytest.mark.parametrize("depth", [1, 63, 64, 65, 66, 200, 9_999, 10_000])
def test_stringify_is_the_same_on_both_sides_of_the_recursion_cut(
    depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Shallow values are written recursively, deeper ones on an explicit stack: one output.
    value: object = {"leaf": "x\ud800", "n": 1e21}
    for level in range(depth - 1):
        value = [value, level] if level % 2 else {"k": value, "0": level}
    text = js_stringify(value)
    monkeypatch.setattr(_json, "_RECURSIVE_DEPTH", 0)  # every value on the explicit stack
    assert js_stringify(value) == text
    monkeypatch.undo()
    assert text.count("[") + text.count("{") == depth
    assert '{"leaf":"x\\ud800","n":1e+21}' in text
    assert js_stringify(parse_json_text(text)) == text
    if depth <= 200:  # Python's own == recurses: compare whole values only where it can
        assert parse_json_text(text) == value
