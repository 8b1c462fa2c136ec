"""The artifact producer: entries derived from Markdown, links, determinism and options."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.answers import LeftOut
from agentskit_chat.answers._candidates import TITLE_TAKEN
from agentskit_chat.answers._markdown import github_slug
from agentskit_chat.errors import BuildError
from agentskit_chat.protocol import (
    compute_local_knowledge_artifact_content_hash,
    decode_deterministic_site_config,
)
from agentskit_chat.retrieval import SYMLINK_LEFT_OUT as SYMLINK
from tests.answers._producer_support import (
    STAMP,
    assert_valid,
    build,
    entry,
    kinds,
    lookup,
    tree,
)

# --- documents ------------------------------------------------------------------------------------


def test_one_document_entry_per_file_with_title_and_path_aliases(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "guides/setup.md": "# Setup guide\n\nInstall it with `pip`, then [run](./run.md) it.\n",
            "index.md": "# Welcome\n",
        },
    )
    result = build(root)
    assert [e.id for e in kinds(result, "document")] == ["doc-guides-setup", "doc-index"]
    setup = entry(result, "doc-guides-setup")
    assert setup.label == "Setup guide"
    assert setup.match.values == ("Setup guide", "guides/setup")
    assert setup.answer.markdown == (
        "**Setup guide**\n\nInstall it with `pip`, then run it.\n\n"
        "Read [Setup guide](/docs/guides/setup)."
    )
    assert [c.to_wire() for c in setup.answer.citations] == [
        {"id": "doc-guides-setup", "title": "Setup guide", "href": "/docs/guides/setup"}
    ]
    index = entry(result, "doc-index")
    assert index.answer.markdown == "**Welcome**\n\nRead [Welcome](/docs)."
    assert index.match.values == ("Welcome", "index")
    assert_valid(result)


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("## Only a section\n\n# Real title\n", "Real title"),
        ("---\ntitle: From front matter\n---\nNo heading here.\n", "From front matter"),
        # Neither: the page's name written as words, never the file name itself.
        ("No heading and no front matter.\n", "Notes"),
        ("Setext title\n============\n", "Setext title"),
    ],
)
def test_document_title_fallbacks(tmp_path: Path, text: str, title: str) -> None:
    result = build(tree(tmp_path, {"notes.md": text}))
    assert kinds(result, "document")[0].label == title


@pytest.mark.parametrize(
    ("prefix", "rel", "href"),
    [
        ("/docs", "guides/setup.md", "/docs/guides/setup"),
        ("/docs/", "guides/setup.md", "/docs/guides/setup"),
        ("", "guides/setup.md", "/guides/setup"),
        ("https://example.com/docs", "a.markdown", "https://example.com/docs/a"),
        ("/docs", "my notes (draft).md", "/docs/my%20notes%20%28draft%29"),
        ("/docs", "v1.2.md", "/docs/v1.2"),
        ("/docs", "guides/index.md", "/docs/guides"),
        ("/docs", "guides/README.md", "/docs/guides"),
        ("/docs", "README.md", "/docs"),
        ("", "index.md", "/"),
        ("/docs", "reindex.md", "/docs/reindex"),
    ],
)
def test_document_links_derive_from_the_path(
    tmp_path: Path, prefix: str, rel: str, href: str
) -> None:
    result = build(tree(tmp_path, {rel: "# T\n"}), href_prefix=prefix)
    assert kinds(result, "document")[0].answer.citations[0].href == href


def test_an_unsafe_href_prefix_names_the_file(tmp_path: Path) -> None:
    tree(tmp_path, {"a.md": "# A\n"})
    with pytest.raises(BuildError, match="unsafe link") as caught:
        build(tmp_path, href_prefix="//evil.example")
    assert caught.value.file == str(tmp_path / "a.md")


def test_summary_is_the_first_paragraph_escaped_and_clipped(tmp_path: Path) -> None:
    words = " ".join(f"w{i}" for i in range(200))
    root = tree(
        tmp_path,
        {
            "a.md": "# A\n\nUse *care* with a_b and `x*y` here.\n",
            "b.md": f"# B\n\n{words}\n",
            "c.md": "# C\n\n- a list item is not a summary\n\nThe paragraph.\n",
        },
    )
    result = build(root)
    assert entry(result, "doc-a").answer.markdown.split("\n\n")[1] == (
        r"Use care with a\_b and `x*y` here."
    )
    summary = entry(result, "doc-b").answer.markdown.split("\n\n")[1]
    assert summary.endswith(" …")
    assert len(summary) <= 330
    assert entry(result, "doc-c").answer.markdown.split("\n\n")[1] == "The paragraph."


def test_markdown_in_titles_is_escaped_in_answers(tmp_path: Path) -> None:
    result = build(tree(tmp_path, {"a.md": "# Use `a*b` [here](x.md) [x]\n"}))
    doc = kinds(result, "document")[0]
    assert doc.label == "Use a*b here [x]"
    assert (
        doc.answer.markdown
        == r"**Use a\*b here \[x\]**" + "\n\n" + r"Read [Use a\*b here \[x\]](/docs/a)."
    )


# --- commands -------------------------------------------------------------------------------------

COMMANDS_DOC = """# Install

