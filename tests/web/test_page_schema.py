"""The page's props check, run in Chromium: every keyword it does not implement fails closed.

The page draws a component only when its props pass the component's JSON Schema (served by the
page's own server); ``validates`` in ``/static/components.js`` implements a subset of JSON
Schema. A schema keyword outside that subset must make the value fail, never pass unchecked.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from agentskit_chat.protocol.fixtures.component import STANDARD_COMPONENT_FRAME_FIXTURES
from tests.web._support import Lab, lab_app, serving

#: (schema, value, whether it validates): every case would pass if its keyword were ignored,
#: unless it is expected to pass.
CASES: list[tuple[str, dict[str, Any], Any, bool]] = [
    # Keywords the page does not implement: closed.
    ("if", {"type": "string", "if": {"const": "a"}, "then": {"const": "b"}}, "a", False),
    ("dependentRequired", {"type": "object", "dependentRequired": {"a": ["b"]}}, {"a": 1}, False),
    ("contains", {"type": "array", "contains": {"const": 1}}, [2], False),
    ("patternProperties", {"type": "object", "patternProperties": {"^x": False}}, {"x": 1}, False),
    ("unevaluatedProperties", {"type": "object", "unevaluatedProperties": False}, {"a": 1}, False),
    ("$dynamicRef", {"$dynamicRef": "#meta"}, "a", False),
    ("misspelt maxLength", {"type": "string", "maxLenght": 1}, "long", False),
    ("unknown nested", {"type": "array", "items": {"type": "string", "x-rule": 1}}, ["a"], False),
    ("a boolean schema", {"type": "object", "properties": {"a": True}}, {"a": 1}, False),
    ("items as a list", {"type": "array", "items": [{"type": "string"}]}, ["a"], False),
    ("$ref elsewhere", {"$ref": "#/definitions/A", "definitions": {"A": {}}}, "a", False),
    ("$ref to nothing", {"$ref": "#/$defs/Missing"}, "a", False),
    # Keywords it implements, now including those the models emit and the old check skipped.
    ("propertyNames", {"type": "object", "propertyNames": {"maxLength": 3}}, {"long": 1}, False),
    ("propertyNames ok", {"type": "object", "propertyNames": {"maxLength": 3}}, {"ok": 1}, True),
    ("$ref sibling", {"$ref": "#/$defs/S", "maxLength": 2, "$defs": {"S": {}}}, "abc", False),
    ("$ref sibling ok", {"$ref": "#/$defs/S", "maxLength": 2, "$defs": {"S": {}}}, "ab", True),
    ("allOf", {"allOf": [{"type": "string"}, {"maxLength": 1}]}, "ab", False),
    ("not", {"not": {"const": "x"}}, "x", False),
    ("minProperties", {"type": "object", "minProperties": 1}, {}, False),
    (
        "uniqueItems",
        {"type": "array", "uniqueItems": True},
        [{"a": 1, "b": 2}, {"b": 2, "a": 1}],
        False,
    ),
    (
        "prefixItems",
        {"prefixItems": [{"type": "string"}], "items": {"type": "number"}},
        ["a", "b"],
        False,
    ),
    (
        "prefixItems ok",
        {"prefixItems": [{"type": "string"}], "items": {"type": "number"}},
        ["a", 1],
        True,
    ),
    ("multipleOf", {"type": "number", "multipleOf": 0.5}, 1.25, False),
    ("multipleOf ok", {"type": "number", "multipleOf": 0.1}, 0.3, True),
    ("const object", {"const": {"a": 1, "b": [2]}}, {"b": [2], "a": 1}, True),
    ("enum object", {"enum": [{"a": 1}]}, {"a": 2}, False),
    (
        "annotations only",
        {"title": "T", "description": "D", "default": 1, "format": "uri"},
        "x",
        True,
    ),
]


@pytest.fixture(scope="module")
def page(browser: Browser) -> Iterator[Page]:
    with serving(lab_app(Lab())) as url:
        opened = browser.new_page()
        opened.goto(url)
        opened.wait_for_selector("body[data-ready=true]", state="attached")
        yield opened
        opened.close()


def test_a_keyword_the_page_does_not_implement_fails_closed(page: Page) -> None:
    assert CASES
    got = page.evaluate(
        """async (cases) => {
          const { validates } = await import("/static/components.js");
          return cases.map(([schema, value]) => validates(schema, value));
        }""",
        [[schema, value] for _, schema, value, _ in CASES],
    )
    wrong = [
        (name, result)
        for (name, _, _, expected), result in zip(CASES, got, strict=True)
        if result is not expected
    ]
    assert wrong == []


def test_every_standard_component_still_resolves_and_a_long_argument_name_does_not(
    page: Page,
) -> None:
    frames = [dict(frame) for frame in STANDARD_COMPONENT_FRAME_FIXTURES]
    assert len(frames) == 12
    tool_call = next(f for f in frames if f["componentKey"] == "tool-call")
    forged = copy.deepcopy(tool_call)
    forged["props"]["arguments"] = {"k" * 129: 1}  # the schema's propertyNames: at most 128
    got = page.evaluate(
        """async (frames) => {
          const { loadCatalog, resolves } = await import("/static/components.js");
          await loadCatalog();
          return frames.map((frame) => resolves(frame));
        }""",
        [*frames, forged],
    )
    assert got == [True] * len(frames) + [False]
