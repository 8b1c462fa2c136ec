"""Loading a Markdown folder and cutting it into heading-aware, citable chunks."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import BuildError, ConfigurationError
from agentskit_chat.protocol import decode_grounded_source, is_safe_href
from agentskit_chat.protocol._text import js_trim, utf16_len
from agentskit_chat.protocol._types import is_safe_id
from agentskit_chat.retrieval import (
    MAX_CHUNK_CHARS,
    MarkdownChunk,
    MarkdownCorpus,
    chunk_markdown,
    github_slug,
    load_markdown_corpus,
)

from ._support import CORPUS, PROJECT_DOCS, write_corpus

NESTED = """# Guide

Opening words.

## Install

Install steps.

### On Linux

Use the package manager.

#### Debian

apt-get install acme

## Configure

Edit the file.
"""


def _by_heading(chunks: tuple[MarkdownChunk, ...]) -> dict[tuple[str, ...], MarkdownChunk]:
    return {chunk.heading_path: chunk for chunk in chunks}


def _assert_valid(chunks: tuple[MarkdownChunk, ...]) -> None:
    assert len({chunk.id for chunk in chunks}) == len(chunks)
    for chunk in chunks:
        assert is_safe_id(chunk.id), chunk.id
        assert is_safe_href(chunk.href), chunk.href
        assert chunk.title == js_trim(chunk.title)
        assert 1 <= utf16_len(chunk.title) <= 256
        assert chunk.text.strip()
        assert len(chunk.text) <= MAX_CHUNK_CHARS
        source = {"id": chunk.id, "title": chunk.title, "href": chunk.href, "excerpt": chunk.text}
        assert decode_grounded_source(source).ok


def test_sections_follow_nested_headings() -> None:
    document = chunk_markdown(NESTED, path="guide.md")
    chunks = _by_heading(document.chunks)
    assert document.title == "Guide"
    assert list(chunks) == [
        (),
        ("Install",),
        ("Install", "On Linux"),
        ("Install", "On Linux", "Debian"),
        ("Configure",),
    ]
    debian = chunks[("Install", "On Linux", "Debian")]
    assert debian.title == "Guide › Install › On Linux › Debian"
    assert debian.href == "/docs/guide#debian"
    assert debian.text == "apt-get install acme"
    intro = chunks[()]
    assert (intro.title, intro.href, intro.text) == ("Guide", "/docs/guide", "Opening words.")
    # A sibling heading closes the deeper ones.
    assert chunks[("Configure",)].title == "Guide › Configure"


def test_text_is_plain_markdown_blocks() -> None:
    source = """# Page

