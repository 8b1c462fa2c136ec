"""``agentskit-chat init``: a new chat project, written completely or not at all.

Every file is written into a hidden staging folder next to the target (so on the same file
system), and the folder is then renamed to the target in one step that refuses any existing
path, an empty directory included: ``renameat2(RENAME_NOREPLACE)`` on Linux, ``renamex_np``
with ``RENAME_EXCL`` on macOS, and a plain rename on Windows (which never replaces a folder).
Where none of these applies, the target is claimed with an exclusive ``mkdir`` and the staging
folder renamed over that empty claim. On any failure the staging folder is removed, along with
any parent folder this call created, and nothing at the target is touched.

The templates are package data (``templates/project``): one shared folder and one per template,
rendered by replacing ``__NAME__``-style placeholders with the project's name, id and title.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, get_args

from agentskit_chat.errors import AgentsKitChatError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

# ctypes, secrets and importlib.resources are imported by the functions that use them: every
# command of the command line imports this module (``init``'s options), few write a project.

__all__ = [
    "TEMPLATES",
    "ScaffoldError",
    "ScaffoldErrorCode",
    "Template",
    "check_target",
    "init_project",
    "project_files",
    "render_template",
    "template_text",
    "validate_project_name",
]

#: What a project can be made from.
Template = Literal["web", "terminal", "fastapi"]
#: The templates, in the order they are offered.
TEMPLATES: Final[tuple[Template, ...]] = get_args(Template)

#: Why scaffolding refused or failed.
ScaffoldErrorCode = Literal[
    "TARGET_EXISTS",
    "TEMPLATE_REQUIRED",
    "NAME_INVALID",
    "COMPONENT_INVALID",
    "COMPONENT_EXISTS",
    "MANIFEST_INVALID",
    "WRITE_FAILED",
]

#: A project name: a letter, then letters, digits, ``-`` or ``_``, ending in a letter or digit.
_NAME: Final = re.compile(r"[A-Za-z](?:[A-Za-z0-9_-]{0,62}[A-Za-z0-9])?")
_PLACEHOLDER: Final = re.compile(r"__([A-Z](?:[A-Z_]*[A-Z])?)__")
_REQUIREMENT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: What every generated project depends on (a project may not be named like one of them).
_PROJECT_DEPENDENCIES: Final = ("agentskit-chat", "pytest", "fastapi", "textual")
#: The dependencies of each template's ``pyproject.toml``.
_DEPENDENCIES: Final[Mapping[Template, tuple[str, ...]]] = {
    "web": ("agentskit-chat[server]>={version}",),
    "terminal": ("agentskit-chat[server,tui]>={version}",),
    "fastapi": ("agentskit-chat[server]>={version}", "fastapi>=0.115"),
}
_TEMPLATE_SUFFIX: Final = ".tmpl"
#: Template files whose name cannot be used as is inside the package.
_RENAMED: Final = {"gitignore": ".gitignore"}

# Linux renameat2(2) and macOS renamex_np(2).
_AT_FDCWD: Final = -100
_RENAME_NOREPLACE: Final = 1
_RENAME_EXCL: Final = 0x4


class ScaffoldError(AgentsKitChatError):
    """``init`` or ``add component`` refused or failed; nothing was left behind.

    Attributes:
        code: See :data:`ScaffoldErrorCode`.
        message: One sentence that never repeats a rejected name.
    """

    def __init__(self, code: ScaffoldErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ScaffoldErrorCode = code
        self.message = message

    @property
    def is_usage_error(self) -> bool:
        """Whether the command was called the wrong way (exit status 2) rather than failing."""
        return self.code in ("TEMPLATE_REQUIRED", "NAME_INVALID", "COMPONENT_INVALID")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _taken_names() -> frozenset[str]:
    """Distribution names a project may not take: what it (or agentskit-chat) depends on."""
    from importlib.metadata import PackageNotFoundError, requires  # noqa: PLC0415 - start-up

    names = {_normalized(name) for name in _PROJECT_DEPENDENCIES}
    try:
        for requirement in requires("agentskit-chat") or ():
            match = _REQUIREMENT_NAME.match(requirement)
            if match is not None:
                names.add(_normalized(match.group()))
    except PackageNotFoundError:  # pragma: no cover - running from a source tree only
        pass
    return frozenset(names)


def validate_project_name(name: str) -> str:
    """``name`` when it can name a project: its folder, Python distribution and chat id.

    Raises:
        ScaffoldError: ``NAME_INVALID`` when it does not start with a letter, holds anything
            but letters, digits, ``-`` and ``_``, ends with ``-`` or ``_``, is longer than 64
            characters, or is the name of a package the project depends on.
    """
    if _NAME.fullmatch(name) is None:
        raise ScaffoldError(
            "NAME_INVALID",
            "A project name must start with a letter, hold only letters, digits, '-' or '_', "
            "end with a letter or digit, and be at most 64 characters.",
        )
    if _normalized(name) in _taken_names():
        raise ScaffoldError(
            "NAME_INVALID", "A project name must not be the name of a package it depends on."
        )
    return name


def _title(name: str) -> str:
    return " ".join(part[:1].upper() + part[1:] for part in re.split(r"[-_]+", name) if part)


def _agentskit_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - start-up

    try:
        return version("agentskit-chat")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree only
        return "0.1.0"


def _template_root() -> Traversable:
    from importlib import resources  # noqa: PLC0415 - start-up time

    return resources.files("agentskit_chat.cli").joinpath("templates")


def _collect(folder: Traversable, prefix: str, into: dict[str, str]) -> None:
    for entry in folder.iterdir():
        if entry.is_dir():
            _collect(entry, f"{prefix}{entry.name}/", into)
        elif entry.name.endswith(_TEMPLATE_SUFFIX):
            stem = entry.name[: -len(_TEMPLATE_SUFFIX)]
            into[prefix + _RENAMED.get(stem, stem)] = entry.read_text(encoding="utf-8")


def template_text(folder: str, name: str) -> str:
    """The text of the template file ``name`` in ``templates/<folder>``."""
    file = _template_root().joinpath(folder).joinpath(name + _TEMPLATE_SUFFIX)
    return file.read_text(encoding="utf-8")


def render_template(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every ``__KEY__`` placeholder replaced by ``values[KEY]``.

    Raises:
        KeyError: a placeholder has no value (a broken template, never user input).
    """

    def replace(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return _PLACEHOLDER.sub(replace, text)


def project_files(name: str, template: Template) -> dict[str, str]:
    """The files of a new ``template`` project called ``name``: relative path → content."""
    sources: dict[str, str] = {}
    root = _template_root().joinpath("project")
    _collect(root.joinpath("_shared"), "", sources)
    _collect(root.joinpath(template), "", sources)
    agentskit = _agentskit_version()
    dependencies = "\n".join(
        f'  "{dependency.format(version=agentskit)}",' for dependency in _DEPENDENCIES[template]
    )
    values = {
        "NAME": name,
        "CHAT_ID": name,
        "TITLE": _title(name),
        "TEMPLATE": template,
        "DEPENDENCIES": dependencies,
    }
    return {path: render_template(text, values) for path, text in sorted(sources.items())}


# --- the all-or-nothing publish ---------------------------------------------------------------


def _native_noreplace(source: Path, target: Path) -> bool:
    """Rename ``source`` to ``target`` unless ``target`` exists; ``False`` when this system
    (or file system) offers no such rename.

    Raises:
        FileExistsError: ``target`` exists.
        OSError: any other failure.
    """
    if sys.platform == "win32":  # pragma: no cover - os.rename never replaces there
        os.rename(source, target)
        return True
    import ctypes  # noqa: PLC0415 - start-up time

    libc = ctypes.CDLL(None, use_errno=True)
    old, new = os.fsencode(source), os.fsencode(target)
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        result = libc.renameat2(_AT_FDCWD, old, _AT_FDCWD, new, _RENAME_NOREPLACE)
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):  # pragma: no cover
        result = libc.renamex_np(old, new, _RENAME_EXCL)
    else:  # pragma: no cover - other systems use the claim below
        return False
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False  # the file system cannot do it: fall back to the claim
    raise OSError(code, os.strerror(code), os.fspath(target))


