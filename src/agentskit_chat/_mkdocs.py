"""MkDocs, Material and PyMdown syntax turned into plain CommonMark before a page is parsed.

Documentation written for MkDocs carries syntax that CommonMark does not know, and that a
reader must never see raw in an answer. :func:`plain_markdown` rewrites a page's Markdown so
that only what a reader should read is left, and leaves fenced code untouched (a page that
documents this very syntax shows it in code blocks, and those stay as written):

- admonitions and collapsible blocks (``!!! note "Title"``, ``??? tip``, ``???+``) and
  content tabs (``=== "macOS"``): the title becomes a paragraph and the indented body is
  un-indented, so its paragraphs, lists and code read as the page's own;
- alerts, the GitHub and Obsidian form of an admonition (``> [!tip]``, ``> [!new] New in
  12.0``, ``> [!note]-``): the title, or the kind ("Tip"), becomes the quote's first paragraph;
- PyMdown blocks (``/// warning | Title`` … ``///``, any number of slashes, options lines
  after the header dropped): the title of an admonition, details or tab block becomes a
  paragraph, the body is kept; an ``html`` block keeps only its body;
- snippet includes (``--8<-- "file.md"``, the block form, ``;--8<--``), FastAPI/Typer code
  includes (``{* docs_src/app.py hl[3] *}``), mkdocstrings directives (``::: package.module``
  and their indented options), abbreviation and footnote definitions: dropped;
- attribute lists (``{#anchor}``, ``{: .class}``, ``{ loading=lazy .off-glb }``), icon and
  emoji shortcodes (``:material-lock:``, ``:octicons-arrow-right-24:``), inline-highlight
  prefixes in code spans (`` `#!py3 True` ``), footnote references (``[^1]``), keys
  (``++ctrl+alt+del++`` → ``Ctrl+Alt+Del``), and the marks of PyMdown's inline formats
  (``==mark==``, ``^^insert^^``, CriticMarkup): removed, their text kept.

:func:`mkdocs_syntax` finds what is left of that syntax in a text (outside code), which is how
tests check answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Final

__all__ = ["mkdocs_syntax", "plain_markdown"]

_FENCE: Final = re.compile(r"^\s*(`{3,}|~{3,})")
_ADMONITION: Final = re.compile(
    r"^(?P<indent>[ \t]*)(?:!!!|\?\?\?\+?)[ \t]*(?P<kind>[\w-]+)?"
    r"(?:[ \t]+(?P<title>\"[^\"]*\"|'[^']*'))?[ \t]*$"
)
_TAB: Final = re.compile(r"^(?P<indent>[ \t]*)===[!+]?[ \t]+(?P<title>\"[^\"]*\"|'[^']*')[ \t]*$")
_BLOCK: Final = re.compile(
    r"^(?P<indent>[ \t]*)(?P<slashes>/{3,})[ \t]*(?P<kind>[\w-]+)(?:[ \t]*\|[ \t]*(?P<title>.*?))?"
    r"[ \t]*$"
)
_BLOCK_OPTION: Final = re.compile(r"^[ \t]+[\w-]+:")
_ALERT: Final = re.compile(
    r"^(?P<quote>[ \t]*(?:>[ \t]?)+)\[!(?P<kind>[\w-]+)\][+-]?(?:[ \t]+(?P<title>\S.*?))?[ \t]*$"
)
_SNIPPET: Final = re.compile(r"^[ \t]*;?-{1,2}8<-{1,2}(?P<file>[ \t]+\S.*)?[ \t]*$")
_CODE_INCLUDE: Final = re.compile(r"^[ \t]*\{\*.*\*\}[ \t]*$")
_MKDOCSTRINGS: Final = re.compile(r"^(?P<indent>[ \t]*):::[ \t]+\S")
_DEFINITION: Final = re.compile(r"^(?:\*\[[^\]]+\]|\[\^[^\]]+\]):")
_ATTR_TOKEN: Final = r"(?:[#.][^\s{}]+|[\w:-]+=(?:\"[^\"]*\"|'[^']*'|[^\s}\"']+))"
_ATTRS: Final = re.compile(
    r"[ \t]*\{:?[ \t]*" + _ATTR_TOKEN + r"(?:[ \t]+" + _ATTR_TOKEN + r")*[ \t]*\}"
)
_ATTRS_LINE: Final = re.compile(r"^[ \t]*" + _ATTRS.pattern.removeprefix("[ \\t]*") + r"[ \t]*$")
_ICON: Final = re.compile(
    r":(?:material|octicons|fontawesome|simple|lucide|fa|si)-[a-z0-9-]+:[ \t]?"
)
_EMOJI: Final = {
    ":white_check_mark:": "✅",
    ":heavy_check_mark:": "✔",
    ":x:": "❌",
    ":warning:": "⚠",
}
_CODE_SPAN: Final = re.compile(r"(`+)(.+?)\1")
_HILITE: Final = re.compile(r"^#!\S+[ \t]+")
_FOOTNOTE_REF: Final = re.compile(r"\[\^[^\]\s]+\]")
#: A reference-style link whose definition lives in an included file: its text is kept.
_REF_LINK: Final = re.compile(r"(?<!!)\[([^\]\n]+)\]\[[^\]\n]*\]")
_KEYS: Final = re.compile(r"\+\+([\w-]+(?:\+[\w-]+)*)\+\+")
_MARKS: Final = re.compile(r"(==|\^\^)(?=\S)(.+?)(?<=\S)\1")
_CRITIC_ADD: Final = re.compile(r"\{\+\+(.*?)\+\+\}|\{==(.*?)==\}")
_CRITIC_DROP: Final = re.compile(r"\{--.*?--\}|\{>>.*?<<\}")
_CRITIC_SWAP: Final = re.compile(r"\{~~.*?~>(.*?)~~\}")
#: Blocks whose title is worth a paragraph (an ``html`` block's "title" is a CSS selector).
#: The first character (after any indentation) of every line the block patterns above match:
#: a line starting with none of them is only inline text.
_BLOCK_STARTS: Final = frozenset("`~!?=/>;-{:*[")
_TITLED_TEXT: Final = """
    admonition note abstract summary tldr info todo tip hint important success check done
    question help faq warning caution attention failure fail missing danger error bug
    example quote cite details tab new settings
