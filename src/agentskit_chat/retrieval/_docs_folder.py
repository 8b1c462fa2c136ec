"""A docs folder on disk: the one reader of its pages, and the writer of artifacts beside it.

:func:`read_docs_folder` is the only code that walks a folder of Markdown. Its rule, for the
artifact producer and the retrieval corpus alike:

- pages are files ending in ``.md`` or ``.markdown``, in any letter case, sorted by path;
- a file or folder whose name starts with ``.`` is skipped;
- a symbolic link (to a file or a folder) is not followed, and is reported as left out;
- a page must be UTF-8 (a leading byte-order mark is dropped); its front matter must be
  closed and valid, or the read fails naming the file and the line.

:func:`write_artifact_build` writes a built artifact and its site configuration, all or nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

from agentskit_chat.answers import (
    ARTIFACT_FILE_NAME,
    SITE_FILE_NAME,
    ArtifactBuild,
    DocsFolder,
    LeftOut,
    SourceDocument,
    is_markdown_name,
)
from agentskit_chat.errors import BuildError

__all__ = ["SYMLINK_LEFT_OUT", "read_docs_folder", "read_docs_pages", "write_artifact_build"]

#: Why a symbolic link was not read.
SYMLINK_LEFT_OUT: Final = "symbolic links are not followed"


def read_docs_folder(docs_dir: str | Path) -> DocsFolder:
    """Read every Markdown page under ``docs_dir`` (see the module documentation for the rule).

    Raises:
        BuildError: the folder does not exist or cannot be listed, a page cannot be read or is
            not UTF-8, or its front matter is malformed; the message names the file and line.

    Example:
        >>> folder = read_docs_folder("docs")  # doctest: +SKIP
        >>> [page.path for page in folder.documents][:2]  # doctest: +SKIP
        ['answers.md', 'architecture.md']
    """
    return read_docs_pages(docs_dir)


def read_docs_pages(
    docs_dir: str | Path, *, reading: Callable[[int], None] | None = None
) -> DocsFolder:
    """:func:`read_docs_folder`, telling ``reading`` the size in bytes of the pages read so far
    after each page: work that a large folder needs can start while the rest is read.

    Raises:
        BuildError: as :func:`read_docs_folder`; and what ``reading`` raises.
    """
    root = Path(docs_dir)
    if not root.is_dir():
        raise BuildError("the docs folder does not exist or is not a folder", file=str(root))

    def fail(error: OSError) -> None:
        raise BuildError(f"cannot read the folder: {error.strerror}", file=str(error.filename))

    found: list[tuple[str, Path]] = []
    skipped: list[LeftOut] = []
    for folder, dirs, files in os.walk(root, onerror=fail):
        base = Path(folder)
        kept: list[str] = []
        for name in dirs:
            if name.startswith("."):
                continue
            if (base / name).is_symlink():
                rel = (base / name).relative_to(root).as_posix()
                skipped.append(LeftOut("file", rel, name, SYMLINK_LEFT_OUT))
            else:
                kept.append(name)
        dirs[:] = kept
        for name in files:
            if not is_markdown_name(name):
                continue
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                skipped.append(LeftOut("file", rel, name, SYMLINK_LEFT_OUT))
            else:
                found.append((rel, path))
    documents: list[SourceDocument] = []
    size = 0
    for rel, path in sorted(found):
        page, taken = _read_page(root, rel, path)
        documents.append(page)
        size += taken
        if reading is not None:
            reading(size)
    return DocsFolder(root, tuple(documents), tuple(sorted(skipped, key=lambda item: item.file)))


def _read_page(root: Path, rel: str, path: Path) -> tuple[SourceDocument, int]:
    """The page, and its size in bytes."""
    display = str(root / rel)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BuildError(f"cannot read the file: {exc.strerror or exc}", file=display) from None
    digest = hashlib.sha256(data).hexdigest()
    content = data.removeprefix(b"\xef\xbb\xbf")
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = content[: exc.start].count(b"\n") + 1
        raise BuildError("the file is not valid UTF-8", file=display, line=line) from None
    return SourceDocument.from_text(rel, text, display=display, sha256=digest), len(data)


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
