"""``agentskit-chat serve app.py:chat``: your own chat definition on the web, in real processes
(one, two workers, reloading), and the usage errors that stop it before it starts."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import uvicorn.supervisors
from typer.testing import CliRunner, Result

from agentskit_chat.cli import app
from tests.server._chat_support import JSON, submit

runner = CliRunner()
COMMAND = [sys.executable, "-c", "from agentskit_chat.cli import main; main()"]
#: How long a server may take to print its URL (two workers import everything twice, on
#: shared cores).
START_S = 120.0

APP = """
import os

from agentskit_chat.conversation import ChatPage, define_chat
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.runtime import ChatConfig, reply_adapter

REPLY = "first version"


def answer(text, request):
    return f"{REPLY}: {text} [pid {os.getpid()}]"


chat = define_chat(
    id="support",
    chat=ChatConfig(adapter=reply_adapter(answer)),
    page=ChatPage(title="Acme support", subtitle="Orders and returns"),
)


def needs_a_database():
    raise ConfigurationError("the chat's database URL is not set")


def has_a_bug():
    raise RuntimeError("zq9 a bug in my factory")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "app.py").write_text(textwrap.dedent(APP), "utf-8")
    return folder


def environment() -> dict[str, str]:
    unset = ("AGENTSKIT_API_KEY", "AGENTSKIT_MODEL", "AGENTSKIT_STORE")
    return {k: v for k, v in os.environ.items() if k not in unset}


def stop(process: subprocess.Popen[bytes]) -> str:
    """Ctrl+C the server's process group (its workers too); return what it wrote to stderr."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.stderr.read().decode() if process.stderr else ""


@contextlib.contextmanager
def serving(folder: Path, *args: str) -> Iterator[tuple[str, list[str]]]:
    """``agentskit-chat serve ARGS`` run in ``folder``; yields its URL and what it printed once
    ready. The process group is stopped on the way out, whatever happened."""
    process = subprocess.Popen(
        [*COMMAND, "serve", *args],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,  # unbuffered: a line read is all that was taken from the pipe
        env=environment(),
        start_new_session=True,
    )
    stderr = ""
    try:
        assert process.stdout is not None
        printed: list[str] = []
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and not any("Press Ctrl+C" in p for p in printed):
            ready, _, _ = select.select([process.stdout], [], [], 0.2)
            if ready:
                line = process.stdout.readline()
                if not line:
                    break
                printed.append(line.decode())
            elif process.poll() is not None:
                break
        if not printed or not printed[0].startswith("Serving"):
            stderr = stop(process)
            raise AssertionError(f"serve did not start: {printed} {stderr}")
        yield printed[0].split(" at ", 1)[1].split()[0], printed
    finally:
        stderr = stderr or stop(process)
        assert "Traceback" not in stderr, stderr


def ask(url: str, text: str, *, session_id: str = "session-1", number: int = 1) -> str:
    """One turn on a fresh connection; the assistant's answer."""
    body = submit(session_id=session_id, turn_id=f"t{number}", event_id=f"e{number}", text=text)
    response = httpx.post(f"{url}/api/chat", content=body, headers=JSON, timeout=30)
    assert response.status_code == 200, response.text
    last = json.loads(response.text.splitlines()[-1])
    assert last["payload"]["status"] == "complete", last
    content: str = last["payload"]["messages"][-1]["content"]
    return content


def pid_of(answer: str) -> str:
    return answer.rsplit("[pid ", 1)[1].rstrip("]")


# --- one process ---------------------------------------------------------------------------------


