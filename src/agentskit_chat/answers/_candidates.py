"""From read documents to candidate entries: declared first, then derived, with unique aliases.

Candidates come in priority order (declared, documents, commands, headings, mentions) so that the
producer keeps the longest prefix that fits the artifact's limits. Aliases declared in front
matter are claimed: derived entries lose them. A mention (a command or package name a page
writes in inline code) answers its page only when no other page mentions it and no other entry
answers to it. An entry whose every alias is shared gets one generated alias of its own,
``<alias> (<context>)``, so that the artifact stays valid and a choice stays reachable by typing
its description.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from agentskit_chat.errors import BuildError
from agentskit_chat.protocol import is_safe_href, normalize_knowledge_key
from agentskit_chat.protocol._knowledge import MAX_ALIASES, MAX_KEY_UNITS
from agentskit_chat.protocol._text import js_trim, utf16_len

from ._front_matter import LABEL_UNITS, DeclaredEntry, alias_fits
from ._markdown import MarkdownDocument, clip_units, code_block, escape_markdown, link

__all__ = [
    "ALIAS_LIMIT",
    "CLAIMED",
    "MENTION_SHARED",
    "MENTION_TAKEN",
    "TITLE_TAKEN",
    "TOO_LONG",
    "Candidate",
    "Doc",
    "Ids",
    "LeftOut",
    "declared_candidates",
    "derived_candidates",
    "final_aliases",
]

TOO_LONG: Final = "longer than 512 UTF-16 code units once normalized"
CLAIMED: Final = "every alias is claimed by a declared entry"
TITLE_TAKEN: Final = "a document has this title, and a title answers its document"
MENTION_SHARED: Final = "more than one page mentions this, so it answers none of them"
MENTION_TAKEN: Final = "a title, path, command block or heading answers to this, and keeps it"
ALIAS_LIMIT: Final = "an entry holds at most 16 aliases; replaced by a generated unique alias"
_CONTEXT_UNITS: Final = 120

Source = Literal["declared", "document", "command", "navigation", "mention"]


@dataclass(frozen=True, slots=True)
class LeftOut:
    """Something the producer dropped, and why.

    Attributes:
        kind: ``document``, ``command``, ``package``, ``navigation`` or a declared entry's kind
            for a whole entry; ``alias`` for one alias; ``file`` for a file or folder that was
            not read.
        file: The path inside the docs folder, with ``/`` separators.
        label: The entry's label, the alias, or the file name.
        reason: A fixed sentence saying which limit or rule applied.
    """

    kind: str
    file: str
    label: str
    reason: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """One entry the artifact may hold, before its final aliases are known."""

    source: Source
    id: str
    kind: str
    label: str
    aliases: tuple[str, ...]
    markdown: str
    citations: tuple[dict[str, str], ...]
    file: str
    display: str
    context: str


@dataclass(frozen=True, slots=True)
class Doc:
    """A read document: its path inside the docs folder, its slug, link and content."""

    rel: str
    slug: str
    display: str
    href: str
    parsed: MarkdownDocument


# --- identifiers, links and text ------------------------------------------------------------------


def _slugify(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


class Ids:
    """Safe, unique entry ids: a slug clipped to 128 characters, then ``-2``, ``-3``, ..."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def take(self, text: str) -> str:
        base = _slugify(text)[:128].rstrip("-") or "entry"
        candidate, number = base, 2
        while candidate in self.taken:
            suffix = f"-{number}"
            candidate = base[: 128 - len(suffix)] + suffix
            number += 1
        self.taken.add(candidate)
        return candidate


def _label(text: str) -> str:
    return js_trim(clip_units(js_trim(text), LABEL_UNITS)) or "Untitled"


def _citation(cid: str, title: str, href: str) -> dict[str, str]:
    return {"id": cid, "title": _label(title), "href": href}


def _section_href(doc: Doc, anchor: str) -> str:
    return f"{doc.href}#{anchor}" if anchor else doc.href


# --- candidates -----------------------------------------------------------------------------------


def declared_candidates(docs: Sequence[Doc], ids: Ids) -> list[Candidate]:
    """The entries declared in front matter, in path order; explicit ids are reserved first.

    Raises:
        BuildError: an id declared twice, or a citation whose link is not safe.
    """
    for doc in docs:
        for entry in doc.parsed.declared:
            if entry.id is not None:
                if entry.id in ids.taken:
                    raise BuildError(
                        f"knowledge entry id `{entry.id}` is declared twice",
                        file=doc.display,
                        line=entry.line,
                    )
                ids.taken.add(entry.id)
    result: list[Candidate] = []
    for doc in docs:
        for entry in doc.parsed.declared:
            entry_id = entry.id if entry.id is not None else ids.take(f"{doc.slug} {entry.label}")
            citations = _declared_citations(doc, entry)
            result.append(
                Candidate(
                    "declared",
                    entry_id,
                    entry.kind,
                    entry.label,
                    entry.aliases,
                    entry.markdown,
                    citations,
                    doc.rel,
                    doc.display,
                    _doc_title(doc),
                )
            )
    return result


