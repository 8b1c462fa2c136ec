"""ACCEPTANCE (slow, about a minute): each template, installed like a user would, passes its
own tests.

For every template: ``init`` a project and ``add component`` to it, create a fresh virtual
environment with uv, install the project with this checkout's wheel (built once per session) as
its agentskit-chat, and run the project's own pytest in that environment. The generated code is
also held to ``ruff`` and ``mypy --strict`` (the tools of this checkout's environment, pointed at
the fresh one). Deselect with ``-m "not acceptance"``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli._scaffold_support import invoke, ok_files

pytestmark = pytest.mark.acceptance

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(sys.executable).parent
#: Each template's extras, and how many tests its project has once a component is added.
EXTRAS = {"web": "server", "terminal": "server,tui", "fastapi": "server"}
PROJECT_TESTS = {"web": 3 + 2, "terminal": 2 + 2, "fastapi": 4 + 2}
RUFF_RULES = "E,F,W,I,B,UP,SIM,RUF,PL,C4,PIE,RET"


def _uv() -> str:
    bundled = ROOT / ".tools" / "bin" / "uv"
    found = str(bundled) if bundled.is_file() else shutil.which("uv")
    assert found, "uv is needed: `make install` puts it in .tools/bin"
    return found


def _environment() -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    environment.pop("UV_PROJECT_ENVIRONMENT", None)
    environment["UV_PYTHON_DOWNLOADS"] = "never"
    return environment


def _run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [os.fspath(part) for part in command],
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout's wheel, built once per session."""
    out = tmp_path_factory.mktemp("wheel")
    _run(_uv(), "build", "--wheel", "--out-dir", out, ROOT)
    built = sorted(out.glob("agentskit_chat-*.whl"))
    assert len(built) == 1
    return built[0]


@pytest.mark.parametrize("template", ["web", "terminal", "fastapi"])
def test_the_generated_project_passes_its_own_tests(
    tmp_path: Path, wheel: Path, template: str
) -> None:
    project = tmp_path / f"{template}-chat"
    ok_files(invoke("init", project, "--template", template, "--json"))
    ok_files(invoke("add", "component", "Status Card", "--directory", project, "--json"))

    venv = tmp_path / "venv"
    _run(_uv(), "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    _run(
        *(_uv(), "pip", "install", "--quiet", "--python", python),
        f"{wheel}[{EXTRAS[template]}]",
        *("--editable", project, "--group", f"{project / 'pyproject.toml'}:dev"),
    )
    where = _run(python, "-c", "import agentskit_chat; print(agentskit_chat.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(venv)  # the wheel, not this checkout

    tests = _run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert re.search(rf"^{PROJECT_TESTS[template]} passed", tests.stdout, re.MULTILINE), (
        tests.stdout
    )

    first_party = 'lint.isort.known-first-party=["app", "chat", "components"]'
    _run(
        *(TOOLS / "ruff", "check", "--isolated", "--no-cache", "--line-length", "100"),
        *("--select", RUFF_RULES, "--ignore", "PLR2004", "--config", first_party, "."),
        cwd=project,
    )
    _run(
        TOOLS / "ruff", "format", "--isolated", "--line-length", "100", "--check", ".", cwd=project
    )
    _run(
        *(TOOLS / "mypy", "--strict", "--explicit-package-bases", "--python-executable", python),
        *("--cache-dir", tmp_path / "mypy-cache", "."),
        cwd=project,
    )
