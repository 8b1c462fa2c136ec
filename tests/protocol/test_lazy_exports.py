"""The protocol package imports a module when one of its names is first used.

The package's ``__init__`` lists where each exported name lives twice: as imports that only type
checkers read, and as the table its ``__getattr__`` uses. Both must name the same modules and
the same names as ``__all__``; an import checked here in a fresh interpreter loads only what it
uses.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentskit_chat import protocol

INIT = Path(protocol.__file__)


def _type_checking_imports() -> dict[str, list[str]]:
    tree = ast.parse(INIT.read_text("utf-8"))
    found: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found.setdefault(node.module, []).extend(alias.name for alias in node.names)
    return found


def test_the_table_names_every_export_where_type_checkers_find_it() -> None:
    imports = _type_checking_imports()
    assert imports
    table = {module: names.split() for module, names in protocol._MODULES.items()}
    assert table == imports
    assert sorted(protocol._WHERE) == sorted(protocol.__all__)


def test_every_export_is_the_object_its_module_defines() -> None:
    assert protocol.__all__
    for name in protocol.__all__:
        module = importlib.import_module(f"agentskit_chat.protocol.{protocol._WHERE[name]}")
        assert getattr(protocol, name) is getattr(module, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NotAWireModel"):
        getattr(protocol, "NotAWireModel")  # noqa: B009 - the name is unknown on purpose


def test_a_fresh_import_loads_only_the_modules_of_the_names_used() -> None:
    probe = (
        "import json, sys\n"
        "import agentskit_chat.protocol as p\n"
        "def loaded():\n"
        "    return sorted(m for m in sys.modules if m.startswith('agentskit_chat.protocol.'))\n"
        "bare = loaded()\n"
        "p.ExactAnswer\n"
        "print(json.dumps([bare, loaded()]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    bare, used = json.loads(done.stdout)
    assert bare == []
    assert "agentskit_chat.protocol._answer" in used
    for unused in ("_turn", "_cursor", "_session", "_message", "_content", "_component"):
        assert f"agentskit_chat.protocol.{unused}" not in used