def _declared_citations(doc: Doc, entry: DeclaredEntry) -> tuple[dict[str, str], ...]:
    if entry.citations is None:
        return (_citation(f"doc-{_slugify(doc.slug)}"[:128], _doc_title(doc), doc.href),)
    cited: list[dict[str, str]] = []
    for number, cite in enumerate(entry.citations, start=1):
        href = doc.href + cite.href if cite.href.startswith("#") else cite.href
        if not is_safe_href(href):
            raise BuildError(
                f"citation {number}: `href` is not a safe link (use /path, #anchor or an "
                "http(s) URL without credentials)",
                file=doc.display,
                line=cite.line,
            )
        cid = cite.id or (_slugify(cite.title)[:128].rstrip("-") or "citation")
        cited.append(_citation(cid, cite.title, href))
    return tuple(cited)


def _doc_title(doc: Doc) -> str:
    return _label(doc.parsed.title)


def _aliases(
    file: str, texts: Sequence[str], claimed: set[str], left: list[LeftOut]
) -> tuple[tuple[str, ...], bool]:
    """The usable aliases of a derived entry, and whether declared entries claimed them all."""
    kept: list[str] = []
    keys: set[str] = set()
    any_claimed = False
    for text in texts:
        alias = js_trim(text)
        if not alias_fits(alias):
            left.append(LeftOut("alias", file, _label(alias), TOO_LONG))
            continue
        key = normalize_knowledge_key(alias)
        if key in claimed:
            any_claimed = True
            left.append(LeftOut("alias", file, _label(alias), CLAIMED))
        elif key not in keys:
            keys.add(key)
            kept.append(alias)
    return tuple(kept), any_claimed and not kept


def derived_candidates(
    docs: Sequence[Doc], ids: Ids, claimed: set[str], left: list[LeftOut]
) -> list[Candidate]:
    """Documents, commands, headings, then mentions, each in path order, without claimed aliases.

    A heading never takes a document's title as its alias: a question equal to a title answers
    that document exactly, not with a choice between it and a section of another page. Mention
    entries come last and take no alias another entry has, so they change no other answer.
    """
    titles = {
        normalize_knowledge_key(js_trim(doc.parsed.title))
        for doc in docs
        if alias_fits(js_trim(doc.parsed.title))
    } - claimed
    documents: list[Candidate] = []
    commands: list[Candidate] = []
    headings: list[Candidate] = []

    def add(bucket: list[Candidate], candidate: Candidate, taken: bool) -> None:
        if candidate.aliases:
            bucket.append(candidate)
        elif taken:
            left.append(LeftOut(candidate.kind, candidate.file, candidate.label, CLAIMED))
        else:
            left.append(LeftOut(candidate.kind, candidate.file, candidate.label, TOO_LONG))

    for doc in docs:
        title = _doc_title(doc)
        doc_id = ids.take(f"doc {doc.slug}")
        aliases, taken = _aliases(doc.rel, [doc.parsed.title, doc.slug], claimed, left)
        add(
            documents,
            Candidate(
                "document",
                doc_id,
                "document",
                title,
                aliases,
                _document_markdown(doc),
                (_citation(doc_id, title, doc.href),),
                doc.rel,
                doc.display,
                doc.slug,
            ),
            taken,
        )
        for command in doc.parsed.commands:
            section = command.section
            entry_id = ids.take(f"cmd {doc.slug} {command.text}")
            if section is None or section is doc.parsed.title_heading:
                where, cite = link(title, doc.href), _citation(entry_id, title, doc.href)
            else:
                href = _section_href(doc, section.anchor)
                where = f"{link(section.text, href)} in {link(title, doc.href)}"
                cite = _citation(entry_id, section.text, href)
            aliases, taken = _aliases(doc.rel, [command.text], claimed, [])
            markdown = f"Run:\n\n{code_block(command.text, 'sh')}\n\nFrom {where}."
            add(
                commands,
                Candidate(
                    "command",
                    entry_id,
                    "command",
                    _label(command.text),
                    aliases,
                    markdown,
                    (cite,),
                    doc.rel,
                    doc.display,
                    title,
                ),
                taken,
            )
        for heading in doc.parsed.headings:
            if normalize_knowledge_key(js_trim(heading.text)) in titles:
                left.append(LeftOut("navigation", doc.rel, _label(heading.text), TITLE_TAKEN))
                continue
            href = _section_href(doc, heading.anchor)
            entry_id = ids.take(f"nav {doc.slug} {heading.anchor or heading.text}")
            aliases, taken = _aliases(doc.rel, [heading.text], claimed, [])
            add(
                headings,
                Candidate(
                    "navigation",
                    entry_id,
                    "navigation",
                    _label(heading.text),
                    aliases,
                    f"See {link(heading.text, href)} in {link(title, doc.href)}.",
                    (_citation(entry_id, heading.text, href),),
                    doc.rel,
                    doc.display,
                    title,
                ),
                taken,
            )
    answered = claimed | {
        normalize_knowledge_key(alias)
        for bucket in (documents, commands, headings)
        for c in bucket
        for alias in c.aliases
    }
    return documents + commands + headings + _mention_candidates(docs, ids, claimed, answered, left)


