"""The deterministic answer resolver: construction, order of checks, envelopes, fast path."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.answers import (
    DeterministicAnswerResolver,
    create_deterministic_answer_resolver,
)
from agentskit_chat.protocol import (
    AnswerEnvelope,
    ChoicesAnswer,
    EscalationAnswer,
    ExactAnswer,
    decode_answer_response,
    decode_local_knowledge_artifact,
)
from agentskit_chat.protocol._text import truncate_utf16
from agentskit_chat.protocol.fixtures import DETERMINISTIC_ANSWER_FIXTURES
from tests.answers._support import (
    ARTIFACT,
    EXPIRES_MS,
    HASH,
    SITE,
    STALE,
    artifact,
    entry,
    now,
)

CORRUPT = "Local knowledge is corrupt. A backend answer is required."
STALE_MESSAGE = "Local knowledge is stale. A backend answer is required."
MISS = "No exact local answer was found. A backend answer is required."
UNAVAILABLE = "The selected local answer is unavailable. A backend answer is required."
CHOICES = "More than one exact local answer matches. Choose one to continue."


def resolver(value: object = ARTIFACT, **options: Any) -> DeterministicAnswerResolver:
    settings_: dict[str, Any] = {"expected_content_hash": HASH, "expected_site_id": SITE}
    settings_["now"] = now
    settings_.update(options)
    return create_deterministic_answer_resolver(value, **settings_)


def own(value: dict[str, Any], **options: Any) -> DeterministicAnswerResolver:
    """A resolver trusting ``value``'s own hash and site."""
    return resolver(
        value,
        expected_content_hash=value["contentHash"],
        expected_site_id=value["siteId"],
        **options,
    )


def escalated(envelope: AnswerEnvelope, reason: str, message: str) -> EscalationAnswer:
    assert isinstance(envelope, EscalationAnswer)
    assert (envelope.reason, envelope.message) == (reason, message)
    assert (envelope.confidence.level, envelope.confidence.basis) == ("low", reason)
    assert envelope.candidate_entry_ids is None
    assert "candidateEntryIds" not in envelope.to_wire()
    return envelope


def assert_revalidates(envelope: AnswerEnvelope) -> None:
    decoded = decode_answer_response(envelope.to_wire())
    assert decoded.ok
    assert decoded.value == envelope
    assert decoded.value.to_json() == envelope.to_json()
    assert decode_answer_response(envelope.to_json()).value == envelope


# --- the spec's vectors --------------------------------------------------------------------------


def test_exact_answer_after_normalization() -> None:
    envelope = resolver().resolve("  ＩＮＳＴＡＬＬ\n CLI ")
    assert isinstance(envelope, ExactAnswer)
    wire = envelope.to_wire()
    assert wire == {
        **DETERMINISTIC_ANSWER_FIXTURES["local"],
        "query": "  ＩＮＳＴＡＬＬ\n CLI ",
        "normalizedQuery": "install cli",
    }


def test_fixture_envelopes_are_reproduced_exactly() -> None:
    r = resolver()
    assert r.resolve("Install CLI").to_wire() == DETERMINISTIC_ANSWER_FIXTURES["local"]
    assert r.resolve("docs").to_wire() == DETERMINISTIC_ANSWER_FIXTURES["ambiguous"]
    assert r.resolve("Why?").to_wire() == DETERMINISTIC_ANSWER_FIXTURES["miss"]
    assert own(STALE).resolve("install cli").to_wire() == DETERMINISTIC_ANSWER_FIXTURES["stale"]
    corrupt = resolver(None).resolve("install cli").to_wire()
    assert corrupt == DETERMINISTIC_ANSWER_FIXTURES["corrupt"]


def test_ambiguous_alias_offers_choices_with_unique_aliases() -> None:
    envelope = resolver().resolve("docs")
    assert isinstance(envelope, ChoicesAnswer)
    assert envelope.message == CHOICES
    assert [(s.id, s.value) for s in envelope.suggestions] == [
        ("docs-agentskit", "agentskit docs"),
        ("docs-registry", "registry docs"),
    ]
    assert envelope.provenance.entry_ids == ("docs-agentskit", "docs-registry")
    assert (envelope.confidence.level, envelope.confidence.basis) == ("medium", "ambiguous")