def test_serve_prints_the_url_and_serves_the_chat(project: Path) -> None:
    with serving(project, "app.py:chat", "--port", "0") as (url, printed):
        assert url.startswith("http://127.0.0.1:")
        assert printed[0] == f"Serving app.py:chat at {url}\n"
        assert any("agentskit-chat chat app.py:chat" in line for line in printed)
        page = httpx.get(f"{url}/", timeout=10)
        health = httpx.get(f"{url}/healthz", timeout=10)
        first = ask(url, "hello")
        second = ask(url, "again", number=2)
        stored = httpx.get(f"{url}/api/chat", params={"sessionId": "session-1"}, timeout=10)
    assert page.status_code == 200
    assert "<title>Acme support</title>" in page.text
    assert '<p class="tagline">Orders and returns</p>' in page.text
    assert health.json() == {"status": "ok"}
    assert first.startswith("first version: hello [pid ")
    assert second.startswith("first version: again [pid ")
    messages = stored.json()["payload"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    # The default store is a SQLite file next to the chat file.
    assert (project / ".agentskit" / "chat.db").is_file()


def test_a_chat_that_fails_to_open_exits_with_its_message(project: Path) -> None:
    result = subprocess.run(
        [*COMMAND, "serve", "app.py:needs_a_database", "--port", "0"],
        cwd=project,
        capture_output=True,
        text=True,
        env=environment(),
        timeout=START_S,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert result.stderr == "error: the chat's database URL is not set\n"
    assert "Traceback" not in result.stderr


def test_a_bug_in_the_users_factory_keeps_its_traceback(project: Path) -> None:
    result = subprocess.run(
        [*COMMAND, "serve", "app.py:has_a_bug", "--port", "0"],
        cwd=project,
        capture_output=True,
        text=True,
        env=environment(),
        timeout=START_S,
        check=False,
    )
    assert result.returncode != 0
    assert "Serving" not in result.stdout
    assert "Traceback" in result.stderr
    assert "RuntimeError: zq9 a bug in my factory" in result.stderr


# --- two workers ---------------------------------------------------------------------------------


def test_two_workers_share_one_sessions_turns_on_sqlite(project: Path, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    args = ("app.py:chat", "--port", "0", "--workers", "2", "--store", store)
    asked: list[str] = []
    answers: list[str] = []
    with serving(project, *args) as (url, printed):
        assert printed[0].endswith("(2 workers)\n")
        deadline = time.monotonic() + 60
        # Each turn on a new connection: the system hands them to either worker.
        while time.monotonic() < deadline and len({pid_of(a) for a in answers}) < 2:
            number = len(asked) + 1
            asked.append(f"question {number}")
            answers.append(ask(url, asked[-1], number=number))
        stored = httpx.get(f"{url}/api/chat", params={"sessionId": "session-1"}, timeout=10)
    assert len({pid_of(a) for a in answers}) == 2, "one worker answered every turn"
    messages = stored.json()["payload"]["messages"]
    # One conversation, in order, whichever worker took each turn.
    assert [m["content"] for m in messages[::2]] == asked
    assert [m["content"] for m in messages[1::2]] == answers
    for question, answer in zip(asked, answers, strict=True):
        assert answer.startswith(f"first version: {question} [pid ")


def test_workers_whose_chat_fails_to_open_stop_the_server(project: Path, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    args = ["app.py:needs_a_database", "--port", "0", "--workers", "2", "--store", store]
    result = subprocess.run(
        [*COMMAND, "serve", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env=environment(),
        timeout=START_S,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "Serving" not in result.stdout
    assert "error: the chat's database URL is not set\n" in result.stderr
    assert result.stderr.endswith("error: the server did not start\n")
    assert "Traceback" not in result.stderr


# --- reloading -----------------------------------------------------------------------------------


def test_reload_serves_the_edited_chat(project: Path) -> None:
    chat_file = project / "app.py"
    with serving(project, "app.py:chat", "--port", "0", "--reload") as (url, printed):
        assert printed[0].endswith("(reloading on changes)\n")
        assert ask(url, "hi", session_id="before").startswith("first version: hi")
        chat_file.write_text(
            chat_file.read_text("utf-8").replace('"first version"', '"second version"'), "utf-8"
        )
        deadline = time.monotonic() + 90
        latest = ""
        attempt = 0
        while time.monotonic() < deadline and not latest.startswith("second version"):
            attempt += 1
            with contextlib.suppress(httpx.HTTPError, AssertionError):
                latest = ask(url, "hi", session_id=f"after-{attempt}")
            time.sleep(0.2)
    assert latest.startswith("second version: hi"), latest


# --- usage errors (before anything starts) -------------------------------------------------------


def _started(*args: object, **kwargs: object) -> None:
    raise AssertionError("the server started")


@pytest.fixture
def in_project(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run in the project folder, where a server that starts fails the test at once (instead
    of serving forever); afterwards ``sys.path`` and ``sys.modules`` forget what loading its
    chat file (in this process) added."""
    monkeypatch.setattr(uvicorn.Server, "run", _started)
    monkeypatch.setattr(uvicorn.supervisors.Multiprocess, "run", _started)
    monkeypatch.setattr(uvicorn.supervisors.ChangeReload, "run", _started)
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project / "unused"))
    yield project
    root = project.resolve()
    for name, module in list(sys.modules.items()):
        file: Any = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(root):
            del sys.modules[name]


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    unset: dict[str, str | None] = {"AGENTSKIT_API_KEY": None, "AGENTSKIT_STORE": None}
    return runner.invoke(app, list(args), env={**unset, **(env or {})})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("app.py:chat", "--model", "x"), "--model applies to a docs folder"),
        (("app.py:chat", "--agent", "writer"), "--agent applies to a docs folder"),
        (("app.py:chat", "--index", "i.db"), "--index applies to a docs folder"),
        (("missing.py:chat",), "missing.py: no such Python file"),
        (("missing.py",), "missing.py: no such Python file"),
        (("app.py:1chat",), "'1chat' is not a Python attribute name"),
        (("app.py:chat", "--workers", "2", "--store", "memory:"), "memory: keeps sessions"),
        (("app.py:chat", "--reload", "--store", "memory:"), "memory: keeps sessions"),
        (("app.py:chat", "--reload", "--workers", "2"), "reloading runs one worker"),
        (("app.py:chat", "--host", "0.0.0.0"), "would expose the chat beyond this machine"),
        (("app.py:chat", "--store", "ftp://nowhere"), "The store URL scheme is not one of"),
        # With several processes a bad reference is reported once, before any worker starts.
        (
            ("app.py:absent", "--workers", "2", "--store", "sqlite:///x.db"),
            "app.py has no attribute 'absent'",
        ),
        (("app.py:absent", "--reload"), "app.py has no attribute 'absent'"),
    ],
)
def test_usage_errors_exit_2_with_one_clear_line(
    in_project: Path, args: tuple[str, ...], message: str
) -> None:
    result = invoke("serve", *args, "--port", "0")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert result.stderr.count("\n") == 1
    assert "Serving" not in result.stdout


def test_a_missing_attribute_exits_2(in_project: Path) -> None:
    result = invoke("serve", "app.py:absent", "--port", "0")
    assert result.exit_code == 2, result.output
    assert result.stderr == "error: app.py has no attribute 'absent'\n"
