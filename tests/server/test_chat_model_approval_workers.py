"""A model's gated calls approved over HTTP by two worker processes on one store, twice each.

Two worker processes serve the same help desk chat (``tests.server._approval_app``) on one
PostgreSQL database or one Redis server (and, without those services, one SQLite file), started
either as ``agentskit-chat serve ... --workers 2`` (one socket, the kernel picks the worker of
each connection) or as two uvicorn processes on two ports (each client always on its own
worker). First each session's turn makes the ``FunctionModel`` propose one confirmation-gated
``open_ticket`` call. Then, for every call at once, two clients approve it at the same moment,
retrying while the session is busy with the other's turn (``409 SESSION_BUSY`` or
``SESSION_CONFLICT``, both retryable).

What must hold: the executor (a line appended to a shared file by whichever worker ran it) ran
exactly once per call; exactly one client got the ``200`` stream whose final snapshot shows the
call complete and the model's answer to its result; the other got ``409
CONFIRMATION_UNAVAILABLE`` (the call no longer waits), and reading the session through its own
URL shows the same outcome; the stored confirmation record is ``approved``.

``AGENTSKIT_MODEL_APPROVAL_CALLS`` sets how many calls race (30 by default).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import httpx
import pytest

from agentskit_chat.storage import ChatStores, open_chat_stores
from tests.server._approval_support import OPENING
from tests.server._chat_support import JSON, lines, submit

pytestmark = pytest.mark.anyio

CALLS: Final = int(os.environ.get("AGENTSKIT_MODEL_APPROVAL_CALLS", "30"))
WORKERS: Final = ("w1", "w2")
ROOT: Final = Path(__file__).resolve().parents[2]
#: How long a client keeps retrying a busy session before the test gives up on it.
PATIENCE_S: Final = 60.0
CLIENTS: Final = ("c1", "c2")
LAUNCHES: Final = ("two-uvicorn-processes", "serve-workers-2")
# uvicorn's own start line, or the one ``agentskit-chat serve`` prints when it is ready.
_LISTENING: Final = re.compile(r"(?:Uvicorn running on|Serving .* at) (http://127\.0\.0\.1:\d+)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'approvals.db'}"
    url: str = request.getfixturevalue("postgres_url" if backend == "postgresql" else "redis_url")
    return url


def _uvicorn(name: str, store: str, log: Path) -> tuple[list[str], dict[str, str]]:
    command = [sys.executable, "-m", "uvicorn", "tests.server._approval_app:app", "--factory"]
    options = ["--host", "127.0.0.1", "--port", "0", "--no-access-log"]
    env = {
        "AGENTSKIT_APPROVAL_STORE": store,
        "AGENTSKIT_APPROVAL_LOG": str(log),
        "AGENTSKIT_APPROVAL_WORKER": name,
    }
    return [*command, *options], env


def _serve(store: str, log: Path) -> tuple[list[str], dict[str, str]]:
    command = [sys.executable, "-c", "from agentskit_chat.cli import main; main()", "serve"]
    # Both clients race from one address: the per-client rate limit is not what is tested.
    options = ["tests.server._approval_app:chat", "--port", "0", "--workers", "2"]
    options += ["--rate-limit", "0"]
    return [*command, *options, "--store", store], {"AGENTSKIT_APPROVAL_LOG": str(log)}


@contextlib.contextmanager
def running(launch: str, store: str, log: Path, work: Path) -> Iterator[dict[str, str]]:
    """The workers, started together; yields the URL each client (``c1``, ``c2``) uses.

    ``two-uvicorn-processes``: worker ``w1`` on one port for ``c1``, ``w2`` on another for
    ``c2``, so the two approvals of a call always meet on different workers.
    ``serve-workers-2``: ``agentskit-chat serve --workers 2``, both clients on its one socket
    (the kernel hands each connection to either worker).
    """
    if launch == "two-uvicorn-processes":
        commands = {name: _uvicorn(name, store, log) for name in WORKERS}
        clients = dict(zip(CLIENTS, WORKERS, strict=True))
    else:
        commands = {"serve": _serve(store, log)}
        clients = dict.fromkeys(CLIENTS, "serve")
    processes: dict[str, subprocess.Popen[bytes]] = {}
    outputs = {name: work / f"{name}.out" for name in commands}
    hidden = ("AGENTSKIT_API_KEY", "AGENTSKIT_MODEL")
    base = {k: v for k, v in os.environ.items() if k not in hidden}
    try:
        for name, (argv, env) in commands.items():
            with outputs[name].open("wb") as output:
                processes[name] = subprocess.Popen(
                    argv,
                    cwd=ROOT,
                    env={**base, **env},
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        urls: dict[str, str] = {}
        deadline = time.monotonic() + 120
        while len(urls) < len(commands):
            for name, process in processes.items():
                text = outputs[name].read_text("utf-8", "replace")
                found = _LISTENING.search(text)
                if found is not None:
                    urls[name] = found.group(1)
                elif process.poll() is not None:
                    pytest.fail(f"{name} exited early: {text[-2000:]}")
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.05)
        yield {client: urls[name] for client, name in clients.items()}
    finally:
        for process in processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGINT)
        for process in processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@dataclass
class Outcome:
    """What one client's approval came to, after its retries of a busy session."""

    client: str
    status: int
    code: str | None  # the refusal's code, or the stream's diagnostic; None for a snapshot
    payload: dict[str, Any] | None  # the final snapshot's payload
    busy: int  # how many retryable refusals it met first