Intro.

## Setup steps

```bash
pip install agentskit-chat
# a comment

$ agentskit-chat artifact build docs \\
    --site-id my-docs \\
    --out public
pip install agentskit-chat
```

```console
$ agentskit-chat --version
0.1.0
```

```python
print("not a command")
```

```sh {title="x"}
make test
```
"""


def test_commands_from_shell_fences(tmp_path: Path) -> None:
    result = build(tree(tmp_path, {"install.md": COMMANDS_DOC}))
    commands = kinds(result, "command")
    assert [c.label for c in commands] == [
        "pip install agentskit-chat",
        "agentskit-chat artifact build docs --site-id my-docs --out public",
        "agentskit-chat --version",
        "make test",
    ]
    first = commands[0]
    assert first.match.values == ("pip install agentskit-chat",)
    assert first.answer.markdown == (
        "Run:\n\n```sh\npip install agentskit-chat\n```\n\n"
        "From [Setup steps](/docs/install#setup-steps) in [Install](/docs/install)."
    )
    assert first.answer.citations[0].href == "/docs/install#setup-steps"
    assert first.answer.citations[0].title == "Setup steps"
    assert_valid(result)


def test_a_command_under_the_title_links_the_document(tmp_path: Path) -> None:
    result = build(tree(tmp_path, {"a.md": "# A\n\n```sh\nls -la\n```\n"}))
    command = kinds(result, "command")[0]
    assert command.answer.markdown.endswith("From [A](/docs/a).")
    assert command.answer.citations[0].href == "/docs/a"


def test_a_command_with_backticks_gets_a_longer_fence(tmp_path: Path) -> None:
    result = build(tree(tmp_path, {"a.md": "# A\n\n````sh\necho ```\n````\n"}))
    assert "````sh\necho ```\n````" in kinds(result, "command")[0].answer.markdown


# --- headings -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("Hello, World!", "hello-world"),
        ("API `v1` reference", "api-v1-reference"),
        ("Ünïcode Straße", "ünïcode-straße"),
        ("snake_case and kebab-case", "snake_case-and-kebab-case"),
        ("  two  spaces", "--two--spaces"),
        ("C++ & Rust?", "c--rust"),
        ("🚀 Launch", "-launch"),
    ],
)
def test_github_slugs(text: str, slug: str) -> None:
    assert github_slug(text) == slug


def test_navigation_entries_for_every_heading_but_the_title(tmp_path: Path) -> None:
    text = "# Guide\n\n## Setup\n\n### Setup\n\n## Hello, World!\n\n## Setup\n"
    result = build(tree(tmp_path, {"guide.md": text}))
    navigation = kinds(result, "navigation")
    assert [(n.label, n.answer.citations[0].href) for n in navigation] == [
        ("Setup", "/docs/guide#setup"),
        ("Setup", "/docs/guide#setup-1"),
        ("Hello, World!", "/docs/guide#hello-world"),
        ("Setup", "/docs/guide#setup-2"),
    ]
    assert navigation[2].answer.markdown == (
        "See [Hello, World!](/docs/guide#hello-world) in [Guide](/docs/guide)."
    )
    # Three "Setup" sections of one document: choices, each with an alias of its own.
    assert lookup(result, "setup") == (navigation[0].id, navigation[1].id, navigation[3].id)
    assert [n.match.values for n in navigation if n.label == "Setup"] == [
        ("Setup", "Setup (Guide)"),
        ("Setup", "Setup (Guide 2)"),
        ("Setup", "Setup (Guide 3)"),
    ]
    assert_valid(result)


def test_the_same_alias_in_several_files_makes_choices(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "a.md": "# Alpha\n\n## Context\n\n```sh\nmake\n```\n",
            "b.md": "# Beta\n\n## Context\n\n```sh\nmake\n```\n",
        },
    )
    result = build(root)
    contexts = [n for n in kinds(result, "navigation") if n.label == "Context"]
    assert lookup(result, "context") == tuple(n.id for n in contexts)
    assert [n.match.values[-1] for n in contexts] == ["Context (Alpha)", "Context (Beta)"]
    assert [lookup(result, n.match.values[-1]) for n in contexts] == [(n.id,) for n in contexts]
    makes = kinds(result, "command")
    assert lookup(result, "make") == tuple(c.id for c in makes)
    assert [c.match.values for c in makes] == [("make", "make (Alpha)"), ("make", "make (Beta)")]
    assert_valid(result)


def test_a_title_answers_its_document_even_when_a_heading_elsewhere_reads_the_same(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path, {"a.md": "# Overview\n", "b.md": "# B\n\n## Overview\n\n## Other\n"})
    result = build(root)
    doc = entry(result, "doc-a")
    assert lookup(result, "overview") == (doc.id,)
    assert lookup(result, "Overview (B)") == ()
    assert doc.match.values == ("Overview", "a")
    assert [n.label for n in kinds(result, "navigation")] == ["Other"]
    assert LeftOut("navigation", "b.md", "Overview", TITLE_TAKEN) in result.left_out


def test_two_documents_titled_alike_still_offer_a_choice(tmp_path: Path) -> None:
    root = tree(tmp_path, {"a.md": "# Overview\n", "b.md": "# Overview\n"})
    result = build(root)
    assert lookup(result, "overview") == (entry(result, "doc-a").id, entry(result, "doc-b").id)


def test_entries_come_in_priority_order(tmp_path: Path) -> None:
    doc = "# {0}\n\n## {0} section\n\n```sh\n{0}-cmd\n```\n"
    result = build(tree(tmp_path, {"a.md": doc.format("A"), "b.md": doc.format("B")}))
    assert [e.kind for e in result.artifact.entries] == [
        "document",
        "document",
        "command",
        "command",
        "navigation",
        "navigation",
    ]


# --- determinism, time and identity ---------------------------------------------------------------


def test_output_is_byte_identical_whatever_the_creation_order(tmp_path: Path) -> None:
    files = {f"d{i}/f{i}.md": f"# Title {i}\n\n## Part\n\n```sh\nrun {i}\n```\n" for i in range(8)}
    first = build(tree(tmp_path / "one", files))
    second = build(tree(tmp_path / "two", dict(reversed(list(files.items())))))
    assert first.artifact_json == second.artifact_json
    assert first.site_json == second.site_json
    assert first.artifact_json.endswith("}\n")
    assert first.artifact_json == first.artifact.to_json() + "\n"


def test_generated_at_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree(tmp_path, {"a.md": "# A\n"})
    clock = lambda: datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)  # noqa: E731
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert build(tmp_path, generated_at=None, now=clock).artifact.generated_at == (
        "2030-01-02T03:04:05.000Z"
    )
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert build(tmp_path, generated_at=None, now=clock).artifact.generated_at == (
        "2023-11-14T22:13:20.000Z"
    )
    assert build(tmp_path, generated_at="2026-07-13T05:00+05:00").artifact.generated_at == (
        "2026-07-13T05:00+05:00"
    )
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(BuildError, match="SOURCE_DATE_EPOCH"):
        build(tmp_path, generated_at=None)


def test_the_default_artifact_id_comes_from_a_placeholder_build(tmp_path: Path) -> None:
    tree(tmp_path, {"a.md": "# A\n"})
    result = build(tmp_path)
    placeholder = build(tmp_path, artifact_id="docs-site-000000000000")
    digest = compute_local_knowledge_artifact_content_hash(placeholder.artifact)
    assert result.artifact.artifact_id == f"docs-site-{digest[7:19]}"
    assert build(tmp_path, artifact_id="release-1").artifact.artifact_id == "release-1"
    long_site = "s" * 128
    long_id = build(tmp_path, site_id=long_site).artifact.artifact_id
    assert len(long_id) == 128
    assert long_id.startswith("s" * 115 + "-")


def test_site_config_names_the_artifact(tmp_path: Path) -> None:
    tree(tmp_path, {"a.md": "# A\n"})
    result = build(
        tmp_path,
        artifact_href="https://cdn.example.com/k.json",
        fallback_mode="disabled",
        expires_at="2026-08-01T00:00:00Z",
    )
    decoded = decode_deterministic_site_config(result.site_json)
    assert decoded.ok
    assert decoded.value == result.site_config
    assert result.site_config.artifact.href == "https://cdn.example.com/k.json"
    assert result.site_config.artifact.content_hash == result.artifact.content_hash
    assert result.site_config.fallback.mode == "disabled"
    assert result.artifact.expires_at == "2026-08-01T00:00:00Z"
    assert result.artifact.verified
    assert result.site_json.endswith("}\n")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"site_id": "bad site"}, "--site-id must be a safe identifier"),
        ({"artifact_id": "-x"}, "--artifact-id must be a safe identifier"),
        ({"generated_at": "2026-07-13"}, "--generated-at must be an ISO date-time"),
        ({"expires_at": "tomorrow"}, "--expires-at must be an ISO date-time"),
        ({"expires_at": STAMP}, "--expires-at must be later"),
        ({"expires_at": "2026-07-13T05:00+05:00"}, "--expires-at must be later"),
        ({"artifact_href": "javascript:alert(1)"}, "--href must be a safe link"),
        ({"fallback_mode": "maybe"}, "--fallback must be backend or disabled"),
    ],
)
def test_bad_options(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    tree(tmp_path, {"a.md": "# A\n"})
    with pytest.raises(BuildError, match=message) as caught:
        build(tmp_path, **options)
    assert caught.value.file is None


def test_missing_or_empty_docs_folder(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="does not exist") as caught:
        build(tmp_path / "nope")
    assert caught.value.file == str(tmp_path / "nope")
    tree(tmp_path, {"notes.txt": "not markdown", ".hidden.md": "# H\n", ".git/x.md": "# X\n"})
    with pytest.raises(BuildError, match="no Markdown files"):
        build(tmp_path)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_symbolic_links_are_not_followed(tmp_path: Path) -> None:
    outside = tree(tmp_path / "outside", {"secret.md": "# Secret\n"})
    root = tree(tmp_path / "docs", {"a.md": "# A\n"})
    (root / "link.md").symlink_to(outside / "secret.md")
    (root / "dir").symlink_to(outside, target_is_directory=True)
    result = build(root)
    assert [e.label for e in kinds(result, "document")] == ["A"]
    assert result.left_out == (
        LeftOut("file", "dir", "dir", SYMLINK),
        LeftOut("file", "link.md", "link.md", SYMLINK),
    )


def test_progress_reports_every_file_and_cannot_break_the_build(tmp_path: Path) -> None:
    tree(tmp_path, {"a.md": "# A\n", "b.md": "# B\n", "c/d.md": "# D\n"})
    calls: list[tuple[int, int]] = []
    build(tmp_path, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]

    def broken(done: int, total: int) -> None:
        raise RuntimeError("observer failure")

    assert build(tmp_path, progress=broken).stats.files == 3
