"""``agentskit-chat chat``: its usage errors, its wiring, and real runs in a pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from typer.testing import CliRunner, Result

from agentskit_chat import tui as tui_package
from agentskit_chat.cli import app
from tests.assistant._support import write_docs
from tests.tui._support import EXACT_ANSWER, EXACT_QUESTION, docs_server

runner = CliRunner()
CLI = str(Path(sys.executable).with_name("agentskit-chat"))
_ESCAPES = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()=>][0-9A-Za-z]?"
)


def invoke(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["docs", "--url", "http://127.0.0.1:8000"], "give a chat, a docs folder or --url"),
        (["--url", "ftp://example.com"], "--url must be an http:// or https:// URL"),
        (["/no/such/folder"], "/no/such/folder: the docs folder does not exist"),
        (["--url", "http://127.0.0.1:8000", "--session", "no spaces"], "not a valid session id"),
    ],
)
def test_usage_errors_exit_2_with_a_clear_message(args: list[str], message: str) -> None:
    result = invoke("chat", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.startswith("error: ")


def test_the_default_docs_folder_is_docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("chat")
    assert result.exit_code == 2
    assert "docs: the docs folder does not exist" in result.stderr


def test_options_reach_the_terminal_chat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    async def fake(**options: Any) -> int:
        calls.append(options)
        return 0

    monkeypatch.setattr(tui_package, "run_terminal_chat", fake)
    monkeypatch.delenv("AGENTSKIT_API_KEY", raising=False)
    remote = invoke("chat", "--url", "http://127.0.0.1:8000", "--api-key", "k", "--session", "s1")
    assert remote.exit_code == 0, remote.output
    docs = write_docs(tmp_path / "docs")
    local = invoke("chat", docs, "--theme", "light", "--store", "sqlite:///x.db")
    assert local.exit_code == 0, local.output
    assert len(calls) == 2
    assert calls[0]["url"] == "http://127.0.0.1:8000"
    assert calls[0]["docs_dir"] is None
    assert (calls[0]["api_key"], calls[0]["session_id"]) == ("k", "s1")
    assert calls[1]["url"] is None
    assert calls[1]["docs_dir"] == docs
    assert (calls[1]["theme"], calls[1]["store"]) == ("light", "sqlite:///x.db")


def test_without_textual_the_error_names_the_tui_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "textual", None)
    result = invoke("chat", "--url", "http://127.0.0.1:8000")
    assert result.exit_code == 1
    assert "needs the 'tui' extra: pip install 'agentskit-chat[tui]'" in result.stderr


def test_the_package_imports_without_textual() -> None:
    code = (
        "import sys; sys.modules['textual'] = None\n"
        "import agentskit_chat.tui as tui\n"
        "try:\n    tui.TerminalChatApp\nexcept ImportError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "needs the 'tui' extra" in done.stdout


# --- the real command in a pseudo-terminal -------------------------------------------------------


class Terminal:
    """A child process on a pseudo-terminal: read what it draws, type keys."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
        env.pop("AGENTSKIT_API_KEY", None)
        self.process = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True
        )
        os.close(slave)
        self.raw = b""

    def screen(self) -> str:
        return " ".join(_ESCAPES.sub("", self.raw.decode("utf-8", "replace")).split())

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.screen():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"{text!r} never appeared: ...{self.screen()[-1500:]}")
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    self.raw += os.read(self.master, 65536)
                except OSError:
                    break

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def exit_code(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    self.raw += os.read(self.master, 65536)
                except OSError:
                    break
        return self.process.wait(timeout=5)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.master)


@contextmanager
def terminal(args: list[str], cwd: Path) -> Iterator[Terminal]:
    opened = Terminal(args, cwd)
    try:
        yield opened
    finally:
        opened.close()


def converse(screen: Terminal) -> None:
    screen.wait_for("Connected to http://127.0.0.1:")
    screen.type(EXACT_QUESTION.encode() + b"\r")
    screen.wait_for(EXACT_ANSWER)
    screen.wait_for("/docs/guide")
    screen.type(b"\x03")  # Ctrl+C


def test_chat_url_talks_to_a_running_server_and_ctrl_c_exits_0(tmp_path: Path) -> None:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(docs_server(tmp_path)) as url,
        terminal([CLI, "chat", "--url", url], tmp_path) as screen,
    ):
        converse(screen)
        assert screen.exit_code() == 0


def test_chat_docs_dir_serves_the_folder_in_process_and_ctrl_c_exits_0(tmp_path: Path) -> None:
    write_docs(tmp_path / "docs")
    with terminal([CLI, "chat", "docs"], tmp_path) as screen:
        converse(screen)
        assert screen.exit_code() == 0


def test_a_folder_whose_assistant_cannot_start_says_why_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with terminal([CLI, "chat", "empty"], tmp_path) as screen:
        screen.wait_for("The docs assistant did not start: empty: no Markdown files")
        screen.wait_for("Press Ctrl+C to quit.")
        screen.type(b"\x03")
        assert screen.exit_code() == 1
