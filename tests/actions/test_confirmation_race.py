"""Confirmation races across processes, on SQLite, PostgreSQL and Redis.

Two worker processes (``tests.actions._race_worker``) resume the same stored sessions and race
to approve the same pending calls, in the same order, from the same moment; before each claim
they meet, so both resumed the session while the call was still pending. Each approval's
status is claimed by a compare-and-set save before the upstream runs, so the executor (a line
appended to a shared file) runs exactly once per call, and the worker that lost a claim gets
the winner's terminal record instead of an error. A token presented to another session is
refused and runs nothing.

``AGENTSKIT_CONFIRMATION_RACE_CALLS`` sets how many calls race (1,000 by default).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Final

import anyio
import pytest

from agentskit_chat.conversation import ChatSession, create_chat_session, resume_chat_session
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.storage import ChatStores, open_chat_stores
from tests.conversation._support import Clock, ModelAdapter, definition

from ._race_worker import AppendingExecutor
from ._support import TOOL, ScriptedChat

pytestmark = pytest.mark.anyio

CALLS: Final = int(os.environ.get("AGENTSKIT_CONFIRMATION_RACE_CALLS", "1000"))
WORKERS: Final = ("w1", "w2")
#: How long a worker may take for the whole race before the test gives up on it.
WORKER_TIMEOUT_S: Final = 600.0
ROOT: Final = Path(__file__).resolve().parents[2]
BACKENDS: Final = ("sqlite", "postgresql", "redis")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'race.db'}"
    fixture = "postgres_url" if backend == "postgresql" else "redis_url"
    url: str = request.getfixturevalue(fixture)
    return url


async def stored_status(stores: ChatStores, session_id: str) -> list[str]:
    raw = await stores.sessions.load(session_id)
    assert raw is not None
    snapshot = json.loads(raw) if isinstance(raw, str) else dict(raw)
    return [c["status"] for c in snapshot["confirmations"]]


async def propose(stores: ChatStores, session_id: str) -> str:
    """A new stored session ``session_id`` holding one pending call; its token."""
    session = create_chat_session(
        definition(ModelAdapter()), session_id=session_id, storage=stores.sessions, now=Clock()
    )
    confirmation = session.create_confirmation(chat=ScriptedChat(), create_id=lambda: session_id)
    record = await confirmation.propose(name=TOOL, input={"to": f"{session_id}@example.com"})
    assert record.status == "pending"
    assert record.tool_call_id == f"app-{session_id}"
    return record.token


async def resume(stores: ChatStores, session_id: str) -> ChatSession:
    return await resume_chat_session(
        definition(ModelAdapter()), session_id=session_id, storage=stores.sessions, now=Clock()
    )


async def forget(stores: ChatStores, session_ids: list[str]) -> None:
    delete = getattr(stores.sessions, "delete", None)
    if delete is not None:
        for session_id in session_ids:
            await delete(session_id)


def run_workers(url: str, pairs: list[tuple[str, str]], work: Path) -> dict[str, Any]:
    """Both workers' results, by worker, after they raced from one start signal."""
    start = work / "start"
    jobs: dict[str, dict[str, Any]] = {}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    # Two pipes, one each way: a worker signals on its own and waits on the other's.
    pipes = [os.pipe(), os.pipe()]
    ends = {WORKERS[0]: (pipes[0][1], pipes[1][0]), WORKERS[1]: (pipes[1][1], pipes[0][0])}
    for worker in WORKERS:
        signal, wait = ends[worker]
        job: dict[str, Any] = {
            "url": url,
            "worker": worker,
            "pairs": pairs,
            "ready": str(work / f"{worker}.ready"),
            "start": str(start),
            "executor": str(work / "executor.log"),
            "result": str(work / f"{worker}.json"),
            "signal": signal,
            "wait": wait,
        }
        job_file = work / f"{worker}.job.json"
        job_file.write_text(json.dumps(job), "utf-8")
        jobs[worker] = job
        processes[worker] = subprocess.Popen(
            [sys.executable, "-m", "tests.actions._race_worker", str(job_file)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            pass_fds=(signal, wait),
        )
    for read_end, write_end in pipes:
        os.close(read_end)
        os.close(write_end)
    try:
        deadline = time.monotonic() + 120
        while not all(Path(str(job["ready"])).exists() for job in jobs.values()):
            for worker, process in processes.items():
                if process.poll() is not None:
                    assert process.stderr is not None
                    pytest.fail(f"{worker} exited early: {process.stderr.read().decode()}")
            assert time.monotonic() < deadline, "the workers never got ready"
            time.sleep(0.01)
        began = time.monotonic()
        start.touch()
        for worker, process in processes.items():
            _, stderr = process.communicate(timeout=WORKER_TIMEOUT_S)
            assert process.returncode == 0, f"{worker}: {stderr.decode()}"
        print(
            f"\n{len(pairs)} calls raced by {len(WORKERS)} workers in "
            f"{time.monotonic() - began:.2f} s"
        )
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return {
        worker: json.loads(Path(str(job["result"])).read_text("utf-8"))
        for worker, job in jobs.items()
    }


@pytest.mark.parametrize("backend", BACKENDS)
async def test_two_processes_approving_the_same_calls_run_each_exactly_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert CALLS > 0
    url = store_url(backend, tmp_path, request)
    run = uuid.uuid4().hex[:8]
    session_ids = [f"race-{run}-{n}" for n in range(CALLS)]
    async with open_chat_stores(url) as stores:
        began = time.monotonic()
        tokens: dict[str, str] = {}
        limiter = anyio.CapacityLimiter(16)

        async def setup(session_id: str) -> None:
            async with limiter:
                tokens[session_id] = await propose(stores, session_id)

        async with anyio.create_task_group() as group:
            for session_id in session_ids:
                group.start_soon(setup, session_id)
        print(f"\n{backend}: {CALLS} pending calls stored in {time.monotonic() - began:.2f} s")
        pairs = [(session_id, tokens[session_id]) for session_id in session_ids]
        try:
            results = await anyio.to_thread.run_sync(run_workers, url, pairs, tmp_path)

            # The executor ran exactly once per call, and for nothing else.
            lines = (tmp_path / "executor.log").read_text("utf-8").splitlines()
            assert lines
            executed = Counter(line.split(" ")[0] for line in lines)
            assert len(lines) == CALLS
            assert executed == Counter(f"app-{session_id}" for session_id in session_ids)
            winners = Counter(line.split(" ")[1] for line in lines)
            print(f"{backend}: calls won by each worker: {dict(winners)}")

            # Every worker got a record back for every token, and it was terminal: the loser
            # of each claim got the winner's record, not an error or a processing status.
            assert set(results) == set(WORKERS)
            for worker, outcome in results.items():
                assert [r["token"] for r in outcome] == [token for _, token in pairs], worker
                assert [r["error"] for r in outcome if r["error"]] == [], worker
                assert {r["status"] for r in outcome} == {"approved"}, worker

            # Every call was really contended: both workers resumed its session while it was
            # still pending (they met before either claimed it), so both tried to claim it.
            for worker, outcome in results.items():
                assert [r["seen"] for r in outcome] == [["pending"]] * CALLS, worker

            # What is stored agrees.
            for session_id in session_ids:
                assert await stored_status(stores, session_id) == ["approved"], session_id
        finally:
            await forget(stores, session_ids)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_token_of_another_session_is_inert(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = store_url(backend, tmp_path, request)
    run = uuid.uuid4().hex[:8]
    owner, other = f"race-{run}-a", f"race-{run}-b"
    executor_file = tmp_path / "executor.log"
    executor = AppendingExecutor(str(executor_file), "w1")
    async with open_chat_stores(url) as stores:
        token = await propose(stores, owner)
        await propose(stores, other)
        try:
            foreign = (await resume(stores, other)).create_confirmation(chat=executor)
            owned = (await resume(stores, owner)).create_confirmation(chat=executor)
            attempts = [
                (foreign, token, other),  # the other session, naming itself
                (foreign, token, owner),  # the other session, naming the owner
                (owned, token, other),  # the owner's confirmation, naming the other session
            ]
            for confirmation, presented, session_id in attempts:
                for decide in (confirmation.approve, confirmation.reject):
                    with pytest.raises(ConfigurationError, match="invalid for this session"):
                        await decide(presented, session_id)
            assert not executor_file.exists()
            assert await stored_status(stores, owner) == ["pending"]
            assert await stored_status(stores, other) == ["pending"]

            # The owner's token still works in its own session, once.
            owned = (await resume(stores, owner)).create_confirmation(chat=executor)
            assert (await owned.approve(token, owner)).status == "approved"
            assert executor_file.read_text("utf-8").splitlines() == [f"app-{owner} w1"]
            assert await stored_status(stores, owner) == ["approved"]
            assert await stored_status(stores, other) == ["pending"]
        finally:
            await forget(stores, [owner, other])
