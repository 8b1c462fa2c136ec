"""Helpers shared by the artifact producer tests: docs trees, builds and lookups."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentskit_chat.answers import ArtifactBuild, build_local_knowledge_artifact
from agentskit_chat.protocol import (
    KnowledgeEntry,
    normalize_knowledge_key,
    verify_local_knowledge_artifact,
)
from agentskit_chat.retrieval import read_docs_folder

STAMP = "2026-07-13T00:00:00.000Z"
REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds" / "agentskit-chat-docs"


def tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def build(root: Path, **options: Any) -> ArtifactBuild:
    options.setdefault("site_id", "docs-site")
    options.setdefault("generated_at", STAMP)
    return build_local_knowledge_artifact(read_docs_folder(root), **options)


def kinds(result: ArtifactBuild, kind: str) -> list[KnowledgeEntry]:
    return [entry for entry in result.artifact.entries if entry.kind == kind]


def lookup(result: ArtifactBuild, query: str) -> tuple[str, ...]:
    return tuple(result.artifact.alias_index.get(normalize_knowledge_key(query), ()))


def entry(result: ArtifactBuild, entry_id: str) -> KnowledgeEntry:
    return next(e for e in result.artifact.entries if e.id == entry_id)


def assert_valid(result: ArtifactBuild) -> None:
    verified = verify_local_knowledge_artifact(
        result.artifact_json,
        expected_content_hash=result.site_config.artifact.content_hash,
        expected_site_id=result.site_config.site_id,
    )
    assert verified.ok, verified.diagnostic
    assert len(result.artifact_json.encode("utf-8")) == result.stats.artifact_bytes <= 524288
