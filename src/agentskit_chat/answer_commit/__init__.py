"""``answer_commit``: an agent's final answer, validated and rendered by code, never by prose.

:func:`render_answer` (and :func:`commit_answer`, which also keeps the advisory readings) takes
the payload a model commits (``fields``, a table of ``rows`` in Markdown/CSV/TSV/lines, or
``unresolved``) and lays it out deterministically; an invalid payload raises
:class:`~agentskit_chat.errors.AnswerCommitError` with a one-line reason and a valid example.
:func:`answer_commit_json_schema` is the tool's JSON Schema. Pure code: no model, no IO. The
pydantic-ai wiring lives in :mod:`agentskit_chat.agents`. See ``docs/answer-commit.md``.
"""

from __future__ import annotations

from ._commit import (
    AnswerReading,
    AnswerShape,
    CommittedAnswer,
    commit_answer,
    render_answer,
)
from ._schema import (
    ANSWER_COMMIT_DESCRIPTION,
    ANSWER_COMMIT_TOOL_NAME,
    MAX_BASIS_CHARACTERS,
    MAX_RENDERED_ANSWER_CHARACTERS,
    answer_commit_json_schema,
    is_reserved_tool_name,
)

__all__ = [
    "ANSWER_COMMIT_DESCRIPTION",
    "ANSWER_COMMIT_TOOL_NAME",
    "MAX_BASIS_CHARACTERS",
    "MAX_RENDERED_ANSWER_CHARACTERS",
    "AnswerReading",
    "AnswerShape",
    "CommittedAnswer",
    "answer_commit_json_schema",
    "commit_answer",
    "is_reserved_tool_name",
    "render_answer",
]
