"""The local knowledge artifact ``agentskit.chat.knowledge`` v1 and its site configuration.

The per-site configuration, the immutable artifact of exact answers, bounded decoding with
expectations, verification against trusted anchors, and the canonical text and ``sha256:``
content hash shared with the reference.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import orjson
from pydantic import BeforeValidator, Field, PlainValidator, PrivateAttr, model_validator

from agentskit_chat.errors import ContentHashError

from ._decode import NOT_JSON, as_text, parse_candidate
from ._deterministic import (
    ARTIFACT_MAX_BYTES,
    CONFIGURED_HASH_MISMATCH,
    CONTENT_HASH_MISMATCH,
    DIFFERENT_SITE,
    HASH_PLACEHOLDER,
    INTEGRITY_UNVERIFIED,
    NOT_VALID_JSON,
    SITE_CONFIG_MAX_BYTES,
    TEXT_TYPES,
    TRUSTED_CONFIG_INVALID,
    bounded_decode,
)
from ._json import js_stringify
from ._result import Decoded, DecodeResult
from ._text import normalize_knowledge_key, utf16_len
from ._time import epoch_ms
from ._types import (
    ContentHash,
    OptTimestamp,
    SafeHref,
    SafeId,
    Timestamp,
    VersionOne,
    WireModel,
    array,
    is_content_hash,
    is_safe_id,
    one_of,
    trimmed,
)

__all__ = [
    "KNOWLEDGE_ENTRY_KINDS",
    "KNOWLEDGE_PROTOCOL",
    "SITE_PROTOCOL",
    "Citation",
    "DeterministicSiteConfig",
    "KnowledgeAnswer",
    "KnowledgeEntry",
    "KnowledgeMatch",
    "LocalKnowledgeArtifact",
    "SiteArtifactRef",
    "SiteFallback",
    "canonicalize_local_knowledge_artifact",
    "compute_local_knowledge_artifact_content_hash",
    "decode_deterministic_site_config",
    "decode_local_knowledge_artifact",
    "verify_local_knowledge_artifact",
]

SITE_PROTOCOL: Final = "agentskit.chat.site"
KNOWLEDGE_PROTOCOL: Final = "agentskit.chat.knowledge"
MAX_ENTRIES: Final = 1024
MAX_ALIASES: Final = 16
MAX_KEY_UNITS: Final = 512
MAX_CITATIONS: Final = 8
KNOWLEDGE_ENTRY_KINDS: Final = (
    "command",
    "package",
    "navigation",
    "contribution",
    "ecosystem",
    "restricted-faq",
    "document",
)
# ``,"contentHash":"sha256:<64 hex>"``: what the validated artifact adds to its canonical text.
_CONTENT_HASH_MEMBER_BYTES: Final = len(',"contentHash":""') + len(HASH_PLACEHOLDER)

Label = Annotated[str, PlainValidator(trimmed(1, 256))]


class Citation(WireModel):
    """A safe citation: ``{id, title, href}`` (title trimmed, 1..256 units; href a safe link)."""

    id: SafeId
    title: Label
    href: SafeHref


# --- site configuration --------------------------------------------------------------------------


class SiteArtifactRef(WireModel):
    """Where the host loads the knowledge artifact, and the hash it must have."""

    href: SafeHref
    content_hash: ContentHash


class SiteFallback(WireModel):
    """Whether questions without an exact local answer may escalate to a backend."""

    mode: Annotated[Literal["backend", "disabled"], PlainValidator(one_of("backend", "disabled"))]


class DeterministicSiteConfig(WireModel):
    """``agentskit.chat.site`` v1: one site's deterministic-answer configuration."""

    protocol: Annotated[Literal["agentskit.chat.site"], PlainValidator(one_of(SITE_PROTOCOL))]
    version: VersionOne
    site_id: SafeId
    artifact: SiteArtifactRef
    fallback: SiteFallback


def decode_deterministic_site_config(payload: object) -> DecodeResult[DeterministicSiteConfig]:
    """Decode an ``agentskit.chat.site`` v1 configuration (16 KiB limit).

    Never raises. Failures carry ``DETERMINISTIC_LIMIT_EXCEEDED``,
    ``DETERMINISTIC_UNSUPPORTED_VERSION`` or ``DETERMINISTIC_INVALID_PAYLOAD``.
    """
    return bounded_decode(
        payload, protocol=SITE_PROTOCOL, limit=SITE_CONFIG_MAX_BYTES, model=DeterministicSiteConfig
    )


# --- artifact ------------------------------------------------------------------------------------


class KnowledgeMatch(WireModel):
    """How questions match an entry: exact aliases compared after key normalization."""

    type: Annotated[Literal["exact"], PlainValidator(one_of("exact"))]
    values: Annotated[
        tuple[Annotated[str, PlainValidator(trimmed(1, MAX_KEY_UNITS))], ...],
        BeforeValidator(array),
        Field(min_length=1, max_length=MAX_ALIASES),
    ]


