"""How a question is read before it is searched and answered: what "when I don't pass one" asks."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat._terms import by_default
from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.protocol import ExactAnswer

from ._support import NOW

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


TESTING = """\
# Testing

## Passing arguments

When you pass no arguments, the `tests` directory is passed to pytest. Pass a directory or a
file to test only that one: `test tests/unit` passes `tests/unit` on.
"""

BUILDS = """\
# Builds

## Output directory

Pass `--dir` to the build command to write builds into another directory of your choice.

Otherwise, builds are written to the `dist` directory of the project root by default.
"""


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "Into which directory are builds written when I don't pass one?",
            "Into which directory are builds written by default?",
        ),
        ("Which level is used unless you change it?", "Which level is used by default?"),
        ("Are URL snippets allowed out of the box?", "Are URL snippets allowed by default?"),
        ("What port if I do not set one, and why?", "What port by default, and why?"),
        # The verb has an object of its own: the question asks about that, not a default.
        ("What happens if I don't set a timeout?", "What happens if I don't set a timeout?"),
        ("What if I don't close the session?", "What if I don't close the session?"),
    ],
)
def test_a_clause_asking_for_the_default_is_read_as_by_default(
    question: str, expected: str
) -> None:
    assert by_default(question) == expected


async def test_when_i_dont_pass_one_is_answered_with_the_default(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "testing.md").write_text(TESTING, "utf-8")
    (docs / "builds.md").write_text(BUILDS, "utf-8")
    async with create_docs_assistant(docs, now=lambda: NOW) as assistant:
        reply = await assistant.ask(
            "Into which directory are builds written when I don't pass one?"
        )
    # "pass" is how the question is put, not what it is about: not "Passing arguments".
    assert isinstance(reply, ExactAnswer)
    assert reply.answer.markdown.startswith("Otherwise, builds are written to the `dist`")
    assert [c.href for c in reply.answer.citations] == ["/docs/builds#output-directory"]
