"""``agentskit-chat ask``: answer one question about a docs folder, in the terminal.

The answer is printed as Markdown with its numbered sources (or, with ``--json``, as the whole
``agentskit.chat.answer`` envelope). A refusal is an answer too: the command prints its message
and exits with 0. It exits with 1 when the work failed and with 2 when it was called the wrong
way (a blank question).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, NoReturn

import typer

from agentskit_chat.errors import (
    AskServiceError,
    BuildError,
    ConfigurationError,
    RetrievalError,
)

if TYPE_CHECKING:
    from agentskit_chat.assistant import AnswerOutcome

__all__ = ["AgentChoice", "ask_command", "render_answer"]

#: The agents ``--agent`` names: :data:`agentskit_chat.assistant.DocsAgent`, spelled here so
#: that the command line starts without importing the assistant (a test keeps them equal).
AgentChoice = Literal["writer", "analyst"]

#: The ``--agent`` option of ``ask`` and ``serve``.
AgentOption = Annotated[
    AgentChoice | None,
    typer.Option(
        "--agent",
        help="Who answers with the model: 'writer' (streamed prose) or 'analyst' (an "
        "answer rendered by answer_commit; needs a model); default: AGENTSKIT_AGENT, "
        "else writer.",
    ),
]


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector for one question, then freeze what it made.

    Answering starts the assistant: tens of thousands of objects (modules, classes, wire
    schemas, the index) that live until the command exits. The collector would walk them again
    and again while they are made, and once more at exit: ~0.1 s of a 0.4 s command, for
    nothing, since reference counting frees the rest as it goes (a start over 5,000 pages
    leaves a few hundred objects in cycles). Afterwards they are frozen (:func:`gc.freeze`):
    kept out of every later collection, including the one at exit. The collector is on again
    afterwards if it was on before.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def render_answer(envelope: AnswerOutcome) -> str:
    """The envelope as terminal text: the Markdown and its sources, the choices, or the message."""
    from agentskit_chat.protocol import ChoicesAnswer, ExactAnswer  # noqa: PLC0415 - start-up

    if isinstance(envelope, ExactAnswer):
        lines = [envelope.answer.markdown]
        if envelope.answer.citations:
            lines += ["", "Sources:"]
            for number, citation in enumerate(envelope.answer.citations, start=1):
                lines += [f"  [{number}] {citation.title}", f"      {citation.href}"]
        return "\n".join(lines)
    if isinstance(envelope, ChoicesAnswer):
        lines = [envelope.message]
        lines += [f"  - {s.label}  (ask: {s.value})" for s in envelope.suggestions]
        return "\n".join(lines)
    return envelope.message


def ask_command(
    question: Annotated[str, typer.Argument(help="The question, in your own words.")],
    docs: Annotated[
        Path,
        typer.Option("--docs", help="The folder of Markdown to answer from.", show_default=True),
    ] = Path("docs"),
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the agentskit.chat.answer envelope as JSON.")
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="A pydantic-ai model string (openai:gpt-4.1-mini, ...); default: "
            "AGENTSKIT_MODEL, else the model-free extractive generator.",
        ),
    ] = None,
    agent: AgentOption = None,
) -> None:
    """Answer a question about a folder of Markdown: exactly, grounded, or not at all."""
    with _no_cycle_collection():
        # Imported when the command runs, so that --help and the other commands start fast.
        from agentskit_chat.assistant import ask_docs  # noqa: PLC0415 - start-up time

        try:
            envelope = ask_docs(question, docs, model=model, agent=agent)
        except AskServiceError as error:
            _fail(error.message, 2 if error.code == "ASK_INVALID_REQUEST" else 1)
        except (BuildError, ConfigurationError, RetrievalError, ImportError) as error:
            _fail(str(error))
        typer.echo(envelope.to_json() if as_json else render_answer(envelope))
