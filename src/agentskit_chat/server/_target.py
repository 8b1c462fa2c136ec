"""What a served chat is made of: a chat definition, a factory, or a definition with resources.

:func:`load_chat_target` finds a target from a command-line reference (``app.py:chat``,
``package.module:attr``), and :class:`ChatTargetHolder` opens it for an app's lifetime: a
:class:`~agentskit_chat.conversation.ChatDefinition` is used as it is; a factory is called once
(sync or async); a factory that returns an async context manager (for example an
``@contextlib.asynccontextmanager`` function) is entered when the app starts and left when it
stops, so a definition can open a database pool or a model client and close it again.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TypeAlias

from agentskit_chat.conversation import ChatDefinition
from agentskit_chat.errors import ConfigurationError

__all__ = [
    "ChatTarget",
    "ChatTargetHolder",
    "load_chat_target",
]

#: What ``create_app`` and ``serve`` take: a definition, or a zero-argument factory returning
#: one (sync or async), or returning an async context manager that yields one.
ChatTarget: TypeAlias = (
    ChatDefinition
    | Callable[
        [],
        ChatDefinition
        | Awaitable[ChatDefinition]
        | contextlib.AbstractAsyncContextManager[ChatDefinition],
    ]
)

#: The attribute looked up when a reference names only a file or module.
DEFAULT_ATTRIBUTE: Final = "chat"
_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _split(reference: str) -> tuple[str, str]:
    where, colon, attribute = reference.rpartition(":")
    if not colon:
        return reference, DEFAULT_ATTRIBUTE
    if not where:
        raise ConfigurationError(f"{reference!r}: name a file or module before the colon")
    return where, attribute


def _import_file(path: Path) -> Any:
    """Import ``path`` as a module named after its file, with its folder first on sys.path
    (so it can import its neighbours, as ``python app.py`` would)."""
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = path.stem
    if not _IDENTIFIER.match(name):
        raise ConfigurationError(f"{path}: a chat file's name must be a Python identifier")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_chat_target(reference: str) -> ChatTarget:
    """The chat target a reference names: ``path/to/app.py:attr`` or ``package.module:attr``
    (``attr`` defaults to ``chat``; dots in it walk attributes).

    Importing runs the file or module, so an error in it propagates as it is (with its
    traceback): it is the user's own code.

    Raises:
        ConfigurationError: the file or module does not exist, or the attribute is missing or
            is neither a chat definition nor a callable.

    Example::

        target = load_chat_target("app.py:chat")
        app = create_app(target)
    """
    where, attribute = _split(reference.strip())
    if not all(_IDENTIFIER.match(part) for part in attribute.split(".")):
        raise ConfigurationError(f"{reference!r}: {attribute!r} is not a Python attribute name")
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where)
        if not path.is_file():
            raise ConfigurationError(f"{where}: no such Python file")
        module = _import_file(path)
    else:
        if not _MODULE.match(where):
            raise ConfigurationError(f"{reference!r}: {where!r} is not a file or module name")
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as error:
            # Only the named module (or a package of it) missing is ours to report; a missing
            # import inside the user's module keeps its own error.
            if error.name is not None and f"{where}.".startswith(f"{error.name}."):
                raise ConfigurationError(f"{where}: no such module") from None
            raise
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ConfigurationError(f"{where} has no attribute {attribute!r}")
        value = getattr(value, part)
    if not isinstance(value, ChatDefinition) and not callable(value):
        raise ConfigurationError(
            f"{reference}: expected a ChatDefinition or a function returning one, "
            f"found {type(value).__name__}"
        )
    return value  # type: ignore[no-any-return]


class ChatTargetHolder:
    """A chat target opened for the lifetime of an app (see the module documentation).

    Opening twice is harmless (the second call does nothing), so a host that opens the app
    itself can still run its lifespan.
    """

    def __init__(self, target: ChatTarget) -> None:
        if not isinstance(target, ChatDefinition) and not callable(target):
            raise ConfigurationError(
                "A chat target must be a ChatDefinition or a function returning one."
            )
        self._target = target
        self._definition: ChatDefinition | None = None
        self._stack: contextlib.AsyncExitStack | None = None

    @property
    def is_open(self) -> bool:
        """Whether the definition is ready."""
        return self._definition is not None

    @property
    def definition(self) -> ChatDefinition:
        """The opened definition.

        Raises:
            ConfigurationError: the target is not open.
        """
        if self._definition is None:
            raise ConfigurationError("The chat is not open yet.")
        return self._definition

    async def open(self) -> None:
        """Make the definition (call the factory, enter its context manager).

        Raises:
            ConfigurationError: the factory gave something else than a chat definition.
        """
        if self._definition is not None:
            return
        target = self._target
        if isinstance(target, ChatDefinition):
            self._definition = target
            return
        made: object = target()
        if inspect.isawaitable(made):
            made = await made
        stack = contextlib.AsyncExitStack()
        if isinstance(made, contextlib.AbstractAsyncContextManager):
            made = await stack.enter_async_context(made)
        if not isinstance(made, ChatDefinition):
            await stack.aclose()
            raise ConfigurationError(
                f"The chat factory returned {type(made).__name__}, not a ChatDefinition."
            )
        self._definition = made
        self._stack = stack

    async def aclose(self) -> None:
        """Leave the definition's context manager, if it has one."""
        stack, self._stack = self._stack, None
        if not isinstance(self._target, ChatDefinition):
            self._definition = None
        if stack is not None:
            await stack.aclose()
