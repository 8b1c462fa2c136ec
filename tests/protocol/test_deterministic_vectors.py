"""Every reference vector of the deterministic plane, case by case."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentskit_chat.errors import ContentHashError
from agentskit_chat.protocol import (
    canonicalize_local_knowledge_artifact,
    compute_local_knowledge_artifact_content_hash,
    decode_answer_response,
    decode_deterministic_site_config,
    decode_local_knowledge_artifact,
    is_safe_href,
    normalize_knowledge_key,
    verify_local_knowledge_artifact,
)
from agentskit_chat.protocol._json import js_stringify, utf8_len
from agentskit_chat.protocol._text import utf16_len
from agentskit_chat.protocol._types import WireModel
from tests._vectors import as_doubles, cases, sorted_sha256


@pytest.mark.parametrize("case", cases("normalize_knowledge_key"))
def test_normalize_knowledge_key(case: dict[str, Any]) -> None:
    result = normalize_knowledge_key(case["input"])
    assert result == case["expected"]
    assert utf16_len(result) == case["expected_utf16_length"]


@pytest.mark.parametrize("case", cases("safe_href"))
def test_safe_href(case: dict[str, Any]) -> None:
    assert utf16_len(case["input"]) == case["input_utf16_length"]
    assert is_safe_href(case["input"]) is case["expected"]


def _payload(case: dict[str, Any]) -> Any:
    return case["input"]["payload"]


def _check(result: Any, expected: dict[str, Any]) -> None:
    if not expected["ok"]:
        assert not result.ok
        assert (result.diagnostic.code, result.diagnostic.message) == (
            expected["code"],
            expected["message"],
        )
        assert result.diagnostic.retryable is False
        return
    assert result.ok, result.diagnostic
    value = result.value
    assert isinstance(value, WireModel)
    wire = value.to_wire()
    if "value" in expected:
        assert as_doubles(wire) == as_doubles(expected["value"])
        # Key order is part of the contract: the serialization must match byte for byte.
        assert value.to_json() == js_stringify(expected["value"])
    else:
        assert sorted_sha256(wire) == expected["value_sha256_sorted"]
        assert utf8_len(value.to_json()) == expected["value_utf8_bytes"]


@pytest.mark.parametrize("case", cases("decode_site_config"))
def test_decode_site_config(case: dict[str, Any]) -> None:
    _check(decode_deterministic_site_config(_payload(case)), case["expected"])


@pytest.mark.parametrize("case", cases("decode_answer_response"))
def test_decode_answer_response(case: dict[str, Any]) -> None:
    _check(decode_answer_response(_payload(case)), case["expected"])


@pytest.mark.parametrize("case", cases("decode_knowledge_artifact"))
def test_decode_knowledge_artifact(case: dict[str, Any]) -> None:
    options = case["input"].get("options")
    payload = _payload(case)
    if case["input"]["operation"] == "decode":
        kwargs: dict[str, Any] = {}
        if options:
            if "expectedContentHash" in options:
                kwargs["expected_content_hash"] = options["expectedContentHash"]
            if "expectedSiteId" in options:
                kwargs["expected_site_id"] = options["expectedSiteId"]
        result = decode_local_knowledge_artifact(payload, **kwargs)
    else:
        options = options or {}
        result = verify_local_knowledge_artifact(
            payload,
            expected_content_hash=options.get("expectedContentHash"),  # type: ignore[arg-type]
            expected_site_id=options.get("expectedSiteId"),  # type: ignore[arg-type]
        )
        if result.ok:
            assert result.value.verified
    _check(result, case["expected"])


@pytest.mark.parametrize("case", cases("content_hash"))
def test_content_hash(case: dict[str, Any]) -> None:
    artifact = json.loads(case["input_json"]) if "input_json" in case else case["input"]
    expected = case["expected"]
    if "error" in expected:
        with pytest.raises(ContentHashError) as raised:
            compute_local_knowledge_artifact_content_hash(artifact)
        assert str(raised.value) == expected["error"]["message"]
        return
    assert compute_local_knowledge_artifact_content_hash(artifact) == expected["content_hash"]
    canonical = canonicalize_local_knowledge_artifact(artifact)
    assert utf8_len(canonical) == expected["canonical_utf8_bytes"]
    if "canonical" in expected:
        assert canonical == expected["canonical"]
    decoded = decode_local_knowledge_artifact({**artifact, "contentHash": expected["content_hash"]})
    assert decoded.ok
    assert utf8_len(decoded.value.to_json()) == expected["validated_artifact_utf8_bytes"]
