"""Every standard props schema is a tool-ready draft 2020-12 schema that agrees with its model."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agentskit_chat.components import STANDARD_COMPONENT_CATALOG, STANDARD_COMPONENT_KEYS
from agentskit_chat.components._fields import PORTABLE_URL_PATTERN, is_portable_url
from agentskit_chat.protocol.fixtures import STANDARD_COMPONENT_FRAME_FIXTURES
from tests.components._standard_support import DEFINITIONS, VALID_PROPS, changed
from tests.components.test_standard_props import BOUNDS, SAFE_URLS, UNSAFE_URLS
from tests.test_tool_schemas import _subschemas, tool_schema_problems


def schema(key: str) -> dict[str, Any]:
    return DEFINITIONS[key].props_schema.model_json_schema()


@pytest.mark.parametrize("key", STANDARD_COMPONENT_KEYS)
def test_each_schema_is_valid_for_tool_calling_providers(key: str) -> None:
    assert tool_schema_problems(key, schema(key)) == []


@pytest.mark.parametrize("key", STANDARD_COMPONENT_KEYS)
def test_each_schema_forbids_unknown_keys_and_requires_what_the_model_requires(key: str) -> None:
    root = schema(key)
    model = DEFINITIONS[key].props_schema
    required = [f.alias or n for n, f in model.model_fields.items() if f.is_required()]
    assert root["additionalProperties"] is False
    assert root.get("required", []) == required
    assert list(root["properties"]) == [f.alias or n for n, f in model.model_fields.items()]
    for definition in root.get("$defs", {}).values():
        assert definition["additionalProperties"] is False
    # Null is never offered for a field: optional means absent (only table cells may be null).
    nulls = [path for path, sub in _subschemas(root) if _allows_null(sub)]
    assert nulls == ([] if key != "table" else ["#/properties/rows/items/additionalProperties"])


def _allows_null(sub: Any) -> bool:
    kind = sub.get("type")
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


def _validator(key: str) -> Draft202012Validator:
    return Draft202012Validator(schema(key))


@pytest.mark.parametrize("key", STANDARD_COMPONENT_KEYS)
def test_each_schema_accepts_the_valid_props(key: str) -> None:
    assert list(_validator(key).iter_errors(VALID_PROPS[key])) == []


@pytest.mark.parametrize(
    "frame", STANDARD_COMPONENT_FRAME_FIXTURES, ids=lambda f: str(f["componentKey"])
)
def test_each_schema_accepts_the_fixture_props(frame: dict[str, Any]) -> None:
    assert list(_validator(frame["componentKey"]).iter_errors(frame["props"])) == []


# Rules a JSON Schema cannot state: unique ids, options only for select fields, the URL
# parser's verdict, the bounded-JSON walk (depth, finiteness), and UTF-16 lengths (a schema
# counts code points, so an astral character counts 1 there and 2 here).
_NOT_IN_SCHEMA = re.compile(
    r":(unique|select-needs-options|text-refuses-options|d|bounded|finite|2)$|/(href|url):1$"
)
SCHEMA_BOUNDS = [p for p in BOUNDS if not _NOT_IN_SCHEMA.search(str(p.id))]


@pytest.mark.parametrize(("key", "path", "ok", "bad"), SCHEMA_BOUNDS)
def test_the_schema_states_each_bound_the_model_enforces(
    key: str, path: tuple[str | int, ...], ok: Any, bad: Any
) -> None:
    validator = _validator(key)
    assert validator.is_valid(changed(key, path, ok))
    assert not validator.is_valid(changed(key, path, bad))


def test_most_bounds_are_stated_by_the_schema() -> None:
    assert len(SCHEMA_BOUNDS) > len(BOUNDS) * 2 // 3


_PATTERN = re.compile(PORTABLE_URL_PATTERN)


@pytest.mark.parametrize("url", SAFE_URLS)
def test_the_url_pattern_admits_every_portable_url(url: str) -> None:
    assert is_portable_url(url)
    assert _PATTERN.search(url)


def test_the_url_pattern_already_refuses_most_unsafe_urls() -> None:
    refused = [url for url in UNSAFE_URLS if not _PATTERN.search(url)]
    assert len(refused) > len(UNSAFE_URLS) // 2


@given(
    st.one_of(
        st.text(max_size=40),
        st.sampled_from(["/", "http", "https:", "HtTpS://"]).flatmap(
            lambda prefix: st.text(max_size=30).map(lambda rest: prefix + rest)
        ),
    )
)
def test_every_portable_url_matches_the_schema_pattern(url: str) -> None:
    if is_portable_url(url):
        assert _PATTERN.search(url)


def test_every_catalog_schema_is_checked() -> None:
    assert len(STANDARD_COMPONENT_CATALOG) == 12
