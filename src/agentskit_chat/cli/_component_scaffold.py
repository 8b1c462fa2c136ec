"""``agentskit-chat add component``: a custom component's files in a project, all or nothing.

A name becomes a component key (``Status Card`` → ``status-card``), a module name
(``status_card``) and a class name (``StatusCard``). Three files are written: the component
(``components/<module>.py``: its strict props model, definition and frame builder), its
terminal text renderer (``components/terminal/<module>.py``) and a test
(``tests/test_<module>_component.py``).

Nothing is written through a symbolic link to a folder, nothing existing is overwritten (every
destination is checked before the first write, and each file is created exclusively), and a
failure part way removes the files and the folders this call created.
"""

from __future__ import annotations

import keyword
import os
import re
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Final

from ._scaffold import ScaffoldError, render_template, template_text

__all__ = ["ComponentNames", "add_component", "component_names"]

_KEY: Final = re.compile(r"[a-z][a-z0-9-]{0,63}")
#: Module names that would clash with the project's own folders.
_RESERVED_MODULES: Final = frozenset({"terminal"})
_SYMLINK: Final = "Refusing to write through a symbolic-link component directory."
#: Template → destination (``{module}`` is the component's module name).
_FILES: Final = {
    "component.py": "components/{module}.py",
    "terminal.py": "components/terminal/{module}.py",
    "test_component.py": "tests/test_{module}_component.py",
}


class ComponentNames:
    """One component's names, derived from what the user typed.

    Attributes:
        key: The component key (``status-card``).
        module: The Python module name (``status_card``).
        class_name: The class name stem (``StatusCard``).
        constant: The definition's constant (``STATUS_CARD``).
    """

    __slots__ = ("class_name", "constant", "key", "module")

    def __init__(self, key: str) -> None:
        self.key = key
        self.module = key.replace("-", "_")
        self.class_name = "".join(part[:1].upper() + part[1:] for part in key.split("-"))
        self.constant = self.module.upper()


def component_names(name: str) -> ComponentNames:
    """The names of a component called ``name``.

    Insert ``-`` between a lower-case letter or digit and a following capital, turn each run of
    other characters into ``-``, trim dashes, lower-case; the result must be a component key.

    Raises:
        ScaffoldError: ``COMPONENT_INVALID`` when the result is not a key
            (``^[a-z][a-z0-9-]{0,63}$``), is a standard component's key, is a Python keyword
            as a module name, or would clash with the ``components/terminal`` folder.

    Example:
        >>> names = component_names("Status Card")
        >>> names.key, names.module, names.class_name
        ('status-card', 'status_card', 'StatusCard')
    """
    from agentskit_chat.components import STANDARD_COMPONENT_KEYS  # noqa: PLC0415 - CLI speed

    key = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", name.strip())
    key = re.sub(r"[^A-Za-z0-9]+", "-", key).strip("-").lower()
    if _KEY.fullmatch(key) is None:
        raise ScaffoldError(
            "COMPONENT_INVALID",
            "Component name must start with a letter and contain only letters, numbers, or dashes.",
        )
    if key in STANDARD_COMPONENT_KEYS:
        raise ScaffoldError(
            "COMPONENT_INVALID", "Component name is reserved by the standard catalog."
        )
    names = ComponentNames(key)
    if keyword.iskeyword(names.module) or names.module in _RESERVED_MODULES:
        raise ScaffoldError(
            "COMPONENT_INVALID",
            "Component name is reserved (a Python keyword or a project folder).",
        )
    return names


def _project_root(directory: Path) -> Path:
    try:
        root = Path(os.path.realpath(directory, strict=True))
    except OSError:
        root = None
    if root is None or not root.is_dir():
        raise ScaffoldError(
            "MANIFEST_INVALID", "Component generation requires an existing project directory."
        )
    return root


def _guard_symlinks(root: Path, destination: Path) -> None:
    """Refuse when a folder between ``root`` and ``destination`` is a symbolic link."""
    folder = destination.parent
    while folder != root:
        if folder.is_symlink():
            raise ScaffoldError("MANIFEST_INVALID", _SYMLINK)
        folder = folder.parent


def _create(path: Path, text: str) -> None:
    """Create the file ``path`` with ``text``; an existing file (or link) is an error."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags, 0o666)
    with os.fdopen(descriptor, "w", encoding="utf-8", newline="\n") as file:
        file.write(text)


def _make_folders(folder: Path, root: Path, created: list[Path]) -> None:
    """Create ``folder`` and its missing parents below ``root``, recording each one made."""
    missing: list[Path] = []
    current = folder
    while current != root and not os.path.lexists(current):
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        os.mkdir(path)
        created.append(path)


def add_component(
    directory: Path,
    name: str,
    *,
    create: Callable[[Path, str], None] | None = None,
) -> list[str]:
    """Write the files of a component called ``name`` into the project at ``directory``.

    Args:
        directory: The project (made by ``agentskit-chat init``); links are followed.
        name: What the user typed (see :func:`component_names`).
        create: Creates one file; by default exclusively, never through a link (tests pass
            one that fails).

    Returns:
        The sorted relative paths written.

    Raises:
        ScaffoldError: ``COMPONENT_INVALID`` (the name), ``MANIFEST_INVALID`` (no such project
            folder, or a symbolic link on the way), ``COMPONENT_EXISTS`` (a destination
            exists; nothing was written) or ``WRITE_FAILED`` (the file system refused; what
            was written is removed again).
    """
    names = component_names(name)
    root = _project_root(directory)
    create = create or _create
    values = {
        "KEY": names.key,
        "MODULE": names.module,
        "CLASS": names.class_name,
        "CONSTANT": names.constant,
    }
    files = {
        destination.format(module=names.module): render_template(
            template_text("component", source), values
        )
        for source, destination in _FILES.items()
    }
    for relative in files:
        destination = root / relative
        try:
            _guard_symlinks(root, destination)
        except OSError as error:
            raise ScaffoldError("WRITE_FAILED", _failure(error)) from None
    for relative in files:
        if os.path.lexists(root / relative):
            raise ScaffoldError(
                "COMPONENT_EXISTS", "Refusing to overwrite an existing component file."
            )
    written: list[Path] = []
    folders: list[Path] = []
    done = False
    try:
        for relative, text in files.items():
            path = root / relative
            _make_folders(path.parent, root, folders)
            create(path, text)
            written.append(path)
        done = True
    except FileExistsError:
        raise ScaffoldError(
            "COMPONENT_EXISTS", "Refusing to overwrite an existing component file."
        ) from None
    except OSError as error:
        raise ScaffoldError("WRITE_FAILED", _failure(error)) from None
    finally:
        if not done:
            for path in written:
                with suppress(OSError):
                    path.unlink()
            for folder in reversed(folders):
                with suppress(OSError):
                    folder.rmdir()
    return sorted(files)


def _failure(error: OSError) -> str:
    return f"Could not write the component: {error.strerror or type(error).__name__}."
