"""Wire contracts of AgentsKit Chat v1, byte-compatible with the TypeScript reference."""

from __future__ import annotations

from ._answer import decode_answer_response
from ._href import is_safe_href
from ._knowledge import (
    canonicalize_local_knowledge_artifact,
    compute_local_knowledge_artifact_content_hash,
    decode_deterministic_site_config,
    decode_local_knowledge_artifact,
    verify_local_knowledge_artifact,
)
from ._text import normalize_knowledge_key

__all__ = [
    "canonicalize_local_knowledge_artifact",
    "compute_local_knowledge_artifact_content_hash",
    "decode_answer_response",
    "decode_deterministic_site_config",
    "decode_local_knowledge_artifact",
    "is_safe_href",
    "normalize_knowledge_key",
    "verify_local_knowledge_artifact",
]
