"""``agentskit-chat init``: the files of each template, and all-or-nothing publishing."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from agentskit_chat.cli import _project as project_module
from agentskit_chat.cli import _scaffold as scaffold
from agentskit_chat.cli._scaffold import ScaffoldError, init_project, validate_project_name
from tests.cli._scaffold_support import TEMPLATE_FILES, files_under, invoke, ok_files, tree_hash

TEMPLATES = sorted(TEMPLATE_FILES)
_PLACEHOLDER = re.compile(r"__[A-Z][A-Z_]*[A-Z]__")


@pytest.mark.parametrize("template", TEMPLATES)
def test_init_writes_the_template_and_lists_its_files(tmp_path: Path, template: str) -> None:
    target = tmp_path / "my-chat"
    files = ok_files(invoke("init", target, "--template", template, "--json"))
    assert files == TEMPLATE_FILES[template]
    assert files_under(target) == files
    assert [p.name for p in tmp_path.iterdir()] == ["my-chat"]  # no staging folder left
    for name in files:
        text = (target / name).read_text(encoding="utf-8")
        assert _PLACEHOLDER.search(text) is None, name
    chat = (target / "chat.py").read_text(encoding="utf-8")
    assert 'id="my-chat"' in chat
    assert 'title="My Chat"' in chat
    assert "from_pydantic_ai" in chat  # the comment showing where a model goes


@pytest.mark.parametrize(
    ("template", "dependencies"),
    [
        ("web", ["agentskit-chat[server]"]),
        ("terminal", ["agentskit-chat[server,tui]"]),
        ("fastapi", ["agentskit-chat[server]", "fastapi"]),
    ],
)
def test_each_template_depends_on_what_it_runs_with(
    tmp_path: Path, template: str, dependencies: list[str]
) -> None:
    ok_files(invoke("init", tmp_path / "deps", "-t", template, "--json"))
    pyproject = tomllib.loads((tmp_path / "deps" / "pyproject.toml").read_text("utf-8"))
    assert pyproject["project"]["name"] == "deps"
    assert [re.split(r"[><=]", d)[0] for d in pyproject["project"]["dependencies"]] == dependencies
    assert [d.split(">")[0] for d in pyproject["dependency-groups"]["dev"]] == ["pytest"]
    assert pyproject["tool"]["pytest"]["ini_options"]["pythonpath"] == ["."]


@pytest.mark.parametrize(
    ("template", "run"),
    [
        ("web", "agentskit-chat serve chat.py:chat"),
        ("terminal", "agentskit-chat chat chat.py:chat"),
        ("fastapi", "uvicorn app:app"),
    ],
)
def test_the_readme_and_the_summary_say_how_to_run_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: str, run: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("init", "my-chat", "--template", template)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"Created the {template} chat project my-chat:"
    assert "  cd my-chat" in result.stdout.splitlines()
    assert f"  uv run {run}" in result.stdout.splitlines()
    readme = (tmp_path / "my-chat" / "README.md").read_text("utf-8")
    assert readme.startswith("# My Chat\n")
    assert f"uv run {run}" in readme
    assert "uv run pytest" in readme


def test_the_web_app_creates_the_app_from_the_shared_chat(tmp_path: Path) -> None:
    ok_files(invoke("init", tmp_path / "site", "-t", "web", "--json"))
    assert "app = create_app(chat)" in (tmp_path / "site" / "app.py").read_text("utf-8")
    fastapi = tmp_path / "api"
    ok_files(invoke("init", fastapi, "-t", "fastapi", "--json"))
    app = (fastapi / "app.py").read_text("utf-8")
    assert 'app.mount("/", chat_app)' in app
    assert '@app.get("/api/status")' in app


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_second_init_is_refused_and_changes_nothing(tmp_path: Path, template: str) -> None:
    target = tmp_path / "twice"
    ok_files(invoke("init", target, "-t", template, "--json"))
    before = tree_hash(tmp_path)
    result = invoke("init", target, "-t", template)
    assert result.exit_code == 1
    assert result.stderr == f"error: TARGET_EXISTS: Refusing to overwrite existing path: {target}\n"
    assert result.stdout == ""
    assert tree_hash(tmp_path) == before


def test_an_existing_empty_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "empty"
    target.mkdir()
    result = invoke("init", target, "-t", "web", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "ok": False,
        "code": "TARGET_EXISTS",
        "message": f"Refusing to overwrite existing path: {target}",
    }
    assert result.stderr == ""
    assert list(target.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir()] == ["empty"]


def test_a_file_or_a_dangling_link_at_the_target_is_left_alone(tmp_path: Path) -> None:
    file = tmp_path / "notes"
    file.write_bytes(b"mine\n")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    before = tree_hash(tmp_path)
    for target in (file, link):
        result = invoke("init", target, "-t", "terminal")
        assert result.exit_code == 1
        assert result.stderr.startswith("error: TARGET_EXISTS: ")
    assert file.read_bytes() == b"mine\n"
    assert os.readlink(link) == os.fspath(tmp_path / "nowhere")
    assert tree_hash(tmp_path) == before


@pytest.mark.parametrize(
    "name",
    ["9lives", "-chat", "my chat", "chat-", "chat_", "my.chat", "ünï", "a" * 65, "semi;colon"],
)
def test_invalid_names_are_usage_errors_that_do_not_repeat_the_name(
    tmp_path: Path, name: str
) -> None:
    result = invoke("init", tmp_path / name, "-t", "web")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: NAME_INVALID: A project name must start with a letter")
    assert name not in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "name", ["agentskit-chat", "Agentskit_Chat", "pytest", "fastapi", "pydantic"]
)
def test_a_name_taken_by_a_dependency_is_refused(tmp_path: Path, name: str) -> None:
    result = invoke("init", tmp_path / name, "-t", "web", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["code"] == "NAME_INVALID"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["a", "Z9", "My_Chat-2", "b" * 64])
def test_valid_names(name: str) -> None:
    assert validate_project_name(name) == name


def test_without_a_template_a_script_gets_template_required(tmp_path: Path) -> None:
    result = invoke("init", tmp_path / "chat")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: TEMPLATE_REQUIRED: Choose a template with --template web, terminal or fastapi.\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_yes_never_asks_even_at_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(project_module, "_interactive", lambda: True)
    result = invoke("init", tmp_path / "chat", "--yes", input="web\n")
    assert result.exit_code == 2
    assert "TEMPLATE_REQUIRED" in result.stderr
    assert "Template (" not in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("answer", "created"), [("terminal", True), ("", False), ("vue", False)])
def test_at_a_terminal_it_asks_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, created: bool
) -> None:
    monkeypatch.setattr(project_module, "_interactive", lambda: True)
    result = invoke("init", tmp_path / "chat", "--json", input=f"{answer}\n")
    assert result.stderr.count("Template (web, terminal, fastapi):") == 1
    # The runner echoes the typed answer to stdout, as a terminal would; the JSON comes last.
    body = json.loads(result.stdout.splitlines()[-1])
    if created:
        assert result.exit_code == 0
        assert body == {"ok": True, "files": TEMPLATE_FILES["terminal"]}
        assert files_under(tmp_path / "chat") == TEMPLATE_FILES["terminal"]
    else:
        assert result.exit_code == 2
        assert body["code"] == "TEMPLATE_REQUIRED"
        assert list(tmp_path.iterdir()) == []


def test_an_existing_target_is_reported_before_asking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(project_module, "_interactive", lambda: True)
    result = invoke("init", tmp_path, input="web\n")
    assert result.exit_code == 1
    assert "TARGET_EXISTS" in result.stderr
    assert "Template (" not in result.stderr


def test_a_real_terminal_is_asked_for_the_template(tmp_path: Path) -> None:
    cli = str(Path(sys.executable).with_name("agentskit-chat"))
    primary, secondary = os.openpty()
    process = subprocess.Popen(
        [cli, "init", "tty-chat"],
        cwd=tmp_path,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        close_fds=True,
    )
    os.close(secondary)
    seen = b""
    try:
        while b"Template (web, terminal, fastapi): " not in seen:
            chunk = os.read(primary, 1024)
            assert chunk, seen
            seen += chunk
        os.write(primary, b"fastapi\n")
        assert process.wait(timeout=60) == 0
        with pytest.raises(OSError):  # the terminal closed with the process: read what is left
            while chunk := os.read(primary, 1024):
                seen += chunk
    finally:
        os.close(primary)
        process.kill()
    assert b"Created the fastapi chat project tty-chat:" in seen
    assert files_under(tmp_path / "tty-chat") == TEMPLATE_FILES["fastapi"]


# --- all or nothing ---------------------------------------------------------------------------


def _failing_after(count: int, error: BaseException) -> Callable[[Path, str], None]:
    calls = {"n": 0}

    def write(path: Path, text: str) -> None:
        calls["n"] += 1
        if calls["n"] > count:
            raise error
        scaffold._write_new(path, text)

    return write


def test_a_failed_write_leaves_no_staging_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scaffold, "_write_new", _failing_after(3, OSError(errno.ENOSPC, "full")))
    result = invoke("init", tmp_path / "chat", "-t", "web", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "ok": False,
        "code": "WRITE_FAILED",
        "message": "Could not write the project: full.",
    }
    assert list(tmp_path.iterdir()) == []


def test_an_unexpected_error_also_cleans_up_and_propagates(tmp_path: Path) -> None:
    parent = tmp_path / "new" / "deeper"
    with pytest.raises(RuntimeError, match="boom"):
        init_project(parent / "chat", "fastapi", write=_failing_after(2, RuntimeError("boom")))
    assert list(tmp_path.iterdir()) == []  # the parent folders it made are gone too


def test_missing_parent_folders_are_created(tmp_path: Path) -> None:
    files = init_project(tmp_path / "apps" / "web" / "chat", "web")
    assert files_under(tmp_path / "apps" / "web" / "chat") == files


def test_a_file_where_a_parent_folder_must_be_is_target_exists(tmp_path: Path) -> None:
    (tmp_path / "apps").write_text("a file")
    with pytest.raises(ScaffoldError) as caught:
        init_project(tmp_path / "apps" / "chat", "web")
    assert caught.value.code == "TARGET_EXISTS"
    assert [p.name for p in tmp_path.iterdir()] == ["apps"]


def _appearing(target: Path, after: int) -> Callable[[Path, str], None]:
    """A writer that makes an empty folder appear at ``target`` after ``after`` files."""
    calls = {"n": 0}

    def write(path: Path, text: str) -> None:
        scaffold._write_new(path, text)
        calls["n"] += 1
        if calls["n"] == after:
            target.mkdir()

    return write


@pytest.mark.parametrize("native", [True, False], ids=["renameat2", "mkdir-claim"])
def test_an_empty_folder_created_meanwhile_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    if not native:
        monkeypatch.setattr(scaffold, "_native_noreplace", lambda source, target: False)
    target = tmp_path / "raced"
    with pytest.raises(ScaffoldError) as caught:
        init_project(target, "web", write=_appearing(target, 6))
    assert caught.value.code == "TARGET_EXISTS"
    assert list(target.iterdir()) == []  # a plain rename would have replaced it
    assert [p.name for p in tmp_path.iterdir()] == ["raced"]


def test_the_claim_fallback_publishes_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scaffold, "_native_noreplace", lambda source, target: False)
    files = init_project(tmp_path / "claimed", "terminal")
    assert files_under(tmp_path / "claimed") == files
    assert [p.name for p in tmp_path.iterdir()] == ["claimed"]


def test_the_project_folder_has_ordinary_permissions(tmp_path: Path) -> None:
    init_project(tmp_path / "perms", "web")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "perms").stat().st_mode & 0o777 == 0o777 & ~umask
