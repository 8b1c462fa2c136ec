"""Checks ``bench/ask_quality.py`` runs on every corpus it measures.

The test suite runs them on the corpora CI has (the seed corpus and Starlette); the fetched
corpora (Hatch, PyMdown Extensions) are only on machines that downloaded them, so the bench
checks them where it measures them and fails loudly instead of a test skipping in CI.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol


class _Question(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def pages(self) -> tuple[str, ...]: ...
    @property
    def facts(self) -> tuple[tuple[str, ...], ...]: ...


def unstated_facts(
    docs: Path,
    questions: Sequence[_Question],
    states: Callable[[str, Iterable[str]], bool],
) -> list[str]:
    """One line per fact that none of its question's pages states (a question file gone stale
    against its corpus), or per page that is missing."""
    problems: list[str] = []
    for question in questions:
        texts: list[str] = []
        for page in question.pages:
            path = docs / page
            if not path.is_file():
                problems.append(f"{question.id}: page {page} is not in the corpus")
                continue
            texts.append(path.read_text("utf-8"))
        for number, fact in enumerate(question.facts, 1):
            if texts and not any(states(text, fact) for text in texts):
                problems.append(f"{question.id}: fact {number} is on none of its pages")
    return problems


def syntax_in_answers(answers: Mapping[str, str]) -> list[str]:
    """One line per answer (by question id) that still holds MkDocs/Material/PyMdown syntax."""
    from agentskit_chat._mkdocs import mkdocs_syntax  # noqa: PLC0415 - the run's dependency

    problems: list[str] = []
    for question_id, text in answers.items():
        found = mkdocs_syntax(text)
        if found:
            problems.append(f"{question_id}: the answer holds {', '.join(found)}")
    return problems
