"""Build a local knowledge artifact and its site configuration from Markdown pages.

One ``document`` entry per file, one ``command`` entry per distinct shell command line, one
``navigation`` entry per heading, one ``command`` or ``package`` entry per command or package name
that only one page mentions, plus the entries declared in front matter, which win over the
derived ones. The output is byte-identical for identical input, always satisfies every bound of
``agentskit.chat.knowledge`` v1, and reports what did not fit. See ``docs/artifacts.md``.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any, Final, Literal

import orjson

from agentskit_chat._doclinks import page_href
from agentskit_chat.errors import BuildError
from agentskit_chat.protocol import (
    KNOWLEDGE_PROTOCOL,
    SITE_PROTOCOL,
    DeterministicSiteConfig,
    LocalKnowledgeArtifact,
    compute_local_knowledge_artifact_content_hash,
    is_safe_href,
    normalize_knowledge_key,
    verify_local_knowledge_artifact,
)
from agentskit_chat.protocol._deterministic import ARTIFACT_MAX_BYTES, HASH_PLACEHOLDER
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.protocol._knowledge import MAX_ENTRIES
from agentskit_chat.protocol._time import epoch_ms, is_timestamp
from agentskit_chat.protocol._types import is_safe_id

from ._candidates import (
    Candidate,
    Doc,
    Ids,
    LeftOut,
    declared_candidates,
    derived_candidates,
    final_aliases,
)
from ._documents import DocsFolder, SourceDocument
from ._markdown import read_markdown_document

__all__ = [
    "ARTIFACT_FILE_NAME",
    "DEFAULT_ARTIFACT_HREF",
    "SITE_FILE_NAME",
    "ArtifactBuild",
    "ArtifactBuildStats",
    "LeftOut",
    "build_local_knowledge_artifact",
]

ARTIFACT_FILE_NAME: Final = "knowledge.json"
SITE_FILE_NAME: Final = "site.json"
DEFAULT_ARTIFACT_HREF: Final = "/agentskit-chat.knowledge.json"

ENTRY_LIMIT: Final = "the artifact holds at most 1024 entries"
SIZE_LIMIT: Final = "the artifact holds at most 524288 bytes"


@dataclass(frozen=True, slots=True)
class ArtifactBuildStats:
    """Counts of one build: files read, entries kept by origin, entries left out, bytes.

    ``commands`` counts the command lines of shell blocks; ``mentions`` the commands and package
    names written in inline code, each answering the one page that mentions it.
    """

    files: int
    entries: int
    declared: int
    documents: int
    commands: int
    headings: int
    left_out: int
    artifact_bytes: int
    mentions: int = 0


@dataclass(frozen=True, slots=True)
class ArtifactBuild:
    """The result of :func:`build_local_knowledge_artifact`.

    Attributes:
        artifact: The verified artifact, decoded from ``artifact_json``.
        site_config: The site configuration naming the artifact's content hash.
        artifact_json: The exact text of ``knowledge.json`` (compact JSON and one final newline).
        site_json: The exact text of ``site.json`` (compact JSON and one final newline).
        left_out: What did not fit or was not read, in a deterministic order.
        stats: Counts of this build.
    """

    artifact: LocalKnowledgeArtifact
    site_config: DeterministicSiteConfig
    artifact_json: str
    site_json: str
    left_out: tuple[LeftOut, ...]
    stats: ArtifactBuildStats


# --- limits and serialization --------------------------------------------------------------------


def _wire(head: dict[str, Any], selected: Sequence[Candidate]) -> dict[str, Any]:
    aliases, _ = final_aliases(selected)
    entries = [
        {
            "id": c.id,
            "kind": c.kind,
            "label": c.label,
            "match": {"type": "exact", "values": list(values)},
            "answer": {"markdown": c.markdown, "citations": list(c.citations)},
        }
        for c, values in zip(selected, aliases, strict=True)
    ]
    return {**head, "entries": entries}


def _size(wire: dict[str, Any]) -> int:
    """UTF-8 bytes of the file ``wire`` becomes: JSON.stringify's text and one newline."""
    try:
        return len(orjson.dumps(wire)) + 1
    except (TypeError, orjson.JSONEncodeError):  # lone surrogates: JSON.stringify escapes them
        return len(js_stringify(wire).encode("utf-8")) + 1


