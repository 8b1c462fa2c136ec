"""``agentskit-chat artifact``: build the knowledge artifact from Markdown, and verify it.

``build`` reads a docs folder and writes ``knowledge.json`` and ``site.json`` all or nothing.
``verify`` checks a pair the way a chat host does before it trusts the artifact: the site
configuration decodes, the artifact decodes, belongs to that site, carries the configured hash,
hashes to it, and has not expired.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, NoReturn

import typer

from agentskit_chat.errors import BuildError

if TYPE_CHECKING:
    from agentskit_chat.answers import ArtifactBuild
    from agentskit_chat.protocol import Diagnostic

__all__ = ["artifact_app"]

# The answer plane's names (agentskit_chat.answers), spelled here so that the command line
# starts without importing it; a test keeps them equal. The rest is imported when a command runs.
ARTIFACT_FILE_NAME: Final = "knowledge.json"
SITE_FILE_NAME: Final = "site.json"
DEFAULT_ARTIFACT_HREF: Final = "/agentskit-chat.knowledge.json"

artifact_app = typer.Typer(
    help="Build and verify the local knowledge artifact of exact answers.",
    no_args_is_help=True,
)


class Fallback(StrEnum):
    """What the chat does with questions the artifact cannot answer exactly."""

    backend = "backend"
    disabled = "disabled"


def _now() -> datetime:
    return datetime.now(UTC)


#: The clock ``verify`` checks expiry against; tests replace it.
clock: Callable[[], datetime] = _now


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@contextmanager
def _progress_bar() -> Iterator[Callable[[int, int], None] | None]:
    """A Rich progress bar on stderr while files are read, only when stderr is a terminal."""
    from rich.console import Console  # noqa: PLC0415 - start-up time
    from rich.progress import (  # noqa: PLC0415 - start-up time
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    columns = (
        TextColumn("Reading Markdown"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("read", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _report(build: ArtifactBuild, paths: tuple[Path, Path], verbose: bool) -> None:
    stats = build.stats
    lines = [
        f"Built {build.artifact.artifact_id} for site {build.artifact.site_id}",
        f"  entries:      {stats.entries} ({stats.declared} declared, {stats.documents} documents,"
        f" {stats.commands} commands, {stats.headings} headings, {stats.mentions} mentions)"
        f" from {stats.files} files",
        f"  size:         {stats.artifact_bytes} of 524288 bytes",
        f"  content hash: {build.artifact.content_hash}",
        f"  wrote:        {paths[0]}, {paths[1]}",
    ]
    if build.left_out:
        hint = "" if verbose else " (list them with --verbose)"
        lines.append(f"  left out:     {len(build.left_out)}{hint}")
        if verbose:
            lines.extend(
                f"    {item.file}: {item.kind} {item.label!r}: {item.reason}"
                for item in build.left_out
            )
    typer.echo("\n".join(lines))


@artifact_app.command("build")
def build_command(  # noqa: PLR0917 (Typer maps parameters to options)
    docs_dir: Annotated[Path, typer.Argument(help="The folder of Markdown files to read.")],
    site_id: Annotated[str, typer.Option("--site-id", help="The site's safe identifier.")],
    out: Annotated[
        Path, typer.Option("--out", help="Where to write knowledge.json and site.json.")
    ],
    artifact_id: Annotated[
        str | None,
        typer.Option(
            "--artifact-id", help="The artifact id (default: <site-id>-<12 hex of the hash>)."
        ),
    ] = None,
    generated_at: Annotated[
        str | None,
        typer.Option(
            "--generated-at",
            help="generatedAt, verbatim (default: SOURCE_DATE_EPOCH, else now).",
        ),
    ] = None,
    expires_at: Annotated[
        str | None, typer.Option("--expires-at", help="expiresAt: when the answers go stale.")
    ] = None,
    href: Annotated[
        str, typer.Option("--href", help="Where the host serves knowledge.json.")
    ] = DEFAULT_ARTIFACT_HREF,
    href_prefix: Annotated[
        str, typer.Option("--href-prefix", help="Prefix of the links to the documents.")
    ] = "/docs",
    fallback: Annotated[
        Fallback, typer.Option("--fallback", help="Whether unanswered questions may escalate.")
    ] = Fallback.backend,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="List every entry that was left out.")
    ] = False,
) -> None:
    """Build knowledge.json and site.json from a folder of Markdown, all or nothing."""
    from agentskit_chat.answers import build_local_knowledge_artifact  # noqa: PLC0415
    from agentskit_chat.retrieval import read_docs_folder, write_artifact_build  # noqa: PLC0415

    try:
        folder = read_docs_folder(docs_dir)
        with _progress_bar() as progress:
            build = build_local_knowledge_artifact(
                folder,
                site_id=site_id,
                artifact_id=artifact_id,
                generated_at=generated_at,
                expires_at=expires_at,
                artifact_href=href,
                fallback_mode=fallback.value,
                href_prefix=href_prefix,
                progress=progress,
            )
        paths = write_artifact_build(build, out)
    except BuildError as exc:
        _fail(str(exc))
    _report(build, paths, verbose)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        _fail(f"{path}: cannot read the file: {exc.strerror or exc}")


def _rejected(path: Path, diagnostic: Diagnostic) -> NoReturn:
    _fail(f"{path}: {diagnostic.message} ({diagnostic.code})")


@artifact_app.command("verify")
def verify_command(
    directory: Annotated[
        Path | None,
        typer.Argument(help="A folder holding knowledge.json and site.json.", show_default=False),
    ] = None,
    artifact: Annotated[
        Path | None,
        typer.Option("--artifact", help="The artifact file (default: DIR/knowledge.json)."),
    ] = None,
    site: Annotated[
        Path | None, typer.Option("--site", help="The site configuration (default: DIR/site.json).")
    ] = None,
) -> None:
    """Check an artifact against its site configuration, as a chat host does before trusting it."""
    from agentskit_chat.protocol import (  # noqa: PLC0415 - start-up time
        decode_deterministic_site_config,
        verify_local_knowledge_artifact,
    )
    from agentskit_chat.protocol._time import epoch_ms  # noqa: PLC0415 - start-up time

    if directory is None and (artifact is None or site is None):
        _fail("give a folder, or both --artifact and --site", code=2)
    artifact_path = artifact if artifact is not None else Path(str(directory)) / ARTIFACT_FILE_NAME
    site_path = site if site is not None else Path(str(directory)) / SITE_FILE_NAME
    site_result = decode_deterministic_site_config(_read(site_path))
    if not site_result.ok:
        _rejected(site_path, site_result.diagnostic)
    config = site_result.value
    result = verify_local_knowledge_artifact(
        _read(artifact_path),
        expected_content_hash=config.artifact.content_hash,
        expected_site_id=config.site_id,
    )
    if not result.ok:
        _rejected(artifact_path, result.diagnostic)
    verified = result.value
    now_ms = int(clock().timestamp() * 1000)
    if verified.expires_at is not None and epoch_ms(verified.expires_at) <= now_ms:
        _fail(
            f"{artifact_path}: expired at {verified.expires_at}; a chat would escalate every "
            "question instead of answering from it"
        )
    typer.echo(
        "\n".join(
            [
                f"Verified {artifact_path} against {site_path}",
                f"  site:         {config.site_id} (fallback: {config.fallback.mode})",
                f"  artifact:     {verified.artifact_id}, {len(verified.entries)} entries",
                f"  content hash: {verified.content_hash}",
                f"  generated:    {verified.generated_at}",
                f"  expires:      {verified.expires_at or 'never'}",
            ]
        )
    )