class KnowledgeAnswer(WireModel):
    """The answer an entry gives: Markdown (trimmed, 1..16384 units) and up to 8 citations."""

    markdown: Annotated[str, PlainValidator(trimmed(1, 16384))]
    citations: Annotated[
        tuple[Citation, ...], BeforeValidator(array), Field(max_length=MAX_CITATIONS)
    ]


class KnowledgeEntry(WireModel):
    """One exact answer of the artifact."""

    id: SafeId
    kind: Annotated[
        Literal[
            "command",
            "package",
            "navigation",
            "contribution",
            "ecosystem",
            "restricted-faq",
            "document",
        ],
        PlainValidator(one_of(*KNOWLEDGE_ENTRY_KINDS)),
    ]
    label: Label
    match: KnowledgeMatch
    answer: KnowledgeAnswer


class LocalKnowledgeArtifact(WireModel):
    """``agentskit.chat.knowledge`` v1: an immutable, hash-addressed set of exact answers.

    Decoding enforces the cross-field rules (normalized aliases at most 512 units and distinct
    within an entry, unique entry ids, an alias of its own for every entry, ``expiresAt`` after
    ``generatedAt``) and records, for each normalized alias, which entries declare it
    (:attr:`alias_index`), so consumers never normalize aliases twice.
    """

    protocol: Annotated[
        Literal["agentskit.chat.knowledge"], PlainValidator(one_of(KNOWLEDGE_PROTOCOL))
    ]
    version: VersionOne
    artifact_id: SafeId
    site_id: SafeId
    content_hash: ContentHash
    generated_at: Timestamp
    expires_at: OptTimestamp = None
    entries: Annotated[
        tuple[KnowledgeEntry, ...], BeforeValidator(array), Field(max_length=MAX_ENTRIES)
    ]

    _alias_index: dict[str, tuple[str, ...]] = PrivateAttr(default_factory=dict)
    _verified: bool = PrivateAttr(default=False)
    _canonical: bytes | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _cross_field_rules(self) -> LocalKnowledgeArtifact:
        owners: dict[str, list[str]] = {}
        entry_keys: list[list[str]] = []
        seen_ids: set[str] = set()
        for entry in self.entries:
            if entry.id in seen_ids:
                raise ValueError("duplicate entry id")
            seen_ids.add(entry.id)
            keys: list[str] = []
            for alias in entry.match.values:
                key = normalize_knowledge_key(alias)
                if len(key) * 2 > MAX_KEY_UNITS and utf16_len(key) > MAX_KEY_UNITS:
                    raise ValueError("normalized alias too long")
                keys.append(key)
            if len(set(keys)) != len(keys):
                raise ValueError("duplicate alias within an entry")
            for key in keys:
                owners.setdefault(key, []).append(entry.id)
            entry_keys.append(keys)
        for keys in entry_keys:
            if not any(len(owners[key]) == 1 for key in keys):
                raise ValueError("entry has no alias of its own")
        if self.expires_at is not None and epoch_ms(self.expires_at) <= epoch_ms(self.generated_at):
            raise ValueError("expiry must follow generation")
        self._alias_index = {key: tuple(ids) for key, ids in owners.items()}
        return self

    @property
    def alias_index(self) -> Mapping[str, tuple[str, ...]]:
        """Normalized alias → ids of the entries that declare it, in artifact order."""
        return self._alias_index

    @property
    def verified(self) -> bool:
        """True when this value came from :func:`verify_local_knowledge_artifact`."""
        return self._verified


def _canonical_value(artifact: LocalKnowledgeArtifact) -> dict[str, Any]:
    head: dict[str, Any] = {
        "protocol": artifact.protocol,
        "version": 1,
        "artifactId": artifact.artifact_id,
        "siteId": artifact.site_id,
        "generatedAt": artifact.generated_at,
    }
    if artifact.expires_at is not None:
        head["expiresAt"] = artifact.expires_at
    head["entries"] = [
        {
            "id": e.id,
            "kind": e.kind,
            "label": e.label,
            "match": {"type": e.match.type, "values": list(e.match.values)},
            "answer": {
                "markdown": e.answer.markdown,
                "citations": [
                    {"id": c.id, "title": c.title, "href": c.href} for c in e.answer.citations
                ],
            },
        }
        for e in artifact.entries
    ]
    return head


def _canonical_bytes(artifact: LocalKnowledgeArtifact) -> bytes:
    if artifact._canonical is not None:
        return artifact._canonical
    value = _canonical_value(artifact)
    try:
        # orjson writes exactly JSON.stringify's bytes for strings without lone surrogates,
        # and the canonical value holds only strings, lists, objects and the integer 1.
        canonical = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        canonical = js_stringify(value).encode("utf-8")
    artifact._canonical = canonical  # the model is frozen, so the text can never go stale
    return canonical


def _validated_size(artifact: LocalKnowledgeArtifact) -> int:
    """UTF-8 size of the decoded artifact's compact JSON (its canonical text plus the hash)."""
    return len(_canonical_bytes(artifact)) + _CONTENT_HASH_MEMBER_BYTES


