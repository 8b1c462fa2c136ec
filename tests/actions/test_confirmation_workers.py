"""The confirmation race across processes: two workers approve the same 1,000 calls at once.

Every call is a pending, session-bound confirmation stored in a real store (a SQLite file,
PostgreSQL, Redis). Two worker processes start together and approve every token in the same
order, each decision resuming its session from the store as one request of the chat server
does. The executor (the confirmation's upstream) appends each call id it runs to one
``O_APPEND`` file. Afterwards: every call ran exactly once, every stored record is
``approved``, and both workers got the terminal record back for every call, including the
ones the other worker ran. A token presented to another session is refused and runs nothing.

``AGENTSKIT_CONFIRMATION_RACE_CALLS`` sets the number of calls (1,000 by default).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, Final

import pytest

from agentskit_chat.conversation import resume_chat_session
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.storage import open_chat_stores
from tests.actions._support import TOOL
from tests.conversation._support import ModelAdapter, definition

pytestmark = pytest.mark.anyio

CALLS: Final = int(os.environ.get("AGENTSKIT_CONFIRMATION_RACE_CALLS", "1000"))
PER_SESSION: Final = 10
ROOT: Final = Path(__file__).parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Proposer:
    """The upstream while the calls are proposed: every call waits for a confirmation."""

    async def propose_tool_call(self, *, id: str, name: str, args: Mapping[str, Any]) -> ToolCall:
        return ToolCall(id=id, name=name, args=dict(args), status="requires_confirmation")

    async def approve(self, tool_call_id: str) -> None:
        raise AssertionError("nothing is approved while proposing")

    async def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        raise AssertionError("nothing is denied while proposing")


async def stored_statuses(stores: Any, session_ids: list[str]) -> dict[str, str]:
    statuses: dict[str, str] = {}
    for session_id in session_ids:
        raw = await stores.sessions.load(session_id)
        assert raw is not None
        snapshot = json.loads(raw) if isinstance(raw, str) else dict(raw)
        for record in snapshot["confirmations"]:
            statuses[record["token"]] = record["status"]
    return statuses


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "redis"])
async def test_two_workers_approving_the_same_calls_run_each_exactly_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        store = f"sqlite:///{tmp_path / 'chat.db'}"
    else:
        store = request.getfixturevalue("postgres_url" if backend == "postgresql" else "redis_url")
    run = uuid.uuid4().hex[:8]
    chat_definition = definition(ModelAdapter())
    sessions = [f"race-{run}-{n}" for n in range(max(2, -(-CALLS // PER_SESSION)))]
    calls: list[tuple[str, str]] = []
    tool_calls: set[str] = set()
    stores = open_chat_stores(store)
    async with stores:
        for number in range(CALLS):
            session_id = sessions[number // PER_SESSION]
            session = await resume_chat_session(
                chat_definition, session_id=session_id, storage=stores.sessions
            )
            confirmation = session.create_confirmation(
                chat=Proposer(), create_id=partial(str.format, "{}-{}", run, number)
            )
            record = await confirmation.propose(
                name=TOOL, input={"to": f"user{number}@example.com"}
            )
            assert record.status == "pending"
            calls.append((session_id, record.token))
            tool_calls.add(record.tool_call_id)
        assert len(calls) == CALLS and len(tool_calls) == CALLS

        # A token is bound to its session: another session refuses it and runs nothing.
        foreign = await resume_chat_session(
            chat_definition, session_id=sessions[-1], storage=stores.sessions
        )
        with pytest.raises(ConfigurationError):
            await foreign.create_confirmation(chat=Proposer()).approve(calls[0][1], sessions[-1])
        assert (await stored_statuses(stores, [calls[0][0]]))[calls[0][1]] == "pending"

        log = tmp_path / "executed.log"
        start = tmp_path / "start"
        workers = []
        for name in ("one", "two"):
            plan = tmp_path / f"plan-{name}.json"
            plan.write_text(
                json.dumps(
                    {
                        "store": store,
                        "worker": name,
                        "log": str(log),
                        "ready": str(tmp_path / f"ready-{name}"),
                        "start": str(start),
                        "calls": calls,
                    }
                )
            )
            workers.append(
                (
                    plan,
                    subprocess.Popen(
                        [sys.executable, "-m", "tests.actions._confirmation_worker", str(plan)],
                        cwd=ROOT,
                        env={**os.environ, "PYTHONPATH": str(ROOT)},
                    ),
                )
            )
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready-{name}").exists() for name in ("one", "two")):
            assert time.monotonic() < deadline, "the workers did not start"
            assert all(process.poll() is None for _, process in workers)
            time.sleep(0.01)
        start.write_text("go")
        results = []
        for plan, process in workers:
            assert process.wait(timeout=600) == 0
            results.append(json.loads(Path(f"{plan}.out.json").read_text()))

        executed = [line.split()[0] for line in log.read_text().splitlines()]
        assert executed, "nothing ran"
        # Exactly once per call: no call ran twice, none was left out.
        assert len(executed) == CALLS
        assert set(executed) == tool_calls
        # Both workers got the terminal record of every call back, the loser of each race too.
        for result in results:
            assert len(result["statuses"]) == CALLS
            assert set(result["statuses"].values()) == {"approved"}
        assert set((await stored_statuses(stores, sessions)).values()) == {"approved"}
    by_worker = {
        name: sum(1 for line in log.read_text().splitlines() if line.endswith(name))
        for name in ("one", "two")
    }
    print(
        f"\n{backend}: {CALLS} calls, executed by worker {by_worker}, "
        f"session conflicts reloaded {[r['conflicts'] for r in results]}, "
        f"seconds {[round(r['seconds'], 1) for r in results]}"
    )
