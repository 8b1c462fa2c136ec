"""The bounded-JSON rule shared by component props, interaction values and confirmation inputs."""

from __future__ import annotations

import math
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.protocol._bounded import is_bounded_json
from agentskit_chat.protocol._text import utf16_len

EMOJI = "😀"


def nested_arrays(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def nested_objects(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"n": value}
    return value


class Hostile:
    def __getattribute__(self, name: str) -> Any:
        raise RuntimeError("boom")


class HostileDict(dict[str, Any]):
    def items(self) -> Any:
        raise RuntimeError("boom")


def test_primitives() -> None:
    for value in (None, True, False, 0, -0.0, 1.5, 10**300, "", "text"):
        assert is_bounded_json(value)


@pytest.mark.parametrize(
    "value",
    [math.inf, -math.inf, math.nan, 10**400, 1e400, b"bytes", object(), {1, 2}, len],
    ids=["inf", "-inf", "nan", "10**400", "1e400", "bytes", "object", "set", "function"],
)
def test_non_json_or_non_finite_fails(value: Any) -> None:
    assert not is_bounded_json(value)


def test_hostile_objects_fail() -> None:
    assert not is_bounded_json(Hostile())
    assert not is_bounded_json({"a": [Hostile()]})


def test_nodes_count_the_root_and_every_primitive() -> None:
    assert is_bounded_json([0] * 999)  # 1000 nodes
    assert not is_bounded_json([0] * 1000)  # 1001 nodes
    assert is_bounded_json({f"k{i}": i for i in range(999)})
    assert not is_bounded_json({f"k{i}": i for i in range(1000)})
    # 1 root + 333 * (1 list + 2 numbers) = 1000 nodes
    assert is_bounded_json([[i, i] for i in range(333)])
    assert not is_bounded_json([[i, i] for i in range(333)] + [0])


def test_depth_limit() -> None:
    assert is_bounded_json(nested_arrays(20))
    assert not is_bounded_json(nested_arrays(21))
    assert is_bounded_json(nested_objects(20))
    assert not is_bounded_json(nested_objects(21))
    # Depth is checked on entry, before the type: even a null leaf at depth 21 fails.
    assert not is_bounded_json(nested_arrays(21, None))
    assert is_bounded_json(nested_arrays(20, []))
    assert not is_bounded_json(nested_arrays(21, []))


def test_string_length_in_utf16_units() -> None:
    assert is_bounded_json("a" * 16384)
    assert not is_bounded_json("a" * 16385)
    assert is_bounded_json(EMOJI * 8192)
    assert not is_bounded_json(EMOJI * 8192 + "a")
    assert is_bounded_json("\ud800" * 16384)  # a lone surrogate is one unit
    assert not is_bounded_json("\ud800" * 16385)
    assert is_bounded_json({"s": ["x" * 16384]})
    assert not is_bounded_json({"s": ["x" * 16385]})


def test_array_and_object_sizes() -> None:
    assert not is_bounded_json([None] * 1001)
    assert not is_bounded_json({str(i): None for i in range(1001)})


def test_key_length_in_utf16_units() -> None:
    assert is_bounded_json({"k" * 256: 1})
    assert not is_bounded_json({"k" * 257: 1})
    assert is_bounded_json({EMOJI * 128: 1})
    assert not is_bounded_json({EMOJI * 128 + "k": 1})


def test_keys_must_be_strings() -> None:
    assert not is_bounded_json({1: "a"})
    assert not is_bounded_json({None: "a"})


def test_only_plain_containers() -> None:
    assert not is_bounded_json(OrderedDict(a=1))
    assert not is_bounded_json(HostileDict(a=1))
    assert not is_bounded_json(type("L", (list,), {})([1]))
    # The package's own frozen forms validate again.
    assert is_bounded_json(MappingProxyType({"a": (1, 2, MappingProxyType({}))}))


def test_cycles_and_shared_references_fail() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert not is_bounded_json(cyclic)
    obj: dict[str, Any] = {}
    obj["self"] = obj
    assert not is_bounded_json(obj)
    shared: dict[str, Any] = {"a": 1}
    assert not is_bounded_json({"x": shared, "y": shared})
    shared_list = [1]
    assert not is_bounded_json([shared_list, shared_list])
    assert is_bounded_json({"x": {"a": 1}, "y": {"a": 1}})


def test_shared_empty_tuple_is_not_a_shared_reference() -> None:
    assert is_bounded_json({"a": (), "b": ()})


# --- properties ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=6)
    ),
    max_leaves=60,
)


def _model(value: Any, depth: int, counter: list[int]) -> bool:
    """An independent restatement of the bounded-JSON rule for values without shared references."""
    counter[0] += 1
    if counter[0] > 1000 or depth > 20:
        return False
    if isinstance(value, str):
        return utf16_len(value) <= 16384
    if isinstance(value, list):
        return len(value) <= 1000 and all(_model(v, depth + 1, counter) for v in value)
    if isinstance(value, dict):
        return (
            len(value) <= 1000
            and all(utf16_len(k) <= 256 for k in value)
            and all(_model(v, depth + 1, counter) for v in value.values())
        )
    return True


@settings(max_examples=200)
@given(json_values)
def test_agrees_with_the_rule(value: Any) -> None:
    assert is_bounded_json(value) is _model(value, 0, [0])


@settings(max_examples=50)
@given(st.integers(min_value=15, max_value=30), st.sampled_from([nested_arrays, nested_objects]))
def test_depth_property(levels: int, build: Any) -> None:
    assert is_bounded_json(build(levels)) is (levels <= 20)


def test_deep_nesting_does_not_raise() -> None:
    assert not is_bounded_json(nested_arrays(100_000))
    assert not is_bounded_json(nested_objects(100_000))