Some *emphasis*, a [link](https://example.com), `inline code` and ![an image](x.png).

- first item
- second **item**

| name | value |
|------|-------|
| port | 8000  |

```python
# a comment, not a heading
print("hello")
```

<div class="note">Raw <b>HTML</b> note</div>
"""
    [chunk] = chunk_markdown(source, path="page.md").chunks
    assert chunk.text == (
        # Code spans keep their backticks: a command in a sentence reads as code.
        "Some emphasis, a link, `inline code` and an image.\n\n"
        "- first item\n- second item\n\n"
        "| name | value |\n| --- | --- |\n| port | 8000 |\n\n"
        # The fence keeps its language, so an answer can show the code highlighted.
        '```python\n# a comment, not a heading\nprint("hello")\n```\n\n'
        "Raw HTML note"
    )


@pytest.mark.parametrize(
    ("source", "title", "texts"),
    [
        (
            "---\ntitle: From Front Matter\nsecret: zq9\n---\n# Heading\n\nBody.\n",
            "From Front Matter",
            ["Body."],
        ),
        # Neither a front matter title nor an H1: the page's name as words, not "notes.md".
        ("---\nsecret: zq9\n...\nBody only.\n", "Notes", ["Body only."]),
        ("\ufeff---\r\ntitle: Windows\r\nsecret: zq9\r\n---\r\nBody.\r\n", "Windows", ["Body."]),
    ],
)
def test_front_matter_is_skipped(source: str, title: str, texts: list[str]) -> None:
    document = chunk_markdown(source, path="notes.md")
    assert document.title == title
    assert [chunk.text for chunk in document.chunks] == texts
    assert all("zq9" not in chunk.text for chunk in document.chunks)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("---\n: [unbalanced zq9\n---\n# T\n\nBody.\n", "YAML"),
        ("---\nkept: yes\n", "never closed"),
    ],
)
def test_malformed_front_matter_is_refused_as_the_artifact_producer_refuses_it(
    source: str, reason: str
) -> None:
    # One reading rule for exact answers and retrieval: a page the artifact refuses is not
    # silently indexed with its front matter as text.
    with pytest.raises(BuildError, match=reason) as raised:
        chunk_markdown(source, path="notes.md")
    assert "zq9" not in str(raised.value)


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Setup", "setup"),
        ("Rate limits: `429` & Retry-After!", "rate-limits-429--retry-after"),
        ("snake_case_name", "snake_case_name"),
        ("Café au lait", "café-au-lait"),
        ("v0.4 → v1.0", "v04--v10"),
        ("!!!", ""),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
def test_an_ascii_heading_gets_the_anchor_of_the_rule_for_any_heading(heading: str) -> None:
    # ASCII headings take a shortcut: the same anchor as the rule read character by character.
    kept = (c for c in heading.lower() if c in " -_" or unicodedata.category(c)[0] in "LMN")
    assert github_slug(heading) == "".join("-" if c == " " else c for c in kept)


def test_duplicate_headings_get_numbered_anchors() -> None:
    source = "# Page\n\n## Setup\n\na\n\n## Setup\n\nb\n\n### Setup\n\nc\n\n## Setup 1\n\nd\n"
    hrefs = [chunk.href for chunk in chunk_markdown(source, path="p.md").chunks]
    # GitHub: setup, setup-1, setup-2; a literal "Setup 1" then takes the next free anchor.
    assert hrefs == ["/docs/p#setup", "/docs/p#setup-1", "/docs/p#setup-2", "/docs/p#setup-1-1"]


@pytest.mark.parametrize(
    ("path", "prefix", "href"),
    [
        ("guide.md", "/docs", "/docs/guide"),
        ("index.md", "/docs", "/docs"),
        ("README.md", "/docs", "/docs"),
        ("guides/index.md", "/docs", "/docs/guides"),
        ("guides/readme.md", "/docs/", "/docs/guides"),
        ("guides/setup.md", "", "/guides/setup"),
        ("index.md", "", "/"),
        ("a b/c#d?.md", "/docs", "/docs/a%20b/c%23d%3F"),
        ("back\\slash.md", "/docs", "/docs/back%5Cslash"),
        ("guide.md", "https://docs.example.com/v1", "https://docs.example.com/v1/guide"),
    ],
)
def test_hrefs_are_safe_page_links(path: str, prefix: str, href: str) -> None:
    [chunk] = chunk_markdown("Body.", path=path, href_prefix=prefix).chunks
    assert chunk.href == href
    assert is_safe_href(chunk.href)


@pytest.mark.parametrize("prefix", ["docs", "//evil.example", "javascript:x", "/docs?x=1", "/a#b"])
def test_unsafe_href_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigurationError):
        chunk_markdown("Body.", path="p.md", href_prefix=prefix)


def test_ids_are_safe_unique_and_stable() -> None:
    first = chunk_markdown(NESTED, path="guides/setup.md")
    again = chunk_markdown(NESTED, path="guides/setup.md")
    assert [c.id for c in first.chunks] == [c.id for c in again.chunks]
    # Editing one section changes no id: ids come from the path and the heading, not positions.
    edited = chunk_markdown(
        NESTED.replace("Opening words.", "New words.\n\n## Added\n\nx"), path="guides/setup.md"
    )
    assert {c.id for c in first.chunks} <= {c.id for c in edited.chunks}
    # Paths that fold to the same readable id still get distinct ids.
    folded = MarkdownCorpus.from_texts({"a/b.md": NESTED, "a-b.md": NESTED, "a_b.md": NESTED})
    _assert_valid(folded.chunks)
    assert first.chunks[1].id.startswith("guides-setup-install-")


def test_long_paths_and_headings_stay_in_bounds() -> None:
    path = "/".join(["ünïcode-folder"] * 12) + "/page.md"
    heading = "Heading " * 60
    document = chunk_markdown(f"# {heading}\n\n## {heading}\n\nBody.\n", path=path)
    _assert_valid(document.chunks)
    assert all(len(chunk.id) <= 128 for chunk in document.chunks)
    assert all(chunk.title.endswith("…") for chunk in document.chunks)


def test_long_sections_are_split_at_paragraph_boundaries() -> None:
    paragraphs = [f"Paragraph {n} " + "word " * 60 for n in range(40)]
    source = "# Long\n\n## Part\n\n" + "\n\n".join(paragraphs) + "\n"
    document = chunk_markdown(source, path="long.md")
    parts = [chunk for chunk in document.chunks if chunk.heading_path == ("Part",)]
    assert len(parts) > 1
    _assert_valid(document.chunks)
    # Every paragraph survives whole, in order, in exactly one part.
    rejoined = [p for chunk in parts for p in chunk.text.split("\n\n")]
    assert rejoined == [p.strip() for p in paragraphs]
    assert {chunk.href for chunk in parts} == {"/docs/long#part"}


def test_a_block_longer_than_a_chunk_is_cut() -> None:
    words = " ".join(f"w{n}" for n in range(2_000))
    blob = "z" * 5_000
    document = chunk_markdown(f"{words}\n\n{blob}\n", path="big.md")
    _assert_valid(document.chunks)
    text = " ".join(chunk.text for chunk in document.chunks)
    assert text.split() == [*words.split(), *("z" * 2_000, "z" * 2_000, "z" * 1_000)]


def test_sections_without_text_make_no_chunk() -> None:
    document = chunk_markdown("# Title\n\n## Empty\n\n## Full\n\nText.\n", path="p.md")
    assert [chunk.heading_path for chunk in document.chunks] == [("Full",)]
    assert chunk_markdown("---\ntitle: Only\n---\n", path="p.md").chunks == ()


def test_folder_is_read_sorted_skipping_hidden_and_other_files(tmp_path: Path) -> None:
    write_corpus(tmp_path)
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "secret.md").write_text("# Secret\n\nNo.\n", "utf-8")
    (tmp_path / ".draft.md").write_text("# Draft\n\nNo.\n", "utf-8")
    (tmp_path / "notes.txt").write_text("not markdown", "utf-8")
    corpus = load_markdown_corpus(tmp_path)
    assert [d.path for d in corpus.documents] == sorted(CORPUS)
    assert corpus.root == tmp_path
    assert corpus.document("install.md") is not None
    install = corpus.document("install.md")
    assert install is not None and install.title == "Installing Acme"
    _assert_valid(corpus.chunks)
    # The same texts in memory give the same chunks.
    assert MarkdownCorpus.from_texts(CORPUS).chunks == corpus.chunks


def test_manifest_is_the_sha256_of_each_file(tmp_path: Path) -> None:
    import hashlib  # noqa: PLC0415

    write_corpus(tmp_path)
    manifest = load_markdown_corpus(tmp_path).manifest
    assert manifest == {
        path: hashlib.sha256((tmp_path / path).read_bytes()).hexdigest() for path in CORPUS
    }


def test_unreadable_input_is_a_build_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError):
        load_markdown_corpus(tmp_path / "missing")
    (tmp_path / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(BuildError) as caught:
        load_markdown_corpus(tmp_path)
    assert caught.value.file is not None and caught.value.file.endswith("latin1.md")


@pytest.mark.parametrize("path", ["/abs.md", "../up.md", "notes.txt"])
def test_in_memory_paths_must_be_relative_markdown(path: str) -> None:
    with pytest.raises(ConfigurationError):
        MarkdownCorpus.from_texts({path: "Body."})


def test_the_project_docs_are_a_valid_corpus() -> None:
    corpus = load_markdown_corpus(PROJECT_DOCS)
    assert corpus.documents, "docs/ has Markdown files"
    assert any(d.path == "retrieval.md" for d in corpus.documents)
    _assert_valid(corpus.chunks)


_markdown_pieces = st.sampled_from(
    [
        "# ",
        "## ",
        "### ",
        "\n",
        "\n\n",
        "---\n",
        "```\n",
        "- ",
        "1. ",
        "| a | b |\n|---|---|\n",
        "<div>",
        "</div>",
        "`",
        "*",
        "[x](y)",
        "Setup",
        "title: T\n",
        "x" * 700,
        " ",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_markdown_pieces, st.text(max_size=30)), max_size=40))
def test_any_markdown_gives_valid_chunks(pieces: list[str]) -> None:
    text = "".join(pieces)
    try:
        document = chunk_markdown(text, path="fuzz/page.md")
    except BuildError:
        # Only a front matter block (a first line of dashes) can make a page unreadable.
        assert text.lstrip("\ufeff").split("\n", 1)[0].split("\r", 1)[0].rstrip(" \t") == "---"
        return
    _assert_valid(document.chunks)


def test_a_cut_keeps_a_lead_in_with_what_it_introduces_and_a_table_with_its_header() -> None:
    # The filler and the lead-in fit in one text; the code block they introduce does not.
    filler = "f" * (MAX_CHUNK_CHARS - len("\n\nInstall it with:") - 5)
    rows = "\n".join(f"| row{i} | " + "x" * 80 + " |" for i in range(40))
    source = (
        f"# Page\n\n{filler}\n\nInstall it with:\n\n```sh\npip install widget\n```\n\n"
        f"The limits:\n\n| Name | Value |\n|---|---|\n{rows}\n"
    )
    texts = [chunk.text for chunk in chunk_markdown(source, path="page.md").chunks]
    assert len(texts) >= 3
    assert all(len(text) <= MAX_CHUNK_CHARS for text in texts)
    # The lead-in moved with its code block; no text ends on a sentence ending in ':'.
    install = next(text for text in texts if "pip install widget" in text)
    assert install.startswith("Install it with:\n\n```")
    assert not any(text.rstrip().endswith(":") for text in texts)
    # Every part of the table starts with its header and rule.
    parts = [text for text in texts if "| row" in text]
    assert len(parts) >= 2
    for part in parts:
        table = part[part.index("| Name") :] if "| Name" in part else part
        assert table.startswith("| Name | Value |\n| --- | --- |\n| row"), part[:80]
    body = [line for part in parts for line in part.splitlines() if line.startswith("| row")]
    assert body == [f"| row{i} | " + "x" * 80 + " |" for i in range(40)]  # each row once


def test_a_table_is_read_from_the_one_commonmark_parse_wherever_it_sits() -> None:
    # The page is parsed once as CommonMark (shared with exact answers), where a table is a
    # paragraph; the chunker reads that paragraph again as a table, lead-in and all.
    text = (
        "# Page\n\nOptions:\n| Name | Value |\n|---|---|\n| `a` | 1 |\n\n"
        "- In a list:\n\n  | K | V |\n  |---|---|\n  | x | y |\n\nNo | table | here.\n"
    )
    document = chunk_markdown(text, path="page.md")
    body = document.chunks[0].text
    assert "Options:\n\n| Name | Value |\n| --- | --- |\n| `a` | 1 |" in body
    assert "| K | V |\n| --- | --- |\n| x | y |" in body
    assert body.endswith("No | table | here.")


def test_logos_badges_and_figures_are_left_out_of_a_chunks_text() -> None:
    page = (
        "# Acme\n\n"
        "![Acme logo](logo.svg)\n\n"
        "| | |\n| --- | --- |\n"
        "| CI | [![Build](https://ci.example/badge.svg)](https://ci.example) |\n"
        "| Package | ![PyPI - Version](https://img.example/v.svg) |\n\n"
        "Acme builds wheels. ![diagram of a build](build.png) It is fast.\n\n"
        "| Option | Default |\n| --- | --- |\n| `jobs` | 4 ![star](star.svg) |\n"
    )
    [chunk] = chunk_markdown(page, path="index.md").chunks
    assert "logo" not in chunk.text
    assert "Build" not in chunk.text
    assert "PyPI" not in chunk.text
    assert "CI" not in chunk.text
    # An image among words reads as its alt text; a row with text beside an image stays.
    assert "Acme builds wheels. diagram of a build It is fast." in chunk.text
    assert "| `jobs` | 4 star |" in chunk.text
    assert "| Option | Default |" in chunk.text
