"""Reading the pages of a large docs folder in child processes too: a faster cold start.

Parsing Markdown is most of a cold start. When a folder holds at least
:data:`MIN_SHARED_CHARS` characters of Markdown and this process may use more than one core,
the pages are cut into batches in page order; this process reads batches, and so does each
child (at most one per other core, at most :data:`MAX_CHILDREN`), taking the next batch when
it is done with one. A child is a fresh Python (``-c``, with this process's import path): it
is never forked from this process (which runs threads) and never imports the application's
``__main__``. No child is started inside a ``multiprocessing`` child (a uvicorn worker: the
workers share the cores already) or from a frozen application.

The result is the serial one exactly: every page is read by the same pure function, and the
batches are put back in page order. A child that fails for any reason (it cannot start, it
exits, a page of its batch raises) costs time only: the batches it did not return are read in
this process, in order, after the others, so a page that cannot be read raises here what it
raises when read alone.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from multiprocessing import parent_process
from typing import IO, Any, Final, TypeVar

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
#: Each message: this mark, its length, its pickle (a child that writes anything else fails).
_MARK: Final = b"akc1"
_HEADER: Final = struct.Struct("!4sQ")
_MAX_MESSAGE: Final = 1 << 31
_CHILD: Final = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from agentskit_chat.retrieval._corpus import read_batch; "
    "from agentskit_chat.retrieval._page_workers import serve; serve(read_batch)"
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
    results: list[tuple[T] | None] = [None] * len(batches)
    handout = _Handout(len(batches))
    helpers = [
        threading.Thread(target=_help, args=(batches, results, handout, prefix), daemon=True)
        for _ in range(children)
    ]
    for helper in helpers:
        helper.start()
    try:
        while (index := handout.take()) is not None:
            try:
                results[index] = (read(batches[index]),)
            except Exception:  # read again below, in page order, to raise
                continue
    finally:
        handout.close()
        for helper in helpers:
            helper.join()
    return [
        done[0] if done is not None else read(batch)
        for done, batch in zip(results, batches, strict=True)
    ]


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


class _Handout:
    """The next batch to read, for this process and its helpers alike, until closed."""

    def __init__(self, total: int) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._total = total

    def take(self) -> int | None:
        with self._lock:
            if self._next >= self._total:
                return None
            self._next += 1
            return self._next - 1

    def close(self) -> None:
        with self._lock:
            self._next = self._total


def _help(
    batches: Sequence[Sequence[SourceDocument]],
    results: list[tuple[Any] | None],
    handout: _Handout,
    prefix: str,
) -> None:
    """One child's helper thread: it hands batches to the child until none is left or the
    child fails (a batch it took and did not return stays unread, for the caller)."""
    path = json.dumps([entry for entry in sys.path if isinstance(entry, str)])
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return
    assert child.stdin is not None and child.stdout is not None  # both are pipes
    try:
        while (index := handout.take()) is not None:
            _send(child.stdin, (prefix, batches[index]))
            read = _receive(child.stdout)
            if not isinstance(read, tuple) or len(read) != 1:
                return
            results[index] = read
    except Exception:  # the child failed: its batch is read by the caller
        return
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()


def _send(stream: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(_MARK, len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    """The next value written with :func:`_send`; ``None`` at the end of the stream or when
    what comes is not such a value."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    mark, size = _HEADER.unpack(header)
    if mark != _MARK or size > _MAX_MESSAGE:
        return None
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # written by our own child (or parent) process


def serve(read_batch: Callable[..., object]) -> None:
    """A child's loop: read each batch of pages sent on stdin with ``read_batch`` (the
    corpus's: ``read_batch(pages, prefix=prefix)``), write what was read to stdout, until stdin
    ends. A page that cannot be read ends the child (the parent reads its batch again)."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (message := _receive(stdin)) is not None:
        prefix, pages = message
        _send(stdout, (read_batch(pages, prefix=prefix),))
