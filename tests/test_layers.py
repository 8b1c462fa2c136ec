"""The layers of ``docs/architecture.md`` hold: no upward or sideways import, no cycle, and the
protocol package imports only its allow-list."""

from __future__ import annotations

import re
from pathlib import Path

import agentskit_chat
from tests._layers import cycles, layer_violations, outside_imports, read_imports, read_table

SRC = Path(agentskit_chat.__file__).parent
ARCHITECTURE = SRC.parents[1] / "docs" / "architecture.md"

#: What the wire contract may import: part of the standard library, and four small libraries.
PROTOCOL_ALLOWED = frozenset(
    {
        "__future__",
        "bisect",
        "codecs",
        "collections",
        "copy",
        "dataclasses",
        "datetime",
        "functools",
        "hashlib",
        "importlib",
        "itertools",
        "json",
        "math",
        "re",
        "types",
        "typing",
        "urllib",
        "pydantic",
        "pydantic_core",
        "orjson",
        "unicodedata2",
        "ada_url",
    }
)


def _table() -> dict[str, object]:
    return dict(read_table(ARCHITECTURE.read_text(encoding="utf-8")))


def test_the_table_has_a_row_for_every_folder() -> None:
    table = read_table(ARCHITECTURE.read_text(encoding="utf-8"))
    folders = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in SRC.glob("*.py")}
    assert folders and modules
    assert set(table) == folders | modules


def test_every_import_follows_the_layer_table() -> None:
    table = read_table(ARCHITECTURE.read_text(encoding="utf-8"))
    imports = read_imports(SRC, "agentskit_chat")
    assert len(imports) > 100
    assert layer_violations(table, imports, "agentskit_chat") == []


def test_there_is_no_import_cycle() -> None:
    imports = read_imports(SRC, "agentskit_chat")
    assert imports
    assert cycles(imports) == []


def test_the_protocol_imports_only_its_allow_list() -> None:
    imports = read_imports(SRC, "agentskit_chat")
    protocol = [name for name in imports if name.startswith("agentskit_chat.protocol")]
    assert len(protocol) > 10
    assert outside_imports(imports, "agentskit_chat.protocol", PROTOCOL_ALLOWED) == []


# --- the checks themselves, on a small tree with planted violations ------------------------------

TABLE = """
| Folder | Layer | Owns | May import |
|---|---|---|---|
| `errors.py` | foundation | errors | — |
| `protocol/` | protocol | wire | `errors` |
| `core/` | core | logic | `protocol`, `errors` |
| `db/` | integrations | a store | `core` |
| `web/` | integrations | a peer | `core` |
"""


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


CLEAN = {
    "__init__.py": "",
    "errors.py": "",
    "protocol/__init__.py": "from pkg.errors import Error\nimport json\n",
    "core/__init__.py": "from ._a import a\n",
    "core/_a.py": "from pkg.protocol import x\nfrom . import _b\n",
    "core/_b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._a import a\n",
    "db/__init__.py": "from pkg.core import a\n",
    "web/__init__.py": "def late():\n    from pkg.core import a\n",
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**CLEAN, "__init__.py": ""})
    table = read_table(TABLE + "| `__init__.py` | facade | names | — |\n")
    imports = read_imports(root, "pkg")
    assert layer_violations(table, imports, "pkg") == []
    assert cycles(imports) == []  # a TYPE_CHECKING import is no cycle
    assert outside_imports(imports, "pkg.protocol", {"json"}) == []


def test_planted_violations_are_each_reported(tmp_path: Path) -> None:
    planted = {
        **CLEAN,
        # upward: core reaches into an integration, inside a function (lazy imports count)
        "core/_c.py": "def f():\n    from pkg.db import store\n",
        # sideways: one integration imports a peer
        "web/_views.py": "from pkg.db import store\n",
        # a cycle at run time between two modules
        "db/_x.py": "from . import _y\n",
        "db/_y.py": "from pkg.db import _x\n",
        # the protocol imports a web framework
        "protocol/_http.py": "import starlette.requests\n",
        # a folder missing from the table
        "extra/__init__.py": "",
    }
    root = _tree(tmp_path, planted)
    table = read_table(TABLE + "| `__init__.py` | facade | names | — |\n")
    imports = read_imports(root, "pkg")
    problems = layer_violations(table, imports, "pkg")
    assert "pkg.core._c: imports pkg.db, which core may not import" in problems
    assert "pkg.web._views: imports pkg.db, which web may not import" in problems
    assert "pkg.extra: its folder has no row in the table" in problems
    assert cycles(imports) == [["pkg.db._x", "pkg.db._y"]]
    assert outside_imports(imports, "pkg.protocol", {"json"}) == ["pkg.protocol._http: starlette"]


def test_a_table_that_allows_an_upward_or_sideways_import_is_refused() -> None:
    table = read_table(
        TABLE
        + "| `base/` | core | x | `db` |\n"
        + "| `peer/` | integrations | x | `web` |\n"
        + "| `cli/` | surfaces | x | `ghost` |\n"
    )
    problems = layer_violations(table, {}, "pkg")
    assert "base: upward import of db (integrations)" in problems
    assert "peer: sideways import of web (integrations)" in problems
    assert "cli: may import unknown 'ghost'" in problems


_CITATION = re.compile(r"DECISIONS [0-9]+|§|\b(?:behaviour|protocol)-[a-z-]+\.md")


def test_comments_state_reasons_instead_of_citing_spec_files() -> None:
    # The specification is not part of this repository: a comment that cites one of its files
    # or sections tells a reader nothing.
    sources = sorted(SRC.rglob("*.py"))
    assert sources
    cited = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if _CITATION.search(line)
    ]
    assert cited == []
