"""One client of the confirmation race: ``python -m tests.actions._race_worker JOB.json``.

The job file names the store URL, this worker's name, the ``(session id, token)`` pairs to
approve, four paths (a ready file this worker creates once its store is open, a start file it
waits for so both workers begin at the same moment, the executor file and its result file) and
two inherited pipe descriptors to the other worker.

For each pair, in order, the worker resumes the session from storage, meets the other worker
through the pipes (so both resumed the session before either claims the call), and approves the
token through an upstream whose ``approve`` appends ``<tool call id> <worker>`` as one line to
the executor file (opened with ``O_APPEND``, so lines of two processes never interleave). The
result file holds, per token, the statuses the resumed session saw, the status of the record
``approve`` returned, and the error it raised, if any.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from agentskit_chat.conversation import resume_chat_session
from agentskit_chat.protocol import ToolCall
from agentskit_chat.storage import open_chat_stores
from tests.conversation._support import Clock, ModelAdapter, definition


class AppendingExecutor:
    """The upstream of one worker: each approval is one line appended to a shared file."""

    def __init__(self, path: str, worker: str) -> None:
        self.path = path
        self.worker = worker

    async def propose_tool_call(self, *, id: str, name: str, args: Mapping[str, Any]) -> ToolCall:
        raise AssertionError("a racing worker never proposes")

    async def approve(self, tool_call_id: str) -> None:
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, f"{tool_call_id} {self.worker}\n".encode())
        finally:
            os.close(descriptor)
        await anyio.sleep(0)

    async def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        raise AssertionError(f"a racing worker never denies ({tool_call_id}: {reason})")


async def meet(signal: int, wait: int) -> None:
    """Tell the other worker this one is ready, then wait until it says the same."""
    os.write(signal, b".")
    await anyio.wait_readable(wait)
    # End of file (the other worker exited) also wakes this one: it then races alone.
    os.read(wait, 1)


async def race(job: dict[str, Any]) -> list[dict[str, Any]]:
    chat_definition = definition(ModelAdapter())
    executor = AppendingExecutor(job["executor"], job["worker"])
    clock = Clock()
    results: list[dict[str, Any]] = []
    async with open_chat_stores(job["url"]) as stores:
        Path(job["ready"]).touch()
        start = Path(job["start"])
        while not start.exists():
            await anyio.sleep(0.001)
        for session_id, token in job["pairs"]:
            result: dict[str, Any] = {"token": token, "seen": None, "status": None, "error": None}
            session = None
            try:
                session = await resume_chat_session(
                    chat_definition, session_id=session_id, storage=stores.sessions, now=clock
                )
                result["seen"] = [r.status for r in session.confirmations if r.token == token]
            except Exception as error:
                result["error"] = f"{type(error).__name__}: {error}"
            await meet(job["signal"], job["wait"])
            if session is None:
                results.append(result)
                continue
            try:
                confirmation = session.create_confirmation(chat=executor)
                result["status"] = (await confirmation.approve(token, session_id)).status
            except Exception as error:
                result["error"] = f"{type(error).__name__}: {error}"
            results.append(result)
    return results


def main(argv: list[str]) -> None:
    job = json.loads(Path(argv[1]).read_text("utf-8"))
    results = anyio.run(race, job)
    Path(job["result"]).write_text(json.dumps(results), "utf-8")


if __name__ == "__main__":
    main(sys.argv)
