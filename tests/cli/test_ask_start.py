"""What ``agentskit-chat ask`` does to start fast, and that none of it shows in what it does.

Start-up times are measured by ``bench/cli.py``, never asserted here.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentskit_chat.cli import app
from tests.assistant._support import write_docs

runner = CliRunner()
QUESTION = "How do I set the cache size?"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return write_docs(tmp_path / "docs")


@pytest.mark.usefixtures("collector")
@pytest.mark.parametrize("enabled", [True, False])
def test_ask_leaves_the_cycle_collector_as_it_found_it(docs: Path, enabled: bool) -> None:
    if enabled:
        gc.enable()
    else:
        gc.disable()
    result = runner.invoke(app, ["ask", QUESTION, "--docs", str(docs)])
    assert result.exit_code == 0, result.output
    assert "cache_size" in result.stdout
    assert gc.isenabled() is enabled


def test_ask_answers_with_the_collector_paused_and_freezes_what_it_made(docs: Path) -> None:
    probe = (
        "import gc, sys\n"
        "from agentskit_chat.assistant import _factory\n"
        "real = _factory.create_docs_assistant\n"
        "seen = []\n"
        "def watched(*args, **options):\n"
        "    seen.append(gc.isenabled())\n"
        "    return real(*args, **options)\n"
        "_factory.create_docs_assistant = watched\n"
        "from agentskit_chat.cli import app\n"
        "try:\n"
        "    app(sys.argv[1:], prog_name='agentskit-chat')\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "print('paused', seen, gc.isenabled(), gc.get_freeze_count() > 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "ask", QUESTION, "--docs", str(docs)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *answer, last = done.stdout.strip().splitlines()
    assert "cache_size" in "\n".join(answer)
    assert last == "paused [False] True True"
