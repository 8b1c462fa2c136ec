"""Answers composed from the structure of retrieved sections: no model, no invented words.

A section's text is read as Markdown blocks: paragraphs (cut into sentences), lists (one unit
per item), tables (one unit per row, the header kept apart) and fenced code. The question and
every unit are reduced to content terms (:mod:`agentskit_chat._terms`); a unit scores the summed
rarity of the question terms it holds (inverse frequency over all units of the sources; less in
code, and in a label: a paragraph of a few words that is no sentence), and a
section scores its best unit plus the rarity of the question terms in its title, a little less
the lower the search ranked it. A question (or part) that asks for a quantity ("how many",
"how long", "maximum", "which version", "which status code") also wants each of its terms
stated with a number: a unit holds a term so when the term is within three words of a number
("16 aliases per entry", "Ink 7.1+"), and that counts as one more (rare) term, so the unit
stating the quantity leads (:mod:`._questions`). A question answered yes or no also wants the
unit that says no or sets a limit ("cannot", "only"), counted beside a question term.

Sources with one link are the parts of one long section, cut apart by the index: they are read
as one section, in their order. The answer draws on one to ``max_sections`` sections. A question
with parts ("X, and Y?", :func:`question_parts`) is answered part by part, in its order: each
part by the section that answers that part best (another section than an earlier part's when one
is at least half as good), the length budget shared evenly. Otherwise the best section comes
first, and a further one only when its title or best unit holds a question term that the chosen
ones' titles and best units do not, and it scores at least half as well as the first; beside a
first section shown whole (every block, within its share of the budget), it must bring two
question terms or more, not one word that would only pad the answer. A question asking how
to do something is answered from the first source instead of a best section showing no code,
when the first source's code holds a name the question writes (``PostgreSQL``) and it scores at
least half as well: search put the command naming the question's thing first
(:mod:`agentskit_chat.retrieval._command_lead`), and prose that names every word of the question
about something else does not outrank it, and the code naming the thing leads that section's
part (its other passages after it, in the page's order), not a sentence that does not name the
thing. Scoring and choosing are in :mod:`._sections`. Each
section shows the passage holding its best unit, and the other passages at least 0.3 as good
that fit the length budget:

- a sentence comes with the rest of its paragraph when that is short, else with the next
  sentence;
- a sentence ending in ``:`` comes with the list, table or code it introduces;
- a list stays a list and a table a Markdown table under its header, their least matching
  items or rows left out when over budget (the header, its rule and the title that introduces
  the block count toward the budget, so a cut block fits rather than being dropped);
- a code block is shown fenced; when the question asks how to do something ("How do I …?",
  "How to …?", or to install, run, set up, start, deploy or configure something), the
  section's code comes right after the passage that answers, before other passages; a
  section left alone (the others did not fit) gets the whole budget, so its command fits.

Prose leads: the paragraph that answers comes first, followed by ``[n]`` (the source's 1-based
position); a list, table or code block that answers best keeps the prose around it in the
page's order, and one with no prose is introduced by the section's title and ``[n]``. Parts of
different sections are separate paragraphs, never spliced. When no unit holds a single
question term, the answer is :data:`NO_GROUNDED_ANSWER`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Final

from agentskit_chat._terms import DOING_TERMS, asks_how_to, content_terms, name_terms
from agentskit_chat.protocol import GroundedSource

from ._blocks import Block, parse_blocks
from ._questions import part_terms, question_parts, wanted_terms
from ._sections import (
    Section,
    best_for,
    choose,
    command_leads,
    merged,
    read_section,
    scored,
    second_topics,
)

__all__ = [
    "NO_GROUNDED_ANSWER",
    "Block",
    "compose_answer",
    "compose_cited",
    "parse_blocks",
    "question_parts",
]

#: The whole answer when no part of the sources shares a term with the question.
NO_GROUNDED_ANSWER: Final = "No grounded sources were found for this question."

_TRAILING_JOINERS: Final = ":;,-–— "
#: A paragraph up to this long is shown whole around its best sentence.
_SHORT_PARAGRAPH: Final = 320
#: Lines of code shown at most, per block: a longer block is cut after them, marked ``…``.
_MAX_CODE_LINES: Final = 40
#: Beside its best passage, a section shows others at least this good, relative to the best.
_GROUP_SHARE: Final = 0.3
#: The share of the length budget the first section may fill when the question has no parts.
_LEAD_SHARE: Final = 0.7
#: A budget no window reaches: a section shown whole.
_UNBOUNDED: Final = 1 << 30


# --- windows ------------------------------------------------------------------------------------


def _cited(text: str, number: int) -> str:
    body = text.rstrip(_TRAILING_JOINERS)
    if text.rstrip().endswith(":"):
        return f"{body} [{number}]:"
    if body and body[-1] in ".!?":
        return f"{body[:-1]} [{number}]{body[-1]}"
    return f"{body} [{number}]."


def _code(block: Block) -> str:
    """The code fenced with its language, whole (a block longer than ``_MAX_CODE_LINES``
    lines is cut there, ``…`` marking what is left out): a command or a configuration shown
    in part is worse than none."""
    lines = block.units[0].split("\n")
    shown = lines[:_MAX_CODE_LINES]
    if len(shown) < len(lines):
        shown.append("…")
    code = "\n".join(shown)
    fence = "```"
    while fence in code:
        fence += "`"
    return f"{fence}{block.language}\n{code}\n{fence}"


def _pick(block: Block, scores: Sequence[float], keep: int) -> list[str]:
    """The ``keep`` best units of ``block`` (all when it has no more), in their order."""
    if keep >= len(block.units):
        return list(block.units)
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:keep]
    return [block.units[i] for i in sorted(ranked)]


def _render(block: Block, scores: Sequence[float], budget: int) -> str:
    """``block`` as Markdown, its least matching units left out to fit ``budget``."""
    if block.kind == "code":
        return _code(block)
    if block.kind == "para":
        whole = " ".join(block.units)
        if len(whole) <= max(budget, _SHORT_PARAGRAPH) or len(block.units) == 1:
            return whole
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        picked = [best]
        if best + 1 < len(block.units) and len(block.units[best]) < _SHORT_PARAGRAPH // 2:
            picked.append(best + 1)
        return " ".join(block.units[i] for i in picked)
    head: list[str] = []
    more = "- …"
    if block.kind == "table" and block.header:
        columns = len(block.header.strip().strip("|").split("|"))
        head = [block.header, "|" + " --- |" * columns]
        more = "| … |" + "  |" * (columns - 1)
    # The header and its rule take room too; the least matching rows make way, and a last
    # row "…" says some did: "three templates" over two rows would mislead.
    room = budget - sum(len(line) + 1 for line in head)
    keep = len(block.units)
    if sum(len(u) + 1 for u in block.units) > room:
        room -= len(more) + 1
        while keep > 1 and sum(len(u) + 1 for u in _pick(block, scores, keep)) > room:
            keep -= 1
    shown = _pick(block, scores, keep)
    if keep < len(block.units):
        shown.append(_marked(more, shown[-1]))
    return "\n".join([*head, *shown])


def _marked(more: str, last: str) -> str:
    """The "…" row after ``last``, the last row or item shown: a list item with ``last``'s
    indent and marker kind (a bullet, or the number after ``last``'s)."""
    if not more.startswith("-"):
        return more
    body = last.lstrip(" ")
    indent = last[: len(last) - len(body)]
    number, dot, _ = body.partition(". ")
    if dot and number.isdigit():
        return f"{indent}{int(number) + 1}. …"
    return f"{indent}{body[:1] or '-'} …"


def _groups(section: Section) -> list[list[int]]:
    """Blocks that belong together: a sentence ending in ``:`` and the block it introduces."""
    groups: list[list[int]] = []
    index = 0
    blocks = section.blocks
    while index < len(blocks):
        block = blocks[index]
        introduces = block.kind == "para" and block.units[-1].rstrip().endswith(":")
        if introduces and index + 1 < len(blocks) and blocks[index + 1].kind != "para":
            groups.append([index, index + 1])
            index += 2
        else:
            groups.append([index])
            index += 1
    return groups


def _window(section: Section, budget: int, doing: bool) -> list[str]:
    """The blocks of ``section`` that answer, as Markdown parts; the first one is cited.

    The group holding the best unit comes first; other groups that hold a question term
    (code too, for a question about doing something) follow in their order while they fit.
    """
    groups = _groups(section)

    def value(group: list[int]) -> float:
        best = max(max(section.scores[i], default=0.0) for i in group)
        if doing and any(section.blocks[i].kind == "code" for i in group):
            best = max(best, section.best_score * 0.5)
        return best

    ranked = sorted(range(len(groups)), key=lambda g: (-value(groups[g]), g))
    first = ranked[0]
    named = _naming_code(section, groups, ranked) if doing else None
    if named is not None:
        # Asked how to do something with a thing the best passage does not name: the code
        # naming it leads (the others in the page's order after it).
        ranked = [named, *(g for g in ranked if g != named)]
        first = named
    if doing:
        # Asked how to do something: the example comes right after the passage that answers.
        code = [g for g in ranked[1:] if any(section.blocks[i].kind == "code" for i in groups[g])]
        ranked = [first, *code, *(g for g in ranked[1:] if g not in code)]
    chosen = [first]
    # A list, table or code block that answers best is introduced by the title: its room too.
    title = _cited(section.title + ":", section.number)
    used = 0 if section.blocks[groups[first][0]].kind == "para" else len(title) + 2
    rendered = {first: _render_group(section, groups[first], budget - used)}
    used += sum(len(part) + 2 for part in rendered[first])
    for g in ranked[1:]:
        if value(groups[g]) <= 0 or value(groups[g]) < _GROUP_SHARE * value(groups[first]):
            break
        parts = _render_group(section, groups[g], budget - used)
        size = sum(len(part) + 2 for part in parts)
        if used + size <= budget:
            chosen.append(g)
            rendered[g] = parts
            used += size
    # Prose leads: a paragraph that answers comes first; a list, table or code block that
    # answers best keeps the prose around it in the page's order.
    lead_prose = section.blocks[groups[first][0]].kind == "para"
    leads = lead_prose or named is not None
    order = [first, *sorted(g for g in chosen if g != first)] if leads else sorted(chosen)
    parts = [part for g in order for part in rendered[g]]
    if section.blocks[groups[order[0]][0]].kind == "para":
        parts[0] = _cited(parts[0], section.number)
    else:
        parts.insert(0, title)
    return parts


def _naming_code(section: Section, groups: list[list[int]], ranked: list[int]) -> int | None:
    """The best group of code holding one of ``section.named`` (a how-to question's names),
    when the best group holds none of them; ``None`` otherwise."""

    def names(group: list[int]) -> bool:
        return any(terms & section.named for i in group for terms in section.unit_terms[i])

    if not section.named or names(groups[ranked[0]]):
        return None
    return next(
        (
            g
            for g in ranked
            if names(groups[g]) and any(section.blocks[i].kind == "code" for i in groups[g])
        ),
        None,
    )


def _whole(section: Section, budget: int, doing: bool) -> bool:
    """Whether ``section`` is shown whole within ``budget``: every block of it, uncut."""
    shown = _window(section, _UNBOUNDED, doing)
    title = 1 if shown and shown[0] == _cited(section.title + ":", section.number) else 0
    return len(shown) - title == len(section.blocks) and sum(len(p) + 2 for p in shown) <= budget


def _render_group(section: Section, group: list[int], budget: int) -> list[str]:
    parts: list[str] = []
    for i in group:
        parts.append(_render(section.blocks[i], section.scores[i], budget - sum(map(len, parts))))
    return parts


def compose_answer(
    query: str,
    sources: Sequence[GroundedSource],
    *,
    max_sections: int = 3,
    max_chars: int = 800,
) -> str:
    """The answer to ``query`` from ``sources`` (best first), deterministically (no I/O).

    ``[n]`` is the n-th of ``sources``. See the module documentation for how sections,
    windows and citations are chosen.
    """
    chosen = _composed(query, sources, max_sections=max_sections, max_chars=max_chars)
    if not chosen:
        return NO_GROUNDED_ANSWER
    return "\n\n".join(
        _unique(part for section, share, doing in chosen for part in _window(section, share, doing))
    )


def compose_cited(
    query: str,
    sources: Sequence[GroundedSource],
    *,
    max_sections: int = 3,
    max_chars: int = 800,
) -> tuple[str, tuple[int, ...]]:
    """:func:`compose_answer`, citing only the sources it uses: the answer, in which ``[n]``
    is the n-th source it cites, and those sources' 0-based positions in ``sources``, in that
    order. Two sections with one link (the parts of a long section) are cited once. No
    positions when the answer is :data:`NO_GROUNDED_ANSWER`.
    """
    chosen = _composed(query, sources, max_sections=max_sections, max_chars=max_chars)
    if not chosen:
        return NO_GROUNDED_ANSWER, ()
    numbers: dict[str, int] = {}  # href -> its number in the answer
    positions: list[int] = []
    parts: list[str] = []
    for section, share, doing in chosen:
        href = sources[section.number - 1].href
        if href not in numbers:
            numbers[href] = len(numbers) + 1
            positions.append(section.number - 1)
        parts += _window(replace(section, number=numbers[href]), share, doing)
    return "\n\n".join(_unique(parts)), tuple(positions)


def _composed(
    query: str, sources: Sequence[GroundedSource], *, max_sections: int, max_chars: int
) -> list[tuple[Section, int, bool]]:
    """The sections the answer shows, in order, each with its share of the length budget and
    whether to show its code; none when nothing answers."""
    wanted = content_terms(query)
    if not wanted or not sources:
        return []
    wanted = wanted_terms(query, wanted)
    parsed = merged(
        [read_section(number, source) for number, source in enumerate(sources, start=1)],
        [source.href for source in sources],
    )
    chosen: list[tuple[Section, bool]] = []  # each with whether to show its code
    clauses = part_terms(query) if max_sections > 1 else []
    if len(clauses) > 1:
        # A question with parts: each part is answered by the section that answers it best,
        # and shows code when that part asks how to do something.
        for terms in clauses[:max_sections]:
            taken = {section.number for section, _ in chosen}
            best = best_for(scored(parsed, terms), taken)
            if best is not None:
                chosen.append((best, any(term in DOING_TERMS for term in terms)))
    if not chosen:
        doing = asks_how_to(query)
        ranked = scored(parsed, wanted)
        if doing:
            ranked = command_leads(ranked, name_terms(query))
        chosen = [(section, doing) for section in choose(ranked, max_sections)]
        fair = False
        if len(chosen) > 1 and _whole(chosen[0][0], int(max_chars * _LEAD_SHARE), doing):
            chosen = second_topics(chosen)
    else:
        fair = True
    shown: list[tuple[Section, int, bool]] = []
    used = 0
    for position, (section, doing) in enumerate(chosen):
        left = max_chars - used
        if fair:
            share = left // (len(chosen) - position)
        elif position == len(chosen) - 1:
            share = left
        else:
            share = left // 2
        if position == 0:
            share = max(share, max_chars // len(chosen))
            if not fair:
                share = max(share, int(max_chars * _LEAD_SHARE))
        size = sum(len(p) + 2 for p in _window(section, share, doing))
        if position and used + size > max_chars:
            continue
        shown.append((section, share, doing))
        used += size
    if len(shown) == 1 and shown[0][2]:
        # Left alone, a how-to answer's section gets the whole budget: the room kept for the
        # sections that did not fit is its command's.
        shown = [(shown[0][0], max(shown[0][1], max_chars), True)]
    return shown


def _unique(parts: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    kept: list[str] = []
    for part in parts:
        key = " ".join(part.casefold().split())
        if key not in seen:
            seen.add(key)
            kept.append(part)
    return kept
