"""A page's Markdown as sections: the blocks under each heading, as plain Markdown.

The page's CommonMark tokens (one parse, shared with exact answers) become one section per
heading, each a list of ``(kind, text)`` blocks: paragraphs, list items, table rows and code;
what says nothing a question asks about (HTML tags, logos, rows of badges) is left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token

from agentskit_chat._doclinks import HeadingSlugger

__all__ = ["Section", "inline_text", "page_sections"]

_TAG = re.compile(r"<!--.*?-->|<[^>]*>", re.DOTALL)
_SPACES = re.compile(r"\s+")
#: Reads again, with GFM tables, the text of a paragraph that holds one (see ``_tokens``).
_TABLES = MarkdownIt("commonmark").enable("table")
_LANGUAGE = re.compile(r"[a-z0-9][a-z0-9+#-]{0,19}")


@dataclass(slots=True)
class Section:
    """The blocks under one heading, as ``(kind, text)``: ``para``, ``item``, ``row``, ``code``
    or ``code:<language>``."""

    level: int  # 0 for the text before the first heading
    heading: str
    slug: str
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (kind, text)


def _code_span(code: str) -> str:
    """``code`` as a Markdown code span, its fence longer than any run of backticks inside."""
    longest = max((len(run) for run in re.findall("`+", code)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if code.startswith("`") or code.endswith("`") else ""
    return f"{ticks}{pad}{code}{pad}{ticks}"


def inline_text(token: Token, *, code: bool = True, images: bool = True) -> str:
    """The inline token's text, an image read as its alt text; without ``images``, nothing
    when the token holds images and no text of its own (a logo, a row of badges, a figure:
    a section's text leaves them out, they say nothing a question asks about)."""
    if not images and _only_images(token):
        return ""
    parts: list[str] = []
    for child in token.children or ():
        if child.type == "code_inline" and code:
            parts.append(_code_span(child.content))
        elif child.type in ("text", "code_inline", "image"):
            parts.append(child.content)
        elif child.type == "softbreak":
            parts.append(" ")
        elif child.type == "hardbreak":
            parts.append("\n")
    return "".join(parts).strip()


def _table_row(cells: Sequence[str], *, header: bool) -> str:
    """A table row as Markdown (``| a | b |``); a header row carries the rule below it."""
    line = "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
    return f"{line}\n|{' --- |' * len(cells)}" if header else line


def _code_kind(info: str) -> str:
    """``code``, or ``code:<language>`` when the fence names a plain language."""
    words = info.strip().strip("{}").split()
    language = words[0].lstrip(".").lower() if words else ""
    return f"code:{language}" if _LANGUAGE.fullmatch(language) else "code"


def _tokens(tokens: Sequence[Token]) -> list[Token]:
    """The page's CommonMark tokens with each paragraph that holds a GFM table read as one.

    The page was parsed once as CommonMark (:func:`~agentskit_chat.answers._markdown.parse_page`,
    shared with exact answers), where a table is a paragraph of ``|`` lines; only such a
    paragraph's own text is read again, with the table rule.
    """
    out: list[Token] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        inline = tokens[index + 1] if index + 1 < len(tokens) else None
        if (
            token.type == "paragraph_open"
            and inline is not None
            and "|" in inline.content
            and "\n" in inline.content
        ):
            read = _TABLES.parse(inline.content)
            if any(part.type == "table_open" for part in read):
                out.extend(read)
                index += 3  # paragraph_open, inline, paragraph_close
                continue
        out.append(token)
        index += 1
    return out


def _only_images(token: Token) -> bool:
    """Whether ``token`` holds an image and no text but spaces (links around images too)."""
    children = token.children or ()
    return any(child.type == "image" for child in children) and all(
        child.type in ("image", "link_open", "link_close", "softbreak", "hardbreak")
        or (child.type == "text" and not child.content.strip())
        for child in children
    )


def page_sections(page_tokens: Sequence[Token]) -> list[Section]:
    """The page's sections in order, the text before the first heading first (level 0)."""
    slugger = HeadingSlugger()
    sections = [Section(0, "", "")]
    tokens = _tokens(page_tokens)
    marker: str | None = None
    row: list[str] | None = None
    row_images = False  # whether a cell held only images (a row of badges)
    head_at: int | None = None  # where the open table's header row is, in its section
    in_head = False
    index = 0
    while index < len(tokens):
        token = tokens[index]
        blocks = sections[-1].blocks
        if token.type == "heading_open":
            heading = inline_text(tokens[index + 1], code=False) if index + 1 < len(tokens) else ""
            sections.append(Section(int(token.tag[1]), heading, slugger.slug(heading)))
            index += 3  # heading_open, inline, heading_close
            continue
        if token.type == "list_item_open":
            marker = f"{token.info}{token.markup} " if token.info else "- "
        elif token.type == "thead_open":
            in_head = True
        elif token.type == "thead_close":
            in_head = False
        elif token.type == "tr_open":
            row, row_images = [], False
        elif token.type == "tr_close" and row is not None:
            # A row of badges or logos (images beside at most a label) says nothing.
            badges = row_images and sum(1 for cell in row if cell) <= 1
            if in_head:
                head_at = len(blocks)
                blocks.append(("row", _table_row(row, header=True)))
            elif any(row) and not badges:
                blocks.append(("row", _table_row(row, header=False)))
            row = None
        elif token.type == "table_close":
            # A table whose every row was left out goes with its header.
            if head_at is not None and head_at == len(blocks) - 1:
                blocks.pop()
            head_at = None
        elif token.type == "inline":
            text = inline_text(token, images=False)
            if row is not None:
                row.append(text)
                row_images = row_images or _only_images(token)
            elif text:
                blocks.append(("item", marker + text) if marker else ("para", text))
            marker = None
        elif token.type in ("fence", "code_block"):
            code = token.content.rstrip("\n")
            if code.strip():
                blocks.append((_code_kind(token.info if token.type == "fence" else ""), code))
            marker = None
        elif token.type == "html_block":
            html = _SPACES.sub(" ", _TAG.sub(" ", token.content)).strip()
            if html:
                blocks.append(("para", html))
        index += 1
    return sections
