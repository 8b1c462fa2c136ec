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

Children may start before the pages are known (:class:`PageWorkers`): a start that will parse
its pages starts them as soon as the part of the folder read so far is large enough, and their
interpreters start while the rest is read. This process takes in the children's batches as
they are written, between batches of its own; their objects cross as the calls that make them
(:func:`pickle_by_fields`), not as slotted dataclasses' state.

The result is the serial one exactly: every batch is read by the same pure function, and the
batches are put back in page order. A child that fails for any reason (it cannot start, it
exits, a page of its batch raises) costs time only: a batch it claimed and did not write is
read here, in order, so a page that cannot be read raises here what it raises when read alone.
"""

from __future__ import annotations

import copyreg
import dataclasses
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
from functools import partial
from multiprocessing import parent_process
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from agentskit_chat.answers import SourceDocument

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "MAX_CHILDREN",
    "MIN_SHARED_CHARS",
    "PageWorkers",
    "children_for",
    "pickle_by_fields",
    "read_shared",
    "serve",
]

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
    return _helpers()


def _helpers() -> int:
    """How many children help read a large folder here (see :func:`children_for`)."""
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
    child processes (:meth:`PageWorkers.read` with children started now).

    A child reads a batch with :func:`~agentskit_chat.retrieval._corpus.read_batch` and
    ``prefix``: ``read`` must read a batch just as that does.
    """
    return PageWorkers().read(pages, read, prefix=prefix, children=children)


class PageWorkers:
    """The child processes that help one read of pages: started when the pages are read
    (:meth:`read`), or earlier, while the folder is still being read (:meth:`reading`), so
    that a child's start (a fresh Python importing the package) overlaps that reading.

    Used once: :meth:`read` stops the children when it returns. :meth:`close` (or leaving a
    ``with`` block) stops children that never read, when the pages are not parsed after all
    (the start cache held them) or reading the folder failed.
    """

    def __init__(self) -> None:
        self._folder: Path | None = None
        self._children: list[subprocess.Popen[bytes]] = []
        self._closed = False
        self._large = False  # whether the pages read so far were large enough for children

    def __enter__(self) -> PageWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def started(self) -> int:
        """How many children were started and not stopped yet."""
        return len(self._children)

    def start(self, children: int) -> None:
        """Start ``children`` children now, unless some were started already or this read is
        over; none when no temporary folder can be made (the pages are then read here)."""
        if self._closed or self._folder is not None or children <= 0:
            return
        try:
            self._folder = Path(tempfile.mkdtemp(prefix="agentskit-pages-"))
        except OSError:  # no temporary folder: read here alone
            return
        for _ in range(children):  # one by one: an interrupt stops those already started
            child = _start(self._folder)
            if child is not None:
                self._children.append(child)

    def reading(self, size: int) -> None:
        """Told the size in bytes of the pages read so far: start the children as soon as
        the folder is large enough for them (:data:`MIN_SHARED_CHARS`; a character takes at
        least a byte), while the rest of it is read."""
        if size >= MIN_SHARED_CHARS and not self._large:
            self._large = True
            self.start(_helpers())

    def read(
        self,
        pages: Sequence[SourceDocument],
        read: Callable[[Sequence[SourceDocument]], T],
        *,
        prefix: str,
        children: int,
    ) -> list[T]:
        """``read(batch)`` of each batch of ``pages``, in order, read here and by the children
        started already, else by ``children`` children started now; then the children are
        stopped.

        A child reads a batch with :func:`~agentskit_chat.retrieval._corpus.read_batch` and
        ``prefix``: ``read`` must read a batch just as that does.
        """
        batches = _batches(pages)
        try:
            self.start(children)
            if self._folder is None or self._closed:
                return [read(batch) for batch in batches]
            # Written while the children start, and renamed into place whole.
            written = self._folder / f"{_PAGES}.partial"
            try:
                written.write_bytes(
                    pickle.dumps((prefix, batches), protocol=pickle.HIGHEST_PROTOCOL)
                )
                os.replace(written, self._folder / _PAGES)
            except OSError:  # a full temporary folder: read here alone
                return [read(batch) for batch in batches]
            return _read_with(batches, read, self._folder, self._children)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the children and remove their folder (nothing is read with them after)."""
        self._closed = True
        children, self._children = self._children, []
        for child in children:
            child.kill()
            child.wait()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


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
    theirs = len(batches) - 1  # the next batch a child may have written, from the last on
    for index in range(len(batches)):
        if not _claim(folder, index):
            break  # the children claim from the last batch on: the rest is theirs
        mine.add(index)
        try:
            results[index] = read(batches[index])
        except Exception:  # read again below, in page order, to raise
            continue
        # The children's batches written meanwhile are taken in now, while they still read:
        # fewer are left to load at the end, when no child helps any more.
        while theirs > index and (folder / f"{theirs}.result").exists():
            taken: tuple[T] | None = _result(folder, theirs)
            if taken is not None:  # else read here below
                results[theirs] = taken[0]
            theirs -= 1
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
    return _result(folder, index)


def _result(folder: Path, index: int) -> tuple[T] | None:
    """The batch a child wrote; ``None`` when its result cannot be read (read it here)."""
    try:
        written: object = pickle.loads((folder / f"{index}.result").read_bytes())
    except Exception:  # a result that cannot be read (our own child wrote it)
        return None
    if isinstance(written, tuple) and len(written) == 1:
        return written  # read_batch's result, as ``read``'s
    return None


def pickle_by_fields(*classes: type[DataclassInstance]) -> None:
    """Pickle the objects of the dataclasses ``classes`` as the call that makes them: the
    class and its fields' values, in order. A batch's result (thousands of chunks and
    headings) then crosses from a child in half the time: a slotted dataclass's own state
    runs a Python function that lists its fields for every object, each way.

    Only for classes that make the very same object again from their fields' values (no
    ``__post_init__``, no field left out of ``__init__``).
    """
    for cls in classes:
        names = tuple(field.name for field in dataclasses.fields(cls))
        assert len(names) > 1  # attrgetter gives a tuple
        copyreg.pickle(cls, partial(_made_from, attrgetter(*names)))


def _made_from(
    values: Callable[[DataclassInstance], tuple[object, ...]], made: DataclassInstance
) -> tuple[type[DataclassInstance], tuple[object, ...]]:
    """How :func:`pickle_by_fields` pickles ``made``: its class, called with its values."""
    return type(made), values(made)


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
