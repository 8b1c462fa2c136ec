"""load_chat_target (``app.py:chat``, ``package.module:attr``) and ChatTargetHolder (a definition,
a factory, an async factory, a factory with resources to open and close)."""

from __future__ import annotations

import contextlib
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.conversation import ChatDefinition, define_chat
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.runtime import ChatConfig, reply_adapter
from agentskit_chat.server import ChatTargetHolder, load_chat_target

pytestmark = pytest.mark.anyio

#: A chat file: ``chat`` (a definition), ``factory`` (a function making one), ``holder.chat``
#: (a definition one attribute down), and values of the wrong kind.
APP = """
from types import SimpleNamespace

from agentskit_chat.conversation import define_chat
from agentskit_chat.runtime import ChatConfig, reply_adapter


def _define(name):
    return define_chat(
        id=name, chat=ChatConfig(adapter=reply_adapter(lambda text, request: name))
    )


chat = _define("{name}")
other = _define("{name}-other")
holder = SimpleNamespace(chat=_define("{name}-nested"))
count = 3
words = "not a chat"


def factory():
    return _define("{name}-made")
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Restore ``sys.path`` after the test (the loader puts a chat file's folder on it) and
    forget every module imported from ``tmp_path``."""
    monkeypatch.syspath_prepend(str(tmp_path / "unused"))
    yield
    root = tmp_path.resolve()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(root):
            del sys.modules[name]


def write_app(folder: Path, name: str = "app", body: str = APP, chat: str = "support") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(body).replace("{name}", chat), "utf-8")
    return path


def write_package(root: Path, package: str, module: str = "chat_app", body: str = APP) -> None:
    folder = root / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("", "utf-8")
    write_app(folder, module, body, chat=f"{package}-{module}")


def chat_id(target: object) -> str:
    assert isinstance(target, ChatDefinition), target
    return target.id


# --- references ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("app.py:chat", "support"),
        ("app.py", "support"),
        ("app.py:other", "support-other"),
        ("app.py:holder.chat", "support-nested"),
        ("  app.py:chat  ", "support"),
        ("./app.py:chat", "support"),
    ],
)
def test_a_file_reference_names_a_definition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: str, expected: str
) -> None:
    write_app(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert chat_id(load_chat_target(reference)) == expected


def test_a_file_reference_by_its_full_path_works_from_anywhere(tmp_path: Path) -> None:
    path = write_app(tmp_path / "project")
    assert chat_id(load_chat_target(f"{path}:chat")) == "support"
    assert chat_id(load_chat_target(str(path))) == "support"


async def test_a_factory_reference_is_the_function_and_makes_the_definition(
    tmp_path: Path,
) -> None:
    path = write_app(tmp_path)
    target = load_chat_target(f"{path}:factory")
    assert callable(target) and not isinstance(target, ChatDefinition)
    holder = ChatTargetHolder(target)
    await holder.open()
    assert holder.definition.id == "support-made"
    await holder.aclose()


def test_a_chat_file_imports_its_neighbours(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "chat_words_zq.py").write_text('NAME = "from-a-neighbour"\n', "utf-8")
    path = write_app(
        folder,
        body=APP.replace('"{name}"', "NAME").replace(
            "from types import", "from chat_words_zq import NAME\nfrom types import"
        ),
    )
    assert chat_id(load_chat_target(f"{path}:chat")) == "from-a-neighbour"


def test_a_module_reference_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_package(tmp_path, "chatpkg_cwd")
    monkeypatch.chdir(tmp_path)
    assert chat_id(load_chat_target("chatpkg_cwd.chat_app:chat")) == "chatpkg_cwd-chat_app"
    assert chat_id(load_chat_target("chatpkg_cwd.chat_app")) == "chatpkg_cwd-chat_app"
    assert chat_id(load_chat_target("chatpkg_cwd.chat_app:holder.chat")) == (
        "chatpkg_cwd-chat_app-nested"
    )


def test_a_module_reference_on_the_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_package(tmp_path / "site", "chatpkg_path")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert chat_id(load_chat_target("chatpkg_path.chat_app:other")) == (
        "chatpkg_path-chat_app-other"
    )


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("missing.py:chat", "missing.py: no such Python file"),
        ("missing.py", "missing.py: no such Python file"),
        ("nowhere/app:chat", "nowhere/app: no such Python file"),
        ("app.py:absent", "app.py has no attribute 'absent'"),
        ("app.py:holder.absent", "app.py has no attribute 'holder.absent'"),
        ("app.py:chat.id.nothing", "app.py has no attribute 'chat.id.nothing'"),
        ("app.py:count", "expected a ChatDefinition or a function returning one, found int"),
        ("app.py:words", "expected a ChatDefinition or a function returning one, found str"),
        ("app.py:1chat", "'1chat' is not a Python attribute name"),
        ("app.py:chat-bot", "'chat-bot' is not a Python attribute name"),
        ("app.py:", "'' is not a Python attribute name"),
        ("app.py:holder..chat", "'holder..chat' is not a Python attribute name"),
        (":chat", "name a file or module before the colon"),
        ("my-package:chat", "'my-package' is not a file or module name"),
        ("1package.app:chat", "'1package.app' is not a file or module name"),
        ("package..app:chat", "'package..app' is not a file or module name"),
        ("chatpkg_absent_zq:chat", "chatpkg_absent_zq: no such module"),
        ("chatpkg_absent_zq.app:chat", "chatpkg_absent_zq.app: no such module"),
        ("./notes.txt:chat", "notes.txt: not a Python file"),
        ("notes.txt:chat", "notes.txt: no such module"),
        ("my-app.py:chat", "a chat file's name must be a Python identifier"),
    ],
)
def test_a_bad_reference_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: str, message: str
) -> None:
    write_app(tmp_path)
    write_app(tmp_path, "my-app")
    (tmp_path / "notes.txt").write_text("chat = 1\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError) as raised:
        load_chat_target(reference)
    assert message in str(raised.value)


def test_a_module_of_an_existing_package_that_is_missing_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_package(tmp_path, "chatpkg_half")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=r"chatpkg_half\.absent: no such module"):
        load_chat_target("chatpkg_half.absent:chat")