def _claim_and_rename(source: Path, target: Path) -> None:
    """Claim ``target`` with an exclusive ``mkdir``, then rename ``source`` over the claim."""
    os.mkdir(target)
    try:
        os.rename(source, target)
    except BaseException:
        with suppress(OSError):
            os.rmdir(target)  # only our own empty claim; anything put there meanwhile stays
        raise


def _publish(source: Path, target: Path) -> None:
    if not _native_noreplace(source, target):
        _claim_and_rename(source, target)


def _write_new(path: Path, text: str) -> None:
    """Create ``path`` (and its folders) with ``text``; an existing file is an error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8", newline="\n") as file:
        file.write(text)


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing ancestors; the ones created, outermost first."""
    missing: list[Path] = []
    current = folder
    while not current.exists():
        missing.append(current)
        current = current.parent
    created: list[Path] = []
    try:
        for path in reversed(missing):
            with suppress(FileExistsError):
                os.mkdir(path)
                created.append(path)
    except BaseException:
        _remove_folders(created)
        raise
    return created


def _remove_folders(created: list[Path]) -> None:
    for path in reversed(created):
        with suppress(OSError):
            os.rmdir(path)


def _staging_folder(parent: Path, name: str) -> Path:
    import secrets  # noqa: PLC0415 - start-up time

    while True:
        staging = parent / f".{name}-{secrets.token_hex(6)}"
        try:
            os.mkdir(staging)
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
        return staging