def _select(
    head: dict[str, Any], candidates: list[Candidate], declared: int, left: list[LeftOut]
) -> list[Candidate]:
    """The longest prefix (by priority) within the entry and byte limits; the rest is left out."""
    if declared > MAX_ENTRIES:
        first = candidates[MAX_ENTRIES]
        raise BuildError(f"declared entries alone exceed {MAX_ENTRIES} entries", file=first.display)
    count = min(len(candidates), MAX_ENTRIES)
    left.extend(LeftOut(c.kind, c.file, c.label, ENTRY_LIMIT) for c in candidates[count:])

    def fits(n: int) -> bool:
        return _size(_wire(head, candidates[:n])) <= ARTIFACT_MAX_BYTES

    if not fits(count):
        if not fits(declared):
            raise BuildError(
                f"declared entries alone exceed {ARTIFACT_MAX_BYTES} bytes",
                file=candidates[declared - 1].display,
            )
        low, high = declared, count
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        left.extend(LeftOut(c.kind, c.file, c.label, SIZE_LIMIT) for c in candidates[low:count])
        count = low
    selected = candidates[:count]
    left.extend(final_aliases(selected)[1])
    return selected


# --- files and options ----------------------------------------------------------------------------


def _timestamp(dt: datetime) -> str:
    dt = dt.astimezone(UTC) if dt.tzinfo is not None else dt
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T"
        f"{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}.000Z"
    )


def _generated_at(generated_at: str | None, now: Callable[[], datetime] | None) -> str:
    if generated_at is not None:
        if not is_timestamp(generated_at):
            raise BuildError("--generated-at must be an ISO date-time with an offset")
        return generated_at
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch:
        if re.fullmatch(r"[0-9]{1,11}", epoch) is None:
            raise BuildError("SOURCE_DATE_EPOCH must be a whole number of seconds")
        try:
            return _timestamp(datetime.fromtimestamp(int(epoch), UTC))
        except (OverflowError, OSError, ValueError):
            raise BuildError("SOURCE_DATE_EPOCH is out of range") from None
    return _timestamp(now() if now is not None else datetime.now(UTC))


def _check_options(
    site_id: str, artifact_id: str | None, expires_at: str | None, artifact_href: str, mode: str
) -> None:
    if not is_safe_id(site_id):
        raise BuildError("--site-id must be a safe identifier (1 to 128 of A-Z a-z 0-9 . _ : -)")
    if artifact_id is not None and not is_safe_id(artifact_id):
        raise BuildError(
            "--artifact-id must be a safe identifier (1 to 128 of A-Z a-z 0-9 . _ : -)"
        )
    if expires_at is not None and not is_timestamp(expires_at):
        raise BuildError("--expires-at must be an ISO date-time with an offset")
    if not is_safe_href(artifact_href):
        raise BuildError("--href must be a safe link (/path or an http(s) URL)")
    if mode not in ("backend", "disabled"):
        raise BuildError("--fallback must be backend or disabled")


# --- the build ------------------------------------------------------------------------------------