class UsersOwnError(Exception):
    """Raised by a chat file while it is imported."""


def test_an_error_inside_the_users_file_propagates_as_itself(tmp_path: Path) -> None:
    path = write_app(tmp_path, "broken_chat_zq", "raise ValueError('a bug in my chat')\n")
    with pytest.raises(ValueError, match="a bug in my chat"):
        load_chat_target(f"{path}:chat")
    # A file that failed to import is not left half-imported.
    assert "broken_chat_zq" not in sys.modules


@pytest.mark.parametrize("kind", ["file", "module"])
def test_a_missing_dependency_of_the_users_code_keeps_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    body = "import chatdep_absent_zq\n" + APP
    monkeypatch.chdir(tmp_path)
    if kind == "file":
        path = write_app(tmp_path, "needs_dep_zq", body)
        reference = f"{path}:chat"
    else:
        write_package(tmp_path, "chatdep_absent_zq_app", body=body)
        reference = "chatdep_absent_zq_app.chat_app:chat"
    with pytest.raises(ModuleNotFoundError) as raised:
        load_chat_target(reference)
    assert raised.type is ModuleNotFoundError
    assert raised.value.name == "chatdep_absent_zq"


# --- the holder ----------------------------------------------------------------------------------


def define(name: str = "support") -> ChatDefinition:
    return define_chat(id=name, chat=ChatConfig(adapter=reply_adapter(lambda text, request: "x")))


async def test_a_definition_is_used_as_it_is() -> None:
    chat = define()
    holder = ChatTargetHolder(chat)
    assert not holder.is_open
    with pytest.raises(ConfigurationError, match="The chat is not open yet"):
        _ = holder.definition
    await holder.open()
    assert holder.is_open
    assert holder.definition is chat
    await holder.aclose()
    # Nothing to close: the definition stays usable.
    assert holder.definition is chat


async def test_a_sync_factory_is_called_once() -> None:
    calls: list[int] = []

    def factory() -> ChatDefinition:
        calls.append(1)
        return define("made")

    holder = ChatTargetHolder(factory)
    await holder.open()
    await holder.open()
    assert holder.definition.id == "made"
    assert calls == [1]
    await holder.aclose()
    assert not holder.is_open


async def test_an_async_factory_is_awaited() -> None:
    async def factory() -> ChatDefinition:
        return define("awaited")

    holder = ChatTargetHolder(factory)
    await holder.open()
    assert holder.definition.id == "awaited"
    await holder.aclose()
    assert not holder.is_open


class Resources:
    """What a chat's context manager opened and closed."""

    def __init__(self) -> None:
        self.entered = 0
        self.exited = 0
        self.yields: object = None

    @contextlib.asynccontextmanager
    async def chat(self) -> AsyncIterator[Any]:
        self.entered += 1
        try:
            yield define("pooled") if self.yields is None else self.yields
        finally:
            self.exited += 1


async def test_an_async_context_manager_factory_is_entered_once_and_exited_once() -> None:
    resources = Resources()
    holder = ChatTargetHolder(resources.chat)
    await holder.open()
    await holder.open()
    assert holder.definition.id == "pooled"
    assert (resources.entered, resources.exited) == (1, 0)
    await holder.aclose()
    assert (resources.entered, resources.exited) == (1, 1)
    assert not holder.is_open
    await holder.aclose()
    assert resources.exited == 1


@pytest.mark.parametrize("made", [None, 42, "chat", {"id": "support"}])
async def test_a_factory_returning_something_else_is_a_configuration_error(made: Any) -> None:
    holder = ChatTargetHolder(lambda: made)
    with pytest.raises(ConfigurationError, match=r"The chat factory returned .*, not a Chat"):
        await holder.open()
    assert not holder.is_open


async def test_a_context_manager_yielding_something_else_is_closed_and_refused() -> None:
    resources = Resources()
    resources.yields = "not a chat"
    holder = ChatTargetHolder(resources.chat)
    with pytest.raises(ConfigurationError, match="The chat factory returned str"):
        await holder.open()
    assert (resources.entered, resources.exited) == (1, 1)
    assert not holder.is_open
    await holder.aclose()
    assert resources.exited == 1


async def test_a_factory_that_raises_leaves_the_holder_closed() -> None:
    def factory() -> ChatDefinition:
        raise UsersOwnError("the database is down")

    holder = ChatTargetHolder(factory)
    with pytest.raises(UsersOwnError):
        await holder.open()
    assert not holder.is_open


@pytest.mark.parametrize("target", [None, 42, "app.py:chat", define().chat])
def test_a_target_that_is_neither_a_definition_nor_a_function_is_refused(target: Any) -> None:
    with pytest.raises(ConfigurationError, match="must be a ChatDefinition or a function"):
        ChatTargetHolder(target)
