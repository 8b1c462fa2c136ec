"""The Ask backend envelopes: request, site configuration, records, diagnostics and metrics."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.protocol import _backend
from agentskit_chat.protocol._answer import EscalationAnswer
from agentskit_chat.protocol._ask_errors import ASK_ERROR_CASES, AskErrorCase
from agentskit_chat.protocol._backend import (
    ASK_DIAGNOSTIC_CODES,
    BACKEND_INVALID_PAYLOAD,
    BACKEND_METRIC_NAMES,
    BACKEND_METRIC_UNIT_BY_NAME,
    BACKEND_METRIC_UNITS,
    AskMessage,
    AskRequest,
    decode_ask_diagnostic,
    decode_ask_request,
    decode_ask_session_record,
    decode_ask_usage,
    decode_backend_metric,
    decode_backend_site_config,
    decode_grounded_source,
)
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.protocol._text import (
    combine_surrogates,
    js_trim,
    normalize_knowledge_key,
    truncate_utf16,
)
from agentskit_chat.protocol._types import WireModel
from agentskit_chat.protocol.fixtures._case import ConformanceCase
from agentskit_chat.protocol.fixtures.ask import (
    ASK_CASES,
    ASK_REQUEST_FIXTURE,
    BACKEND_METRIC_FIXTURE,
    BACKEND_SITE_CONFIG_FIXTURE,
)
from tests._vectors import as_doubles

EMOJI = "\U0001f600"
Decoder = Callable[[object], Any]
DECODERS: dict[str, Decoder] = {
    "decode_ask_request": decode_ask_request,
    "decode_backend_site_config": decode_backend_site_config,
    "decode_grounded_source": decode_grounded_source,
    "decode_ask_session_record": decode_ask_session_record,
    "decode_ask_usage": decode_ask_usage,
    "decode_ask_diagnostic": decode_ask_diagnostic,
    "decode_backend_metric": decode_backend_metric,
}


def ok(decoder: Decoder, payload: Any) -> bool:
    return bool(decoder(payload).ok)


# --- the spec's conformance cases -----------------------------------------------------------------

BACKEND_CASES = [c for c in ASK_CASES if c.operation in DECODERS]


def test_every_section_12_backend_case_is_a_fixture() -> None:
    assert len(BACKEND_CASES) == 33
    assert {c.operation for c in BACKEND_CASES} == set(DECODERS)


@pytest.mark.parametrize(
    "case", BACKEND_CASES, ids=[f"{c.operation}:{c.name}" for c in BACKEND_CASES]
)
@pytest.mark.parametrize("form", ["value", "text", "bytes"])
def test_fixture_case(case: ConformanceCase, form: str) -> None:
    payload = case.input
    if form != "value" and not isinstance(payload, str):
        payload = js_stringify(payload)
    if form == "bytes":
        payload = payload.encode("utf-8")
    result = DECODERS[case.operation](payload)
    if case.expect == "error":
        assert not result.ok
        assert (result.diagnostic.code, result.diagnostic.message) == (case.code, case.message)
        assert result.diagnostic.retryable is False
        return
    assert result.ok, case.name
    if case.value is not None:
        assert as_doubles(result.value.to_wire()) == as_doubles(case.value)
        assert result.value.to_json() == js_stringify(case.value)


def test_request_example_session_id() -> None:
    result = decode_ask_request(ASK_REQUEST_FIXTURE)
    assert result.ok
    assert result.value.session_id == "registry:session-1"
    assert isinstance(result.value.deterministic, EscalationAnswer)


def test_metric_example_has_no_query_key() -> None:
    assert "query" not in decode_backend_metric(BACKEND_METRIC_FIXTURE).unwrap().to_wire()


# --- bounds ---------------------------------------------------------------------------------------


def request(**changes: Any) -> dict[str, Any]:
    return {**copy.deepcopy(ASK_REQUEST_FIXTURE), **changes}


def site(section: str | None = None, **changes: Any) -> dict[str, Any]:
    value = copy.deepcopy(BACKEND_SITE_CONFIG_FIXTURE)
    (value[section] if section else value).update(changes)
    return value


def user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def escalation(query: str = "Q?", **changes: Any) -> dict[str, Any]:
    return {
        "protocol": "agentskit.chat.answer",
        "version": 1,
        "outcome": "escalation",
        "query": query,
        "normalizedQuery": truncate_utf16(normalize_knowledge_key(query), 512),
        "message": "A backend answer is required.",
        "reason": "stale",
        "confidence": {"level": "low", "basis": "stale"},
        **changes,
    }


REQUEST_BOUNDS = [
    (request(messages=[user("x")] * 64), True),
    (request(messages=[user("x")] * 65), False),
    (request(messages=[user("x" * 16384)]), True),
    (request(messages=[user(EMOJI * 8192)]), True),
    (request(messages=[user(EMOJI * 8192 + "x")]), False),
    (request(messages=[{"role": "assistant", "content": ""}]), True),
    (request(messages=[{"role": "tool", "content": ""}]), False),
    (request(messages=[{"role": "user"}]), False),
    (request(messages=[{"role": "user", "content": None}]), False),
    (request(messages=None), False),
    (request(messages={"0": user("x")}), False),
    (request(version=1.0), True),
    (request(version=True), False),
    (request(version="1"), False),
    (request(version=None), False),
    (request(protocol=None), False),
    (request(sessionId="a" * 128), True),
    (request(sessionId="a" * 129), False),
    (request(sessionId="-a"), False),
    (request(sessionId="a\n"), False),
    (request(deterministic=None), False),
    (request(deterministic=escalation()), True),
    (request(deterministic=escalation("\ufdfa" * 100)), True),  # normalized: cut at 512
    (request(deterministic=escalation("x" * 513)), False),
    (request(deterministic=escalation(normalizedQuery="Q?")), False),
    (request(deterministic=escalation(confidence={"level": "low", "basis": "miss"})), False),
    (request(deterministic=escalation(confidence={"level": "high", "basis": "stale"})), False),
    (request(deterministic=escalation(provenance={"source": "local"})), True),  # stripped
    (request(deterministic=escalation(candidateEntryIds=["a"] * 8)), True),
    (request(deterministic=escalation(candidateEntryIds=["a"] * 9)), False),
    (request(deterministic=[]), False),
    ({"messages": [user("x")], "assistant": "a"}, False),
    ({"messages": [user("x")], "components": []}, False),
    ({"messages": [user("x")]}, True),
]


@pytest.mark.parametrize(("payload", "valid"), REQUEST_BOUNDS)
def test_request_bounds(payload: dict[str, Any], valid: bool) -> None:
    assert ok(decode_ask_request, payload) is valid


SITE_BOUNDS = [
    (site("limits", requestTimeoutMs=100), True),
    (site("limits", requestTimeoutMs=120000), True),
    (site("limits", requestTimeoutMs=99), False),
    (site("limits", requestTimeoutMs=120001), False),
    (site("limits", requestTimeoutMs=30000.0), True),
    (site("limits", requestTimeoutMs=100.5), False),
    (site("limits", requestTimeoutMs=True), False),
    (site("limits", retrievalTimeoutMs=100), True),
    (site("limits", retrievalTimeoutMs=60000), True),
    (site("limits", retrievalTimeoutMs=99), False),
    (site("limits", retrievalTimeoutMs=60001), False),
    (site("limits", generationTimeoutMs=100), True),
    (site("limits", generationTimeoutMs=120000), True),
    (site("limits", generationTimeoutMs=99), False),
    (site("limits", generationTimeoutMs=120001), False),
    (site("limits", maxSources=1), True),
    (site("limits", maxSources=8), True),
    (site("limits", maxSources=0), False),
    (site("limits", maxSources=9), False),
    (site("limits", extra=1), False),
    (site("assistant", suggestions=["s"] * 8), True),
    (site("assistant", suggestions=["s"] * 9), False),
    (site("assistant", suggestions=[" "]), False),
    (site("assistant", name="n" * 256), True),
    (site("assistant", name=" " + "n" * 256 + "\u3000"), True),
    (site("assistant", name="n" * 257), False),
    (site("assistant", name=EMOJI * 128 + "n"), False),
    (site("assistant", name="\ufeff"), False),
    (site("assistant", id="bad id"), False),
    (site("assistant", extra=1), False),
    (site("corpus", mode="local"), True),
    (site("corpus", mode="Local"), False),
    (site("corpus", extra=1), False),
    (site("persistence", mode="disabled"), True),
    (site("persistence", mode="optional"), False),
    (site("persistence", extra=1), False),
    (site(components=["c"] * 64, actions=["a"] * 64), True),
    (site(components=["c"] * 65), False),
    (site(actions=["a"] * 65), False),
    (site(actions=["not safe"]), False),
    (site(version=2), False),
    (site(protocol="agentskit.chat.site"), False),
]


@pytest.mark.parametrize(("payload", "valid"), SITE_BOUNDS)
def test_site_config_bounds(payload: dict[str, Any], valid: bool) -> None:
    assert ok(decode_backend_site_config, payload) is valid


def source(**changes: Any) -> dict[str, Any]:
    return {"id": "a", "title": "T", "href": "/docs/a", "excerpt": "e", **changes}


def metric(**changes: Any) -> dict[str, Any]:
    return {**BACKEND_METRIC_FIXTURE, **changes}


RECORD_BOUNDS: list[tuple[Decoder, Any, bool]] = [
    (decode_grounded_source, source(excerpt="e" * 4096), True),
    (decode_grounded_source, source(excerpt="\n" + "e" * 4096 + " "), True),
    (decode_grounded_source, source(excerpt="e" * 4097), False),
    (decode_grounded_source, source(excerpt=" \t"), False),
    (decode_grounded_source, source(title="t" * 257), False),
    (decode_grounded_source, source(href="//evil.example"), False),
    (decode_grounded_source, source(href="https://x.y/z#a"), True),
    (decode_grounded_source, source(extra=None), False),
    (decode_ask_session_record, {"revision": 9007199254740991, "messages": []}, True),
    (decode_ask_session_record, {"revision": 9007199254740992, "messages": []}, False),
    (decode_ask_session_record, {"revision": -1, "messages": []}, False),
    (decode_ask_session_record, {"revision": 1.5, "messages": []}, False),
    (decode_ask_session_record, {"revision": 2.0, "messages": [user("x")] * 64}, True),
    (decode_ask_session_record, {"revision": 0, "messages": [user("x")] * 65}, False),
    (decode_ask_session_record, {"revision": 0, "messages": [{**user("x"), "id": "m"}]}, False),
    (decode_ask_session_record, {"revision": 0}, False),
    (decode_ask_usage, {"inputTokens": 0, "outputTokens": 5.0, "totalTokens": 5}, True),
    (decode_ask_usage, {"inputTokens": -1}, False),
    (decode_ask_usage, {"totalTokens": True}, False),
    (decode_ask_usage, {"outputTokens": None}, False),
    (decode_ask_usage, {"costUsd": 0}, True),
    (decode_ask_usage, {"costUsd": -0.0}, True),
    (decode_ask_usage, {"costUsd": -0.01}, False),
    (decode_ask_usage, {"costUsd": 10**400}, False),
    (decode_ask_usage, '{"costUsd":1e400}', False),
    (decode_ask_usage, {"costUsd": float("nan")}, False),
    (decode_ask_usage, {"model": " m "}, True),
    (decode_ask_usage, {"model": "m" * 256}, True),
    (decode_ask_usage, {"model": "m" * 257}, False),
    (decode_ask_usage, {"model": "  "}, False),
    (decode_ask_usage, {"extra": 1}, False),
    (decode_ask_diagnostic, {"code": "ASK_X", "message": "m", "retryable": False}, False),
    (
        decode_ask_diagnostic,
        {"code": "ASK_TIMEOUT", "message": "m" * 4096, "retryable": False},
        True,
    ),
    (
        decode_ask_diagnostic,
        {"code": "ASK_TIMEOUT", "message": "m" * 4097, "retryable": False},
        False,
    ),
    (decode_ask_diagnostic, {"code": "ASK_TIMEOUT", "message": " ", "retryable": False}, False),
    (decode_ask_diagnostic, {"code": "ASK_TIMEOUT", "message": "m", "retryable": 0}, False),
    (decode_ask_diagnostic, {"code": "ASK_TIMEOUT", "message": "m"}, False),
    (decode_backend_metric, metric(value=0), True),
    (decode_backend_metric, metric(value=-1), False),
    (decode_backend_metric, metric(value=10**400), False),
    (decode_backend_metric, metric(value=True), False),
    (decode_backend_metric, metric(name="request.total"), False),
    (decode_backend_metric, metric(unit="s"), False),
    (decode_backend_metric, metric(outcome="failed"), False),
    (decode_backend_metric, metric(emittedAt="2026-07-13 00:00:00Z"), False),
    (decode_backend_metric, metric(emittedAt="2024-02-29T23:59+05:30"), True),
    (decode_backend_metric, metric(requestId="request 1"), False),
    (decode_backend_metric, metric(subject="u1"), False),
]


@pytest.mark.parametrize(("decoder", "payload", "valid"), RECORD_BOUNDS)
def test_record_bounds(decoder: Decoder, payload: Any, valid: bool) -> None:
    assert ok(decoder, payload) is valid


@pytest.mark.parametrize("code", ASK_DIAGNOSTIC_CODES)
def test_every_diagnostic_code(code: str) -> None:
    assert ok(decode_ask_diagnostic, {"code": code, "message": "m", "retryable": True})


@pytest.mark.parametrize("name", BACKEND_METRIC_NAMES)
@pytest.mark.parametrize("unit", BACKEND_METRIC_UNITS)
def test_every_metric_name_with_every_unit(name: str, unit: str) -> None:
    assert ok(decode_backend_metric, metric(name=name, unit=unit))


def test_metric_constants() -> None:
    assert BACKEND_METRIC_NAMES == (
        "request.total_ms",
        "stream.first_event_ms",
        "stream.first_token_ms",
        "stream.bytes",
        "stream.events",
        "stream.snapshots",
        "deterministic.fallback",
        "retrieval.total_ms",
        "retrieval.documents",
        "persistence.total_ms",
        "cancellation.count",
        "conflict.count",
        "error.count",
        "usage.input_tokens",
        "usage.output_tokens",
        "usage.total_tokens",
        "cost.usd",
    )
    assert BACKEND_METRIC_UNITS == ("ms", "bytes", "count", "tokens", "usd")
    assert set(BACKEND_METRIC_UNIT_BY_NAME.values()) == set(BACKEND_METRIC_UNITS)
    assert len(ASK_DIAGNOSTIC_CODES) == len(set(ASK_DIAGNOSTIC_CODES)) == 11


# --- construction in Python -----------------------------------------------------------------------


def test_request_built_in_python_serializes_in_schema_order() -> None:
    escalated = EscalationAnswer.model_validate(escalation())
    built = AskRequest(
        deterministic=escalated,
        messages=(AskMessage(role="user", content="Q?"),),
        session_id="s1",
        version=1,
        protocol="agentskit.chat.ask",
    )
    assert list(built.to_wire()) == [
        "protocol",
        "version",
        "sessionId",
        "messages",
        "deterministic",
    ]
    assert decode_ask_request(built.to_json()).unwrap() == built
    minimal = AskRequest(messages=(AskMessage(role="assistant", content=""),))
    assert minimal.to_json() == '{"messages":[{"role":"assistant","content":""}]}'


def test_request_validation_refuses_a_non_envelope_escalation() -> None:
    with pytest.raises(ValueError):
        AskRequest.model_validate(
            {"messages": [{"role": "user", "content": "x"}], "deterministic": 1}
        )


# --- diagnostics ----------------------------------------------------------------------------------


def test_request_diagnostics() -> None:
    assert decode_ask_request(b"\xef\xbb\xbf{").diagnostic.to_wire() == {  # type: ignore[union-attr]
        "code": "ASK_INVALID_REQUEST",
        "message": "Request body is not valid JSON.",
        "retryable": False,
    }
    assert decode_ask_request("[]").diagnostic.message == "The Ask request payload is invalid."  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("decoder", "subject"),
    [
        (decode_backend_site_config, "The backend site configuration"),
        (decode_grounded_source, "The grounded source"),
        (decode_ask_session_record, "The Ask session record"),
        (decode_ask_usage, "The Ask usage record"),
        (decode_ask_diagnostic, "The Ask diagnostic"),
        (decode_backend_metric, "The backend metric"),
    ],
)
def test_backend_diagnostics(decoder: Decoder, subject: str) -> None:
    for payload, message in (("{", "is not valid JSON."), ("NaN", "is not valid JSON.")):
        result = decoder(payload)
        assert (result.diagnostic.code, result.diagnostic.message) == (
            BACKEND_INVALID_PAYLOAD,
            f"{subject} {message}",
        )
    assert decoder([]).diagnostic.message == f"{subject} is invalid."
    assert decoder("[" * 100000 + "]" * 100000).diagnostic.message == f"{subject} is invalid."


def test_error_cases_table() -> None:
    assert len(ASK_ERROR_CASES) == 20
    for name, case in ASK_ERROR_CASES.items():
        assert isinstance(case, AskErrorCase), name
        assert case.code in ASK_DIAGNOSTIC_CODES
        assert case.to_diagnostic().to_wire() == {
            "code": case.code,
            "message": case.message,
            "retryable": case.retryable,
        }
    assert "ASK_UNAUTHORIZED" not in {c.code for c in ASK_ERROR_CASES.values()}
    assert ASK_ERROR_CASES["invalid_json"].message == "Request body is not valid JSON."
    assert ASK_ERROR_CASES["invalid_request"].message == "The Ask request payload is invalid."
    assert (ASK_ERROR_CASES["rate_limited"].status, ASK_ERROR_CASES["rate_limited"].retryable) == (
        429,
        True,
    )


# --- properties -----------------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=()), max_size=30).map(combine_surrogates)
LABEL = TEXT.filter(lambda s: 0 < len(js_trim(s)) <= 128)
SAFE_ID = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,20}\Z")
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": TEXT})
TIMESTAMP = st.builds(
    "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z".format,
    st.integers(0, 9999),
    st.integers(1, 12),
    st.integers(1, 28),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
    st.integers(0, 999),
)
NUMBER = st.integers(0, 2**53 - 1) | st.floats(0, 1e300)
ESCALATION = st.builds(
    lambda query, reason, message, ids: {
        **escalation(query, message=message, reason=reason),
        "confidence": {"level": "low", "basis": reason},
        **({} if ids is None else {"candidateEntryIds": ids}),
    },
    TEXT,
    st.sampled_from(["miss", "stale", "corrupt", "offline"]),
    TEXT.filter(bool),
    st.none() | st.lists(SAFE_ID, max_size=8),
)

ENVELOPES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "decode_ask_request": st.fixed_dictionaries(
        {"messages": st.lists(MESSAGE, min_size=1, max_size=5)},
        optional={
            "protocol": st.just("agentskit.chat.ask"),
            "version": st.just(1),
            "sessionId": SAFE_ID,
            "deterministic": ESCALATION,
        },
    ),
    "decode_backend_site_config": st.fixed_dictionaries(
        {
            "protocol": st.just("agentskit.chat.backend-site"),
            "version": st.just(1),
            "siteId": SAFE_ID,
            "assistant": st.fixed_dictionaries(
                {"id": SAFE_ID, "name": LABEL, "suggestions": st.lists(LABEL, max_size=8)}
            ),
            "corpus": st.fixed_dictionaries(
                {"id": SAFE_ID, "mode": st.sampled_from(["local", "federated"])}
            ),
            "components": st.lists(SAFE_ID, max_size=4),
            "actions": st.lists(SAFE_ID, max_size=4),
            "limits": st.fixed_dictionaries(
                {
                    "requestTimeoutMs": st.integers(100, 120000),
                    "retrievalTimeoutMs": st.integers(100, 60000),
                    "generationTimeoutMs": st.integers(100, 120000),
                    "maxSources": st.integers(1, 8),
                }
            ),
            "persistence": st.fixed_dictionaries(
                {"mode": st.sampled_from(["required", "disabled"])}
            ),
        }
    ),
    "decode_grounded_source": st.fixed_dictionaries(
        {
            "id": SAFE_ID,
            "title": LABEL,
            "href": st.sampled_from(["/docs/a", "https://x.y/z?q=1#f", "http:example.com"]),
            "excerpt": LABEL,
        }
    ),
    "decode_ask_session_record": st.fixed_dictionaries(
        {"revision": st.integers(0, 2**53 - 1), "messages": st.lists(MESSAGE, max_size=5)}
    ),
    "decode_ask_usage": st.fixed_dictionaries(
        {},
        optional={
            "inputTokens": st.integers(0, 2**53 - 1),
            "outputTokens": st.integers(0, 2**53 - 1),
            "totalTokens": st.integers(0, 2**53 - 1),
            "costUsd": NUMBER,
            "model": LABEL,
        },
    ),
    "decode_ask_diagnostic": st.fixed_dictionaries(
        {
            "code": st.sampled_from(ASK_DIAGNOSTIC_CODES),
            "message": LABEL,
            "retryable": st.booleans(),
        }
    ),
    "decode_backend_metric": st.fixed_dictionaries(
        {
            "protocol": st.just("agentskit.chat.backend-metric"),
            "version": st.just(1),
            "name": st.sampled_from(BACKEND_METRIC_NAMES),
            "siteId": SAFE_ID,
            "corpusId": SAFE_ID,
            "requestId": SAFE_ID,
            "value": NUMBER,
            "unit": st.sampled_from(BACKEND_METRIC_UNITS),
            "outcome": st.sampled_from(["ok", "rejected", "cancelled", "error"]),
            "emittedAt": TIMESTAMP,
        }
    ),
}


@pytest.mark.parametrize("operation", list(ENVELOPES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_round_trip(operation: str, data: st.DataObject) -> None:
    decoder = DECODERS[operation]
    payload = data.draw(ENVELOPES[operation])
    first = decoder(payload)
    assert first.ok
    value: WireModel = first.value
    text = value.to_json()
    again = decoder(text)
    assert again.ok
    # Numbers are doubles: a huge integral float comes back as an int of the same double.
    assert as_doubles(again.value.to_wire()) == as_doubles(value.to_wire())
    assert again.value.to_json() == text
    assert decoder(text.encode("utf-8")).value == again.value
    order = [field.alias or name for name, field in type(value).model_fields.items()]
    assert list(value.to_wire()) == [key for key in order if key in value.to_wire()]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
)


@pytest.mark.parametrize("operation", list(DECODERS))
@settings(max_examples=60, deadline=None)
@given(value=JSON, raw=st.binary(max_size=64), text=TEXT)
def test_decoders_never_raise(operation: str, value: Any, raw: bytes, text: str) -> None:
    decoder = DECODERS[operation]
    for payload in (value, raw, text, js_stringify(value) if not _has_nan(value) else "1"):
        result = decoder(payload)
        assert result.ok in (True, False)
    for payload in ("1e400", "9" * 400, [10**400], {"a": float("inf")}, object(), lambda: 1):
        assert decoder(payload).ok in (True, False)


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    return False


def test_cyclic_and_hostile_payloads_are_invalid() -> None:
    cyclic: dict[str, Any] = {"messages": []}
    cyclic["messages"].append(cyclic)

    class Raising(dict[str, Any]):
        def __getitem__(self, key: str) -> Any:
            raise RuntimeError("boom")

        def items(self) -> Any:
            raise RuntimeError("boom")

    class RaisingStr(str):
        def encode(self, *args: Any, **kwargs: Any) -> bytes:
            raise RuntimeError("boom")

        def isascii(self) -> bool:
            raise RuntimeError("boom")

    for decoder in DECODERS.values():
        assert not decoder(cyclic).ok
        assert decoder(Raising(messages=[])).ok in (True, False)
        assert not decoder(RaisingStr("{")).ok


MARKER = "ZQXJMARKERVW"


@pytest.mark.parametrize("operation", list(DECODERS))
@settings(max_examples=40, deadline=None)
@given(noise=TEXT, key=st.sampled_from(["messages", "siteId", "title", "model", "message", "x"]))
def test_diagnostics_never_echo_input(operation: str, noise: str, key: str) -> None:
    decoder = DECODERS[operation]
    secret = MARKER + noise
    for payload in ({key: secret, "extra": secret}, secret, "{" + secret, [secret]):
        result = decoder(payload)
        assert not result.ok
        assert MARKER not in result.diagnostic.message
        assert MARKER not in str(result.diagnostic.to_wire())


def test_module_exports_are_complete() -> None:
    for name in _backend.__all__:
        assert getattr(_backend, name) is not None


# --- "__proto__" and "constructor" in strict objects --------------------------------------------

#: Every strict object of the backend envelopes, as (decoder, builder of the payload given the
#: object with an extra key, the object without it).
STRICT_OBJECTS: list[tuple[str, Decoder, Callable[[dict[str, Any]], Any], dict[str, Any]]] = [
    ("request", decode_ask_request, lambda o: o, request()),
    ("message", decode_ask_request, lambda o: request(messages=[o]), user("hi")),
    ("site", decode_backend_site_config, lambda o: o, site()),
    *(
        (section, decode_backend_site_config, lambda o, s=section: site(**{s: o}), site()[section])
        for section in ("assistant", "corpus", "limits", "persistence")
    ),
    ("source", decode_grounded_source, lambda o: o, source()),
    ("session", decode_ask_session_record, lambda o: o, {"revision": 0, "messages": []}),
    (
        "session-message",
        decode_ask_session_record,
        lambda o: {"revision": 0, "messages": [o]},
        user("hi"),
    ),
    ("usage", decode_ask_usage, lambda o: o, {"inputTokens": 1}),
    (
        "diagnostic",
        decode_ask_diagnostic,
        lambda o: o,
        {"code": "ASK_TIMEOUT", "message": "m", "retryable": True},
    ),
    ("metric", decode_backend_metric, lambda o: o, metric()),
]


@pytest.mark.parametrize(
    ("decoder", "build", "obj"),
    [pytest.param(d, b, o, id=name) for name, d, b, o in STRICT_OBJECTS],
)
@settings(max_examples=20, deadline=None)
@given(value=st.one_of(st.none(), st.integers(), st.text(max_size=5), st.just({}), st.just([])))
def test_proto_key_is_dropped_from_every_strict_object(
    decoder: Decoder, build: Callable[[dict[str, Any]], Any], obj: dict[str, Any], value: Any
) -> None:
    # Same verdict as the reference: the key never becomes a property there, so it is not
    # an unknown key; its value is read by nothing, here or there.
    plain = decoder(build(copy.deepcopy(obj)))
    assert plain.ok
    with_proto = decoder(build({**copy.deepcopy(obj), "__proto__": value}))
    assert with_proto.ok
    assert with_proto.value.to_json() == plain.value.to_json()
    text = js_stringify(build({**copy.deepcopy(obj), "__proto__": value}))
    assert decoder(text).value.to_json() == plain.value.to_json()


@pytest.mark.parametrize(
    ("decoder", "build", "obj"),
    [pytest.param(d, b, o, id=name) for name, d, b, o in STRICT_OBJECTS],
)
@pytest.mark.parametrize("key", ["constructor", "__proto", "__PROTO__", "prototype", "toString"])
def test_other_object_keys_stay_unknown_keys(
    decoder: Decoder, build: Callable[[dict[str, Any]], Any], obj: dict[str, Any], key: str
) -> None:
    assert not decoder(build({**copy.deepcopy(obj), key: 1})).ok
