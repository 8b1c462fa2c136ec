"""A section's text as Markdown blocks, read by markdown-it-py (CommonMark with tables).

The same parser reads the docs folder (:mod:`agentskit_chat.retrieval`), so an excerpt is read
the way its page was: setext headings, indented code, loose and nested lists, block quotes and
tables all come out as the blocks they are, whatever wrote the excerpt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["Block", "BlockKind", "parse_blocks", "sentences"]

BlockKind = Literal["para", "list", "table", "code"]

_PARSER: Final = MarkdownIt("commonmark").enable("table")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[*_`]*[A-Z0-9@`])")
_SPACES: Final = re.compile(r"\s+")
_TAG: Final = re.compile(r"<!--.*?-->|<[^>]*>", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Block:
    """One Markdown block of a section.

    Attributes:
        kind: ``para``, ``list``, ``table`` or ``code``.
        units: What is scored: a paragraph's sentences, a list's items (marker kept), a table's
            body rows, or the code's text as one unit.
        header: A table's header row (empty for other blocks).
        language: A code block's language, as its fence named it (may be empty).
    """

    kind: BlockKind
    units: tuple[str, ...]
    header: str = ""
    language: str = ""


def sentences(text: str) -> tuple[str, ...]:
    """The sentences of a paragraph, whitespace collapsed."""
    flat = _SPACES.sub(" ", text).strip()
    return tuple(s for s in _SENTENCE_END.split(flat) if s)


def _inline(token: Token) -> str:
    """An inline token's Markdown source on one line (code spans and links kept)."""
    return _SPACES.sub(" ", token.content).strip()


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


class _Reader:
    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.items: list[str] = []
        self.markers: list[str] = []  # the open lists' next markers ("- ", "3. ")
        self.item_open = False
        self.header = ""
        self.rows: list[str] = []
        self.row: list[str] | None = None
        self.in_head = False

    def flush_list(self) -> None:
        if self.items:
            self.blocks.append(Block("list", tuple(self.items)))
            self.items = []

    def text(self, text: str) -> None:
        if not text:
            return
        if self.markers and self.item_open:
            depth = "  " * (len(self.markers) - 1)
            self.items.append(f"{depth}{self.markers[-1]}{text}")
            self.item_open = False
        elif self.markers and self.items:
            self.items[-1] = f"{self.items[-1]} {text}"  # a further paragraph of the item
        else:
            self.flush_list()
            found = sentences(text)
            if found:
                self.blocks.append(Block("para", found))

    def inline(self, token: Token) -> None:
        """A paragraph's text; its last lines are table rows when each starts with ``|`` (a
        table cut from its header, as a long section's second part may start)."""
        lines = token.content.split("\n")
        start = len(lines)
        while start > 0 and lines[start - 1].strip().startswith("|"):
            start -= 1
        if start == len(lines) or self.markers:
            self.text(_inline(token))
            return
        self.text(_SPACES.sub(" ", " ".join(lines[:start])).strip())
        self.flush_list()
        self.blocks.append(Block("table", tuple(line.strip() for line in lines[start:])))

    def read(self, tokens: Sequence[Token]) -> list[Block]:
        for token in tokens:
            kind = token.type
            if kind in ("bullet_list_open", "ordered_list_open"):
                start = int(str(token.attrGet("start") or 1))
                self.markers.append("- " if kind == "bullet_list_open" else f"{start}. ")
            elif kind in ("bullet_list_close", "ordered_list_close"):
                self.markers.pop()  # a list right after another one goes on in the same block
            elif kind == "list_item_open":
                self.item_open = True
            elif kind == "list_item_close":
                marker = self.markers[-1]
                if marker != "- ":
                    self.markers[-1] = f"{int(marker[:-2]) + 1}. "
                self.item_open = False
            elif kind == "thead_open":
                self.in_head = True
            elif kind == "thead_close":
                self.in_head = False
            elif kind == "tr_open":
                self.row = []
            elif kind == "tr_close" and self.row is not None:
                if self.in_head:
                    self.header = _row(self.row)
                elif any(self.row):
                    self.rows.append(_row(self.row))
                self.row = None
            elif kind == "table_close":
                self.flush_list()
                if self.rows or self.header:
                    self.blocks.append(Block("table", tuple(self.rows), self.header))
                self.header, self.rows = "", []
            elif kind == "inline":
                if self.row is not None:
                    self.row.append(_inline(token))
                else:
                    self.inline(token)
            elif kind in ("fence", "code_block"):
                code = token.content.rstrip("\n")
                if code.strip():
                    self.flush_list()
                    words = token.info.strip().strip("{}").split() if kind == "fence" else []
                    language = words[0].lstrip(".") if words else ""
                    self.blocks.append(Block("code", (code,), language=language))
            elif kind == "html_block":
                self.text(_SPACES.sub(" ", _TAG.sub(" ", token.content)).strip())
        self.flush_list()
        return self.blocks


def parse_blocks(text: str) -> list[Block]:
    """The blocks of a section's text (Markdown as the corpus writes it, or any text).

    Headings are paragraphs, a block quote's paragraphs are paragraphs, a list is one block of
    items (nested items indented under theirs, a loose item's further paragraphs joined to
    it), a table is its header and rows, and code is kept verbatim with its language.
    """
    return _Reader().read(_PARSER.parse(text))
