"""The top-level package: curated lazy re-exports that keep subpackage imports light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agentskit_chat


def test_every_exported_name_resolves() -> None:
    for name in agentskit_chat.__all__:
        assert getattr(agentskit_chat, name) is not None, name
    assert sorted(dir(agentskit_chat)) == sorted(agentskit_chat.__all__)


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = agentskit_chat.not_a_name


def test_importing_the_protocol_loads_no_backend() -> None:
    code = (
        "import sys, agentskit_chat.protocol; "
        "print(sorted(m for m in sys.modules if m.startswith(('agentskit_chat.ask', "
        "'agentskit_chat.assistant', 'starlette', 'httpx', 'psycopg', 'redis'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_core_loads_no_model_sdk_web_or_database_driver() -> None:
    code = (
        "import sys, agentskit_chat.runtime, agentskit_chat.conversation, "
        "agentskit_chat.answers, agentskit_chat.answer_commit, agentskit_chat.service, "
        "agentskit_chat.agents; "
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic_ai', 'starlette', "
        "'httpx', 'psycopg', 'redis', 'sqlite3', 'agentskit_chat.ask'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