def build_local_knowledge_artifact(
    source: DocsFolder | Sequence[SourceDocument],
    *,
    site_id: str,
    artifact_id: str | None = None,
    generated_at: str | None = None,
    expires_at: str | None = None,
    artifact_href: str = DEFAULT_ARTIFACT_HREF,
    fallback_mode: Literal["backend", "disabled"] = "backend",
    href_prefix: str = "/docs",
    progress: Callable[[int, int], None] | None = None,
    now: Callable[[], datetime] | None = None,
) -> ArtifactBuild:
    """Build a verified knowledge artifact and its site configuration from Markdown pages.

    Pure: the pages come in (read them with :func:`agentskit_chat.retrieval.read_docs_folder`,
    whose symbolic links left out are reported again here), the artifact comes out, and nothing
    is read or written (write it with :func:`agentskit_chat.retrieval.write_artifact_build`).

    Args:
        source: A docs folder as read, or the pages themselves (any order; built in path
            order).
        site_id: The site's safe identifier.
        artifact_id: The artifact's id; by default ``<site_id>-<12 hex>``, the hex taken from
            the content hash of the same artifact built with the id ``<site_id>-000000000000``.
        generated_at: ``generatedAt`` verbatim; else ``SOURCE_DATE_EPOCH``; else ``now()``.
        expires_at: An optional ``expiresAt``, later than ``generatedAt``.
        artifact_href: Where the host serves the artifact (written into the site config).
        fallback_mode: Whether unanswered questions may escalate to a backend.
        href_prefix: Prepended to each document's path to form its link (``/docs`` turns
            ``guides/setup.md`` into ``/docs/guides/setup``).
        progress: Called with ``(files read, files in total)``; its exceptions are ignored.
        now: The clock used when neither ``generated_at`` nor ``SOURCE_DATE_EPOCH`` is set.

    Raises:
        BuildError: a bad option, an unreadable file, malformed front matter, or declared entries
            that break a limit; the message names the file and line.

    Example:
        >>> from agentskit_chat.retrieval import read_docs_folder, write_artifact_build
        >>> folder = read_docs_folder("docs")  # doctest: +SKIP
        >>> build = build_local_knowledge_artifact(folder, site_id="my-docs")  # doctest: +SKIP
        >>> write_artifact_build(build, "public")  # doctest: +SKIP
    """
    _check_options(site_id, artifact_id, expires_at, artifact_href, fallback_mode)
    stamp = _generated_at(generated_at, now)
    if expires_at is not None and epoch_ms(expires_at) <= epoch_ms(stamp):
        raise BuildError("--expires-at must be later than the generation time")
    if isinstance(source, DocsFolder):
        pages, left, where = source.documents, list(source.left_out), str(source.root)
    else:
        pages, left, where = tuple(source), [], None
    pages = tuple(sorted(pages, key=lambda page: page.path))
    if not pages:
        raise BuildError("no Markdown files (*.md, *.markdown) in the docs folder", file=where)
    prefix = href_prefix.rstrip("/")
    docs: list[Doc] = []
    for done, page in enumerate(pages, start=1):
        slug = str(PurePosixPath(page.path).with_suffix(""))
        href = page_href(prefix, slug)
        if not is_safe_href(href):
            raise BuildError(f"--href-prefix gives the unsafe link {href!r}", file=page.display)
        parsed = read_markdown_document(page, stem=PurePosixPath(slug).name)
        docs.append(Doc(page.path, slug, page.display, href, parsed))
        if progress is not None:
            with contextlib.suppress(Exception):
                progress(done, len(pages))

    ids = Ids()
    declared = declared_candidates(docs, ids)
    claimed = {normalize_knowledge_key(a) for c in declared for a in c.aliases}
    candidates = declared + derived_candidates(docs, ids, claimed, left)

    id_prefix = site_id[:115]
    head: dict[str, Any] = {
        "protocol": KNOWLEDGE_PROTOCOL,
        "version": 1,
        "artifactId": artifact_id if artifact_id is not None else f"{id_prefix}-{'0' * 12}",
        "siteId": site_id,
        "contentHash": HASH_PLACEHOLDER,
        "generatedAt": stamp,
        **({"expiresAt": expires_at} if expires_at is not None else {}),
    }
    selected = _select(head, candidates, len(declared), left)
    wire = _wire(head, selected)
    if artifact_id is None:
        digest = compute_local_knowledge_artifact_content_hash(wire)
        wire["artifactId"] = f"{id_prefix}-{digest[7:19]}"
    content_hash = compute_local_knowledge_artifact_content_hash(wire)
    wire["contentHash"] = content_hash
    artifact_json = LocalKnowledgeArtifact.model_validate(wire).to_json() + "\n"
    verified = verify_local_knowledge_artifact(
        artifact_json, expected_content_hash=content_hash, expected_site_id=site_id
    )
    if not verified.ok:  # a bug in this module, never bad input
        raise BuildError(f"the built artifact does not verify: {verified.diagnostic.message}")
    site_config = DeterministicSiteConfig.model_validate(
        {
            "protocol": SITE_PROTOCOL,
            "version": 1,
            "siteId": site_id,
            "artifact": {"href": artifact_href, "contentHash": content_hash},
            "fallback": {"mode": fallback_mode},
        }
    )
    sources = Counter(c.source for c in selected)
    stats = ArtifactBuildStats(
        files=len(pages),
        entries=len(selected),
        declared=sources["declared"],
        documents=sources["document"],
        commands=sources["command"],
        headings=sources["navigation"],
        mentions=sources["mention"],
        left_out=len(left),
        artifact_bytes=len(artifact_json.encode("utf-8")),
    )
    return ArtifactBuild(
        artifact=verified.value,
        site_config=site_config,
        artifact_json=artifact_json,
        site_json=site_config.to_json() + "\n",
        left_out=tuple(left),
        stats=stats,
    )