def _exists_error(target: Path) -> ScaffoldError:
    return ScaffoldError("TARGET_EXISTS", f"Refusing to overwrite existing path: {target}")


_EXISTS_ERRNOS: Final = frozenset({errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR})


def check_target(target: Path) -> str:
    """The project name ``target`` gives, when a project may be created there.

    Raises:
        ScaffoldError: ``NAME_INVALID`` (its last path component, see
            :func:`validate_project_name`) or ``TARGET_EXISTS`` (anything is there, an empty
            folder or a dangling link included).
    """
    target = Path(os.path.abspath(target))
    name = validate_project_name(target.name)
    if os.path.lexists(target):
        raise _exists_error(target)
    return name


def init_project(
    target: Path,
    template: Template,
    *,
    write: Callable[[Path, str], None] | None = None,
) -> list[str]:
    """Write a new ``template`` project at ``target``, named after its last path component.

    Args:
        target: Where the project goes; it must not exist (not even as an empty folder). Its
            parent folders are created as needed.
        template: ``web``, ``terminal`` or ``fastapi``.
        write: Creates one file; by default exclusively, with its folders (tests pass one that
            fails).

    Returns:
        The sorted relative paths of the files written.

    Raises:
        ScaffoldError: ``NAME_INVALID`` (see :func:`validate_project_name`), ``TARGET_EXISTS``
            (something is at ``target``, or a file is where a parent folder must be), or
            ``WRITE_FAILED`` (the file system refused; nothing is left behind).
    """
    target = Path(os.path.abspath(target))
    name = check_target(target)
    files = project_files(name, template)
    write = write or _write_new
    created: list[Path] = []
    staging: Path | None = None
    published = False
    try:
        created = _make_parents(target.parent)
        staging = _staging_folder(target.parent, name)
        for relative, text in files.items():
            write(staging / relative, text)
        _publish(staging, target)
        published = True
    except OSError as error:
        if error.errno in _EXISTS_ERRNOS:
            raise _exists_error(target) from None
        reason = error.strerror or type(error).__name__
        raise ScaffoldError("WRITE_FAILED", f"Could not write the project: {reason}.") from None
    finally:
        if not published:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            _remove_folders(created)
    return sorted(files)