def test_resolve_choice_answers_an_offered_entry() -> None:
    envelope = resolver().resolve_choice("docs-registry", "docs")
    assert isinstance(envelope, ExactAnswer)
    assert envelope.answer.markdown == "Open the Registry documentation."
    assert envelope.provenance.entry_ids == ("docs-registry",)  # type: ignore[union-attr]
    assert (envelope.query, envelope.normalized_query) == ("docs", "docs")


def test_resolve_choice_rejects_a_real_entry_not_offered_for_the_query() -> None:
    escalated(resolver().resolve_choice("install-cli", "docs"), "miss", UNAVAILABLE)
    escalated(resolver().resolve_choice("not-an-entry", "docs"), "miss", UNAVAILABLE)
    escalated(resolver().resolve_choice("docs-registry", "nothing"), "miss", UNAVAILABLE)


def test_resolve_choice_accepts_a_single_entry_match() -> None:
    envelope = resolver().resolve_choice("install-cli", "Install CLI")
    assert envelope.to_wire() == DETERMINISTIC_ANSWER_FIXTURES["local"]


def test_miss_is_low_confidence() -> None:
    envelope = escalated(resolver().resolve("compare these frameworks"), "miss", MISS)
    assert envelope.normalized_query == "compare these frameworks"


def test_stale_artifact_never_answers() -> None:
    escalated(own(STALE).resolve("install cli"), "stale", STALE_MESSAGE)
    escalated(own(STALE).resolve("docs"), "stale", STALE_MESSAGE)
    escalated(own(STALE).resolve_choice("docs-registry", "docs"), "stale", STALE_MESSAGE)


@pytest.mark.parametrize(
    ("clock_ms", "stale"),
    [(EXPIRES_MS - 1, False), (EXPIRES_MS, True), (EXPIRES_MS + 1, True)],
)
def test_expiry_equality_counts_as_stale(clock_ms: int, stale: bool) -> None:
    envelope = resolver(now=lambda: clock_ms).resolve("install cli")
    assert isinstance(envelope, EscalationAnswer) is stale


def test_the_clock_is_read_on_every_call() -> None:
    ticks = iter([EXPIRES_MS - 1, EXPIRES_MS])
    r = resolver(now=lambda: next(ticks))
    assert isinstance(r.resolve("install cli"), ExactAnswer)
    escalated(r.resolve("install cli"), "stale", STALE_MESSAGE)


def test_naive_clock_is_rejected() -> None:
    r = resolver(now=lambda: datetime(2026, 7, 13))
    with pytest.raises(ValueError, match="timezone-aware"):
        r.resolve("install cli")


def test_default_clock_with_an_artifact_that_never_expires() -> None:
    value = artifact(expiresAt=None)
    assert "expiresAt" not in value
    r = create_deterministic_answer_resolver(
        value, expected_content_hash=value["contentHash"], expected_site_id=SITE
    )
    assert isinstance(r.resolve("install cli"), ExactAnswer)


def test_over_long_query_never_matches() -> None:
    long_alias = artifact([entry("long", "x" * 512), entry("short", "y")])
    r = own(long_alias)
    assert isinstance(r.resolve("x" * 512), ExactAnswer)
    envelope = escalated(r.resolve("x" * 513), "miss", MISS)
    assert envelope.query == "x" * 512
    # Never truncated into a match, even when normalization would shrink it to an alias.
    escalated(r.resolve("x" * 512 + " "), "miss", MISS)
    escalated(r.resolve_choice("long", "x" * 513), "miss", UNAVAILABLE)


def test_normalization_expansion_is_a_miss() -> None:
    query = "\ufdfa" * 100
    envelope = escalated(resolver().resolve(query), "miss", MISS)
    assert envelope.query == query
    assert envelope.normalized_query == truncate_utf16(envelope.normalized_query, 512)
    assert len(envelope.normalized_query) == 512
    escalated(resolver().resolve_choice("install-cli", query), "miss", UNAVAILABLE)
    assert_revalidates(envelope)


def test_query_truncation_never_splits_a_surrogate_pair() -> None:
    envelope = resolver().resolve("x" * 511 + "😀" + "tail")
    assert envelope.query == "x" * 511
    envelope = resolver().resolve("x" * 510 + "😀" + "tail")
    assert envelope.query == "x" * 510 + "😀"
    assert_revalidates(envelope)


