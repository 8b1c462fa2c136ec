"""MkDocs, Material and PyMdown syntax never reaches an answer; code that shows it stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat import _mkdocs
from agentskit_chat._mkdocs import mkdocs_syntax, plain_markdown
from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.protocol import ExactAnswer
from agentskit_chat.retrieval import chunk_markdown

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SHARED_CORPORA = ROOT.parent / "shared" / "corpora"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # Admonitions, collapsible blocks and tabs: the title is a paragraph, the body stays.
        (
            '!!! warning "Experimental API"\n    It may change.\n',
            "Experimental API\n\nIt may change.\n\n",
        ),
        ("!!! note\n    Read this.\n", "Note\n\nRead this.\n\n"),
        (
            '???+ info "Streaming"\n    Chunks are sent as produced.\n',
            "Streaming\n\nChunks are sent as produced.\n\n",
        ),
        (
            '=== "macOS"\n\n    ```sh\n    brew install x\n    ```\n',
            "macOS\n\n\n```sh\nbrew install x\n```\n\n",
        ),
        # Alerts (GitHub, Obsidian): the title, or the kind, leads the quote.
        ("> [!tip]\n> Pair it with BetterEm.", "> Tip\n>\n> Pair it with BetterEm."),
        ("> [!new] New in 12.0\n> Added.", "> New in 12.0\n>\n> Added."),
        ("  > > [!NOTE]-\n  > > Nested.", "  > > Note\n  > >\n  > > Nested."),
        ("```\n> [!tip] shown\n```", "```\n> [!tip] shown\n```"),
        # PyMdown blocks, their options dropped; an html block keeps only its body.
        ("/// warning | Careful\nBody.\n///", "Careful\n\nBody.\n"),
        ("/// html | div.result\n**Shown**\n///", "**Shown**\n"),
        ("//// tab | One\n    attrs: {class: x}\nText.\n////", "One\n\nText.\n"),
        # Includes and directives are dropped.
        ('--8<-- "links.md"', ""),
        ("--8<--\na.md\nb.md\n--8<--\nAfter.", "After."),
        ("{* ../../docs_src/app.py hl[3] *}\nText.", "Text."),
        ("::: hatch.plugin.Interface\n    options:\n      show: true\nText.", "Text."),
        ("*[HTML]: Hyper Text Markup Language\nText.", "Text."),
        # Inline syntax is removed, its text kept.
        ("## Features ### {: #features }", "## Features ###"),
        ("![Logo](logo.svg){ loading=lazy .off-glb }", "![Logo](logo.svg)"),
        (":material-lock:{ .lg } __Environments__", " __Environments__"),
        ("Press ++ctrl+alt+delete++.", "Press Ctrl+Alt+Delete."),
        ("==marked== and ^^inserted^^ text[^1]", "marked and inserted text"),
        ("`#!py3 True` by default", "`True` by default"),
        ("See [CodeHilite][codehilite] for more.", "See CodeHilite for more."),
        ("| yes | :white_check_mark: |", "| yes | ✅ |"),
        # Fenced code is left exactly as written, whatever it shows.
        (
            '```md\n!!! note\n    x\n--8<-- "a.md"\n```',
            '```md\n!!! note\n    x\n--8<-- "a.md"\n```',
        ),
        # Ordinary braces are text.
        ("Use `/{username}` or {name} here.", "Use `/{username}` or {name} here."),
    ],
)
def test_plain_markdown(source: str, expected: str) -> None:
    assert plain_markdown(source) == expected


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('!!! note "x"', ["!!!"]),
        ("text {: .class } more", ["{:"]),
        ("a {#anchor} b", ["{#anchor}"]),
        ("{* docs_src/a.py *}", ["{* docs_src/a.py *}"]),
        ("/// tab | A", ["///"]),
        ("an :octicons-arrow-right-24: icon", [":octicons-arrow-right-24:"]),
        ("[!tip] Pair it with BetterEm.", ["[!tip]"]),
        ("> [!warning]\n> Careful.", ["> [!warning]"]),
        ("```\n!!! note\n```\nclean `{: x}` text", []),
        ("Plain answer [1].", []),
    ],
)
def test_mkdocs_syntax_finds_what_is_left(text: str, found: list[str]) -> None:
    assert mkdocs_syntax(text) == found


MATERIAL_PAGE = """\
---
title: Environments
---

