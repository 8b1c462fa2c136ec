"""``kill -9`` of a worker mid-turn: the lease expires, the turn is indeterminate, nothing runs
twice. The worker is a real uvicorn process on real stores (SQLite, PostgreSQL, Redis)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server._chat_support import JSON, submit

#: A lease of the slow app: timeout 2 s + 3 x cleanup 1 s.
LEASE_S = 5.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def worker(store: str, side_effects: Path, turn_seconds: float) -> Iterator[tuple[str, int]]:
    """The slow chat app under uvicorn in its own process; yields its URL and pid."""
    port = _free_port()
    env = {
        **os.environ,
        "AGENTSKIT_STORE": store,
        "AGENTSKIT_SIDE_EFFECTS": str(side_effects),
        "AGENTSKIT_TURN_SECONDS": str(turn_seconds),
    }
    command = [sys.executable, "-m", "uvicorn", "tests.server._slow_app:app", "--factory"]
    process = subprocess.Popen(
        [*command, "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read() if process.stderr else b""
            try:
                httpx.get(url, timeout=1)  # any answer: the socket is up
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield url, process.pid
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=20)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "redis"])
def test_a_killed_worker_leaves_an_indeterminate_turn_that_never_runs_twice(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        store = f"sqlite:///{tmp_path / 'chat.db'}"
    else:
        store = request.getfixturevalue("postgres_url" if backend == "postgresql" else "redis_url")
    side_effects = tmp_path / "side-effects.log"
    session_id = f"kill-{uuid.uuid4().hex[:8]}"
    first = submit(session_id=session_id, turn_id="turn-1", event_id="e1", text="refund order 7")
    with (
        worker(store, side_effects, turn_seconds=60) as (url, pid),
        httpx.Client(timeout=20) as client,
        client.stream("POST", url, content=first, headers=JSON) as response,
    ):
        line = next(response.iter_lines())
        assert json.loads(line)["payload"]["status"] == "streaming"
        os.kill(pid, signal.SIGKILL)  # mid-turn: no cleanup runs
        killed_at = time.monotonic()
    assert side_effects.read_text("utf-8").splitlines() == ["refund order 7"]

    with (
        worker(store, side_effects, turn_seconds=0) as (url, _),
        httpx.Client(timeout=20) as client,
    ):
        second = submit(session_id=session_id, turn_id="turn-2", event_id="e2", text="hello")
        busy = client.post(url, content=second, headers=JSON)
        if time.monotonic() - killed_at < LEASE_S - 0.5:
            # The dead worker's lease still holds the session.
            assert busy.status_code == 409
            assert busy.json()["error"]["message"] == "Another turn is active for this session."
        deadline = time.monotonic() + 3 * LEASE_S
        while busy.status_code == 409 and time.monotonic() < deadline:
            time.sleep(0.2)
            busy = client.post(url, content=second, headers=JSON)
        assert busy.status_code == 200
        assert time.monotonic() - killed_at >= LEASE_S - 0.5  # not before the lease expired
        last = json.loads(busy.text.splitlines()[-1])
        assert last["payload"]["status"] == "complete"
        assert last["payload"]["messages"][-1]["content"] == "working done: hello"
        replay = client.post(
            url,
            content=submit(session_id=session_id, turn_id="turn-1", event_id="e3", text="x"),
            headers=JSON,
        )
    assert replay.status_code == 409
    assert replay.json()["error"]["message"] == (
        "This turn already ended without a known outcome; start a new turn."
    )
    # The killed turn's side effect happened once, and never again.
    assert side_effects.read_text("utf-8").splitlines() == ["refund order 7", "hello"]
