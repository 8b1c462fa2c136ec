"""The differential vectors: inputs where a port easily differs from the reference.

Each case either gives the reference's verdict, or is one of the deliberate, safer differences
listed in ``docs/differences.md`` and is checked by the test named after that difference.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentskit_chat.protocol import (
    decode_ask_events,
    decode_ask_request,
    decode_backend_metric,
    decode_backend_site_config,
    encode_ask_event,
    is_safe_href,
    normalize_knowledge_key,
)
from agentskit_chat.protocol._ask import AskToolEvent
from tests._vectors import as_doubles, family

#: Cases whose reference verdict we deliberately do not follow, by the difference they show.
IDNA_STRICTER = ("diff-href-005", "diff-href-006", "diff-href-007")
DIFFERENCES = frozenset(IDNA_STRICTER)

_DECODERS = {
    "ask_request": decode_ask_request,
    "backend_site": decode_backend_site_config,
    "backend_metric": decode_backend_metric,
}


def _cases(*families: str, differences: bool = False) -> list[Any]:
    return [
        pytest.param(case, id=case["id"])
        for case in family("differential")["cases"]
        if case["family"] in families and (case["id"] in DIFFERENCES) is differences
    ]


def _generated(spec: dict[str, Any]) -> str:
    assert spec["generate"] == "deep_tool_args"
    depth: int = spec["depth"]
    return '{"type":"tool","id":"","name":"","args":' + '{"n":' * depth + "0" + "}" * depth + "}\n"


def test_every_case_is_run_once() -> None:
    cases = family("differential")["cases"]
    run = _cases("ask_ndjson", "ask_request", "backend_site", "backend_metric")
    run += _cases("safe_href", "normalize_knowledge_key")
    run += _cases("safe_href", differences=True)
    assert len(run) == len(cases) == 25
    assert {case["id"] for case in cases} >= DIFFERENCES


@pytest.mark.parametrize("case", _cases("ask_ndjson"))
def test_ask_ndjson(case: dict[str, Any]) -> None:
    expected = case["expected"]
    if isinstance(case["input"], dict):
        line = _generated(case["input"])
        result = decode_ask_events(line)
        assert len(result.events) == expected["events_count"]
        (event,) = result.events
        assert isinstance(event, AskToolEvent)
        assert (event.to_json() == line[:-1]) is expected["reserializes_to_input"]
        assert encode_ask_event(event) == line
        return
    result = decode_ask_events(case["input"])
    assert as_doubles(result.to_wire()) == as_doubles(expected)


@pytest.mark.parametrize("case", _cases("ask_request", "backend_site", "backend_metric"))
def test_backend_envelopes(case: dict[str, Any]) -> None:
    result = _DECODERS[case["family"]](case["input"])
    assert result.ok is case["expected"]["ok"]
    if result.value is not None:
        assert result.value.to_json() == case["expected"]["value_json"]


@pytest.mark.parametrize("case", _cases("safe_href"))
def test_safe_href(case: dict[str, Any]) -> None:
    assert is_safe_href(case["input"]) is case["expected"]["safe"]


@pytest.mark.parametrize("case", _cases("normalize_knowledge_key"))
def test_normalize_knowledge_key(case: dict[str, Any]) -> None:
    assert normalize_knowledge_key(case["input"]) == case["expected"]["output"]


@pytest.mark.parametrize("case", _cases("safe_href", differences=True))
def test_idna_hosts_also_meet_the_current_url_standard(case: dict[str, Any]) -> None:
    # The reference's parser accepts these hosts; the current URL Standard refuses them (an
    # Arabic-Indic digit label fails the bidirectional-text rule, ``xn--1-`` is a second
    # spelling of the all-ASCII ``1``), and so do we.
    assert case["expected"]["safe"] is True
    assert is_safe_href(case["input"]) is False