def call_of(payload: dict[str, Any], call_id: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        call
        for message in payload["messages"]
        for call in message.get("toolCalls", [])
        if call["id"] == call_id
    ]
    assert found, f"{call_id} is not in the snapshot"
    return found[-1]


async def propose(http: httpx.AsyncClient, url: str, session_id: str, ref: str) -> None:
    body = submit(session_id=session_id, turn_id="t1", event_id="t1", text=f"open {ref}")
    response = await http.post(f"{url}/api/chat", content=body, headers=JSON)
    assert response.status_code == 200, response.text
    last = lines(response.content)[-1]
    assert last["event"] == "server.turn.snapshot", last
    assert call_of(last["payload"], f"call-{ref}")["status"] == "requires_confirmation"
    assert last["payload"]["messages"][-1]["content"] == OPENING


async def approve(
    http: httpx.AsyncClient, url: str, client: str, session_id: str, call_id: str
) -> Outcome:
    turn_id = f"approve-{client}"
    busy = 0
    until = time.monotonic() + PATIENCE_S
    while True:
        body = submit(
            session_id=session_id,
            turn_id=turn_id,
            event_id=f"{turn_id}-{busy}",
            text="Approve",
            payload={"confirmation": {"toolCallId": call_id, "decision": "approve"}},
        )
        response = await http.post(f"{url}/api/chat", content=body, headers=JSON)
        if response.status_code != 200:
            code = response.json()["error"]["code"]
            if code in ("SESSION_BUSY", "SESSION_CONFLICT") and time.monotonic() < until:
                busy += 1
                await anyio.sleep(0.01)
                continue
            return Outcome(client, response.status_code, code, None, busy)
        events = lines(response.content)
        assert events, "an empty stream"
        last = events[-1]
        if last["event"] != "server.turn.snapshot":
            return Outcome(client, 200, last["payload"]["code"], None, busy)
        return Outcome(client, 200, None, last["payload"], busy)


async def read(http: httpx.AsyncClient, url: str, session_id: str) -> dict[str, Any]:
    response = await http.get(f"{url}/api/chat", params={"sessionId": session_id})
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()["payload"]
    return payload


async def stored_confirmations(stores: ChatStores, session_id: str) -> list[dict[str, Any]]:
    raw = await stores.sessions.load(session_id)
    assert raw is not None
    stored = json.loads(raw) if isinstance(raw, str) else dict(raw)
    assert "activeTurn" not in stored  # every turn released its lease
    confirmations: list[dict[str, Any]] = stored["confirmations"]
    return confirmations


async def propose_all(http: httpx.AsyncClient, urls: dict[str, str], refs: list[str]) -> None:
    """Turn 1 of every session (``approve-<ref>``), half through each client's URL."""
    limiter = anyio.CapacityLimiter(8)

    async def one(n: int) -> None:
        async with limiter:
            await propose(http, urls[CLIENTS[n % 2]], f"approve-{refs[n]}", refs[n])

    async with anyio.create_task_group() as group:
        for n in range(len(refs)):
            group.start_soon(one, n)


