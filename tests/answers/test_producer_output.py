"""The artifact producer: limits, all-or-nothing writes, real documentation, properties."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentskit_chat.answers._candidates import (
    MENTION_SHARED,
    MENTION_TAKEN,
    TITLE_TAKEN,
    TOO_LONG,
)
from agentskit_chat.answers._producer import (
    ENTRY_LIMIT,
    SIZE_LIMIT,
    ArtifactBuild,
)
from agentskit_chat.errors import BuildError
from agentskit_chat.retrieval import write_artifact_build
from tests.answers._producer_support import (
    REPO,
    SEEDS,
    assert_valid,
    build,
    kinds,
    lookup,
    tree,
)

# --- limits ---------------------------------------------------------------------------------------


def test_derived_texts_over_the_alias_bound_are_left_out(tmp_path: Path) -> None:
    long = "word " * 110  # 550 units
    text = f"# {long}\n\n## {long}\n\n## {chr(0xFDFA) * 100}\n\n```sh\necho {long}\n```\n"
    result = build(tree(tmp_path, {"a.md": text}))
    doc = kinds(result, "document")[0]
    assert doc.match.values == ("a",)
    assert doc.label == ("word " * 52)[:256].strip()
    assert kinds(result, "navigation") == []
    assert kinds(result, "command") == []
    reasons = {(item.kind, item.reason) for item in result.left_out}
    assert reasons == {("alias", TOO_LONG), ("navigation", TOO_LONG), ("command", TOO_LONG)}
    assert len(result.left_out) == 4


def test_labels_are_clipped_without_splitting_a_character(tmp_path: Path) -> None:
    result = build(tree(tmp_path, {"a.md": "# " + "😀" * 200 + "\n"}))
    assert kinds(result, "document")[0].label == "😀" * 128


def test_entry_limit_keeps_the_highest_priority(tmp_path: Path) -> None:
    headings = "".join(f"## Heading {i}\n\n" for i in range(1100))
    result = build(tree(tmp_path, {"a.md": "# A\n\n```sh\nls\n```\n\n" + headings}))
    assert result.stats.entries == 1024
    assert [e.kind for e in result.artifact.entries[:2]] == ["document", "command"]
    dropped = [item for item in result.left_out if item.reason == ENTRY_LIMIT]
    assert [item.label for item in dropped] == [f"Heading {i}" for i in range(1022, 1100)]
    assert_valid(result)


def _declared_big(count: int, size: int) -> str:
    body = "".join(
        f"  - kind: restricted-faq\n    label: Big {i}\n    answer: {'z' * size}\n"
        for i in range(count)
    )
    return f"---\nknowledge:\n{body}---\n"


def test_size_limit_keeps_the_longest_prefix_that_fits(tmp_path: Path) -> None:
    headings = "".join(f"## {'h' * 400} {i}\n\n" for i in range(300))
    result = build(tree(tmp_path, {"a.md": _declared_big(28, 16000) + "# A\n\n" + headings}))
    dropped = [item for item in result.left_out if item.reason == SIZE_LIMIT]
    assert dropped
    assert all(item.kind == "navigation" for item in dropped)
    assert result.stats.declared == 28
    assert result.stats.entries + len(dropped) == 28 + 1 + 300
    # The next entry would not have fitted: one heading entry is under 2 KiB.
    assert 524288 - 2048 < result.stats.artifact_bytes <= 524288
    assert_valid(result)


def test_declared_entries_alone_over_the_size_limit_fail(tmp_path: Path) -> None:
    tree(tmp_path, {"big.md": _declared_big(40, 16000) + "# A\n"})
    with pytest.raises(BuildError, match="declared entries alone exceed 524288 bytes"):
        build(tmp_path)


def test_declared_entries_alone_over_the_entry_limit_fail(tmp_path: Path) -> None:
    body = "".join(f"  - {{kind: command, label: L{i}, answer: A}}\n" for i in range(1025))
    tree(tmp_path, {"many.md": f"---\nknowledge:\n{body}---\n"})
    with pytest.raises(BuildError, match="declared entries alone exceed 1024 entries"):
        build(tmp_path)


# --- writing --------------------------------------------------------------------------------------


def test_write_creates_both_files_exactly(tmp_path: Path) -> None:
    result = build(tree(tmp_path / "docs", {"a.md": "# A\n"}))
    artifact_path, site_path = write_artifact_build(result, tmp_path / "out" / "nested")
    assert artifact_path.read_bytes() == result.artifact_json.encode("utf-8")
    assert site_path.read_bytes() == result.site_json.encode("utf-8")
    assert sorted(p.name for p in artifact_path.parent.iterdir()) == ["knowledge.json", "site.json"]


def _failing_replace(fail_on: int) -> Callable[..., None]:
    calls = {"n": 0}
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        calls["n"] += 1
        if calls["n"] == fail_on:
            raise OSError(28, "No space left on device")
        real(src, dst)

    return replace


def test_a_failed_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = build(tree(tmp_path / "docs", {"a.md": "# A\n"}))
    out = tmp_path / "out"
    out.mkdir()
    (out / "knowledge.json").write_text("old artifact")
    (out / "site.json").write_text("old site")
    monkeypatch.setattr(os, "replace", _failing_replace(2))
    with pytest.raises(BuildError, match="No space left on device"):
        write_artifact_build(result, out)
    assert (out / "knowledge.json").read_text() == "old artifact"
    assert (out / "site.json").read_text() == "old site"
    assert sorted(p.name for p in out.iterdir()) == ["knowledge.json", "site.json"]


def test_a_failed_write_into_a_new_folder_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = build(tree(tmp_path / "docs", {"a.md": "# A\n"}))
    monkeypatch.setattr(os, "replace", _failing_replace(2))
    with pytest.raises(BuildError):
        write_artifact_build(result, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()


# --- acceptance: real documentation ---------------------------------------------------------------


def _one_letter_off(title: str) -> str:
    chars = list(title)
    for index in range(len(chars) - 1, -1, -1):
        if chars[index].isalpha():
            chars[index] = "b" if chars[index].lower() == "a" else "a"
            return "".join(chars)
    return title + "a"


def assert_titles_resolve(result: ArtifactBuild) -> None:
    documents = kinds(result, "document")
    assert documents
    shared = {
        label
        for label in (d.label for d in documents)
        if sum(1 for d in documents if d.label == label) > 1
    }
    for doc in documents:
        # A title answers its document exactly (only two pages titled alike make a choice).
        if doc.label in shared:
            assert doc.id in lookup(result, doc.label), doc.label
        else:
            assert lookup(result, doc.label) == (doc.id,), doc.label
        assert lookup(result, _one_letter_off(doc.label)) == (), doc.label


def test_builds_the_repository_docs(tmp_path: Path) -> None:
    result = build(REPO / "docs")
    assert result.stats.documents == len(list((REPO / "docs").rglob("*.md")))
    assert_valid(result)
    assert_titles_resolve(result)


def test_builds_the_seed_docs() -> None:
    if not SEEDS.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"seed docs missing at {SEEDS}")
        pytest.skip("seed docs are not checked out next to the repository")
    result = build(SEEDS, site_id="agentskit-docs")
    assert result.stats.files == result.stats.documents == 110
    # One heading reads exactly like another page's title; the title keeps it.
    mention_reasons = {MENTION_SHARED, MENTION_TAKEN}
    assert [
        (item.kind, item.label, item.reason)
        for item in result.left_out
        if item.reason not in mention_reasons
    ] == [("navigation", "CLI", TITLE_TAKEN)]
    # Commands and package names mentioned on one page only answer that page.
    mentions = [e for e in result.artifact.entries if e.kind in ("command", "package")]
    assert result.stats.mentions == len(mentions) - result.stats.commands == 26
    shared = {item.label for item in result.left_out if item.reason == MENTION_SHARED}
    assert {"pnpm catalog:report", "@agentskit/chat", "@agentskit/react"} <= shared
    assert len(shared) == 34
    assert lookup(result, "pnpm catalog:report") == ()
    assert lookup(result, "pnpm version:packages") == (
        "code-releases-release-process-pnpm-version-packages",
    )
    assert lookup(result, "@agentskit/rag") == ("pkg-examples-rag-reference-agentskit-rag",)
    assert_valid(result)
    assert_titles_resolve(result)
    assert build(SEEDS, site_id="agentskit-docs").artifact_json == result.artifact_json


# --- property -------------------------------------------------------------------------------------

_words = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")),
    min_size=1,
    max_size=24,
)
_spans = st.sampled_from(
    ["make", "make serve", "pnpm add @a/b", "@a/b", "pip install x", "uv add <pkg>", "x"]
)
_docs = st.lists(
    st.tuples(
        _words,
        st.lists(_words, max_size=4),
        st.lists(st.sampled_from(["make", "ls -la", "pip install x", "$ run it"]), max_size=2),
        st.lists(st.one_of(_spans, _words), max_size=3),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_docs)
def test_any_docs_build_a_valid_artifact_where_titles_resolve(
    docs: list[tuple[str, list[str], list[str], list[str]]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        files = {}
        for index, (title, headings, commands, spans) in enumerate(docs):
            body = "".join(f"## {h}\n\n" for h in headings)
            fence = "```sh\n" + "\n".join(commands) + "\n```\n" if commands else ""
            code = "".join("Write `` " + s.replace("`", "'") + " ``.\n\n" for s in spans)
            files[f"doc{index}.md"] = f"# {title}\n\n{code}{body}{fence}"
        root = tree(Path(folder), files)
        result = build(root)
        assert_valid(result)
        for doc in kinds(result, "document"):
            assert any(doc.id in lookup(result, alias) for alias in doc.match.values)
            assert doc.id in lookup(result, doc.match.values[0])
        # A mention entry answers alone, with its page's answer.
        by_id = {e.id: e for e in result.artifact.entries}
        for item in result.artifact.entries:
            if item.id.startswith(("code-", "pkg-")):
                assert lookup(result, item.match.values[0]) == (item.id,)
                page = next(
                    e
                    for e in kinds(result, "document")
                    if e.answer.citations[0].href == item.answer.citations[0].href
                )
                assert by_id[item.id].answer.markdown == page.answer.markdown
        assert build(root).artifact_json == result.artifact_json
