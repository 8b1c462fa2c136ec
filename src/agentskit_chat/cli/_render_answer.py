"""``agentskit-chat render-answer``: render an ``answer_commit`` payload, for scripts.

Reads the payload (a JSON file, or ``-`` for standard input) and prints its rendered final
answer, exactly as an analyst agent would return it, followed by one newline. An invalid
payload prints ``error:`` with the one-line reason, then a minimal valid example, on stderr and
exits with 1; a file that cannot be read exits with 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from agentskit_chat.errors import AnswerCommitError

__all__ = ["render_answer_command"]


def _read(source: str) -> str | None:
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # Not UTF-8 text: the renderer reports an empty text as invalid JSON.
        return ""


def render_answer_command(
    payload: Annotated[
        str,
        typer.Argument(
            help="A JSON file holding the answer_commit payload, or - to read standard input.",
            show_default=False,
        ),
    ],
) -> None:
    """Print the final answer an answer_commit payload renders to (fields, table or unresolved)."""
    # Imported when the command runs, so that --help and the other commands start fast.
    from agentskit_chat.answer_commit import render_answer  # noqa: PLC0415 - start-up time

    text = _read(payload)
    if text is None:
        typer.echo("error: the payload file could not be read.", err=True)
        raise typer.Exit(2)
    try:
        rendered = render_answer(text)
    except AnswerCommitError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None
    typer.echo(rendered)
