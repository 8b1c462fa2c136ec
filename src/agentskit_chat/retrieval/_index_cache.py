"""The on-disk cache of search indexes: a docs folder's SQLite FTS5 index, reused across starts.

Each index file is named by a key: the SHA-256 of the index format, the chunking settings and
every document's path and content hash. A start whose documents hash to a key with a file
opens that file read-only (it is checked against the documents again); any other start builds
a new file under a temporary name and renames it into place, then removes the folder's older
files. A file is never written after it is named, so an index never serves other documents
than its own: change one page and the key, hence the file, changes.

The cache lives in ``$AGENTSKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentskit-chat``, else
``~/.cache/agentskit-chat``, under ``index/<16 hex of the docs folder's absolute path>/``.
Deleting it is always safe: the next start builds the index again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from pathlib import Path
from typing import Final

from agentskit_chat.errors import RetrievalError

from ._corpus import MarkdownCorpus
from ._sqlite_fts import INDEX_FORMAT, SQLiteFTSRetriever

__all__ = [
    "CACHE_DIR_ENV",
    "cache_root",
    "cached_or_memory_index",
    "index_key",
    "open_cached_index",
]

#: The environment variable naming the cache folder.
CACHE_DIR_ENV: Final = "AGENTSKIT_CACHE_DIR"
_PREFIX: Final = "index-"
_SUFFIX: Final = ".sqlite3"


def cache_root() -> Path:
    """The cache folder: ``$AGENTSKIT_CACHE_DIR``, ``$XDG_CACHE_HOME/agentskit-chat`` or
    ``~/.cache/agentskit-chat``."""
    chosen = os.environ.get(CACHE_DIR_ENV, "").strip()
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "agentskit-chat"


def index_key(corpus: MarkdownCorpus) -> str:
    """The hex SHA-256 naming ``corpus``'s index: format, settings, every path and hash."""
    digest = hashlib.sha256(f"{INDEX_FORMAT}\n{corpus.settings}\n".encode())
    for path, sha256 in sorted(corpus.manifest.items()):
        digest.update(f"{path}\0{sha256}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _folder(root: Path, docs_dir: Path) -> Path:
    where = os.fspath(docs_dir.resolve()).encode("utf-8", "surrogatepass")
    return root / "index" / hashlib.sha256(where).hexdigest()[:16]


def open_cached_index(
    docs_dir: Path, corpus: MarkdownCorpus, *, root: Path | None = None
) -> SQLiteFTSRetriever:
    """``corpus``'s index from the cache, built there first when it is not cached yet.

    Synchronous (file and SQLite work): call it in a worker thread.

    Args:
        docs_dir: The folder the corpus was read from (it names the cache's sub-folder).
        corpus: The documents to search.
        root: The cache folder; by default :func:`cache_root`.

    Raises:
        RetrievalError: the cache folder or the index file cannot be written or read.
    """
    folder = _folder(cache_root() if root is None else root, docs_dir)
    path = folder / f"{_PREFIX}{index_key(corpus)[:32]}{_SUFFIX}"
    if path.is_file():
        with contextlib.suppress(RetrievalError):
            return SQLiteFTSRetriever.read_only(path, corpus=corpus)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        raise RetrievalError("The index cache folder could not be created.") from None
    temporary = folder / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        built = SQLiteFTSRetriever(temporary, corpus=corpus)
        report = built.last_report
        built.seal()
        os.replace(temporary, path)
    except OSError:
        raise RetrievalError("The index cache file could not be written.") from None
    finally:
        for leftover in (temporary, *(temporary.with_name(temporary.name + s) for s in _SIDE)):
            with contextlib.suppress(OSError):
                leftover.unlink()
    for stale in folder.glob(f"{_PREFIX}*{_SUFFIX}"):
        if stale != path:
            # A process still searching an older file keeps it open; it is not written again.
            with contextlib.suppress(OSError):
                stale.unlink()
    return SQLiteFTSRetriever.read_only(path, corpus=corpus, report=report)


def cached_or_memory_index(docs_dir: Path, corpus: MarkdownCorpus) -> SQLiteFTSRetriever:
    """:func:`open_cached_index`, or an index in memory when the cache cannot be used (a
    read-only home folder, a full disk): the cache saves time, it is never required."""
    try:
        return open_cached_index(docs_dir, corpus)
    except RetrievalError:
        return SQLiteFTSRetriever(":memory:", corpus=corpus)


#: What SQLite may leave beside a database file.
_SIDE: Final = ("-wal", "-shm", "-journal")