def canonicalize_local_knowledge_artifact(artifact: LocalKnowledgeArtifact | object) -> str:
    """The canonical text of an artifact: the compact JSON its content hash is computed over.

    Keys come in a fixed order, ``contentHash`` is left out, and values are the decoded ones
    (unknown keys stripped, labels, aliases, Markdown and citation titles trimmed).

    Raises:
        ContentHashError: when ``artifact`` is not a model and does not decode as one.
    """
    return _canonical_bytes(_as_artifact(artifact)).decode("utf-8")


def _digest(canonical: bytes) -> str:
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def _as_artifact(artifact: object) -> LocalKnowledgeArtifact:
    if isinstance(artifact, LocalKnowledgeArtifact):
        return artifact
    result = _decode_with_placeholder(artifact)
    if not result.ok:
        raise ContentHashError(result.diagnostic.code, result.diagnostic.message)
    return result.value


def _decode_with_placeholder(payload: object) -> DecodeResult[LocalKnowledgeArtifact]:
    candidate: object = payload
    if isinstance(payload, TEXT_TYPES):
        candidate = parse_candidate(as_text(payload))
        if candidate is NOT_JSON:
            return NOT_VALID_JSON
    if isinstance(candidate, LocalKnowledgeArtifact):
        candidate = candidate.to_wire()
    if isinstance(candidate, Mapping):
        try:
            candidate = {**candidate, "contentHash": HASH_PLACEHOLDER}
        except Exception:
            candidate = None
    return bounded_decode(
        candidate,
        protocol=KNOWLEDGE_PROTOCOL,
        limit=ARTIFACT_MAX_BYTES,
        model=LocalKnowledgeArtifact,
        size_of=_validated_size,
    )


def compute_local_knowledge_artifact_content_hash(artifact: object) -> str:
    """The ``sha256:<hex>`` content hash of an artifact, as a producer computes it.

    Any ``contentHash`` the input carries is ignored (replaced by a placeholder), so the result
    does not depend on it. The input may be a model, a mapping, or JSON text.

    Raises:
        ContentHashError: when the input is not a valid artifact; the message is the decoder's
            fixed diagnostic message and never contains input data.

    Example:
        >>> from agentskit_chat.protocol.fixtures import LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE
        >>> compute_local_knowledge_artifact_content_hash(LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE)[:15]
        'sha256:d1b98e69'
    """
    result = _decode_with_placeholder(artifact)
    if not result.ok:
        raise ContentHashError(result.diagnostic.code, result.diagnostic.message)
    return _digest(_canonical_bytes(result.value))


def decode_local_knowledge_artifact(
    payload: object,
    *,
    expected_content_hash: str | None = None,
    expected_site_id: str | None = None,
) -> DecodeResult[LocalKnowledgeArtifact]:
    """Decode an ``agentskit.chat.knowledge`` v1 artifact (512 KiB limit), without hashing.

    ``expected_content_hash`` and ``expected_site_id``, when given, are compared verbatim with the
    artifact's declared values (hash first). Use :func:`verify_local_knowledge_artifact` to also
    recompute the content hash. Never raises.
    """
    result = bounded_decode(
        payload,
        protocol=KNOWLEDGE_PROTOCOL,
        limit=ARTIFACT_MAX_BYTES,
        model=LocalKnowledgeArtifact,
        size_of=_validated_size,
    )
    if not result.ok:
        return result
    if expected_content_hash is not None and expected_content_hash != result.value.content_hash:
        return CONFIGURED_HASH_MISMATCH
    if expected_site_id is not None and expected_site_id != result.value.site_id:
        return DIFFERENT_SITE
    return result


def verify_local_knowledge_artifact(
    payload: object,
    *,
    expected_content_hash: str,
    expected_site_id: str,
) -> DecodeResult[LocalKnowledgeArtifact]:
    """Decode an artifact and prove it is the one a trusted site configuration names.

    Checks, in order: the trusted anchors themselves (a content hash and a safe id), the bounded
    decode, the declared hash and site against the anchors, then the recomputed SHA-256 of the
    canonical text against the declared hash. The returned value has ``verified`` set.
    Never raises.
    """
    if not is_content_hash(expected_content_hash) or not is_safe_id(expected_site_id):
        return TRUSTED_CONFIG_INVALID
    result = decode_local_knowledge_artifact(
        payload, expected_content_hash=expected_content_hash, expected_site_id=expected_site_id
    )
    if not result.ok:
        return result
    artifact = result.value
    try:
        if _validated_size(artifact) > ARTIFACT_MAX_BYTES:
            return INTEGRITY_UNVERIFIED
        digest = _digest(_canonical_bytes(artifact))
    except Exception:
        return INTEGRITY_UNVERIFIED
    if digest != artifact.content_hash:
        return CONTENT_HASH_MISMATCH
    artifact._verified = True
    return Decoded(artifact)
