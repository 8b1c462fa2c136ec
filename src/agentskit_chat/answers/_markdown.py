"""Reading the Markdown of one file for the artifact producer, and writing answer Markdown.

A document yields its title, a short summary, its headings with GitHub-style anchors, the
distinct command lines of its shell-fenced code blocks, the commands and package names it
mentions (see ``_mentions``), and what its front matter declares.
Markdown structure comes from markdown-it-py (CommonMark), never from hand parsing. Everything
here is pure: the producer does the file system work.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Final

from markdown_it import MarkdownIt
from markdown_it.token import Token

from agentskit_chat._doclinks import HeadingSlugger, github_slug
from agentskit_chat._mkdocs import plain_markdown
from agentskit_chat.protocol import normalize_knowledge_key
from agentskit_chat.protocol._text import js_trim, utf16_len

from ._front_matter import DeclaredEntry
from ._mentions import Mention, code_span_mentions

if TYPE_CHECKING:
    from ._documents import SourceDocument

__all__ = [
    "PROMPT_LANGUAGES",
    "SHELL_LANGUAGES",
    "Command",
    "Heading",
    "MarkdownDocument",
    "clip_units",
    "code_block",
    "escape_markdown",
    "github_slug",
    "keep_reading",
    "link",
    "page_reading",
    "parse_page",
    "read_markdown_document",
    "remember_reading",
]

SUMMARY_UNITS: Final = 320
#: Fence languages whose lines are commands. In the prompt languages, only ``$ `` lines are.
SHELL_LANGUAGES: Final = frozenset({"sh", "bash", "shell", "zsh", "console", "shell-session"})
PROMPT_LANGUAGES: Final = frozenset({"console", "shell-session"})
_MARKDOWN_PUNCTUATION: Final = re.compile(r"([\\`*_\[\]<>#|~])")
_PARSER: Final = MarkdownIt("commonmark")


@dataclass(frozen=True, slots=True)
class Heading:
    """A heading: its level, plain text, GitHub-style anchor (may be empty) and 1-based line."""

    level: int
    text: str
    anchor: str
    line: int


@dataclass(frozen=True, slots=True)
class Command:
    """A distinct command line and the section it first appears in (``None``: before any)."""

    text: str
    section: Heading | None
    line: int


@dataclass(frozen=True, slots=True)
class MarkdownDocument:
    """What the producer needs from one Markdown file.

    Attributes:
        title: The first level-1 heading, else front matter ``title``, else the file stem.
        title_heading: The heading the title came from, if any.
        summary: The first top-level paragraph as escaped inline Markdown, clipped; may be empty.
        headings: Every other non-empty heading, in document order.
        commands: Distinct command lines (by normalized key), first occurrence first.
        declared: Entries declared under ``knowledge:`` in the front matter.
        mentions: Distinct commands and package names written in inline code (by normalized
            key), first occurrence first.
    """

    title: str
    title_heading: Heading | None
    summary: str
    headings: tuple[Heading, ...]
    commands: tuple[Command, ...]
    declared: tuple[DeclaredEntry, ...]
    mentions: tuple[Mention, ...] = ()


# --- small text helpers ---------------------------------------------------------------------------


def clip_units(text: str, units: int) -> str:
    """At most ``units`` UTF-16 code units of ``text``, never splitting a character."""
    if utf16_len(text) <= units:
        return text
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return text[:index]
    return text


def escape_markdown(text: str) -> str:
    """Backslash-escape the punctuation that could start Markdown syntax inside inline text."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def _code_span(text: str) -> str:
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def code_block(text: str, language: str) -> str:
    """A fenced code block long enough never to be closed by ``text`` itself."""
    longest = max((len(run) for run in re.findall("`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def link(text: str, href: str) -> str:
    """A Markdown link with escaped text; the destination is bracketed when it needs to be."""
    destination = f"<{href}>" if any(c in href for c in " ()<>") else href
    return f"[{escape_markdown(text)}]({destination})"


# --- Markdown body --------------------------------------------------------------------------------


def _plain_text(children: Sequence[Token]) -> str:
    parts: list[str] = []
    for child in children:
        if child.type in ("text", "code_inline", "image"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return js_trim("".join(parts))


def _summary(children: Sequence[Token]) -> str:
    """Escaped inline Markdown of a paragraph (code spans kept, links as text), clipped."""
    atoms: list[tuple[str, int]] = []  # (markdown, visible UTF-16 units); " " is a break
    for child in children:
        if child.type in ("text", "image"):
            for part in re.split(r"(\s+)", child.content):
                if part:
                    atoms.append((" ", 1) if part.isspace() else (escape_markdown(part), len(part)))
        elif child.type == "code_inline":
            atoms.append((_code_span(child.content), utf16_len(child.content)))
        elif child.type in ("softbreak", "hardbreak"):
            atoms.append((" ", 1))
    out: list[str] = []
    used = 0
    for markdown, units in atoms:
        if markdown == " ":
            if out and out[-1] != " ":
                out.append(" ")
                used += 1
        elif out and used + units > SUMMARY_UNITS:
            return "".join(out).rstrip(" ") + " …"
        else:
            out.append(markdown)
            used += units
    return "".join(out).rstrip(" ")


def _fence_language(info: str) -> str:
    words = info.strip().strip("{}").split()
    return words[0].lower().lstrip(".") if words else ""


def _command_lines(content: str, language: str) -> list[tuple[str, int]]:
    """Command lines of a shell block with their 0-based line offset inside the block."""
    prompt_only = language in PROMPT_LANGUAGES
    commands: list[tuple[str, int]] = []
    pending: list[str] | None = None
    start = 0
    for offset, raw in enumerate(content.split("\n")):
        line = js_trim(raw)
        if pending is not None:
            if line.endswith("\\"):
                pending.append(js_trim(line[:-1]))
                continue
            pending.append(line)
            commands.append((" ".join(p for p in pending if p), start))
            pending = None
            continue
        if line == "$" or line.startswith("$ "):
            line = js_trim(line[1:])
        elif prompt_only:
            continue
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending, start = [js_trim(line[:-1])], offset
            continue
        commands.append((line, offset))
    if pending is not None and any(pending):
        commands.append((" ".join(p for p in pending if p), start))
    return commands


def _named(stem: str) -> str:
    """A page's name written as words: ``release-notes`` → ``Release notes``."""
    words = " ".join(re.split(r"[-_\s]+", stem)).strip()
    return (words[:1].upper() + words[1:]) or stem


def parse_page(page: SourceDocument) -> list[Token]:
    """The page's Markdown as CommonMark tokens: the one parse of a page that exact answers and
    the retrieval corpus share.

    MkDocs, Material or PyMdown syntax is read as plain Markdown (so that no answer shows it; a
    page without it is read exactly as written), and blank lines stand in place of the front
    matter, so that the tokens' line numbers are the file's.
    """
    front = page.front_matter
    body = plain_markdown("\n".join(page.text.split("\n")[front.lines :]))
    return _PARSER.parse("\n" * front.lines + body)


def remember_reading(page: SourceDocument, tokens: Sequence[Token]) -> None:
    """Read the page from ``tokens`` (its :func:`parse_page`) now and keep the reading on it,
    for :func:`read_markdown_document`: a reader that parsed the page shares the parse."""
    keep_reading(page, page_reading(page, tokens))


def page_reading(page: SourceDocument, tokens: Sequence[Token]) -> MarkdownDocument:
    """What :func:`read_markdown_document` reads from the page, from ``tokens`` (its
    :func:`parse_page`): for a reader that parses pages in another process."""
    return _read_tokens(page, tokens, stem=_stem(page.path))


def keep_reading(page: SourceDocument, reading: MarkdownDocument) -> None:
    """Keep ``reading`` (the page's :func:`page_reading`) on the page, for
    :func:`read_markdown_document`."""
    object.__setattr__(page, "_reading", reading)


def _stem(path: str) -> str:
    return PurePosixPath(path).with_suffix("").name


def read_markdown_document(page: SourceDocument, *, stem: str) -> MarkdownDocument:
    """What the producer needs from one page (its front matter was checked when it was read).

    The page is parsed with :func:`parse_page`, unless another reader kept the reading of that
    parse on it (:func:`remember_reading`).

    Args:
        page: The page.
        stem: The fallback title when neither a level-1 heading nor a front matter title exists.
    """
    kept = page._reading
    if isinstance(kept, MarkdownDocument) and stem == _stem(page.path):
        return kept
    return _read_tokens(page, parse_page(page), stem=stem)


def _read_tokens(page: SourceDocument, tokens: Sequence[Token], *, stem: str) -> MarkdownDocument:
    front = page.front_matter
    slugger = HeadingSlugger()
    headings: list[Heading] = []
    title_heading: Heading | None = None
    summary = ""
    section: Heading | None = None
    commands: list[Command] = []
    seen_commands: set[str] = set()
    mentions: list[Mention] = []
    seen_mentions: set[str] = set()
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            inline = tokens[index + 1]
            heading_text = _plain_text(inline.children or [])
            line = (token.map[0] if token.map else 0) + 1
            heading = Heading(int(token.tag[1]), heading_text, slugger.slug(heading_text), line)
            section = heading if heading_text else section
            if title_heading is None and heading.level == 1 and heading_text:
                title_heading = heading
            elif heading_text:
                headings.append(heading)
        elif token.type == "paragraph_open" and token.level == 0 and not summary:
            summary = _summary(tokens[index + 1].children or [])
        elif token.type == "fence" and _fence_language(token.info) in SHELL_LANGUAGES:
            first = (token.map[0] if token.map else 0) + 2
            for command, offset in _command_lines(token.content, _fence_language(token.info)):
                key = normalize_knowledge_key(command)
                if key not in seen_commands:
                    seen_commands.add(key)
                    commands.append(Command(command, section, first + offset))
        if token.type == "inline":
            line = (token.map[0] if token.map else 0) + 1
            for child in token.children or []:
                if child.type == "code_inline":
                    for text, kind in code_span_mentions(child.content):
                        key = normalize_knowledge_key(text)
                        if key not in seen_mentions:
                            seen_mentions.add(key)
                            mentions.append(Mention(text, kind, line))
    if title_heading is not None:
        title = title_heading.text
    else:
        title = front.title if front.title is not None else _named(stem)
    return MarkdownDocument(
        title=title,
        title_heading=title_heading,
        summary=summary,
        headings=tuple(headings),
        commands=tuple(commands),
        declared=front.entries,
        mentions=tuple(mentions),
    )
