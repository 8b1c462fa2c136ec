"""A heading's exact answer shows the section, not a pointer to it.

The knowledge artifact answers a heading ("Rate limiting", or a choice picked between two
pages' "Limits") with a link: ``See [Limits](…) in [Operations](…).``. The reader asked for that
section, so the docs assistant shows its beginning instead (what the section says, up to a
length budget, its code blocks whole), with the same citation. The artifact itself, its
entries and its content hash, stay exactly as built: only what the reader sees is expanded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from agentskit_chat.protocol import ExactAnswer, LocalKnowledgeArtifact, LocalProvenance
from agentskit_chat.retrieval import MarkdownChunk

__all__ = ["SectionAnswers"]

#: How much of a section an expanded answer shows, in characters (whole blocks).
_BUDGET: Final = 800
_FENCE: Final = "```"


def _blocks(text: str) -> list[str]:
    """The blocks of a chunk's text (separated by blank lines), a fenced block kept whole."""
    blocks: list[str] = []
    current: list[str] = []
    fenced = False
    for part in text.split("\n\n"):
        current.append(part)
        fenced ^= sum(1 for line in part.split("\n") if line.startswith(_FENCE)) % 2 == 1
        if not fenced:
            blocks.append("\n\n".join(current))
            current = []
    if current:
        blocks.append("\n\n".join(current))
    return blocks


def _beginning(chunks: Iterable[MarkdownChunk]) -> str:
    """The first blocks of a section, whole, within the budget (the first one always), the
    first prose block cited ``[1]``."""
    shown: list[str] = []
    used = 0
    for chunk in chunks:
        for block in _blocks(chunk.text):
            if shown and used + len(block) > _BUDGET:
                return _cite(shown)
            shown.append(block)
            used += len(block) + 2
    return _cite(shown)


def _cite(blocks: list[str]) -> str:
    for index, block in enumerate(blocks):
        if block.startswith(("```", "|", "- ")) or block[:1].isdigit():
            continue
        body = block.rstrip()
        if body.endswith(":"):
            blocks[index] = f"{body[:-1]} [1]:"
        elif body[-1:] in ".!?":
            blocks[index] = f"{body[:-1]} [1]{body[-1]}"
        else:
            blocks[index] = f"{body} [1]."
        return "\n\n".join(blocks)
    return "\n\n".join(["[1]", *blocks])


class SectionAnswers:
    """Expands the exact answers of headings into the sections they point at.

    Args:
        artifact: The verified artifact: which entries answer a heading.
        chunks: The corpus's chunks, whose links are the entries' citation links.
    """

    def __init__(self, artifact: LocalKnowledgeArtifact, chunks: Iterable[MarkdownChunk]) -> None:
        by_href: dict[str, list[MarkdownChunk]] = {}
        for chunk in chunks:
            by_href.setdefault(chunk.href, []).append(chunk)
        self._sections: Mapping[str, list[MarkdownChunk]] = by_href
        self._headings = frozenset(
            entry.id
            for entry in artifact.entries
            if entry.kind == "navigation" and len(entry.answer.citations) == 1
        )

    def expand(self, answer: ExactAnswer) -> ExactAnswer:
        """``answer`` with the section's beginning as its Markdown when it answers a heading
        whose section the corpus holds; any other answer unchanged."""
        provenance = answer.provenance
        if not isinstance(provenance, LocalProvenance):
            return answer
        entry_ids = provenance.entry_ids
        if len(entry_ids) != 1 or entry_ids[0] not in self._headings:
            return answer
        [citation] = answer.answer.citations
        chunks = self._sections.get(citation.href)
        if not chunks:
            return answer
        wire = answer.to_wire()
        wire["answer"] = {**wire["answer"], "markdown": _beginning(chunks)}
        return ExactAnswer.model_validate(wire)