async def race(
    http: httpx.AsyncClient, urls: dict[str, str], refs: list[str]
) -> dict[str, list[Outcome]]:
    """Both clients approve every call, all at once; their outcomes by ref."""
    outcomes: dict[str, list[Outcome]] = {ref: [] for ref in refs}
    start = anyio.Event()

    async def one(client: str, ref: str) -> None:
        await start.wait()
        outcome = await approve(http, urls[client], client, f"approve-{ref}", f"call-{ref}")
        outcomes[ref].append(outcome)

    async with anyio.create_task_group() as group:
        for ref in refs:
            for client in CLIENTS:
                group.start_soon(one, client, ref)
        await anyio.sleep(0.1)  # every client is waiting for the start
        start.set()
    return outcomes


@pytest.mark.parametrize(
    ("backend", "launch"),
    [
        *((backend, launch) for backend in ("postgresql", "redis") for launch in LAUNCHES),
        # Without the services, the race still runs somewhere: on one SQLite file.
        ("sqlite", "two-uvicorn-processes"),
    ],
)
async def test_two_workers_approving_each_model_call_at_once_run_it_exactly_once(
    backend: str, launch: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert CALLS > 0
    store = store_url(backend, tmp_path, request)
    run = uuid.uuid4().hex[:8]
    refs = [f"{run}x{n}" for n in range(CALLS)]
    log = tmp_path / "executor.log"
    name = f"{backend}, {launch}"
    async with open_chat_stores(store) as stores:
        try:
            with running(launch, store, log, tmp_path) as urls:
                async with httpx.AsyncClient(timeout=60) as http:
                    began = time.monotonic()
                    await propose_all(http, urls, refs)
                    print(f"\n{name}: {CALLS} calls proposed in {time.monotonic() - began:.2f} s")
                    assert not log.exists()  # proposing never runs anything
                    for ref in refs:
                        records = await stored_confirmations(stores, f"approve-{ref}")
                        assert [(c["toolCallId"], c["status"]) for c in records] == [
                            (f"call-{ref}", "pending")
                        ]

                    began = time.monotonic()
                    outcomes = await race(http, urls, refs)
                    print(f"{name}: approved twice at once in {time.monotonic() - began:.2f} s")

                    # The executor ran exactly once per call, and for nothing else.
                    executed = log.read_text("utf-8").splitlines()
                    assert executed
                    assert len(executed) == CALLS
                    assert Counter(line.split(" ")[0] for line in executed) == Counter(refs)
                    ran_on = dict(line.split(" ") for line in executed)
                    print(f"{name}: calls run by each worker: {dict(Counter(ran_on.values()))}")

                    busy = 0
                    for ref, pair in outcomes.items():
                        assert sorted(o.client for o in pair) == sorted(CLIENTS), ref
                        busy += sum(o.busy for o in pair)
                        (winner,) = [o for o in pair if o.status == 200 and o.code is None]
                        (loser,) = [o for o in pair if o is not winner]
                        # The winner's stream: the call ran, and the model answered its result.
                        assert winner.payload is not None
                        call = call_of(winner.payload, f"call-{ref}")
                        assert (call["status"], call["result"]) == ("complete", f"TICKET-{ref}")
                        answer = winner.payload["messages"][-1]["content"]
                        assert answer == f"success: TICKET-{ref}"
                        if launch == "two-uvicorn-processes":
                            assert (
                                ran_on[ref]
                                == dict(zip(CLIENTS, WORKERS, strict=True))[winner.client]
                            )
                        # The loser is told the call no longer waits; its URL shows the outcome.
                        assert (loser.status, loser.code) == (409, "CONFIRMATION_UNAVAILABLE")
                        seen = await read(http, urls[loser.client], f"approve-{ref}")
                        assert call_of(seen, f"call-{ref}")["status"] == "complete"
                        records = await stored_confirmations(stores, f"approve-{ref}")
                        assert [c["status"] for c in records] == ["approved"]
                    print(f"{name}: retries of a busy session: {busy}")
                    assert busy > 0  # the two approvals of a call really collided
        finally:
            delete = getattr(stores.sessions, "delete", None)
            if delete is not None:
                for ref in refs:
                    await delete(f"approve-{ref}")
