"""Textual stays inside the terminal chat: no other package imports it."""

from __future__ import annotations

from pathlib import Path

import agentskit_chat
from tests._layers import read_imports

SRC = Path(agentskit_chat.__file__).parent


def test_only_the_tui_package_imports_textual() -> None:
    imports = read_imports(SRC, "agentskit_chat")
    users = {name for name, record in imports.items() if "textual" in record.external}
    assert users, "nothing imports textual: the check would pass on nothing"
    assert all(name.startswith("agentskit_chat.tui.") for name in users), users
    assert "agentskit_chat.tui" not in users
