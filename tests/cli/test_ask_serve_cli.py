"""``agentskit-chat ask`` and ``agentskit-chat serve``."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from agentskit_chat import assistant as assistant_package
from agentskit_chat.assistant import NO_GROUNDED_SOURCES, AnswerOutcome
from agentskit_chat.cli import app
from agentskit_chat.protocol import decode_answer_response
from tests.assistant._support import write_docs

runner = CliRunner()


def invoke(*args: str | Path, env: dict[str, str | None] | None = None) -> Result:
    return runner.invoke(app, [str(a) for a in args], env=env)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return write_docs(tmp_path / "docs")


def test_ask_prints_the_answer_and_its_sources(docs: Path) -> None:
    result = invoke("ask", "How do I set the cache size?", "--docs", docs)
    assert result.exit_code == 0, result.output
    answer, _, sources = result.stdout.partition("\n\nSources:\n")
    assert "cache_size" in answer
    assert "[1]" in answer
    assert "  [1] Setup guide › Configuring the cache\n" in sources
    assert "      /docs/guide#configuring-the-cache\n" in sources


def test_ask_json_prints_the_envelope(docs: Path) -> None:
    result = invoke("ask", "Which license is the widget released under?", "--docs", docs, "--json")
    assert result.exit_code == 0, result.output
    envelope = json.loads(result.stdout)
    assert decode_answer_response(result.stdout.strip()).ok
    assert envelope["outcome"] == "answer"
    assert envelope["provenance"]["source"] == "backend"
    assert envelope["answer"]["citations"][0]["href"] == "/docs/faq#licensing"


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the capital of France?", NO_GROUNDED_SOURCES),
        ("Setup guide", "Read [Setup guide](/docs/guide)."),
        ("Configuring the cache", "More than one exact local answer matches."),
    ],
)
def test_ask_text_for_each_outcome(docs: Path, question: str, expected: str) -> None:
    result = invoke("ask", question, "--docs", docs)
    # A refusal is an answer too: exit 0, with the refusal text.
    assert result.exit_code == 0, result.output
    assert expected in result.stdout


def test_ask_refusal_as_json(docs: Path) -> None:
    result = invoke("ask", "What is the capital of France?", "--docs", docs, "--json")
    assert result.exit_code == 0
    envelope = json.loads(result.stdout)
    assert (envelope["outcome"], envelope["reason"]) == ("escalation", "miss")
    assert envelope["message"] == NO_GROUNDED_SOURCES


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("ask", "   "), 2, "error: A user question is required."),
        (("ask", "Setup guide", "--docs", "missing"), 1, "the docs folder does not exist"),
    ],
)
def test_ask_failures(
    docs: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], code: int, message: str
) -> None:
    monkeypatch.chdir(docs.parent)
    result = invoke(*args) if "--docs" in args else invoke(*args, "--docs", docs)
    assert result.exit_code == code
    assert message in result.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "docs.example.com"])
def test_serve_off_loopback_without_a_key_is_refused(docs: Path, host: str) -> None:
    result = invoke("serve", docs, "--host", host, env={"AGENTSKIT_API_KEY": None})
    assert result.exit_code == 2
    assert "set an API key with --api-key or AGENTSKIT_API_KEY" in result.stderr


def test_serve_without_a_docs_folder_fails(tmp_path: Path) -> None:
    result = invoke("serve", tmp_path / "missing", "--port", "0")
    assert result.exit_code == 1
    assert "the docs folder does not exist" in result.stderr
    assert "app.py:chat" in result.stderr  # how to serve a chat of one's own instead


def test_serve_reports_a_folder_without_markdown_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = invoke("serve", tmp_path / "empty", "--port", "0")
    assert result.exit_code == 1
    assert "error: " in result.stderr
    assert "no Markdown files" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Serving" not in result.stdout


def _read_line(process: subprocess.Popen[str], deadline: float) -> str:
    assert process.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.1)
        if ready:
            return process.stdout.readline()
        if process.poll() is not None:
            break
    raise AssertionError("serve printed no URL in time")


def test_serve_prints_its_url_and_answers_over_http(docs: Path) -> None:
    command = [sys.executable, "-c", "from agentskit_chat.cli import main; main()"]
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTSKIT_API_KEY", "AGENTSKIT_MODEL")}
    process = subprocess.Popen(
        [*command, "serve", str(docs), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first = _read_line(process, time.monotonic() + 30)
        assert first.startswith(f"Serving the docs assistant for {docs} at http://127.0.0.1:")
        url = first.rsplit(" ", 1)[1].strip()
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/healthz").json() == {"status": "ok"}
            answer = client.post("/api/answer", json={"question": "How do I set the cache size?"})
        assert (
            answer.json()["answer"]["citations"][0]["href"] == "/docs/guide#configuring-the-cache"
        )
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    # Ctrl+C: uvicorn shuts down gracefully, then re-raises the signal (exit 130, as shells do).
    stderr = process.stderr.read() if process.stderr else ""
    assert process.returncode in (0, 130, -signal.SIGINT), stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("args", "env", "agent", "code", "expected"),
    [
        ((), {}, None, 0, "cache_size"),
        (("--agent", "writer"), {}, "writer", 0, "cache_size"),
        (("--agent", "analyst"), {}, "analyst", 1, "error: The analyst agent needs a model"),
        ((), {"AGENTSKIT_AGENT": "analyst"}, None, 1, "error: The analyst agent needs a model"),
        ((), {"AGENTSKIT_AGENT": "poet"}, None, 1, "error: AGENTSKIT_AGENT must be"),
    ],
)
def test_ask_agent_option_reaches_the_assistant(
    docs: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    args: tuple[str, ...],
    env: dict[str, str],
    agent: str | None,
    code: int,
    expected: str,
) -> None:
    seen: list[dict[str, object]] = []
    real = assistant_package.ask_docs

    def spy(question: str, docs_dir: Path, **options: Any) -> AnswerOutcome:
        seen.append(options)
        return real(question, docs_dir, **options)

    monkeypatch.setattr(assistant_package, "ask_docs", spy)
    result = invoke(
        "ask",
        "How do I set the cache size?",
        "--docs",
        docs,
        *args,
        env={"AGENTSKIT_MODEL": None, "AGENTSKIT_AGENT": None, **env},
    )
    assert result.exit_code == code, result.output
    assert expected in (result.stdout if code == 0 else result.stderr)
    assert [options["agent"] for options in seen] == [agent]


def test_ask_refuses_an_unknown_agent(docs: Path) -> None:
    result = invoke("ask", "Setup guide", "--docs", docs, "--agent", "poet")
    assert result.exit_code == 2
    assert "--agent" in result.stderr


def test_serve_with_the_analyst_agent_and_no_model_reports_it_in_one_line(docs: Path) -> None:
    result = invoke(
        "serve",
        docs,
        "--port",
        "0",
        "--agent",
        "analyst",
        env={"AGENTSKIT_MODEL": None, "AGENTSKIT_API_KEY": None},
    )
    assert result.exit_code == 1
    assert "error: The analyst agent needs a model" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Serving" not in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--workers", "2", "--index", "index.db"), "--index keeps one SQLite index per process"),
        (("--store", "ftp://nowhere"), "The store URL scheme is not one of"),
        (("--store", "sqlite://"), "use memory: instead"),
    ],
)
def test_serve_refuses_options_that_cannot_work_together(
    docs: Path, args: tuple[str, ...], expected: str
) -> None:
    result = invoke("serve", docs, "--port", "0", *args, env={"AGENTSKIT_STORE": None})
    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert "Serving" not in result.stdout