def _document_markdown(doc: Doc) -> str:
    """A page's answer: its title, its first paragraph and a link to it."""
    title = _doc_title(doc)
    parts = [f"**{escape_markdown(title)}**"]
    if doc.parsed.summary:
        parts.append(doc.parsed.summary)
    parts.append(f"Read {link(title, doc.href)}.")
    return "\n\n".join(parts)


def _mention_candidates(
    docs: Sequence[Doc], ids: Ids, claimed: set[str], answered: set[str], left: list[LeftOut]
) -> list[Candidate]:
    """One entry per command or package name that exactly one page mentions, answering the page.

    ``answered`` holds every alias of the other entries: a mention never shares an alias, so
    asking for it either answers its one page or finds another entry's answer unchanged.
    """
    pages = Counter(
        normalize_knowledge_key(mention.text) for doc in docs for mention in doc.parsed.mentions
    )
    result: list[Candidate] = []
    for doc in docs:
        title = _doc_title(doc)
        for mention in doc.parsed.mentions:
            key = normalize_knowledge_key(mention.text)
            label = _label(mention.text)
            if not alias_fits(mention.text):
                reason: str | None = TOO_LONG
            elif key in claimed:
                reason = CLAIMED
            elif key in answered:
                reason = MENTION_TAKEN
            elif pages[key] > 1:
                reason = MENTION_SHARED
            else:
                reason = None
            if reason is not None:
                left.append(LeftOut(mention.kind, doc.rel, label, reason))
                continue
            prefix = "code" if mention.kind == "command" else "pkg"
            entry_id = ids.take(f"{prefix} {doc.slug} {mention.text}")
            result.append(
                Candidate(
                    "mention",
                    entry_id,
                    mention.kind,
                    label,
                    (mention.text,),
                    _document_markdown(doc),
                    (_citation(entry_id, title, doc.href),),
                    doc.rel,
                    doc.display,
                    title,
                )
            )
    return result


# --- aliases, limits and serialization ------------------------------------------------------------


def _unique_alias(candidate: Candidate, taken: set[str]) -> str:
    """``<alias> (<context>)``, numbered when needed, that no other entry uses."""
    context = js_trim(clip_units(candidate.context, _CONTEXT_UNITS))
    base = candidate.aliases[0]
    number = 1
    while True:
        suffix = f" ({context})" if number == 1 else f" ({context} {number})"
        alias = js_trim(clip_units(base, MAX_KEY_UNITS - utf16_len(suffix))) + suffix
        if not alias_fits(alias):
            alias = f"{candidate.id} {number}"
        key = normalize_knowledge_key(alias)
        if key not in taken:
            taken.add(key)
            return alias
        number += 1


def final_aliases(
    selected: Sequence[Candidate],
) -> tuple[list[tuple[str, ...]], list[LeftOut]]:
    """Every entry's aliases, with a generated unique alias where all of its are shared."""
    keys = [[normalize_knowledge_key(alias) for alias in c.aliases] for c in selected]
    owners = Counter(key for entry_keys in keys for key in entry_keys)
    taken = set(owners)
    result: list[tuple[str, ...]] = []
    left: list[LeftOut] = []
    for candidate, entry_keys in zip(selected, keys, strict=True):
        aliases = candidate.aliases
        if not any(owners[key] == 1 for key in entry_keys):
            if len(aliases) >= MAX_ALIASES:
                left.append(LeftOut("alias", candidate.file, aliases[-1], ALIAS_LIMIT))
                aliases = aliases[: MAX_ALIASES - 1]
            aliases = (*aliases, _unique_alias(candidate, taken))
        result.append(aliases)
    return result, left
