"""YAML front matter of a Markdown file: a fallback title and declared knowledge entries.

A file may open with a ``---`` line, YAML, and a closing ``---`` (or ``...``) line. Under
``knowledge:`` it lists entries ``{id?, kind, label, aliases, answer, citations?}``. Every shape
rule and every per-entry bound of the artifact is checked here, so a mistake fails the build with
the file and the line instead of producing an artifact that consumers would reject.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from agentskit_chat.errors import BuildError
from agentskit_chat.protocol import KNOWLEDGE_ENTRY_KINDS, normalize_knowledge_key
from agentskit_chat.protocol._knowledge import MAX_ALIASES, MAX_CITATIONS, MAX_KEY_UNITS
from agentskit_chat.protocol._text import js_trim, utf16_len
from agentskit_chat.protocol._types import is_safe_id

if TYPE_CHECKING:
    # Imported where a page has front matter: most pages have none.
    import yaml

__all__ = [
    "LABEL_UNITS",
    "MARKDOWN_UNITS",
    "DeclaredCitation",
    "DeclaredEntry",
    "FrontMatter",
    "alias_fits",
    "read_front_matter",
]

LABEL_UNITS: Final = 256
MARKDOWN_UNITS: Final = 16384
_ENTRY_KEYS: Final = ("id", "kind", "label", "aliases", "answer", "citations")
_CITATION_KEYS: Final = ("id", "title", "href")
# Front matter YAML starts on the file's second line; PyYAML counts lines from 0.
_FIRST_LINE: Final = 2


@dataclass(frozen=True, slots=True)
class DeclaredCitation:
    """A citation written in front matter; ``href`` may be a ``#anchor`` of the document."""

    id: str | None
    title: str
    href: str
    line: int


@dataclass(frozen=True, slots=True)
class DeclaredEntry:
    """A knowledge entry written in front matter, shape-checked and trimmed.

    ``citations`` is ``None`` when the key was absent (the producer then cites the document).
    """

    id: str | None
    kind: str
    label: str
    aliases: tuple[str, ...]
    markdown: str
    citations: tuple[DeclaredCitation, ...] | None
    line: int


@dataclass(frozen=True, slots=True)
class FrontMatter:
    """What a file's front matter says, and how many lines the block spans (0: none)."""

    title: str | None
    entries: tuple[DeclaredEntry, ...]
    lines: int


def alias_fits(alias: str) -> bool:
    """Whether a trimmed alias respects the 512-unit bound, before and after normalization."""
    return (
        0 < utf16_len(alias) <= MAX_KEY_UNITS
        and utf16_len(normalize_knowledge_key(alias)) <= MAX_KEY_UNITS
    )


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + _FIRST_LINE


def _value_node(node: yaml.Node | None, key: str) -> tuple[int | None, yaml.Node | None]:
    """The line of ``key`` in a mapping node, and its value node."""
    import yaml  # noqa: PLC0415

    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return _line(key_node), value_node
    return None, None


def _items(node: yaml.Node | None) -> list[yaml.Node]:
    import yaml  # noqa: PLC0415

    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _load_yaml(source: str, display: str) -> tuple[Any, yaml.Node | None]:
    import yaml  # noqa: PLC0415

    try:
        # The reader checks every character as it is built: a control character fails here.
        loader = yaml.SafeLoader(source)
    except yaml.YAMLError:
        raise BuildError(
            "front matter is not valid YAML: it holds a character YAML does not allow",
            file=display,
            line=1,
        ) from None
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = int(mark.line) + _FIRST_LINE if mark is not None else 1
        problem = exc.problem or exc.context or "syntax error"
        raise BuildError(
            f"front matter is not valid YAML: {problem}", file=display, line=line
        ) from None
    except yaml.YAMLError as exc:
        raise BuildError(f"front matter is not valid YAML: {exc}", file=display, line=1) from None
    finally:
        loader.dispose()
    return data, node


class _Checker:
    """Shape checks for one declared entry, each failure naming the file and line."""

    def __init__(self, display: str, number: int, node: yaml.Node) -> None:
        self.display = display
        self.number = number
        self.node = node
        self.line = _line(node)

    def fail(self, reason: str, *, key: str | None = None, line: int | None = None) -> BuildError:
        if line is None:
            line = (_value_node(self.node, key)[0] if key else None) or self.line
        return BuildError(f"knowledge entry {self.number}: {reason}", file=self.display, line=line)

    def text(
        self, value: object, name: str, limit: int, *, key: str, line: int | None = None
    ) -> str:
        if not isinstance(value, str) or not js_trim(value):
            raise self.fail(f"`{name}` must be a non-blank string", key=key, line=line)
        trimmed = js_trim(value)
        if utf16_len(trimmed) > limit:
            raise self.fail(
                f"`{name}` is longer than {limit} UTF-16 code units", key=key, line=line
            )
        return trimmed

    def safe_id(self, value: object, *, key: str, line: int | None = None) -> str:
        if not is_safe_id(value):
            raise self.fail(
                "`id` must be a safe identifier: 1 to 128 of A-Z a-z 0-9 . _ : - starting "
                "with a letter or a digit",
                key=key,
                line=line,
            )
        return str(value)


