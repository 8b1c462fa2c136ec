"""``agentskit-chat components catalog``: print, write and check the catalog page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner, Result

from agentskit_chat.cli import app
from agentskit_chat.components import render_component_catalog_page

runner = CliRunner()
PAGE = render_component_catalog_page()
COMMAND = [sys.executable, "-c", "from agentskit_chat.cli import main; main()"]


def invoke(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


def test_without_output_it_prints_the_page() -> None:
    result = invoke("components", "catalog")
    assert result.exit_code == 0, result.output
    assert result.stdout == PAGE


def test_output_writes_the_page_creating_folders(tmp_path: Path) -> None:
    target = tmp_path / "docs" / "components-catalog.md"
    result = invoke("components", "catalog", "--output", target)
    assert result.exit_code == 0, result.output
    assert target.read_bytes() == PAGE.encode("utf-8")
    assert result.stdout == f"Wrote {target.as_posix()}.\n"


def test_check_on_a_current_file_exits_0(tmp_path: Path) -> None:
    target = tmp_path / "catalog.md"
    target.write_bytes(PAGE.encode("utf-8"))
    result = invoke("components", "catalog", "--output", target, "--check")
    assert result.exit_code == 0, result.output
    assert "is up to date" in result.stdout


def test_check_on_a_stale_file_exits_1_names_the_fix_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "catalog.md"
    stale = PAGE.replace("1 to 20 items", "1 to 21 items")
    assert stale != PAGE
    target.write_text(stale, "utf-8")
    result = invoke("components", "catalog", "--output", target, "--check")
    assert result.exit_code == 1
    path = target.as_posix()
    assert result.stderr == (
        f"error: {path} is out of date; run: agentskit-chat components catalog --output {path}\n"
    )
    assert target.read_text("utf-8") == stale


def test_check_on_a_file_with_one_extra_newline_is_stale(tmp_path: Path) -> None:
    target = tmp_path / "catalog.md"
    target.write_bytes(PAGE.encode("utf-8") + b"\n")
    assert invoke("components", "catalog", "-o", target, "--check").exit_code == 1


def test_check_on_a_missing_file_exits_1_and_names_the_fix(tmp_path: Path) -> None:
    target = tmp_path / "missing.md"
    result = invoke("components", "catalog", "--output", target, "--check")
    assert result.exit_code == 1
    assert "does not exist" in result.stderr
    assert f"agentskit-chat components catalog --output {target.as_posix()}" in result.stderr
    assert not target.exists()


def test_check_defaults_to_the_docs_page(tmp_path: Path) -> None:
    # Run from a folder whose docs/components-catalog.md is stale: the message names that path.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "components-catalog.md").write_text("# Old\n", "utf-8")
    done = subprocess.run(
        [*COMMAND, "components", "catalog", "--check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "error: docs/components-catalog.md is out of date; run: agentskit-chat components "
        "catalog --output docs/components-catalog.md\n"
    )


def test_the_group_lists_its_command() -> None:
    result = invoke("components", "--help")
    assert result.exit_code == 0
    assert "catalog" in result.stdout