[:octicons-file-code-24:][_source]{: .source-link }

Environments keep projects apart. { .lead }

!!! tip "Shell completion"
    Run `envtool completion` to print the completion script.

??? info "Where environments live"
    Environments live under the data directory, one folder each.

=== "Linux"
    ```sh
    envtool create --python 3.12
    ```

=== "Windows"
    ```powershell
    envtool.exe create --python 3.12
    ```

## Creating an environment ## {: #create }

/// warning | Slow on first use
The first creation downloads the interpreter, which takes a minute.
///

{* ../../docs_src/create.py hl[2] *}

Press ++ctrl+c++ to stop a creation.

--8<-- "links.md"

*[CLI]: Command line interface
"""

REFERENCE_PAGE = """\
# Reference

::: envtool.api.Environment
    options:
      show_source: false

## Options

| Option | Default | Description |
| --- | --- | --- |
| `python` | `#!py3 "3.12"` | The interpreter version :material-language-python: |
| `keep` | `#!py3 False` | Keep the folder after removal |
"""


@pytest.fixture
def material_docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "environments.md").write_text(MATERIAL_PAGE, "utf-8")
    (folder / "reference.md").write_text(REFERENCE_PAGE, "utf-8")
    return folder


def test_chunks_of_a_material_page_hold_its_words_and_no_syntax() -> None:
    document = chunk_markdown(MATERIAL_PAGE, path="environments.md")
    assert document.title == "Environments"
    text = "\n\n".join(chunk.text for chunk in document.chunks)
    assert mkdocs_syntax(text) == []
    for words in (
        "Shell completion",
        "Run `envtool completion` to print the completion script.",
        "Environments live under the data directory",
        "```sh\nenvtool create --python 3.12\n```",
        "Slow on first use",
        "Press Ctrl+C to stop a creation.",
    ):
        assert words in text
    assert [chunk.heading for chunk in document.chunks] == [
        "Environments",
        "Creating an environment",
    ]


async def test_exact_answers_from_material_pages_hold_no_syntax(material_docs: Path) -> None:
    async with create_docs_assistant(material_docs) as assistant:
        entries = assistant.artifact_build.artifact.entries
        page = await assistant.ask("Creating an environment")
    assert entries
    assert all(mkdocs_syntax(entry.answer.markdown) == [] for entry in entries)
    assert isinstance(page, ExactAnswer)
    assert "Slow on first use" in page.answer.markdown  # the section itself, not a pointer
    assert mkdocs_syntax(page.answer.markdown) == []


@pytest.mark.parametrize(
    "question",
    [
        "How do I print the shell completion script?",
        "Where do environments live?",
        "How do I create an environment on Windows?",
        "Why is the first creation slow?",
        "How do I stop a creation?",
        "What is the default python option?",
    ],
)
async def test_answers_from_material_pages_hold_no_syntax(
    material_docs: Path, question: str
) -> None:
    async with create_docs_assistant(material_docs) as assistant:
        reply = await assistant.ask(question)
    assert isinstance(reply, ExactAnswer), question
    assert mkdocs_syntax(reply.answer.markdown) == []


def _corpus_questions(name: str, docs: Path) -> list[str]:
    data = json.loads((ROOT / "bench" / f"quality_questions_{name}.json").read_text("utf-8"))
    questions = [entry["question"] for entry in data["questions"]]
    assert questions
    return questions


async def test_no_answer_over_an_external_corpus_holds_mkdocs_syntax() -> None:
    """Every question of Starlette's frozen set (its docs are beside the repository in CI);
    bench/ask_quality.py checks the answers over every corpus it measures, the fetched ones
    (Hatch, PyMdown Extensions) too."""
    name, folder = "starlette", SHARED_CORPORA / "starlette-1.10.0" / "docs"
    assert folder.is_dir(), f"the {name} corpus is not at {folder}"
    answered = 0
    async with create_docs_assistant(folder) as assistant:
        # Exact answers too: every entry of the knowledge artifact built from the corpus.
        entries = assistant.artifact_build.artifact.entries
        assert entries
        for entry in entries:
            assert mkdocs_syntax(entry.answer.markdown) == [], entry.id
            assert mkdocs_syntax(entry.label) == [], entry.id
        for question in _corpus_questions(name, folder):
            reply = await assistant.ask(question)
            if isinstance(reply, ExactAnswer):
                answered += 1
                assert mkdocs_syntax(reply.answer.markdown) == [], question
    assert answered >= 20


def _every_rewrite(text: str) -> str:
    """Inline MkDocs syntax removed by every rewrite in turn, none skipped."""
    text = _mkdocs._ICON.sub("", text)
    for code, emoji in _mkdocs._EMOJI.items():
        text = text.replace(code, emoji)
    text = _mkdocs._ATTRS.sub("", text)
    text = _mkdocs._FOOTNOTE_REF.sub("", text)
    text = _mkdocs._REF_LINK.sub(r"\1", text)
    text = _mkdocs._CRITIC_DROP.sub("", text)
    text = _mkdocs._CRITIC_SWAP.sub(r"\1", text)
    text = _mkdocs._CRITIC_ADD.sub(lambda m: m.group(1) or m.group(2) or "", text)
    text = _mkdocs._KEYS.sub(
        lambda m: "+".join(k.capitalize() for k in m.group(1).split("+")), text
    )
    return _mkdocs._MARKS.sub(r"\2", text)


_PIECES = [
    "a",
    "b ",
    "ctrl",
    ":",
    "{",
    "}",
    "[",
    "]",
    "^",
    "+",
    "=",
    "~",
    "-",
    ">",
    "<",
    "!",
    "#",
    ".",
    "`",
    '"',
    ":material-lock:",
    ":x:",
    "{: #id }",
    "{ .off }",
    "[^1]",
    "[text][ref]",
    "{--x--}",
    "{>>c<<}",
    "{~~a~>b~~}",
    "{++add++}",
    "{==hi==}",
    "++ctrl+c++",
    "==m==",
    "^^i^^",
]


@settings(max_examples=400)
@given(st.lists(st.sampled_from(_PIECES), max_size=14).map("".join))
def test_rewrites_skipped_for_want_of_their_character_change_nothing(text: str) -> None:
    # Each rewrite runs only when the text holds the character it needs (a large folder's
    # cold start): the line comes out as every rewrite in turn would leave it.
    assert _mkdocs._prose(text) == _every_rewrite(text)
    parts: list[str] = []
    last = 0
    for match in _mkdocs._CODE_SPAN.finditer(text):
        parts += [_every_rewrite(text[last : match.start()]), _mkdocs._code_span(match)]
        last = match.end()
    assert _mkdocs._inline(text) == "".join([*parts, _every_rewrite(text[last:])])


_BLOCK_PATTERNS = {
    name: getattr(_mkdocs, name)
    for name in (
        "_FENCE",
        "_ADMONITION",
        "_TAB",
        "_BLOCK",
        "_ALERT",
        "_SNIPPET",
        "_CODE_INCLUDE",
        "_MKDOCSTRINGS",
        "_DEFINITION",
        "_ATTRS_LINE",
    )
}


@pytest.mark.parametrize("name", sorted(_BLOCK_PATTERNS))
@settings(max_examples=200)
@given(data=st.data())
def test_every_line_a_block_pattern_matches_starts_with_a_block_character(
    name: str, data: st.DataObject
) -> None:
    # A line starting with no block character is read as inline text at once (most lines):
    # that is the same reading only if no block pattern can match such a line.
    line = data.draw(st.from_regex(_BLOCK_PATTERNS[name]).filter(lambda text: "\n" not in text))
    assert _BLOCK_PATTERNS[name].match(line)
    assert line.lstrip()[:1] in _mkdocs._BLOCK_STARTS
