"""Deterministic plane: spec fixtures, hostile input, every bound, and properties."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ContentHashError
from agentskit_chat.protocol import (
    canonicalize_local_knowledge_artifact,
    compute_local_knowledge_artifact_content_hash,
    decode_answer_response,
    decode_deterministic_site_config,
    decode_local_knowledge_artifact,
    normalize_knowledge_key,
    verify_local_knowledge_artifact,
)
from agentskit_chat.protocol._knowledge import LocalKnowledgeArtifact
from agentskit_chat.protocol._text import JS_WHITESPACE
from agentskit_chat.protocol.fixtures import (
    DETERMINISTIC_ANSWER_FIXTURES,
    DETERMINISTIC_CASES,
    DETERMINISTIC_CONTENT_HASH_FIXTURE,
    DETERMINISTIC_SITE_CONFIG_FIXTURE,
    LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE,
    ConformanceCase,
)
from tests._strategies import MARKER, assert_no_echo, payloads

DETERMINISTIC_MESSAGES = {
    "Deterministic payload exceeds its safety limit.",
    "Deterministic payload is not valid JSON.",
    "Deterministic payload uses an unsupported version.",
    "Deterministic payload is invalid.",
    "Deterministic artifact does not match the configured content hash.",
    "Deterministic artifact belongs to a different site.",
    "Trusted deterministic artifact configuration is invalid.",
    "Deterministic artifact content does not match its SHA-256 hash.",
    "Deterministic artifact integrity could not be verified.",
}
OPERATIONS: dict[str, Callable[..., Any]] = {
    "decode_deterministic_site_config": decode_deterministic_site_config,
    "decode_local_knowledge_artifact": decode_local_knowledge_artifact,
    "verify_local_knowledge_artifact": verify_local_knowledge_artifact,
    "decode_answer_response": decode_answer_response,
}
OPTIONS = {
    "expected_content_hash": DETERMINISTIC_CONTENT_HASH_FIXTURE,
    "expected_site_id": "agentskit-docs",
}


@pytest.mark.parametrize("case", DETERMINISTIC_CASES, ids=lambda c: f"{c.family}:{c.name}")
def test_conformance_case(case: ConformanceCase) -> None:
    if case.operation == "compute_local_knowledge_artifact_content_hash":
        assert compute_local_knowledge_artifact_content_hash(case.input) == case.value
        return
    operation = OPERATIONS[case.operation]
    if case.operation == "verify_local_knowledge_artifact":
        options = {"expected_content_hash": None, "expected_site_id": None, **case.options}
        result = operation(case.input, **options)
    else:
        result = operation(case.input, **case.options)
    if case.expect == "ok":
        assert result.ok, result.diagnostic
        if case.value is not None:
            assert result.value.to_wire() == case.value
    else:
        assert not result.ok
        assert result.diagnostic.code == case.code
        assert result.diagnostic.message == case.message
        assert result.diagnostic.retryable is False
        assert "unexpected" not in result.diagnostic.message


def artifact(**changes: Any) -> dict[str, Any]:
    value = copy.deepcopy(LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE)
    value.update(changes)
    return value


def entry(i: int, **changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "id": f"entry-{i}",
        "kind": "document",
        "label": f"Entry {i}",
        "match": {"type": "exact", "values": [f"question {i}"]},
        "answer": {"markdown": f"Answer {i}.", "citations": []},
    }
    value.update(changes)
    return value


def decodes(payload: dict[str, Any]) -> bool:
    return decode_local_knowledge_artifact(payload).ok


# --- the spec's golden values --------------------------------------------------------------------


def test_padded_fixture_hashes_and_verifies_like_the_fixture() -> None:
    padded = artifact()
    first = padded["entries"][0]
    first["label"] = "  Install the CLI \n"
    first["match"]["values"][0] = "  install cli  "
    first["answer"]["markdown"] = "\tRun `npm install agentskit`.  "
    first["answer"]["citations"][0]["title"] = " Quickstart "
    assert (
        compute_local_knowledge_artifact_content_hash(padded) == DETERMINISTIC_CONTENT_HASH_FIXTURE
    )
    assert verify_local_knowledge_artifact(padded, **OPTIONS).ok


def test_canonical_text_of_the_fixture() -> None:
    canonical = canonicalize_local_knowledge_artifact(LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE)
    assert len(canonical.encode()) == 1064
    assert canonical.startswith(
        '{"protocol":"agentskit.chat.knowledge","version":1,"artifactId":"agentskit-docs-2026-07-13",'
        '"siteId":"agentskit-docs","generatedAt":"2026-07-13T00:00:00.000Z",'
        '"expiresAt":"2026-07-14T00:00:00.000Z","entries":[{"id":"install-cli","kind":"command",'
    )
    assert '"contentHash"' not in canonical


def test_ambiguous_fixture_serializes_exactly() -> None:
    result = decode_answer_response(DETERMINISTIC_ANSWER_FIXTURES["ambiguous"])
    assert result.ok
    assert result.value.to_json() == (
        '{"protocol":"agentskit.chat.answer","version":1,"outcome":"choices","query":"docs",'
        '"normalizedQuery":"docs","message":"More than one exact local answer matches. Choose one '
        'to continue.","suggestions":[{"id":"docs-agentskit","label":"AgentsKit documentation",'
        '"value":"agentskit docs"},{"id":"docs-registry","label":"Registry documentation","value":'
        '"registry docs"}],"provenance":{"source":"local","artifactId":"agentskit-docs-2026-07-13",'
        '"contentHash":"sha256:d1b98e69dcb00985dc5fdad4a8475f926168e6485e85716758ad5e0f35cd4906",'
        '"entryIds":["docs-agentskit","docs-registry"]},"confidence":{"level":"medium",'
        '"basis":"ambiguous"}}'
    )


def test_every_answer_fixture_decodes_from_text_too() -> None:
    for fixture in DETERMINISTIC_ANSWER_FIXTURES.values():
        from_text = decode_answer_response(
            decode_answer_response(fixture).value.to_json()  # type: ignore[union-attr]
        )
        assert from_text.ok and from_text.value.to_wire() == fixture


def test_site_config_fixture_from_text_and_bytes() -> None:
    text = decode_deterministic_site_config(DETERMINISTIC_SITE_CONFIG_FIXTURE).value.to_json()  # type: ignore[union-attr]
    for payload in (text, text.encode(), b"\xef\xbb\xbf" + text.encode()):
        result = decode_deterministic_site_config(payload)
        assert result.ok and result.value.to_wire() == DETERMINISTIC_SITE_CONFIG_FIXTURE


def test_alias_index_records_owners() -> None:
    result = decode_local_knowledge_artifact(LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE)
    assert result.ok
    assert result.value.alias_index["docs"] == ("docs-agentskit", "docs-registry")
    assert result.value.alias_index["install cli"] == ("install-cli",)
    assert result.value.verified is False


# --- hostile input -------------------------------------------------------------------------------


class Exploding(dict[str, Any]):
    def get(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError("do-not-leak")

    def __getitem__(self, _: Any) -> Any:
        raise RuntimeError("do-not-leak")

    def items(self) -> Any:
        raise RuntimeError("do-not-leak")


@pytest.mark.parametrize(
    "decoder",
    [decode_deterministic_site_config, decode_local_knowledge_artifact, decode_answer_response],
)
def test_cyclic_and_exploding_input_is_invalid(decoder: Callable[[Any], Any]) -> None:
    cyclic: dict[str, Any] = {"secret": "do-not-leak"}
    cyclic["self"] = cyclic
    for payload in (cyclic, Exploding(secret="do-not-leak"), object(), {1, 2}, b"\xff\xfe"):
        result = decoder(payload)
        assert not result.ok
        assert result.diagnostic.code == "DETERMINISTIC_INVALID_PAYLOAD"
        assert "do-not-leak" not in result.diagnostic.message


def test_cyclic_artifact_is_exactly_the_invalid_diagnostic() -> None:
    cyclic: dict[str, Any] = {"secret": "do-not-leak"}
    cyclic["self"] = cyclic
    result = decode_local_knowledge_artifact(cyclic)
    assert not result.ok
    assert result.diagnostic.to_wire() == {
        "code": "DETERMINISTIC_INVALID_PAYLOAD",
        "message": "Deterministic payload is invalid.",
        "retryable": False,
    }


def test_hash_of_invalid_input_raises_typed_error_without_input() -> None:
    with pytest.raises(ContentHashError) as raised:
        compute_local_knowledge_artifact_content_hash(artifact(entries=[{"unexpected": MARKER}]))
    assert str(raised.value) == "Deterministic payload is invalid."
    assert raised.value.code == "DETERMINISTIC_INVALID_PAYLOAD"
    with pytest.raises(ContentHashError):
        compute_local_knowledge_artifact_content_hash("{not json")


# --- bounds: at each limit and one past ----------------------------------------------------------


def test_entry_count_bound() -> None:
    assert decodes(artifact(entries=[]))
    assert decodes(artifact(entries=[entry(i) for i in range(1024)]))
    assert not decodes(artifact(entries=[entry(i) for i in range(1025)]))


@pytest.mark.parametrize(
    ("field", "ok_value", "bad_value"),
    [
        ("label", "x" * 256, "x" * 257),
        ("label", "😀" * 128, "😀" * 128 + "x"),
        ("label", "  " + "x" * 256 + "  ", ""),
    ],
)
def test_label_bounds(field: str, ok_value: str, bad_value: str) -> None:
    assert decodes(artifact(entries=[entry(0, **{field: ok_value})]))
    assert not decodes(artifact(entries=[entry(0, **{field: bad_value})]))


def test_alias_bounds() -> None:
    def with_values(values: list[str]) -> dict[str, Any]:
        return artifact(entries=[entry(0, match={"type": "exact", "values": values})])

    assert decodes(with_values([f"q{i}" for i in range(16)]))
    assert not decodes(with_values([f"q{i}" for i in range(17)]))
    assert not decodes(with_values([]))
    assert decodes(with_values(["x" * 512]))
    assert not decodes(with_values(["x" * 513]))
    assert not decodes(with_values(["\ufeff"]))  # JavaScript whitespace: blank
    assert decodes(with_values(["\u0085"]))  # not JavaScript whitespace
    assert not decodes(with_values(["install cli", "INSTALL  CLI"]))
    # 100 units long, but 1800 once normalized.
    assert not decodes(with_values(["\ufdfa" * 100]))
    assert decodes(with_values(["\ufdfa" * 28]))  # 504 normalized units


def test_markdown_and_citation_bounds() -> None:
    def answer(markdown: str, citations: int) -> dict[str, Any]:
        cites = [{"id": f"c{i}", "title": "T", "href": "/docs"} for i in range(citations)]
        return artifact(entries=[entry(0, answer={"markdown": markdown, "citations": cites})])

    assert decodes(answer("x" * 16384, 8))
    assert not decodes(answer("x" * 16385, 0))
    assert not decodes(answer("x", 9))
    assert not decodes(answer(" \n ", 0))


def test_identifier_bounds() -> None:
    assert decodes(artifact(artifactId="a" * 128))
    assert not decodes(artifact(artifactId="a" * 129))
    assert not decodes(artifact(artifactId="-a"))
    assert not decodes(artifact(artifactId="a\n"))
    assert not decodes(artifact(siteId="a١"))  # Arabic-Indic digit: not ASCII


@pytest.mark.parametrize(
    ("generated", "expires", "ok"),
    [
        ("2026-07-13T00:00:00.000Z", "2026-07-13T00:00:00.001Z", True),
        ("2026-07-13T00:00:00.000Z", "2026-07-13T00:00:00.000Z", False),
        ("2026-07-13T00:00:00.0001Z", "2026-07-13T00:00:00.0002Z", False),
        ("2026-07-13T00:00Z", "2026-07-13T05:00+05:00", False),
        ("2026-07-13T00:00Z", "2026-07-13T05:01+05:00", True),
        ("0000-02-29T00:00Z", "0000-03-01T00:00Z", True),
    ],
)
def test_expiry_is_compared_in_milliseconds(generated: str, expires: str, ok: bool) -> None:
    assert decodes(artifact(generatedAt=generated, expiresAt=expires)) is ok


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-02-29T00:00Z",
        "2026-07-13t00:00Z",
        "2026-07-13T24:00Z",
        "2026-07-13T00:00:60Z",
        "2026-07-13T00:00+0530",
        "2026-07-13T00:00+24:00",
        "2026-07-13 00:00Z",
        "2026-07-13T00:00z",
        "2026-07-13T00:00:00.Z",
        "+02026-07-13T00:00Z",
        "2026-07-13T00:00Z\n",
    ],
)
def test_rejected_timestamps(stamp: str) -> None:
    assert not decodes(artifact(generatedAt=stamp, expiresAt="2099-01-01T00:00Z"))


def test_site_config_byte_limit_counts_utf8() -> None:
    fixture = decode_deterministic_site_config(DETERMINISTIC_SITE_CONFIG_FIXTURE).value.to_json()  # type: ignore[union-attr]
    room = 16384 - len(fixture.encode())
    exact = fixture + " " * room
    assert decode_deterministic_site_config(exact).ok
    assert decode_deterministic_site_config(exact + " ").diagnostic.code == (  # type: ignore[union-attr]
        "DETERMINISTIC_LIMIT_EXCEEDED"
    )
    # A 3-byte character that fits in UTF-16 units still counts 3 bytes.
    assert not decode_deterministic_site_config(fixture + "\u00a0" * (room // 2 + 1)).ok


def test_answer_query_bounds_and_truncation() -> None:
    miss = copy.deepcopy(DETERMINISTIC_ANSWER_FIXTURES["miss"])
    ok = {**miss, "query": "a" * 512, "normalizedQuery": "a" * 512}
    assert decode_answer_response(ok).ok
    assert not decode_answer_response({**ok, "query": "a" * 513}).ok
    # normalizedQuery is the first 512 units of the normalized query: it may split a pair.
    query = "\ufdfa" * 27 + "a" * 25 + "😀"  # 54 units; 513 once normalized
    cut = normalize_knowledge_key(query).encode("utf-16-le", "surrogatepass")[:1024]
    normalized = cut.decode("utf-16-le", "surrogatepass")
    assert normalized.endswith("\ud83d")
    assert decode_answer_response({**miss, "query": query, "normalizedQuery": normalized}).ok


def test_suggestion_bounds() -> None:
    ambiguous = copy.deepcopy(DETERMINISTIC_ANSWER_FIXTURES["ambiguous"])

    def with_suggestions(n: int) -> dict[str, Any]:
        suggestions = [{"id": f"s{i}", "label": "L", "value": "v"} for i in range(n)]
        provenance = {**ambiguous["provenance"], "entryIds": [s["id"] for s in suggestions]}
        return {**ambiguous, "suggestions": suggestions, "provenance": provenance}

    assert decode_answer_response(with_suggestions(2)).ok
    assert decode_answer_response(with_suggestions(8)).ok
    assert not decode_answer_response(with_suggestions(9)).ok
    assert not decode_answer_response(with_suggestions(1)).ok


def test_answer_byte_limit_applies_to_text() -> None:
    local = decode_answer_response(DETERMINISTIC_ANSWER_FIXTURES["local"]).value.to_json()  # type: ignore[union-attr]
    padded = local + " " * (262144 - len(local))
    assert decode_answer_response(padded).ok
    assert decode_answer_response(padded + " ").diagnostic.code == "DETERMINISTIC_LIMIT_EXCEEDED"  # type: ignore[union-attr]


# --- properties ----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(payloads)
def test_decoders_never_raise_or_echo(payload: Any) -> None:
    for decoder in (
        decode_deterministic_site_config,
        decode_local_knowledge_artifact,
        decode_answer_response,
    ):
        result = decoder(payload)
        if not result.ok:
            assert_no_echo(result.diagnostic.message, DETERMINISTIC_MESSAGES)
    result = verify_local_knowledge_artifact(payload, **OPTIONS)
    if not result.ok:
        assert_no_echo(result.diagnostic.message, DETERMINISTIC_MESSAGES)


aliases = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12
).filter(lambda s: normalize_knowledge_key(s) != "")


@st.composite
def artifacts(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(min_value=0, max_value=6))
    entries = []
    seen: set[str] = set()
    for i in range(count):
        own = f"unique alias {i}"
        extra = [
            a for a in draw(st.lists(aliases, max_size=3)) if normalize_knowledge_key(a) not in seen
        ]
        values, keys = [], set()
        for alias in [own, *extra]:
            key = normalize_knowledge_key(alias)
            if key not in keys and len(key) <= 512:
                keys.add(key)
                values.append(alias)
        seen |= keys
        entries.append(
            entry(
                i,
                match={"type": "exact", "values": values},
                label=draw(
                    st.text(min_size=1, max_size=20).filter(
                        lambda s: s.strip(" \t\n\r\x0b\x0c\xa0\ufeff\u2028\u2029\u3000") != ""
                    )
                ),
            )
        )
    value = artifact(entries=entries)
    value.pop("expiresAt")
    value["contentHash"] = compute_local_knowledge_artifact_content_hash(value)
    return value


@settings(max_examples=60, deadline=None)
@given(artifacts())
def test_artifact_round_trip_and_verification(value: dict[str, Any]) -> None:
    decoded = decode_local_knowledge_artifact(value)
    if not decoded.ok:  # a generated label may be blank under the JavaScript whitespace set
        return
    text = decoded.value.to_json()
    again = verify_local_knowledge_artifact(
        text, expected_content_hash=value["contentHash"], expected_site_id="agentskit-docs"
    )
    assert again.ok, again.diagnostic
    assert again.value.to_wire() == decoded.value.to_wire()
    assert isinstance(again.value, LocalKnowledgeArtifact)
    # Reordering keys never changes the hash: the canonical form fixes the order.
    reordered = dict(reversed(list(value.items())))
    assert compute_local_knowledge_artifact_content_hash(reordered) == value["contentHash"]


def _answer_with(name: str, path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    payload = copy.deepcopy(DETERMINISTIC_ANSWER_FIXTURES[name])
    target: Any = payload
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return payload


@pytest.mark.parametrize(
    ("name", "path", "at_bound", "past_bound"),
    [
        ("miss", ("message",), "m" * 4096, "m" * 4097),
        ("miss", ("message",), "😀" * 2048, "😀" * 2048 + "m"),
        ("miss", ("candidateEntryIds",), [f"e{i}" for i in range(8)], [f"e{i}" for i in range(9)]),
        ("backend", ("provenance", "provider"), "p" * 128, "p" * 129),
        ("backend", ("provenance", "model"), " " + "m" * 128 + " ", ""),
        ("backend", ("answer", "markdown"), "x" * 16384, "x" * 16385),
        ("backend", ("answer", "markdown"), " ", ""),
        (
            "backend",
            ("answer", "citations"),
            [{"id": f"c{i}", "title": "T", "href": "/d"} for i in range(8)],
            [{"id": f"c{i}", "title": "T", "href": "/d"} for i in range(9)],
        ),
        (
            "backend",
            ("answer", "citations", 0),
            {"id": "c", "title": "t" * 256, "href": "/d"},
            {"id": "c", "title": "t" * 257, "href": "/d"},
        ),
        ("ambiguous", ("suggestions", 0, "label"), "l" * 256, "l" * 257),
        ("ambiguous", ("suggestions", 0, "value"), "v" * 512, "v" * 513),
        ("ambiguous", ("message",), "m" * 4096, ""),
        ("local", ("provenance", "artifactId"), "a" * 128, "a" * 129),
    ],
)
def test_answer_bounds(
    name: str, path: tuple[str | int, ...], at_bound: Any, past_bound: Any
) -> None:
    if path == ("answer", "citations", 0):
        base = _answer_with(name, ("answer", "citations"), [at_bound])
        assert decode_answer_response(base).ok
        assert not decode_answer_response(
            _answer_with(name, ("answer", "citations"), [past_bound])
        ).ok
        return
    assert decode_answer_response(_answer_with(name, path, at_bound)).ok
    assert not decode_answer_response(_answer_with(name, path, past_bound)).ok


@pytest.mark.parametrize(
    ("path", "at_bound", "past_bound"),
    [
        (("siteId",), "s" * 128, "s" * 129),
        (("artifact", "href"), "/" + "d" * 2047, "/" + "d" * 2048),
        (
            ("artifact", "href"),
            "https://example.com/" + "😀" * 1014,
            "https://example.com/" + "😀" * 1015,
        ),
        (("artifact", "contentHash"), "sha256:" + "a" * 64, "sha256:" + "A" * 64),
        (("fallback", "mode"), "disabled", "Disabled"),
    ],
)
def test_site_config_bounds(path: tuple[str, ...], at_bound: Any, past_bound: Any) -> None:
    def with_value(value: Any) -> dict[str, Any]:
        payload = copy.deepcopy(DETERMINISTIC_SITE_CONFIG_FIXTURE)
        target = payload
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return payload

    assert decode_deterministic_site_config(with_value(at_bound)).ok
    assert not decode_deterministic_site_config(with_value(past_bound)).ok


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
safe_ids = st.builds(
    str.__add__, st.sampled_from(_ALNUM), st.text(alphabet=_ALNUM + "._:-", max_size=20)
)
labels = st.text(min_size=1, max_size=30).filter(lambda s: s.strip(JS_WHITESPACE) != "")
hrefs = st.one_of(
    st.builds(lambda path: "/" + path, st.text(alphabet=_ALNUM + "._-", max_size=20)),
    st.builds(
        lambda host, path: f"https://{host}.example/{path}",
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12),
        safe_ids,
    ),
)


@st.composite
def site_configs(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "protocol": "agentskit.chat.site",
        "version": 1,
        "siteId": draw(safe_ids),
        "artifact": {
            "href": draw(hrefs),
            "contentHash": "sha256:"
            + draw(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)),
        },
        "fallback": {"mode": draw(st.sampled_from(["backend", "disabled"]))},
    }


@settings(max_examples=100, deadline=None)
@given(site_configs())
def test_site_config_round_trip(config: dict[str, Any]) -> None:
    decoded = decode_deterministic_site_config(config)
    assert decoded.ok
    again = decode_deterministic_site_config(decoded.value.to_json().encode())
    assert again.ok and again.value == decoded.value
    assert again.value.to_wire() == config


@st.composite
def answer_envelopes(draw: st.DrawFn) -> dict[str, Any]:
    query = draw(st.text(max_size=40))
    normalized = normalize_knowledge_key(query)[:512]
    base = {
        "protocol": "agentskit.chat.answer",
        "version": 1,
        "query": query,
        "normalizedQuery": normalized,
    }
    citation = st.builds(
        lambda i, t, h: {"id": i, "title": t.strip(JS_WHITESPACE), "href": h},
        safe_ids,
        labels,
        hrefs,
    )
    outcome = draw(st.sampled_from(["local", "backend", "choices", "escalation"]))
    if outcome == "escalation":
        reason = draw(st.sampled_from(["miss", "stale", "corrupt", "offline"]))
        return {
            **base,
            "outcome": "escalation",
            "message": draw(labels),
            "reason": reason,
            "confidence": {"level": "low", "basis": reason},
        }
    provenance = {
        "source": "local",
        "artifactId": draw(safe_ids),
        "contentHash": "sha256:" + "a" * 64,
    }
    if outcome == "choices":
        ids = draw(st.lists(safe_ids, min_size=2, max_size=8))
        suggestions = [
            {
                "id": i,
                "label": draw(labels).strip(JS_WHITESPACE),
                "value": draw(labels).strip(JS_WHITESPACE),
            }
            for i in ids
        ]
        return {
            **base,
            "outcome": "choices",
            "message": draw(labels),
            "suggestions": suggestions,
            "provenance": {**provenance, "entryIds": ids},
            "confidence": {"level": "medium", "basis": "ambiguous"},
        }
    answer = {
        "markdown": draw(labels),
        "citations": draw(st.lists(citation, max_size=8)),
    }
    if outcome == "local":
        return {
            **base,
            "outcome": "answer",
            "answer": answer,
            "provenance": {**provenance, "entryIds": [draw(safe_ids)]},
            "confidence": {"level": "high", "basis": "exact"},
        }
    return {
        **base,
        "outcome": "answer",
        "answer": answer,
        "provenance": {"source": "backend", "model": draw(labels).strip(JS_WHITESPACE)},
        "confidence": {"level": "high", "basis": "backend"},
    }


@settings(max_examples=150, deadline=None)
@given(answer_envelopes())
def test_answer_envelope_round_trip(envelope: dict[str, Any]) -> None:
    decoded = decode_answer_response(envelope)
    assert decoded.ok, decoded.diagnostic
    assert decoded.value.to_wire() == envelope
    again = decode_answer_response(decoded.value.to_json())
    assert again.ok and again.value == decoded.value
