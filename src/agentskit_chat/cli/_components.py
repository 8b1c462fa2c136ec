"""``agentskit-chat components``: the component catalog page, printed, written or checked.

``catalog`` renders the Markdown page of the twelve standard components. It prints the page,
writes it to ``--output``, or, with ``--check``, compares the file at ``--output`` with a fresh
rendering and exits with 1 when it is out of date, so CI can keep the checked-in page current.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["components_app"]

#: Where the checked-in catalog page lives, relative to the project root.
DEFAULT_CATALOG_PATH = Path("docs/components-catalog.md")

components_app = typer.Typer(
    help="Document the standard components.",
    no_args_is_help=True,
)


def _fix(path: Path) -> str:
    return f"run: agentskit-chat components catalog --output {path.as_posix()}"


@components_app.command("catalog")
def catalog_command(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the page to this file instead of printing it "
            f"(with --check: the file to compare; default {DEFAULT_CATALOG_PATH.as_posix()}).",
            show_default=False,
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Write nothing; exit with 1 when the file differs from a fresh rendering.",
        ),
    ] = False,
) -> None:
    """Print the Markdown catalog of the standard components, write it, or check it is current."""
    # Imported when the command runs, so that --help and the other commands start fast.
    from agentskit_chat.components import render_component_catalog_page  # noqa: PLC0415

    page = render_component_catalog_page().encode("utf-8")
    if check:
        path = output if output is not None else DEFAULT_CATALOG_PATH
        try:
            current = path.read_bytes()
        except FileNotFoundError:
            typer.echo(f"error: {path.as_posix()} does not exist; {_fix(path)}", err=True)
            raise typer.Exit(1) from None
        except OSError as error:
            typer.echo(f"error: {path.as_posix()} could not be read: {error.strerror}", err=True)
            raise typer.Exit(2) from None
        if current != page:
            typer.echo(f"error: {path.as_posix()} is out of date; {_fix(path)}", err=True)
            raise typer.Exit(1)
        typer.echo(f"{path.as_posix()} is up to date.")
        return
    if output is None:
        typer.echo(page.decode("utf-8"), nl=False)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_bytes(page)
    except OSError as error:
        typer.echo(f"error: {output.as_posix()} could not be written: {error.strerror}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"Wrote {output.as_posix()}.")
