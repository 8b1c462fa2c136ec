"""The code in README.md and docs/ names only what the package exports: every import of a
Python example resolves, so an example can never point at a name that moved."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


_FROM = re.compile(r"^from (agentskit_chat[\w.]*) import (\([^)]*\)|[^\n]+)", re.MULTILINE)
_IMPORT = re.compile(r"^import (agentskit_chat[\w.]*)", re.MULTILINE)


def _imports(page: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for block in _BLOCK.findall(page.read_text(encoding="utf-8")):
        for module, names in _FROM.findall(block):
            for item in names.strip("()").replace("\n", " ").split(","):
                name = item.split("#")[0].strip().split(" as ")[0].strip()
                if name:
                    found.append((module, name))
        found.extend((module, "") for module in _IMPORT.findall(block))
    return found


EXAMPLES = [(page.name, module, name) for page in PAGES for module, name in _imports(page)]


def test_the_docs_have_python_examples() -> None:
    assert len(EXAMPLES) > 30


@pytest.mark.parametrize(("page", "module", "name"), EXAMPLES)
def test_every_import_of_an_example_resolves(page: str, module: str, name: str) -> None:
    imported = importlib.import_module(module)
    if name:
        assert hasattr(imported, name), f"{page}: {module} has no {name}"