def _entry(raw: object, node: yaml.Node, number: int, display: str) -> DeclaredEntry:
    check = _Checker(display, number, node)
    if not isinstance(raw, dict):
        raise check.fail("must be a mapping with kind, label, aliases and answer")
    for key in raw:
        if key not in _ENTRY_KEYS:
            raise check.fail(f"unknown key `{key}` (expected {', '.join(_ENTRY_KEYS)})", key=key)
    entry_id = check.safe_id(raw["id"], key="id") if "id" in raw else None
    kind = raw.get("kind")
    if kind not in KNOWLEDGE_ENTRY_KINDS:
        raise check.fail(f"`kind` must be one of {', '.join(KNOWLEDGE_ENTRY_KINDS)}", key="kind")
    label = check.text(raw.get("label"), "label", LABEL_UNITS, key="label")
    markdown = check.text(raw.get("answer"), "answer", MARKDOWN_UNITS, key="answer")
    aliases = _aliases(raw.get("aliases", [label]), check)
    citations = _citations(raw, check)
    return DeclaredEntry(entry_id, str(kind), label, aliases, markdown, citations, check.line)


def _aliases(value: object, check: _Checker) -> tuple[str, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_ALIASES:
        raise check.fail(f"`aliases` must be a list of 1 to {MAX_ALIASES} strings", key="aliases")
    nodes = _items(_value_node(check.node, "aliases")[1])
    aliases: list[str] = []
    seen: set[str] = set()
    for index, alias in enumerate(value):
        line = _line(nodes[index]) if index < len(nodes) else None
        name = f"aliases[{index + 1}]"
        trimmed = check.text(alias, name, MAX_KEY_UNITS, key="aliases", line=line)
        key = normalize_knowledge_key(trimmed)
        if utf16_len(key) > MAX_KEY_UNITS:
            raise check.fail(
                f"`{name}` is longer than {MAX_KEY_UNITS} UTF-16 code units once normalized",
                key="aliases",
                line=line,
            )
        if key in seen:
            raise check.fail(
                f"`{name}` repeats an earlier alias once normalized", key="aliases", line=line
            )
        seen.add(key)
        aliases.append(trimmed)
    return tuple(aliases)


def _citations(raw: dict[Any, Any], check: _Checker) -> tuple[DeclaredCitation, ...] | None:
    if "citations" not in raw:
        return None
    value = raw["citations"]
    if not isinstance(value, list) or len(value) > MAX_CITATIONS:
        raise check.fail(f"`citations` must be a list of at most {MAX_CITATIONS}", key="citations")
    nodes = _items(_value_node(check.node, "citations")[1])
    citations: list[DeclaredCitation] = []
    for index, item in enumerate(value):
        line = _line(nodes[index]) if index < len(nodes) else check.line
        if not isinstance(item, dict) or any(key not in _CITATION_KEYS for key in item):
            raise check.fail(
                f"citation {index + 1} must be a mapping with title, href and an optional id",
                line=line,
            )
        cid = check.safe_id(item["id"], key="citations", line=line) if "id" in item else None
        title = check.text(item.get("title"), "title", LABEL_UNITS, key="citations", line=line)
        href = item.get("href")
        if not isinstance(href, str) or not href:
            raise check.fail(f"citation {index + 1}: `href` must be a string", line=line)
        citations.append(DeclaredCitation(cid, title, href, line))
    return tuple(citations)


def read_front_matter(text: str, display: str) -> FrontMatter:
    """Read the front matter block at the start of ``text`` (LF line ends), if there is one.

    Raises:
        BuildError: an unclosed block, invalid YAML, or a declared entry that breaks a rule,
            with the file and the 1-based line.
    """
    lines = text.split("\n")
    if lines[0].rstrip(" \t") != "---":
        return FrontMatter(None, (), 0)
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip(" \t") in ("---", "...")), 0)
    if not end:
        raise BuildError("front matter opened with '---' is never closed", file=display, line=1)
    data, node = _load_yaml("\n".join(lines[1:end]), display)
    if data is None:
        return FrontMatter(None, (), end + 1)
    if not isinstance(data, dict):
        raise BuildError("front matter must be a YAML mapping", file=display, line=_FIRST_LINE)
    title = data.get("title")
    if title is not None and (not isinstance(title, str) or not js_trim(title)):
        title_line = _value_node(node, "title")[0] or _FIRST_LINE
        raise BuildError(
            "front matter `title` must be a non-blank string", file=display, line=title_line
        )
    declared = data.get("knowledge")
    if declared is None:
        return FrontMatter(title, (), end + 1)
    line, value_node = _value_node(node, "knowledge")
    if not isinstance(declared, list):
        raise BuildError(
            "front matter `knowledge` must be a list of entries", file=display, line=line
        )
    nodes = _items(value_node)
    entries = tuple(
        _entry(item, nodes[index], index + 1, display) for index, item in enumerate(declared)
    )
    return FrontMatter(js_trim(title) if title is not None else None, entries, end + 1)