"""
_TITLED: Final = frozenset(_TITLED_TEXT.split())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _fence_end(lines: Sequence[str], start: int) -> int:
    """The index after the fenced code block opening at ``start``."""
    match = _FENCE.match(lines[start])
    assert match is not None
    marker = match.group(1)
    for index in range(start + 1, len(lines)):
        closing = _FENCE.match(lines[index])
        if (
            closing
            and closing.group(1)[0] == marker[0]
            and len(closing.group(1)) >= len(marker)
            and not lines[index].strip()[len(closing.group(1)) :].strip()
        ):
            return index + 1
    return len(lines)


def _indented_body(lines: Sequence[str], start: int, indent: int) -> int:
    """The index after the body indented deeper than ``indent`` that starts at ``start``."""
    end = start
    index = start
    while index < len(lines):
        line = lines[index]
        if line.strip() and _indent(line) <= indent:
            break
        index += 1
        if line.strip():
            end = index
    return end


def _dedent(lines: Sequence[str], indent: int) -> list[str]:
    """``lines`` moved left so that their body (indented past ``indent``) starts at ``indent``."""
    deeper = [_indent(line) for line in lines if line.strip()]
    cut = min(deeper, default=indent) - indent
    return [line[cut:] if line.strip() else "" for line in lines]


def _title(raw: str | None) -> str:
    text = (raw or "").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return _inline(text).strip()


def _titled(indent: int, title: str, body: list[str]) -> Iterator[str]:
    if title:
        yield " " * indent + title
        yield ""
    yield from body
    yield ""


def _block_end(lines: Sequence[str], start: int, slashes: str) -> int:
    """The index of the line closing the ``///`` block opened at ``start`` (or the end)."""
    index = start + 1
    while index < len(lines):
        line = lines[index]
        if _FENCE.match(line):
            index = _fence_end(lines, index)
            continue
        if line.strip() == slashes:
            return index
        index += 1
    return len(lines)


def _code_span(match: re.Match[str]) -> str:
    ticks, content = match.group(1), match.group(2)
    return f"{ticks}{_HILITE.sub('', content)}{ticks}"