def test_normalized_query_follows_the_protocol_cut() -> None:
    # 512 units that normalize to 513 (the ligature expands): the protocol cuts by code unit.
    query = "ﬁ" + "x" * 509 + "😀"
    envelope = escalated(resolver().resolve(query), "miss", MISS)
    assert envelope.query == query
    assert envelope.normalized_query == "fi" + "x" * 509 + "\ud83d"
    assert_revalidates(envelope)


# --- construction ------------------------------------------------------------------------------


def _version(value: int) -> dict[str, Any]:
    return {**copy.deepcopy(ARTIFACT), "version": value}


def _tampered() -> dict[str, Any]:
    value = copy.deepcopy(ARTIFACT)
    value["entries"][0]["answer"]["markdown"] = "Tampered content."
    return value


CORRUPTIONS: dict[str, tuple[object, dict[str, Any], str]] = {
    "null": (None, {}, "Deterministic payload is invalid."),
    "invalid hash option": (
        ARTIFACT,
        {"expected_content_hash": "sha256:XYZ"},
        "Trusted deterministic artifact configuration is invalid.",
    ),
    "invalid site option": (
        ARTIFACT,
        {"expected_site_id": "bad site"},
        "Trusted deterministic artifact configuration is invalid.",
    ),
    "oversized text": (
        '{"padding":"' + "x" * 524288 + '"}',
        {},
        "Deterministic payload exceeds its safety limit.",
    ),
    "not json": ("{bad", {}, "Deterministic payload is not valid JSON."),
    "unsupported version": (
        _version(2),
        {},
        "Deterministic payload uses an unsupported version.",
    ),
    "schema": (
        {**copy.deepcopy(ARTIFACT), "entries": [{}]},
        {},
        "Deterministic payload is invalid.",
    ),
    "configured hash": (
        ARTIFACT,
        {"expected_content_hash": "sha256:" + "b" * 64},
        "Deterministic artifact does not match the configured content hash.",
    ),
    "other site": (
        ARTIFACT,
        {"expected_site_id": "other-site"},
        "Deterministic artifact belongs to a different site.",
    ),
    "tampered": (
        _tampered(),
        {},
        "Deterministic artifact content does not match its SHA-256 hash.",
    ),
}


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_every_verification_failure_makes_a_corrupt_resolver(name: str) -> None:
    value, options, message = CORRUPTIONS[name]
    r = resolver(value, **options)
    assert r.is_corrupt
    assert r.artifact is None
    assert r.diagnostic is not None
    assert r.diagnostic.message == message
    escalated(r.resolve("install cli"), "corrupt", CORRUPT)
    escalated(r.resolve_choice("install-cli", "install cli"), "corrupt", CORRUPT)


class _Hostile(dict[str, Any]):
    def items(self) -> Any:
        raise RuntimeError("boom")

    def get(self, *args: Any) -> Any:
        raise RuntimeError("boom")


def test_construction_never_raises_on_hostile_input() -> None:
    assert resolver(_Hostile(ARTIFACT)).is_corrupt
    assert resolver(object()).is_corrupt
    assert resolver(ARTIFACT, expected_content_hash=None).is_corrupt


@pytest.mark.parametrize(
    "form",
    [
        lambda: json.dumps(ARTIFACT, ensure_ascii=False),
        lambda: json.dumps(ARTIFACT).encode(),
        lambda: decode_local_knowledge_artifact(ARTIFACT).value,
    ],
    ids=["text", "bytes", "model"],
)
def test_accepts_text_bytes_and_models(form: Any) -> None:
    r = resolver(form())
    assert not r.is_corrupt
    assert r.resolve("Install CLI").to_wire() == DETERMINISTIC_ANSWER_FIXTURES["local"]


def test_an_unverified_model_is_verified_again() -> None:
    model = decode_local_knowledge_artifact(_tampered()).value
    assert model is not None
    assert resolver(model).is_corrupt


def test_later_mutation_of_the_input_has_no_effect() -> None:
    value = copy.deepcopy(ARTIFACT)
    r = resolver(value)
    value["entries"][0]["answer"]["markdown"] = "Changed."
    value["entries"][0]["match"]["values"].append("sneaky")
    assert r.resolve("install cli").answer.markdown == "Run `npm install agentskit`."  # type: ignore[union-attr]
    escalated(r.resolve("sneaky"), "miss", MISS)


