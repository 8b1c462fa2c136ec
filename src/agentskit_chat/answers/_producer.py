"""Build a local knowledge artifact and its site configuration from a folder of Markdown.

One ``document`` entry per file, one ``command`` entry per distinct shell command line, one
``navigation`` entry per heading, plus the entries declared in front matter, which win over the
derived ones. The output is byte-identical for identical input, always satisfies every bound of
``agentskit.chat.knowledge`` v1, and reports what did not fit. See ``docs/artifacts.md``.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
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
from ._markdown import read_markdown_document

__all__ = [
    "ARTIFACT_FILE_NAME",
    "DEFAULT_ARTIFACT_HREF",
    "SITE_FILE_NAME",
    "ArtifactBuild",
    "ArtifactBuildStats",
    "LeftOut",
    "build_local_knowledge_artifact",
    "write_artifact_build",
]

ARTIFACT_FILE_NAME: Final = "knowledge.json"
SITE_FILE_NAME: Final = "site.json"
DEFAULT_ARTIFACT_HREF: Final = "/agentskit-chat.knowledge.json"
MARKDOWN_SUFFIXES: Final = (".md", ".markdown")

ENTRY_LIMIT: Final = "the artifact holds at most 1024 entries"
SIZE_LIMIT: Final = "the artifact holds at most 524288 bytes"
SYMLINK: Final = "symbolic links are not followed"


@dataclass(frozen=True, slots=True)
class ArtifactBuildStats:
    """Counts of one build: files read, entries kept by origin, entries left out, bytes."""

    files: int
    entries: int
    declared: int
    documents: int
    commands: int
    headings: int
    left_out: int
    artifact_bytes: int


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


def _markdown_files(docs_dir: Path, left: list[LeftOut]) -> list[tuple[str, Path]]:
    """Markdown files under ``docs_dir`` in path order; hidden names skipped, links reported."""

    def fail(error: OSError) -> None:
        raise BuildError(f"cannot read the folder: {error.strerror}", file=str(error.filename))

    found: list[tuple[str, Path]] = []
    skipped: list[LeftOut] = []
    for root, dirs, files in os.walk(docs_dir, onerror=fail):
        base = Path(root)
        kept: list[str] = []
        for name in dirs:
            if name.startswith("."):
                continue
            if (base / name).is_symlink():
                rel = (base / name).relative_to(docs_dir).as_posix()
                skipped.append(LeftOut("file", rel, name, SYMLINK))
            else:
                kept.append(name)
        dirs[:] = kept
        for name in files:
            if name.startswith(".") or not name.lower().endswith(MARKDOWN_SUFFIXES):
                continue
            rel = (base / name).relative_to(docs_dir).as_posix()
            if (base / name).is_symlink():
                skipped.append(LeftOut("file", rel, name, SYMLINK))
            else:
                found.append((rel, base / name))
    left.extend(sorted(skipped, key=lambda item: item.file))
    return sorted(found, key=lambda item: item[0])


def _read_text(path: Path, display: str) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BuildError(f"cannot read the file: {exc.strerror or exc}", file=display) from None
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BuildError("the file is not valid UTF-8", file=display, line=line) from None


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
    docs_dir: Path | str,
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
    """Build a verified knowledge artifact and its site configuration from a folder of Markdown.

    Reads every ``*.md`` and ``*.markdown`` file under ``docs_dir`` (hidden names and symbolic
    links skipped) in path order. Nothing is written: pass the result to
    :func:`write_artifact_build`.

    Args:
        docs_dir: The folder of Markdown.
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
        >>> build = build_local_knowledge_artifact("docs", site_id="my-docs")  # doctest: +SKIP
        >>> write_artifact_build(build, Path("public"))  # doctest: +SKIP
    """
    _check_options(site_id, artifact_id, expires_at, artifact_href, fallback_mode)
    stamp = _generated_at(generated_at, now)
    if expires_at is not None and epoch_ms(expires_at) <= epoch_ms(stamp):
        raise BuildError("--expires-at must be later than the generation time")
    root = Path(docs_dir)
    if not root.is_dir():
        raise BuildError("the docs folder does not exist or is not a folder", file=str(root))
    left: list[LeftOut] = []
    files = _markdown_files(root, left)
    if not files:
        raise BuildError("no Markdown files (*.md, *.markdown) in the docs folder", file=str(root))
    prefix = href_prefix.rstrip("/")
    docs: list[Doc] = []
    for done, (rel, path) in enumerate(files, start=1):
        display = str(root / rel)
        slug = str(PurePosixPath(rel).with_suffix(""))
        href = page_href(prefix, slug)
        if not is_safe_href(href):
            raise BuildError(f"--href-prefix gives the unsafe link {href!r}", file=display)
        parsed = read_markdown_document(
            _read_text(path, display), stem=PurePosixPath(slug).name, display=display
        )
        docs.append(Doc(rel, slug, display, href, parsed))
        if progress is not None:
            with contextlib.suppress(Exception):
                progress(done, len(files))

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
        files=len(files),
        entries=len(selected),
        declared=sources["declared"],
        documents=sources["document"],
        commands=sources["command"],
        headings=sources["navigation"],
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


# --- writing --------------------------------------------------------------------------------------


def _temp_file(directory: Path, name: str, data: bytes) -> Path:
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(temp, 0o644)
    return Path(temp)


def write_artifact_build(build: ArtifactBuild, out_dir: Path | str) -> tuple[Path, Path]:
    """Write ``knowledge.json`` and ``site.json`` into ``out_dir``, all or nothing.

    Both files are written to temporary files in ``out_dir`` first and then renamed over the
    targets, the artifact before the site configuration that trusts it. If the second rename
    fails the first is undone, and a folder this call created is removed again.

    Returns:
        The paths of the artifact and of the site configuration.

    Raises:
        BuildError: the folder or a file could not be written; nothing was changed.
    """
    folder = Path(out_dir)
    artifact_path, site_path = folder / ARTIFACT_FILE_NAME, folder / SITE_FILE_NAME
    created = not folder.exists()
    temps: list[Path] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temps.append(_temp_file(folder, ARTIFACT_FILE_NAME, build.artifact_json.encode("utf-8")))
        temps.append(_temp_file(folder, SITE_FILE_NAME, build.site_json.encode("utf-8")))
        previous = artifact_path.read_bytes() if artifact_path.is_file() else None
        os.replace(temps[0], artifact_path)
        try:
            os.replace(temps[1], site_path)
        except OSError:
            if previous is None:
                artifact_path.unlink(missing_ok=True)
            else:
                os.replace(_temp_file(folder, ARTIFACT_FILE_NAME, previous), artifact_path)
            raise
    except OSError as exc:
        for temp in temps:
            temp.unlink(missing_ok=True)
        if created:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise BuildError(
            f"cannot write the artifact: {exc.strerror or exc}", file=str(folder)
        ) from None
    return artifact_path, site_path
