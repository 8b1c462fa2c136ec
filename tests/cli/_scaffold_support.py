"""Shared helpers of the scaffolding tests: invoking the CLI and fingerprinting folders."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Final

from typer.testing import CliRunner, Result

from agentskit_chat.cli import app

runner = CliRunner()

#: Each template's files (sorted, as ``init --json`` lists them).
TEMPLATE_FILES: Final[dict[str, list[str]]] = {
    "web": [".gitignore", "README.md", "app.py", "chat.py", "pyproject.toml", "tests/test_chat.py"],
    "terminal": [".gitignore", "README.md", "chat.py", "pyproject.toml", "tests/test_chat.py"],
    "fastapi": [
        ".gitignore",
        "README.md",
        "app.py",
        "chat.py",
        "pyproject.toml",
        "tests/test_chat.py",
    ],
}


def invoke(*args: str | Path, input: str | None = None) -> Result:
    """Run ``agentskit-chat ARGS`` in process."""
    return runner.invoke(app, [os.fspath(a) for a in args], input=input)


def ok_files(result: Result) -> list[str]:
    """The file list of a successful ``--json`` run."""
    assert result.exit_code == 0, result.output
    body: dict[str, Any] = json.loads(result.stdout)
    assert body["ok"] is True
    files: list[str] = body["files"]
    return files


def files_under(root: Path) -> list[str]:
    """Every file below ``root``, as sorted relative POSIX paths."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir())


def tree_hash(root: Path) -> str:
    """A fingerprint of everything below ``root``: names, kinds, link targets and contents."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest.update(f"L {relative} -> {os.readlink(path)}\n".encode())
        elif path.is_dir():
            digest.update(f"D {relative}\n".encode())
        else:
            digest.update(
                f"F {relative} {hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode()
            )
    return digest.hexdigest()
