"""One worker process of the confirmation race (``tests/actions/test_confirmation_workers.py``).

``python -m tests.actions._confirmation_worker PLAN`` reads a JSON plan (store URL, worker
name, executor log, ready and start files, and ``[session id, token]`` pairs), says it is
ready, waits for the start file, then approves every token as a real client would: each
decision resumes its session from the store (as one request of the chat server does) and
approves through a session-bound confirmation whose upstream appends the tool call id to the
executor log (``O_APPEND``, one line per run). It writes the status of every record it got
back to ``PLAN.out.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from agentskit_chat.conversation import resume_chat_session
from agentskit_chat.errors import SessionConflictError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.storage import open_chat_stores
from tests.conversation._support import ModelAdapter, definition

#: How often one decision may find its session changed by the other worker before it gives up.
MAX_CONFLICTS = 50


class Executor:
    """The upstream of the confirmation: approving runs the action, which logs its call id."""

    def __init__(self, log: Path, worker: str) -> None:
        self._log = log
        self._worker = worker

    async def propose_tool_call(self, *, id: str, name: str, args: Mapping[str, Any]) -> ToolCall:
        raise AssertionError("workers only decide")

    async def approve(self, tool_call_id: str) -> None:
        line = f"{tool_call_id} {self._worker}\n".encode()
        fd = os.open(self._log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        await anyio.sleep(0)

    async def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        raise AssertionError("workers only approve")


async def race(plan: dict[str, Any]) -> dict[str, Any]:
    chat_definition = definition(ModelAdapter())
    executor = Executor(Path(plan["log"]), plan["worker"])
    statuses: dict[str, str] = {}
    conflicts = 0
    stores = open_chat_stores(plan["store"])
    async with stores:
        Path(plan["ready"]).write_text("ready")
        while not Path(plan["start"]).exists():
            await anyio.sleep(0.005)
        started = time.perf_counter()
        for session_id, token in plan["calls"]:
            for _ in range(MAX_CONFLICTS):
                session = await resume_chat_session(
                    chat_definition, session_id=session_id, storage=stores.sessions
                )
                confirmation = session.create_confirmation(chat=executor)
                try:
                    record = await confirmation.approve(token, session_id)
                except SessionConflictError:
                    conflicts += 1  # the other worker saved this session meanwhile: reload
                    continue
                statuses[token] = record.status
                break
        elapsed = time.perf_counter() - started
    return {"statuses": statuses, "conflicts": conflicts, "seconds": elapsed}


def main() -> None:
    path = Path(sys.argv[1])
    plan = json.loads(path.read_text())
    result = anyio.run(race, plan)
    Path(f"{path}.out.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
