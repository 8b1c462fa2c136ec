"""The ``agentskit-chat`` command line.

Sub-commands are Typer apps kept in private modules and mounted here. Every command prints its
results on stdout and its errors on stderr, and exits with 0 on success, 1 when the work failed
and 2 when it was called the wrong way. Those modules import what a command needs (the
assistant, the server, the terminal, the answer plane) only when it runs, so ``--version``,
``--help`` and every other command start without them; ``tests/cli/test_startup.py`` checks it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from agentskit_chat._version import __version__

from ._artifact import artifact_app
from ._ask import ask_command
from ._chat import chat_command
from ._components import components_app
from ._project import add_app, completion_command, enable_shell_completion, init_command
from ._render_answer import render_answer_command
from ._serve import serve_command

__all__ = ["app", "main"]

app = typer.Typer(
    name="agentskit-chat",
    help="Build, verify and serve agent chats that answer from your own documentation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(artifact_app, name="artifact")
app.add_typer(components_app, name="components")
app.command("ask")(ask_command)
app.command("serve")(serve_command)
app.command("chat")(chat_command)
app.command("render-answer")(render_answer_command)
app.command("init")(init_command)
app.add_typer(add_app, name="add")
app.command("completion")(completion_command)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-v",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Build, verify and serve agent chats that answer from your own documentation."""


def main() -> None:
    """Run the command line (the ``agentskit-chat`` console script)."""
    enable_shell_completion()
    app()