def _prose(text: str) -> str:
    """Inline syntax removed from text that is not code.

    Each rewrite runs only when the text holds the character its pattern cannot match without
    (most lines hold none): the result is the same, at a fraction of the cost on a large folder.
    """
    if ":" in text:
        text = _ICON.sub("", text)
        for code, emoji in _EMOJI.items():
            text = text.replace(code, emoji)
    if "{" in text:
        text = _ATTRS.sub("", text)
    if "[" in text:
        text = _FOOTNOTE_REF.sub("", text)
        text = _REF_LINK.sub(r"\1", text)
    if "{" in text:
        text = _CRITIC_DROP.sub("", text)
        text = _CRITIC_SWAP.sub(r"\1", text)
        text = _CRITIC_ADD.sub(lambda m: m.group(1) or m.group(2) or "", text)
    if "++" in text:
        text = _KEYS.sub(
            lambda m: "+".join(key.capitalize() for key in m.group(1).split("+")), text
        )
    if "==" in text or "^^" in text:
        text = _MARKS.sub(r"\2", text)
    return text


def _inline(line: str) -> str:
    """``line`` with inline MkDocs syntax removed outside its code spans."""
    if "`" not in line:
        return _prose(line)
    parts: list[str] = []
    last = 0
    for match in _CODE_SPAN.finditer(line):
        parts.append(_prose(line[last : match.start()]))
        parts.append(_code_span(match))
        last = match.end()
    parts.append(_prose(line[last:]))
    return "".join(parts)


def _render(lines: Sequence[str]) -> Iterator[str]:
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.lstrip()[:1] not in _BLOCK_STARTS:  # most lines: no block syntax to look for
            yield _inline(line)
            index += 1
            continue
        if _FENCE.match(line):
            end = _fence_end(lines, index)
            yield from lines[index:end]
            index = end
            continue
        admonition = _ADMONITION.match(line) or _TAB.match(line)
        if admonition is not None:
            indent = _indent(line)
            end = _indented_body(lines, index + 1, indent)
            groups = admonition.groupdict()
            title = _title(groups.get("title")) or (groups.get("kind") or "").capitalize()
            body = list(_render(_dedent(lines[index + 1 : end], indent)))
            yield from _titled(indent, title, body)
            index = end
            continue
        block = _BLOCK.match(line)
        if block is not None:
            indent = _indent(line)
            end = _block_end(lines, index, block.group("slashes"))
            first = index + 1
            while first < end and _BLOCK_OPTION.match(lines[first]):
                first += 1
            kind = block.group("kind").lower()
            title = _title(block.group("title")) if kind in _TITLED else ""
            body = list(_render(lines[first:end]))
            yield from _titled(indent, title, body)
            index = end + 1
            continue
        snippet = _SNIPPET.match(line)
        if snippet is not None:
            index += 1
            if snippet.group("file") is None:  # the block form: files until the closing line
                while index < len(lines) and _SNIPPET.match(lines[index]) is None:
                    index += 1
                index += 1
            continue
        if _MKDOCSTRINGS.match(line) is not None:  # an API reference directive and its options
            index = _indented_body(lines, index + 1, _indent(line))
            continue
        alert = _ALERT.match(line)
        if alert is not None:  # "> [!tip]": the title (or the kind) as the quote's paragraph
            quote = alert.group("quote")
            yield quote + (_title(alert.group("title")) or alert.group("kind").capitalize())
            yield quote.rstrip()
            index += 1
            continue
        if _CODE_INCLUDE.match(line) or _DEFINITION.match(line) or _ATTRS_LINE.match(line):
            index += 1
            continue
        yield _inline(line)
        index += 1


def plain_markdown(markdown: str) -> str:
    """``markdown`` with MkDocs, Material and PyMdown syntax rewritten as plain CommonMark
    (see the module documentation); fenced code is left as written."""
    return "\n".join(_render(markdown.split("\n")))


_LEFTOVER: Final = re.compile(
    r"^[ \t]*(?:!!!|\?\?\?|===[ \t]+[\"']|/{3,}|;?--8<--|:::[ \t])"
    r"|\{\*.*?\*\}|\{:|\{[ \t]*[#.][\w-]+[^}]*\}|:(?:material|octicons|fontawesome)-[a-z0-9-]+:"
    r"|`#!\w|^[ \t>]*\[![\w-]+\]",
    re.MULTILINE,
)


def mkdocs_syntax(text: str) -> list[str]:
    """The pieces of MkDocs, Material or PyMdown syntax in ``text`` outside fenced code and
    code spans (none in a clean answer)."""
    lines = text.split("\n")
    kept: list[str] = []
    index = 0
    while index < len(lines):
        if _FENCE.match(lines[index]):
            index = _fence_end(lines, index)
            continue
        kept.append(_CODE_SPAN.sub("``", lines[index]))
        index += 1
    return [match.group(0) for match in _LEFTOVER.finditer("\n".join(kept))]
