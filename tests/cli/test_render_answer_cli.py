"""``agentskit-chat render-answer``: the renderer for scripts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from agentskit_chat.answer_commit import render_answer
from agentskit_chat.cli import app

runner = CliRunner()
COMMAND = [sys.executable, "-c", "from agentskit_chat.cli import main; main()"]

BASIS = "Every file of acme/api, one row per file, from files.path."
TABLE: dict[str, Any] = {
    "rows": {"columns": ["path", "copies"], "data": [["a, b.py", 3], ['say "hi".py', 1]]},
    "basis": BASIS,
}


def invoke(*args: str | Path, stdin: str | bytes | None = None) -> Result:
    return runner.invoke(app, [str(a) for a in args], input=stdin)


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(data), "utf-8")
    return path


@pytest.mark.parametrize(
    "data",
    [
        TABLE,
        {**TABLE, "rows": {**TABLE["rows"], "format": "csv"}, "answer_only": True},
        {"fields": [{"label": "Answer", "value": 42}], "basis": BASIS},
        {"unresolved": {"reason": "No copies are recorded."}, "basis": BASIS},
    ],
)
def test_render_answer_prints_the_rendered_text(tmp_path: Path, data: dict[str, Any]) -> None:
    result = invoke("render-answer", write(tmp_path, data))
    assert result.exit_code == 0, result.output
    assert result.stdout == render_answer(data) + "\n"
    assert result.stderr == ""


def test_render_answer_reads_standard_input_with_a_dash() -> None:
    data = {**TABLE, "rows": {**TABLE["rows"], "format": "csv"}, "answer_only": "true"}
    result = invoke("render-answer", "-", stdin=json.dumps(data))
    assert result.exit_code == 0, result.output
    assert result.stdout == 'path,copies\n"a, b.py",3\n"say ""hi"".py",1\n'


@pytest.mark.parametrize(
    ("stdin", "reason"),
    [
        (json.dumps({"fields": [{"label": "n", "value": ""}], "basis": BASIS}), "fields[0].value"),
        (json.dumps({"fields": [{"label": "n", "value": 1}]}), "basis is required"),
        ('{"fields":[{"label":"n","value":1234567890123456.7}],"basis":"b"}', "as a string"),
        ("not json", "The payload is not valid JSON."),
        (b"\xff\xfe{}", "The payload is not valid JSON."),
    ],
)
def test_an_invalid_payload_exits_1_with_the_reason_and_an_example(
    stdin: str | bytes, reason: str
) -> None:
    result = invoke("render-answer", "-", stdin=stdin)
    assert result.exit_code == 1
    assert result.stdout == ""
    first, example = result.stderr.rstrip("\n").split("\n")
    assert first.startswith("error: ")
    assert reason in first
    assert example.startswith("Example: {")
    assert render_answer(example.removeprefix("Example: "))


def test_an_unreadable_file_exits_2(tmp_path: Path) -> None:
    result = invoke("render-answer", tmp_path / "missing.json")
    assert result.exit_code == 2
    assert result.stderr == "error: the payload file could not be read.\n"


def test_render_answer_is_listed_in_the_help() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    assert "render-answer" in result.stdout


def test_the_console_script_renders_exact_bytes(tmp_path: Path) -> None:
    data = {"fields": [{"label": "Café", "value": "naïve ✓"}], "basis": BASIS, "answer_only": 1}
    completed = subprocess.run(
        [*COMMAND, "render-answer", str(write(tmp_path, data))],
        capture_output=True,
        check=False,
        timeout=60,
        env={"PYTHONIOENCODING": "utf-8", "PATH": ""},
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "naïve ✓\n".encode()
