"""A docs assistant's start: its folder read once, and what it builds from the pages.

The pages are parsed once, by the chunker, which keeps on each page what the artifact producer
reads of it. With the start cache (no index file of the assistant's own), unchanged pages are
not parsed at all: the parts and the index are read back (``retrieval._index_cache``).

A large folder's pages are parsed by child processes too (``retrieval._page_workers``). When
the pages will be parsed (an index file of its own, or nothing cached yet for the folder) the
children start while the folder is still being read: their interpreters' start overlaps it.
The cyclic garbage collector is paused while the parts are built or read back
(:func:`collector_paused`).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Final, TypeVar

from agentskit_chat.answers import ArtifactBuild, DocsFolder, build_local_knowledge_artifact
from agentskit_chat.retrieval import SQLiteFTSRetriever, TermWeights
from agentskit_chat.retrieval._corpus import read_corpus, section_counts
from agentskit_chat.retrieval._docs_folder import read_docs_pages
from agentskit_chat.retrieval._index_cache import IndexNow, StartParts, cached_start, holds_entry
from agentskit_chat.retrieval._page_workers import PageWorkers

__all__ = ["collector_paused", "start_parts"]

T = TypeVar("T")


def start_parts(
    docs_dir: Path,
    *,
    site_id: str,
    href_prefix: str,
    index_path: Path | None,
    now: Callable[[], datetime] | None,
    prepare: Callable[[ArtifactBuild], T],
) -> tuple[DocsFolder, StartParts, SQLiteFTSRetriever | None, T]:
    """The folder as read, the parts built from its pages, (with the start cache, when
    ``index_path`` is ``None``) the search index, ``None`` for an index file of its own,
    which the caller opens and updates, and what ``prepare`` makes of the artifact build.

    A build made now is prepared while the start cache's index is still being written (the
    resolver's verification of the artifact fits in that wait); one read back from the cache
    is prepared after.

    Synchronous (file, SQLite and child process work): call it in a worker thread.

    Raises:
        BuildError: the folder is missing, holds no Markdown, or a page is unreadable.
        ConfigurationError: ``href_prefix`` cannot start a safe link.
    """
    prepared: list[T] = []
    with PageWorkers() as workers:
        parsed = index_path is not None or not holds_entry(docs_dir)
        folder = read_docs_pages(docs_dir, reading=workers.reading if parsed else None)
        make = partial(
            _make,
            folder,
            site_id=site_id,
            href_prefix=href_prefix,
            now=now,
            workers=workers,
            prepare=lambda build: prepared.append(prepare(build)),
        )
        with collector_paused():  # millions of objects made, few of them garbage in cycles
            if index_path is not None:
                return folder, make(None), None, prepared[0]
            parts, index = cached_start(folder, site_id=site_id, href_prefix=href_prefix, make=make)
        if not prepared:  # read back from the start cache
            try:
                prepared.append(prepare(parts.build))
            except BaseException:
                index.close()
                raise
        return folder, parts, index, prepared[0]


def _make(
    folder: DocsFolder,
    index_now: IndexNow | None,
    *,
    site_id: str,
    href_prefix: str,
    now: Callable[[], datetime] | None,
    workers: PageWorkers,
    prepare: Callable[[ArtifactBuild], object],
) -> StartParts:
    # Called with the collector paused (start_parts).
    corpus = read_corpus(
        folder.documents, href_prefix=href_prefix, root=folder.root, workers=workers
    )
    if index_now is not None:
        index_now(corpus)  # the start cache writes the search index meanwhile
    # Counted as the pages were read (a large folder: in child processes too); the words are
    # what a misspelled word of a question is corrected to: the words the docs write.
    counts = section_counts(corpus)
    weights = TermWeights(counts.terms, counts.sections)
    build = build_local_knowledge_artifact(
        folder, site_id=site_id, href_prefix=href_prefix, now=now
    )
    prepare(build)
    return StartParts(corpus, build, weights, counts.words)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a start builds its parts, on again afterwards
    if it was on before (and no other start still runs).

    A start makes millions of objects (a 5,000-page cold start: Markdown tokens, chunks, the
    artifact's entries) that reference counting frees as it goes or that live on; the collector
    walked them again and again while they were made: about a second of a six-second start.
    """
    with _PAUSES.lock:
        if _PAUSES.running == 0:
            _PAUSES.was_enabled = gc.isenabled()
            gc.disable()
        _PAUSES.running += 1
    try:
        yield
    finally:
        with _PAUSES.lock:
            _PAUSES.running -= 1
            if _PAUSES.running == 0 and _PAUSES.was_enabled:
                gc.enable()


class _Pauses:
    """How many starts run with the collector paused, and whether it was on before the first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.was_enabled = True


_PAUSES: Final = _Pauses()
