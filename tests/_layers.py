"""Reading a source tree's imports and checking them against a layer table.

The table lives in ``docs/architecture.md`` (one row a folder: its layer and what it may
import), so the page that explains the layers is also the rule the tests enforce.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: The layers, bottom first. A package may import packages of lower layers that its row lists;
#: in ``core`` and ``surfaces`` a row may also list a peer of its own layer (core packages
#: build on each other; the CLI builds the server's apps), never in ``integrations``.
LAYERS = ("foundation", "protocol", "core", "integrations", "application", "surfaces", "facade")
PEERS_ALLOWED = frozenset({"core", "surfaces"})

_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([a-z]+)\s*\|[^|]*\|\s*(.*?)\s*\|\s*$")


@dataclass(frozen=True)
class Row:
    """One folder (or top-level module) of the table."""

    name: str
    layer: str
    may_import: frozenset[str]


@dataclass
class Imports:
    """Every import of one module: package-level targets and module-level runtime edges."""

    module: str
    targets: set[str] = field(default_factory=set)  # other top-level names of the project
    runtime_edges: set[str] = field(default_factory=set)  # modules imported at run time
    external: set[str] = field(default_factory=set)  # top-level modules of other projects


def read_table(markdown: str) -> dict[str, Row]:
    """The layer table's rows, by folder name (``protocol``, ``_terms``, ``__init__``)."""
    rows: dict[str, Row] = {}
    for line in markdown.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        name = match.group(1).removesuffix("/").removesuffix(".py")
        targets = frozenset(re.findall(r"`([^`]+)`", match.group(3)))
        rows[name] = Row(name, match.group(2), frozenset(t.removesuffix("/") for t in targets))
    return rows


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def module_name(root: Path, path: Path, package: str) -> str:
    """``package.sub.mod`` for ``root/sub/mod.py`` (``__init__`` is the package itself)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def read_imports(root: Path, package: str) -> dict[str, Imports]:
    """The imports of every module under ``root`` (the folder of ``package``)."""
    found: dict[str, Imports] = {}
    known = {module_name(root, path, package) for path in root.rglob("*.py")}
    for path in sorted(root.rglob("*.py")):
        name = module_name(root, path, package)
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = _type_checking_lines(tree)
        record = Imports(name)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            modules: list[str] = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: max(1, len(base) - (node.level - 1))]
                    source = ".".join([*base, node.module] if node.module else base)
                else:
                    source = node.module or ""
                # ``from pkg.sub import mod`` imports the submodule ``mod`` when there is one.
                modules = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
                    for alias in node.names
                ]
            for target in modules:
                if target != package and not target.startswith(package + "."):
                    if target and target != "__future__":
                        record.external.add(target.split(".")[0])
                    continue
                top = target.split(".")[1] if "." in target else "__init__"
                own = name.split(".")[1] if "." in name else "__init__"
                if top != own:
                    record.targets.add(top)
                if node.lineno not in typing_only:
                    record.runtime_edges.add(target)
        found[name] = record
    return found


def layer_violations(
    table: Mapping[str, Row], imports: Mapping[str, Imports], package: str
) -> list[str]:
    """Every import that the table does not allow, and every row that breaks the layering."""
    problems: list[str] = []
    rank = {layer: index for index, layer in enumerate(LAYERS)}
    for row in table.values():
        if row.layer not in rank:
            problems.append(f"{row.name}: unknown layer {row.layer!r}")
            continue
        for target in sorted(row.may_import):
            other = table.get(target)
            if other is None:
                problems.append(f"{row.name}: may import unknown {target!r}")
            elif rank.get(other.layer, 99) > rank[row.layer]:
                problems.append(f"{row.name}: upward import of {target} ({other.layer})")
            elif other.layer == row.layer and row.layer not in PEERS_ALLOWED:
                problems.append(f"{row.name}: sideways import of {target} ({other.layer})")
    for name, record in sorted(imports.items()):
        own = name.split(".")[1] if "." in name else "__init__"
        found = table.get(own)
        if found is None:
            problems.append(f"{name}: its folder has no row in the table")
            continue
        for target in sorted(record.targets - found.may_import):
            problems.append(f"{name}: imports {package}.{target}, which {own} may not import")
    return problems


def cycles(imports: Mapping[str, Imports]) -> list[list[str]]:
    """The import cycles among the modules (run-time imports only), each as a module list."""
    graph = {
        name: sorted(e for e in record.runtime_edges if e in imports and e != name)
        for name, record in imports.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        # Iterative Tarjan: (node, next child position).
        work: list[tuple[str, int]] = [(start, 0)]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, position = work[-1]
            children = graph[node]
            if position < len(children):
                work[-1] = (node, position + 1)
                child = children[position]
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def outside_imports(
    imports: Mapping[str, Imports], prefix: str, allowed: Iterable[str]
) -> list[str]:
    """``module: name`` for each import of another project, under ``prefix``, not in ``allowed``."""
    allow = set(allowed)
    return [
        f"{name}: {external}"
        for name, record in sorted(imports.items())
        if name == prefix or name.startswith(prefix + ".")
        for external in sorted(record.external - allow)
    ]
