"""Hypothesis strategies shared by the protocol tests."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

#: A marker that generated payloads carry; a diagnostic must never contain it.
MARKER = "zq9MARKERq9z"

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.just(MARKER),
    st.just(10**400),
    st.just(float("inf")),
)

#: Any JSON-like value, including huge numbers, infinities and odd strings.
json_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.one_of(st.text(max_size=10), st.just(MARKER)), children, max_size=5),
    ),
    max_leaves=30,
)


def deep(levels: int, leaf: Any = 0) -> Any:
    """``leaf`` nested in ``levels`` single-element arrays."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


#: JSON text: generated values, plus nonsense, deep nesting and JavaScript-only spellings.
json_texts = st.one_of(
    json_values.map(lambda v: json.dumps(v, default=str)),
    st.text(max_size=60),
    st.just("[" * 5000 + "]" * 5000),
    st.just('{"a":' * 3000 + "1" + "}" * 3000),
    st.just("1e400"),
    st.just('"\\ud800' + MARKER + '"'),
    st.just("NaN"),
    st.just('{"protocol":' + json.dumps(MARKER) + "}"),
)

payloads = st.one_of(json_values, json_texts, st.binary(max_size=60), json_texts.map(str.encode))


def assert_no_echo(message: str, allowed: set[str]) -> None:
    """A diagnostic message is one of the fixed messages and holds no generated data."""
    assert message in allowed
    assert MARKER not in message