def test_corrupt_resolver_skips_staleness_and_length_but_truncates() -> None:
    r = resolver(STALE, expected_content_hash="sha256:" + "c" * 64)
    envelope = escalated(r.resolve("x" * 600), "corrupt", CORRUPT)
    assert envelope.query == "x" * 512
    assert envelope.normalized_query == "x" * 512


def test_stale_is_checked_before_length() -> None:
    envelope = escalated(own(STALE).resolve("x" * 600), "stale", STALE_MESSAGE)
    assert envelope.query == "x" * 512
    escalated(own(STALE).resolve_choice("a", "x" * 600), "stale", STALE_MESSAGE)


# --- suggestions ---------------------------------------------------------------------------------


def test_at_most_eight_suggestions_each_with_its_own_alias() -> None:
    entries = [entry(f"e{i}", "shared", f"alias {i}", label=f"Entry {i}") for i in range(10)]
    r = own(artifact(entries))
    envelope = r.resolve("SHARED")
    assert isinstance(envelope, ChoicesAnswer)
    assert [s.id for s in envelope.suggestions] == [f"e{i}" for i in range(8)]
    assert [s.value for s in envelope.suggestions] == [f"alias {i}" for i in range(8)]
    assert [s.label for s in envelope.suggestions] == [f"Entry {i}" for i in range(8)]
    assert envelope.provenance.entry_ids == tuple(f"e{i}" for i in range(8))
    assert isinstance(r.resolve_choice("e7", "shared"), ExactAnswer)
    escalated(r.resolve_choice("e8", "shared"), "miss", UNAVAILABLE)
    assert_revalidates(envelope)


def test_unique_alias_is_the_first_value_owned_by_one_entry() -> None:
    entries = [
        entry("a", "common", "also common", "only a"),
        entry("b", "common", "also common", "only b"),
    ]
    envelope = own(artifact(entries)).resolve("also common")
    assert isinstance(envelope, ChoicesAnswer)
    assert [s.value for s in envelope.suggestions] == ["only a", "only b"]


def test_buckets_keep_artifact_order() -> None:
    entries = [entry("z", "k", "z1"), entry("a", "k", "a1"), entry("m", "K ", "m1")]
    envelope = own(artifact(entries)).resolve("k")
    assert [s.id for s in envelope.suggestions] == ["z", "a", "m"]  # type: ignore[union-attr]


# --- the fast path builds exactly what validation would ------------------------------------------

POOL_ENTRIES = [
    entry("install-cli", "install cli", "npm install agentskit", cites=2),
    entry("docs-a", "docs", "agentskit docs", cites=1),
    entry("docs-b", "docs", "registry docs", cites=3),
    entry("docs-c", "docs", "café docs"),
    entry("astral", "emoji 😀 help"),
]
POOL = own(artifact(POOL_ENTRIES))
QUERIES = st.one_of(
    st.sampled_from(
        ["install cli", "INSTALL  CLI", "docs", " Docs\t", "CAFÉ DOCS", "emoji 😀 help", ""]
    ),
    st.text(max_size=40),
    st.text(min_size=500, max_size=530),
    st.builds(lambda a, b: a + b, st.sampled_from(["docs", "install cli"]), st.text(max_size=3)),
)


@settings(max_examples=200)
@given(QUERIES)
def test_every_resolved_envelope_revalidates_to_an_equal_value(query: str) -> None:
    assert_revalidates(POOL.resolve(query))


@settings(max_examples=200)
@given(st.sampled_from(["install-cli", "docs-a", "docs-b", "docs-c", "astral", "x"]), QUERIES)
def test_every_choice_envelope_revalidates_to_an_equal_value(choice: str, query: str) -> None:
    assert_revalidates(POOL.resolve_choice(choice, query))


@settings(max_examples=50)
@given(QUERIES)
def test_escalations_of_every_kind_revalidate(query: str) -> None:
    for r in (resolver(None), own(STALE)):
        assert_revalidates(r.resolve(query))
        assert_revalidates(r.resolve_choice("docs-a", query))
