"""Reading the pages of a large docs folder in child processes too: a faster cold start.

Parsing Markdown is most of a cold start. When a folder holds at least
:data:`MIN_SHARED_CHARS` characters of Markdown and this process may use more than one core,
the pages are cut into batches in page order and written to a private temporary folder; this
process reads batches from the first on, and each child (at most one per other core, at most
:data:`MAX_CHILDREN`) from the last on, each batch claimed by creating its claim file (only
one creator succeeds) and a child's result written beside it. No thread, no pipe: nothing here
waits for the interpreter lock while this process parses. A child is a fresh Python (``-c``,
with this process's import path): it is never forked from this process (which runs threads)
and never imports the application's ``__main__``. No child is started inside a
``multiprocessing`` child (a uvicorn worker: the workers share the cores already) or from a
frozen application.

The result is the serial one exactly: every batch is read by the same pure function, and the
batches are put back in page order. A child that fails for any reason (it cannot start, it
exits, a page of its batch raises) costs time only: a batch it claimed and did not write is
read here, in order, so a page that cannot be read raises here what it raises when read alone.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from multiprocessing import parent_process
from pathlib import Path
from typing import Final, TypeVar

from agentskit_chat.answers import SourceDocument

__all__ = ["MAX_CHILDREN", "MIN_SHARED_CHARS", "children_for", "read_shared", "serve"]

T = TypeVar("T")

#: A folder with less Markdown than this (in characters) is read in this process alone: a
#: child's start (importing the package, about half a second) would cost more than it saves.
MIN_SHARED_CHARS: Final = 2_000_000
#: At most this many children help, whatever the number of cores.
MAX_CHILDREN: Final = 3
#: Pages are handed out in batches of about this many characters.
_BATCH_CHARS: Final = 200_000
#: How often this process looks for a child's batch it waits for, in seconds.
_POLL: Final = 0.005
_PAGES: Final = "pages.pickle"
#: How long this process waits for a batch a child claimed, in seconds, before it stops the
#: children and reads the batch itself (a batch takes a child a fraction of a second).
_STALLED: Final = 30.0
#: How long a child waits for the pages, in seconds, before it gives up.
_PAGES_WAIT: Final = 60.0
_CHILD: Final = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from agentskit_chat.retrieval._corpus import read_batch; "
    "from agentskit_chat.retrieval._page_workers import serve; serve(read_batch, sys.argv[2])"
)


def children_for(pages: Sequence[SourceDocument]) -> int:
    """How many child processes help read ``pages`` (see the module documentation): 0 for a
    small folder, on one core, inside a ``multiprocessing`` child, or in a frozen application.
    """
    if sum(len(page.text) for page in pages) < MIN_SHARED_CHARS:
        return 0
    if getattr(sys, "frozen", False) or not sys.executable or parent_process() is not None:
        return 0
    return max(0, min(_cores() - 1, MAX_CHILDREN))


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - platforms without CPU affinity


def read_shared(
    pages: Sequence[SourceDocument],
    read: Callable[[Sequence[SourceDocument]], T],
    *,
    prefix: str,
    children: int,
) -> list[T]:
    """``read(batch)`` of each batch of ``pages``, in order, read here and by ``children``
    child processes.

    A child reads a batch with :func:`~agentskit_chat.retrieval._corpus.read_batch` and
    ``prefix``: ``read`` must read a batch just as that does.
    """
    batches = _batches(pages)
    try:
        folder = Path(tempfile.mkdtemp(prefix="agentskit-pages-"))
    except OSError:  # no temporary folder: read here alone
        return [read(batch) for batch in batches]
    started: list[subprocess.Popen[bytes] | None] = []
    try:
        for _ in range(children):  # one by one: an interrupt stops those already started
            started.append(_start(folder))
        # Written while the children start, and renamed into place whole.
        written = folder / f"{_PAGES}.partial"
        try:
            written.write_bytes(pickle.dumps((prefix, batches), protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(written, folder / _PAGES)
        except OSError:  # a full temporary folder: read here alone
            return [read(batch) for batch in batches]
        return _read_with(batches, read, folder, [child for child in started if child])
    finally:
        for child in started:
            if child:
                child.kill()
                child.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _start(folder: Path) -> subprocess.Popen[bytes] | None:
    path = json.dumps([entry for entry in sys.path if isinstance(entry, str)])
    try:
        return subprocess.Popen(
            [sys.executable, "-c", _CHILD, path, os.fspath(folder)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None


def _read_with(
    batches: Sequence[Sequence[SourceDocument]],
    read: Callable[[Sequence[SourceDocument]], T],
    folder: Path,
    children: Sequence[subprocess.Popen[bytes]],
) -> list[T]:
    results: dict[int, T] = {}
    mine: set[int] = set()
    for index in range(len(batches)):
        if not _claim(folder, index):
            break  # the children claim from the last batch on: the rest is theirs
        mine.add(index)
        try:
            results[index] = read(batches[index])
        except Exception:  # read again below, in page order, to raise
            continue
    read_all: list[T] = []
    for index, batch in enumerate(batches):
        if index in results:
            read_all.append(results[index])
            continue
        written: tuple[T] | None = None if index in mine else _written(folder, index, children)
        read_all.append(read(batch) if written is None else written[0])
    return read_all


def _claim(folder: Path, index: int) -> bool:
    """Whether this process claimed the batch (created its claim file) before any other; not
    when the file cannot be created (a batch no one claims is read by the parent at the end)."""
    try:
        os.close(os.open(folder / f"{index}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except OSError:
        return False
    return True


def _written(
    folder: Path, index: int, children: Sequence[subprocess.Popen[bytes]]
) -> tuple[T] | None:
    """The batch a child claimed, once written; ``None`` when no child will write it (every
    child has ended, or none wrote a batch for :data:`_STALLED` seconds: they are stopped)."""
    result = folder / f"{index}.result"
    since = time.monotonic()
    while not result.exists():
        if all(child.poll() is not None for child in children) and not result.exists():
            return None  # every child has ended (one of them failed on this batch)
        if time.monotonic() - since > _STALLED:
            for child in children:
                child.kill()
            return None
        time.sleep(_POLL)
    try:
        written: object = pickle.loads(result.read_bytes())  # written by our own child
    except Exception:  # a result that cannot be read: read here
        return None
    if isinstance(written, tuple) and len(written) == 1:
        return written  # read_batch's result, as ``read``'s
    return None


def _batches(pages: Sequence[SourceDocument]) -> list[Sequence[SourceDocument]]:
    batches: list[Sequence[SourceDocument]] = []
    start = size = 0
    for index, page in enumerate(pages):
        size += len(page.text)
        if size >= _BATCH_CHARS:
            batches.append(pages[start : index + 1])
            start, size = index + 1, 0
    if start < len(pages):
        batches.append(pages[start:])
    return batches


def serve(read_batch: Callable[..., object], folder: str) -> None:
    """A child's work: claim batches from the last one on, read each with ``read_batch`` (the
    corpus's: ``read_batch(pages, prefix=prefix)``) and write the result beside its claim,
    passing over the batches claimed already. A page that cannot be read ends the child (the
    parent reads its batch again).

    The cyclic garbage collector is off in the child: the batches' objects are freed by
    reference counting as they go (a fifth of a child's time was spent walking them), and the
    child ends when the batches are read."""
    gc.disable()
    where = Path(folder)
    pages = where / _PAGES
    waited = 0.0
    while not pages.exists():  # the parent writes them while this child starts
        if waited > _PAGES_WAIT:
            return
        time.sleep(_POLL)
        waited += _POLL
    prefix, batches = pickle.loads(pages.read_bytes())
    for index in reversed(range(len(batches))):
        if not _claim(where, index):
            continue  # taken by the parent (then all below are) or by another child
        data = pickle.dumps((read_batch(batches[index], prefix=prefix),), protocol=-1)
        partial = where / f"{index}.partial-{os.getpid()}"
        partial.write_bytes(data)
        os.replace(partial, where / f"{index}.result")
