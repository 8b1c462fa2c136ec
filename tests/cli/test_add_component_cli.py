"""``agentskit-chat add component``: names, files, and nothing written on any refusal."""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agentskit_chat.cli import _component_scaffold as component_scaffold
from agentskit_chat.cli._component_scaffold import add_component, component_names
from agentskit_chat.cli._scaffold import ScaffoldError
from agentskit_chat.components import STANDARD_COMPONENT_KEYS
from tests.cli._scaffold_support import files_under, invoke, ok_files, tree_hash

STATUS_CARD_FILES = [
    "components/status_card.py",
    "components/terminal/status_card.py",
    "tests/test_status_card_component.py",
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project made by ``init``."""
    root = tmp_path / "proj"
    ok_files(invoke("init", root, "-t", "web", "--json"))
    return root


@pytest.mark.parametrize(
    ("name", "key", "module", "class_name"),
    [
        ("Status Card", "status-card", "status_card", "StatusCard"),
        ("metricTile", "metric-tile", "metric_tile", "MetricTile"),
        ("  order -- summary!! ", "order-summary", "order_summary", "OrderSummary"),
        ("v2 Gauge", "v2-gauge", "v2_gauge", "V2Gauge"),
        ("HTTPStatus", "httpstatus", "httpstatus", "Httpstatus"),
        ("x" * 64, "x" * 64, "x" * 64, "X" + "x" * 63),
    ],
)
def test_names(name: str, key: str, module: str, class_name: str) -> None:
    names = component_names(name)
    assert (names.key, names.module, names.class_name) == (key, module, class_name)
    assert names.constant == module.upper()


def test_add_component_writes_its_three_files(project: Path) -> None:
    before = set(files_under(project))
    files = ok_files(invoke("add", "component", "Status Card", "--directory", project, "--json"))
    assert files == STATUS_CARD_FILES
    assert set(files_under(project)) - before == set(STATUS_CARD_FILES)
    component = (project / "components" / "status_card.py").read_text("utf-8")
    assert 'KEY = "status-card"' in component
    assert "class StatusCardProps(BaseModel):" in component
    assert 'extra="forbid", strict=True' in component
    assert "label: str = Field(min_length=1, max_length=256)" in component
    assert "STATUS_CARD = ComponentDefinition(" in component
    assert 'capabilities=("display",)' in component
    assert "the web page and the terminal chat" in component.lower()
    terminal = (project / "components" / "terminal" / "status_card.py").read_text("utf-8")
    assert "def render_status_card(frame: object) -> str | None:" in terminal


def test_the_current_folder_is_the_default_project(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    result = invoke("add", "component", "metricTile")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "Added the component metric-tile:"
    assert "from components.metric_tile import METRIC_TILE" in result.stdout
    assert "text fallback" in result.stdout
    assert (project / "components" / "metric_tile.py").is_file()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("---", "must start with a letter"),
        ("", "must start with a letter"),
        ("9 lives", "must start with a letter"),
        ("x" * 65, "must start with a letter"),
        ("form", "reserved by the standard catalog"),
        ("Choice List", "reserved by the standard catalog"),
        ("class", "a Python keyword"),
        ("Terminal", "a project folder"),
    ],
)
def test_invalid_or_reserved_names_write_nothing(project: Path, name: str, message: str) -> None:
    before = tree_hash(project)
    result = invoke("add", "component", "-d", project, "--", name)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: COMPONENT_INVALID: ")
    assert message in result.stderr
    assert tree_hash(project) == before


def test_every_standard_key_is_reserved() -> None:
    assert len(STANDARD_COMPONENT_KEYS) == 12
    for key in STANDARD_COMPONENT_KEYS:
        with pytest.raises(ScaffoldError) as caught:
            component_names(key)
        assert caught.value.code == "COMPONENT_INVALID"


@pytest.mark.parametrize("existing", STATUS_CARD_FILES)
def test_a_collision_writes_nothing(project: Path, existing: str) -> None:
    (project / existing).parent.mkdir(parents=True, exist_ok=True)
    (project / existing).write_text("mine\n")
    before = tree_hash(project)
    result = invoke("add", "component", "Status Card", "-d", project, "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "ok": False,
        "code": "COMPONENT_EXISTS",
        "message": "Refusing to overwrite an existing component file.",
    }
    assert tree_hash(project) == before


def test_adding_the_same_component_twice_is_refused(project: Path) -> None:
    ok_files(invoke("add", "component", "Status Card", "-d", project, "--json"))
    before = tree_hash(project)
    result = invoke("add", "component", "status-card", "-d", project)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: COMPONENT_EXISTS: ")
    assert tree_hash(project) == before


@pytest.mark.parametrize("linked", ["components", "components/terminal", "tests"])
def test_a_symbolic_link_on_the_way_is_refused(project: Path, tmp_path: Path, linked: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = project / linked
    if link.exists():
        (project / "tests").rename(tmp_path / "tests-moved")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    before = tree_hash(project)
    result = invoke("add", "component", "Status Card", "-d", project)
    assert result.exit_code == 1
    assert result.stderr == (
        "error: MANIFEST_INVALID: Refusing to write through a symbolic-link component directory.\n"
    )
    assert tree_hash(project) == before
    assert list(elsewhere.iterdir()) == []


def test_a_linked_project_folder_is_followed(project: Path, tmp_path: Path) -> None:
    link = tmp_path / "project-link"
    link.symlink_to(project, target_is_directory=True)
    assert add_component(link, "Status Card") == STATUS_CARD_FILES
    assert (project / "components" / "status_card.py").is_file()


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_the_project_folder_must_exist(tmp_path: Path, kind: str) -> None:
    directory = tmp_path / "proj"
    if kind == "file":
        directory.write_text("not a folder")
    result = invoke("add", "component", "Status Card", "-d", directory)
    assert result.exit_code == 1
    assert result.stderr == (
        "error: MANIFEST_INVALID: Component generation requires an existing project directory.\n"
    )


def _failing_on(call: int, error: BaseException) -> Callable[[Path, str], None]:
    calls = {"n": 0}

    def create(path: Path, text: str) -> None:
        calls["n"] += 1
        if calls["n"] == call:
            raise error
        component_scaffold._create(path, text)

    return create


@pytest.mark.parametrize("call", [1, 2, 3])
def test_a_failed_write_removes_the_files_and_folders_it_made(
    project: Path, monkeypatch: pytest.MonkeyPatch, call: int
) -> None:
    before = tree_hash(project)
    failing = _failing_on(call, OSError(errno.EACCES, "Permission denied"))
    monkeypatch.setattr(component_scaffold, "_create", failing)
    result = invoke("add", "component", "Status Card", "-d", project, "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["code"] == "WRITE_FAILED"
    assert not (project / "components").exists()  # the folders it created are gone too
    assert (project / "tests" / "test_chat.py").is_file()  # what was there stays
    assert tree_hash(project) == before


def test_a_file_that_appears_meanwhile_is_component_exists(project: Path) -> None:
    before = tree_hash(project)

    def racing(path: Path, text: str) -> None:
        if path.name == "test_status_card_component.py":
            path.write_text("someone else's\n")
        component_scaffold._create(path, text)

    with pytest.raises(ScaffoldError) as caught:
        add_component(project, "Status Card", create=racing)
    assert caught.value.code == "COMPONENT_EXISTS"
    (project / "tests" / "test_status_card_component.py").unlink()  # theirs, kept by us
    assert tree_hash(project) == before
