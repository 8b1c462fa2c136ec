"""The command line starts light: ``--version`` and ``--help`` import no sub-command's work.

Each check runs in a fresh interpreter, since this test process has imported everything already.
Start-up times themselves are measured by ``bench/cli.py``, never asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import get_args

import snowballstemmer

from agentskit_chat import _version, answers
from agentskit_chat._terms import stem
from agentskit_chat.assistant import DocsAgent
from agentskit_chat.cli import _artifact, _ask, app

#: What no command imports before it runs: the assistant, the answer plane, the servers, the
#: terminal, the wire models and the libraries under them.
HEAVY = (
    "agentskit_chat.agents",
    "agentskit_chat.answer_commit",
    "agentskit_chat.answers",
    "agentskit_chat.assistant",
    "agentskit_chat.components",
    "agentskit_chat.protocol",
    "agentskit_chat.retrieval",
    "agentskit_chat.server",
    "agentskit_chat.service",
    "agentskit_chat.storage",
    "agentskit_chat.tui",
    "anyio",
    "httpx",
    "importlib.metadata",
    "markdown_it",
    "pydantic",
    "pydantic_ai",
    "snowballstemmer",
    "starlette",
    "textual",
    "uvicorn",
    "yaml",
)

#: What answering a question about a docs folder does not need: the model's agents (no model is
#: configured), the chat runtime and its schemas, the chat's wire families (turns, sessions,
#: messages, assistant content, components) and choice reservations, the other retrievers and
#: the page renderer, servers, the terminal, YAML (no page has front matter).
NOT_FOR_ASK = (
    "agentskit_chat.agents",
    "agentskit_chat.answer_commit",
    "agentskit_chat.answers._adapter",
    "agentskit_chat.answers._choices",
    "agentskit_chat.components",
    "agentskit_chat.protocol._component",
    "agentskit_chat.protocol._content",
    "agentskit_chat.protocol._cursor",
    "agentskit_chat.protocol._message",
    "agentskit_chat.protocol._session",
    "agentskit_chat.protocol._turn",
    "agentskit_chat.retrieval._adapters",
    "agentskit_chat.retrieval._federated",
    "agentskit_chat.retrieval._langchain",
    "agentskit_chat.retrieval._llamaindex",
    "agentskit_chat.retrieval._page_html",
    "agentskit_chat.retrieval._postgres_fts",
    "agentskit_chat.runtime",
    "agentskit_chat.server",
    "agentskit_chat.storage",
    "agentskit_chat.tui",
    "httpx",
    "jsonschema",
    "pydantic_ai",
    "rich",
    "starlette",
    "textual",
    "uvicorn",
    "yaml",
)

#: What Typer imports itself to draw a help screen (Rich, its Markdown, its pydantic adapters).
TYPER_HELP = ("importlib.metadata", "markdown_it", "pydantic")

_RUN = """
import json, sys
from agentskit_chat.cli import app
try:
    app(sys.argv[1:], prog_name="agentskit-chat")
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _loaded(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *args], capture_output=True, text=True, check=False, env=env
    )
    *output, last = done.stdout.strip().splitlines()
    report = json.loads(last)
    return report["code"], "\n".join(output), set(report["modules"])


def _heavy(modules: set[str], allowed: tuple[str, ...] = ()) -> list[str]:
    return sorted(
        name
        for name in modules
        for heavy in HEAVY
        if (name == heavy or name.startswith(heavy + ".")) and heavy not in allowed
    )


def test_version_imports_no_command() -> None:
    code, output, modules = _loaded("--version")
    assert (code, output) == (0, _version.__version__)
    assert "agentskit_chat.cli" in modules
    assert _heavy(modules) == []
    assert not any(name == "rich" or name.startswith("rich.") for name in modules)


def test_help_lists_every_command_and_imports_none() -> None:
    code, output, modules = _loaded("--help")
    names = [command.name for command in app.registered_commands] + [
        group.name for group in app.registered_groups
    ]
    assert code == 0
    assert len(names) == 9
    for name in names:
        assert name is not None
        assert f" {name} " in output
    assert _heavy(modules, allowed=TYPER_HELP) == []


def test_a_command_help_imports_none() -> None:
    code, output, modules = _loaded("ask", "--help")
    assert code == 0
    assert "--agent" in output
    assert _heavy(modules, allowed=TYPER_HELP) == []


def test_ask_imports_only_what_the_answer_needs(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(
        "# Guide\n\n## Cache size\n\nSet `cache_size` to how many pages the cache holds.\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTSKIT_MODEL", "AGENTSKIT_AGENT")}
    for _ in range(2):  # the first run fills the start cache, the second reads it
        code, output, modules = _loaded(
            "ask", "How do I set the cache size?", "--docs", str(docs), env=env
        )
        assert code == 0
        assert "cache_size" in output
        assert "agentskit_chat.assistant" in modules
        found = sorted(
            name
            for name in modules
            for unneeded in NOT_FOR_ASK
            if name == unneeded or name.startswith(unneeded + ".")
        )
        assert found == []


def test_the_english_stemmer_is_loaded_alone_and_stems_the_same() -> None:
    probe = "import sys, agentskit_chat._terms as t; print(t.stem('limiting'), sorted(sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    stemmed, _, modules = done.stdout.partition(" ")
    assert stemmed == "limit"
    assert "'snowballstemmer" not in modules
    assert "english_stemmer" in modules
    reference = snowballstemmer.stemmer("english")
    words = [
        "limits",
        "limiting",
        "limiter",
        "running",
        "generously",
        "caresses",
        "ponies",
        "relational",
        "sky",
    ]
    assert [stem(word) for word in words] == [reference.stemWord(word) for word in words]


def test_names_spelled_in_the_command_line_match_their_sources() -> None:
    assert _version.__version__ == version("agentskit-chat")
    assert get_args(_ask.AgentChoice) == get_args(DocsAgent)
    assert _artifact.ARTIFACT_FILE_NAME == answers.ARTIFACT_FILE_NAME
    assert _artifact.SITE_FILE_NAME == answers.SITE_FILE_NAME
    assert _artifact.DEFAULT_ARTIFACT_HREF == answers.DEFAULT_ARTIFACT_HREF
