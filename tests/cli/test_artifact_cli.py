"""``agentskit-chat artifact build|verify`` through Typer's runner."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentskit_chat import __version__
from agentskit_chat.cli import _artifact, app
from tests.answers._producer_support import STAMP, tree

runner = CliRunner()
DOCS = {
    "index.md": "# Welcome\n\nStart here.\n\n## Install\n\n```sh\npip install agentskit\n```\n",
    "guides/setup.md": "# Setup guide\n\n## Install\n",
}


def invoke(*args: str | Path, env: dict[str, str | None] | None = None) -> Result:
    return runner.invoke(app, [str(a) for a in args], env=env)


def built(tmp_path: Path, *extra: str) -> Path:
    docs = tree(tmp_path / "docs", DOCS)
    out = tmp_path / "out"
    result = invoke(
        "artifact",
        "build",
        docs,
        "--site-id",
        "my-docs",
        "--out",
        out,
        "--generated-at",
        STAMP,
        *extra,
    )
    assert result.exit_code == 0, result.output
    return out


def test_build_writes_both_files_and_reports(tmp_path: Path) -> None:
    docs = tree(tmp_path / "docs", DOCS)
    out = tmp_path / "out"
    result = invoke(
        "artifact", "build", docs, "--site-id", "my-docs", "--out", out, "--generated-at", STAMP
    )
    assert result.exit_code == 0, result.output
    artifact = json.loads((out / "knowledge.json").read_text("utf-8"))
    site = json.loads((out / "site.json").read_text("utf-8"))
    assert site["artifact"]["contentHash"] == artifact["contentHash"]
    assert site["artifact"]["href"] == "/agentskit-chat.knowledge.json"
    assert site["fallback"] == {"mode": "backend"}
    assert artifact["siteId"] == "my-docs"
    assert artifact["generatedAt"] == STAMP
    assert f"content hash: {artifact['contentHash']}" in result.stdout
    summary = "entries:      5 (0 declared, 2 documents, 1 commands, 2 headings, 0 mentions)"
    assert f"{summary} from 2 files" in result.stdout
    assert result.stderr == ""


def test_build_is_reproducible_with_source_date_epoch(tmp_path: Path) -> None:
    docs = tree(tmp_path / "docs", DOCS)
    outputs = []
    for name in ("one", "two"):
        result = invoke(
            "artifact",
            "build",
            docs,
            "--site-id",
            "s",
            "--out",
            tmp_path / name,
            env={"SOURCE_DATE_EPOCH": "1700000000"},
        )
        assert result.exit_code == 0, result.output
        outputs.append((tmp_path / name / "knowledge.json").read_bytes())
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["generatedAt"] == "2023-11-14T22:13:20.000Z"


def test_build_options_reach_the_files(tmp_path: Path) -> None:
    out = built(
        tmp_path,
        "--artifact-id", "release-7",
        "--expires-at", "2999-01-01T00:00:00Z",
        "--href", "https://cdn.example.com/k.json",
        "--href-prefix", "/handbook",
        "--fallback", "disabled",
    )  # fmt: skip
    artifact = json.loads((out / "knowledge.json").read_text("utf-8"))
    site = json.loads((out / "site.json").read_text("utf-8"))
    assert artifact["artifactId"] == "release-7"
    assert artifact["expiresAt"] == "2999-01-01T00:00:00Z"
    assert artifact["entries"][0]["answer"]["citations"][0]["href"] == "/handbook/guides/setup"
    assert site["artifact"]["href"] == "https://cdn.example.com/k.json"
    assert site["fallback"] == {"mode": "disabled"}


def test_build_lists_what_was_left_out_when_verbose(tmp_path: Path) -> None:
    docs = tree(tmp_path / "docs", {"a.md": "# A\n\n## " + "long " * 120 + "\n"})
    args: list[str | Path] = [
        "artifact",
        "build",
        docs,
        "--site-id",
        "s",
        "--out",
        tmp_path / "out",
    ]
    quiet = invoke(*args, "--generated-at", STAMP)
    assert "left out:     1 (list them with --verbose)" in quiet.stdout
    verbose = invoke(*args, "--generated-at", STAMP, "--verbose")
    assert "a.md: navigation 'long long" in verbose.stdout
    assert "longer than 512 UTF-16 code units once normalized" in verbose.stdout


def test_bad_front_matter_fails_with_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    docs = tree(
        tmp_path / "docs",
        {**DOCS, "broken.md": "---\ntitle: ok\nknowledge: [a, b\n---\n# Broken\n"},
    )
    out = tmp_path / "out"
    result = invoke(
        "artifact", "build", docs, "--site-id", "s", "--out", out, "--generated-at", STAMP
    )
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {docs / 'broken.md'}:3: front matter is not valid")
    assert not out.exists()


def test_a_failed_build_keeps_the_previous_files(tmp_path: Path) -> None:
    out = built(tmp_path)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    tree(tmp_path / "docs", {"broken.md": "---\nnever closed\n"})
    result = invoke(
        "artifact", "build", tmp_path / "docs", "--site-id", "my-docs", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 1
    assert "broken.md:1: front matter opened with '---' is never closed" in result.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--site-id", "bad id"], "error: --site-id must be a safe identifier"),
        (["--site-id", "s", "--expires-at", STAMP], "error: --expires-at must be later"),
        (["--site-id", "s", "--href", "//evil"], "error: --href must be a safe link"),
    ],
)
def test_bad_build_options_exit_1(tmp_path: Path, args: list[str], message: str) -> None:
    docs = tree(tmp_path / "docs", DOCS)
    result = invoke(
        "artifact", "build", docs, "--out", tmp_path / "out", "--generated-at", STAMP, *args
    )
    assert result.exit_code == 1
    assert result.stderr.startswith(message)
    assert not (tmp_path / "out").exists()


def test_build_usage_errors_exit_2(tmp_path: Path) -> None:
    assert invoke("artifact", "build", tmp_path, "--out", tmp_path / "o").exit_code == 2
    result = invoke(
        "artifact", "build", tmp_path, "--site-id", "s", "--out", tmp_path, "--fallback", "x"
    )
    assert result.exit_code == 2


def test_verify_accepts_a_fresh_build(tmp_path: Path) -> None:
    out = built(tmp_path)
    for args in ([out], ["--artifact", out / "knowledge.json", "--site", out / "site.json"]):
        result = invoke("artifact", "verify", *args)
        assert result.exit_code == 0, result.output
        assert "site:         my-docs (fallback: backend)" in result.stdout
        assert "entries" in result.stdout
        assert "expires:      never" in result.stdout


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda a: a.replace("Start here.", "Tampered."),
            "Deterministic artifact content does not match its SHA-256 hash. "
            "(DETERMINISTIC_HASH_MISMATCH)",
        ),
        (
            lambda a: a.replace('"siteId":"my-docs"', '"siteId":"other"'),
            "Deterministic artifact belongs to a different site. (DETERMINISTIC_INVALID_PAYLOAD)",
        ),
        (
            lambda a: a.replace('"version":1', '"version":2', 1),
            "Deterministic payload uses an unsupported version. "
            "(DETERMINISTIC_UNSUPPORTED_VERSION)",
        ),
        (
            lambda a: a[:-10],
            "Deterministic payload is not valid JSON. (DETERMINISTIC_INVALID_PAYLOAD)",
        ),
    ],
)
def test_verify_rejects_a_tampered_artifact(
    tmp_path: Path, change: Callable[[str], str], message: str
) -> None:
    out = built(tmp_path)
    path = out / "knowledge.json"
    text = path.read_text("utf-8")
    changed = change(text)
    assert changed != text
    path.write_text(changed, "utf-8")
    result = invoke("artifact", "verify", out)
    assert result.exit_code == 1
    assert result.stderr == f"error: {path}: {message}\n"
    assert result.stdout == ""


def test_verify_rejects_a_site_config_naming_another_hash(tmp_path: Path) -> None:
    out = built(tmp_path)
    site = json.loads((out / "site.json").read_text("utf-8"))
    site["artifact"]["contentHash"] = "sha256:" + "b" * 64
    (out / "site.json").write_text(json.dumps(site), "utf-8")
    result = invoke("artifact", "verify", out)
    assert result.exit_code == 1
    assert "does not match the configured content hash. (DETERMINISTIC_HASH_MISMATCH)" in (
        result.stderr
    )


def test_verify_rejects_an_invalid_site_config(tmp_path: Path) -> None:
    out = built(tmp_path)
    (out / "site.json").write_text('{"protocol":"agentskit.chat.site"}', "utf-8")
    result = invoke("artifact", "verify", out)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {out / 'site.json'}: Deterministic payload is invalid. "
        "(DETERMINISTIC_INVALID_PAYLOAD)\n"
    )


def test_verify_rejects_an_expired_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = built(tmp_path, "--expires-at", "2026-07-14T00:00:00.000Z")
    monkeypatch.setattr(_artifact, "clock", lambda: datetime(2026, 7, 13, 23, 59, tzinfo=UTC))
    assert invoke("artifact", "verify", out).exit_code == 0
    monkeypatch.setattr(_artifact, "clock", lambda: datetime(2026, 7, 14, tzinfo=UTC))
    result = invoke("artifact", "verify", out)
    assert result.exit_code == 1
    assert "expired at 2026-07-14T00:00:00.000Z" in result.stderr


def test_verify_missing_files_and_usage(tmp_path: Path) -> None:
    result = invoke("artifact", "verify", tmp_path)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {tmp_path / 'site.json'}: cannot read the file")
    usage = invoke("artifact", "verify", "--artifact", tmp_path / "knowledge.json")
    assert usage.exit_code == 2
    assert "give a folder, or both --artifact and --site" in usage.stderr


def test_version_and_help() -> None:
    assert invoke("--version").stdout == f"{__version__}\n"
    assert "artifact" in invoke("--help").stdout
    assert invoke("artifact", "build", "--help").exit_code == 0
