"""``agentskit-chat init``, ``add component`` and ``completion``.

``init NAME --template web|terminal|fastapi`` writes a new chat project into the folder NAME
(which must not exist, not even empty), completely or not at all. ``add component NAME`` writes
a custom component into such a project. ``completion bash|zsh|fish`` prints the shell script
that completes every ``agentskit-chat`` command.

A refusal prints ``error: CODE: message`` on stderr, or with ``--json`` the object
``{"ok": false, "code": ..., "message": ...}`` on stdout; success with ``--json`` prints
``{"ok": true, "files": [...]}``. The exit status is 2 when the command was called the wrong way
(``NAME_INVALID``, ``TEMPLATE_REQUIRED``, ``COMPONENT_INVALID``) and 1 when it could not be done
(``TARGET_EXISTS``, ``COMPONENT_EXISTS``, ``MANIFEST_INVALID``, ``WRITE_FAILED``).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Final, Literal, NoReturn

import typer

from ._component_scaffold import add_component, component_names
from ._scaffold import TEMPLATES, ScaffoldError, Template, check_target, init_project

__all__ = [
    "COMPLETE_VAR",
    "PROG_NAME",
    "add_app",
    "completion_command",
    "enable_shell_completion",
    "init_command",
]

#: The console script the completion scripts complete.
PROG_NAME: Final = "agentskit-chat"
#: The environment variable through which a shell asks the command for completions.
COMPLETE_VAR: Final = "_AGENTSKIT_CHAT_COMPLETE"
_TEMPLATE_REQUIRED: Final = "Choose a template with --template web, terminal or fastapi."
#: How each template's project is started, from its folder.
_RUN: Final[dict[Template, str]] = {
    "web": "uv run agentskit-chat serve chat.py:chat",
    "terminal": "uv run agentskit-chat chat chat.py:chat",
    "fastapi": "uv run uvicorn app:app",
}

JsonOption = Annotated[
    bool,
    typer.Option("--json", help='Print {"ok": ..., "files": [...]} (or the error) as JSON.'),
]


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _interactive() -> bool:
    """Whether a person is at the terminal (both stdin and stdout are terminals)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _fail(error: ScaffoldError, as_json: bool) -> NoReturn:
    if as_json:
        typer.echo(_json({"ok": False, "code": error.code, "message": error.message}))
    else:
        typer.echo(f"error: {error.code}: {error.message}", err=True)
    raise typer.Exit(2 if error.is_usage_error else 1)


def _ask_template() -> Template:
    answer = typer.prompt(
        f"Template ({', '.join(TEMPLATES)})", default="", show_default=False, err=True
    )
    choice = str(answer).strip().lower()
    for template in TEMPLATES:
        if choice == template:
            return template
    raise ScaffoldError("TEMPLATE_REQUIRED", _TEMPLATE_REQUIRED)


def init_command(
    name: Annotated[
        Path,
        typer.Argument(
            help="The new project's folder (it must not exist); its last part names the "
            "project: a letter, then letters, digits, '-' or '_'.",
            show_default=False,
        ),
    ],
    template: Annotated[
        Template | None,
        typer.Option(
            "--template",
            "-t",
            help="web (the chat page), terminal (the terminal chat) or fastapi (mounted in a "
            "FastAPI app). Asked for when left out at a terminal.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    yes: Annotated[
        bool,
        typer.Option("--yes", "-y", help="Never ask: without --template, fail instead."),
    ] = False,
) -> None:
    """Create a new chat project: chat.py, a server entry, a test, pyproject.toml and a README."""
    try:
        check_target(name)
        if template is None:
            if yes or not _interactive():
                raise ScaffoldError("TEMPLATE_REQUIRED", _TEMPLATE_REQUIRED)
            template = _ask_template()
        files = init_project(name, template)
    except ScaffoldError as error:
        _fail(error, as_json)
    if as_json:
        typer.echo(_json({"ok": True, "files": files}))
        return
    folder = shlex.quote(os.fspath(name))
    typer.echo(f"Created the {template} chat project {folder}:")
    for file in files:
        typer.echo(f"  {file}")
    typer.echo("\nNext:")
    typer.echo(f"  cd {folder}")
    typer.echo("  uv run pytest")
    typer.echo(f"  {_RUN[template]}")


add_app = typer.Typer(help="Add to a project made by 'agentskit-chat init'.", no_args_is_help=True)


@add_app.command("component")
def add_component_command(
    name: Annotated[
        str,
        typer.Argument(
            help="The component's name, e.g. 'Status card' (its key becomes status-card).",
            show_default=False,
        ),
    ],
    directory: Annotated[
        Path,
        typer.Option("--directory", "-d", help="The project folder.", show_default=False),
    ] = Path(),
    as_json: JsonOption = False,
) -> None:
    """Write a custom component: its props model and definition, a terminal renderer, a test."""
    try:
        files = add_component(directory, name)
    except ScaffoldError as error:
        _fail(error, as_json)
    if as_json:
        typer.echo(_json({"ok": True, "files": files}))
        return
    names = component_names(name)
    typer.echo(f"Added the component {names.key}:")
    for file in files:
        typer.echo(f"  {file}")
    typer.echo(
        f"\nRegister it in chat.py (from components.{names.module} import {names.constant}):\n"
        f"  components=define_component_manifest([*STANDARD_COMPONENT_CATALOG, "
        f"{names.constant}])\n"
        "The web page and the terminal chat show it as its text fallback (the label)."
    )


def completion_command(
    shell: Annotated[
        Literal["bash", "zsh", "fish"],
        typer.Argument(help="The shell to complete in.", show_default=False),
    ],
) -> None:
    """Print the shell completion script for every agentskit-chat command.

    Load it at shell start:

    bash (~/.bashrc): eval "$(agentskit-chat completion bash)"

    zsh (~/.zshrc, after compinit): eval "$(agentskit-chat completion zsh)"

    fish: agentskit-chat completion fish > ~/.config/fish/completions/agentskit-chat.fish
    """
    from typer._completion_shared import get_completion_script  # noqa: PLC0415

    typer.echo(get_completion_script(prog_name=PROG_NAME, complete_var=COMPLETE_VAR, shell=shell))


def enable_shell_completion() -> None:
    """Let a shell's completion request (``_AGENTSKIT_CHAT_COMPLETE`` set) be answered.

    The app is built without Typer's ``--install-completion`` options, which is where Typer
    would otherwise register its completion classes.
    """
    if os.environ.get(COMPLETE_VAR):
        from typer._completion_classes import completion_init  # noqa: PLC0415

        completion_init()
