"""Reading a section's Markdown into blocks, and composing from any text without failing."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agentskit_chat._terms import words
from agentskit_chat.generation._compose import (
    NO_GROUNDED_ANSWER,
    Block,
    compose_answer,
    parse_blocks,
    question_parts,
)
from agentskit_chat.protocol import GroundedSource


def para(*sentences: str) -> Block:
    return Block("para", sentences)


@pytest.mark.parametrize(
    ("text", "blocks"),
    [
        ("One. Two! Three?", [para("One.", "Two!", "Three?")]),
        ("See v1.2 for more. Run it.", [para("See v1.2 for more.", "Run it.")]),
        ("Wrapped\nlines join.", [para("Wrapped lines join.")]),
        ("A.\n\nB.", [para("A."), para("B.")]),
        ("# Title\nText here.", [para("Title"), para("Text here.")]),
        ("> Note this.", [para("Note this.")]),
        ("- a\n- b\n  wrapped", [Block("list", ("- a", "- b wrapped"))]),
        # Three lists in CommonMark (each delimiter starts one), shown as one, markers written
        # the one way the corpus writes them.
        ("1. a\n2) b\n* c", [Block("list", ("1. a", "2. b", "- c"))]),
        ("Stores are:\n- a\n- b", [para("Stores are:"), Block("list", ("- a", "- b"))]),
        (
            "| a | b |\n| --- | --- |\n| 1 | 2 |\n| 3 | 4 |",
            [Block("table", ("| 1 | 2 |", "| 3 | 4 |"), "| a | b |")],
        ),
        ("|a|b|\n|:--|--:|\n|1|2|", [Block("table", ("| 1 | 2 |",), "| a | b |")]),
        ("| a | b\n|-|:-:\n| 1 | 2", [Block("table", ("| 1 | 2 |",), "| a | b |")]),
        ("| 1 | 2 |\n| 3 | 4 |", [Block("table", ("| 1 | 2 |", "| 3 | 4 |"))]),
        ("| only header |\n|---|", [Block("table", (), "| only header |")]),
        ("text\n| a |", [para("text"), Block("table", ("| a |",))]),
        (
            "```bash\npip install x\n  indented\n\n```\nAfter.",
            [Block("code", ("pip install x\n  indented",), language="bash"), para("After.")],
        ),
        # What a line-by-line reader got wrong: a setext heading, indented code, a loose list
        # (its items' second paragraphs), a nested list.
        ("Title\n=====\nText.", [para("Title"), para("Text.")]),
        (
            "Run:\n\n    make serve\n\nDone.",
            [para("Run:"), Block("code", ("make serve",)), para("Done.")],
        ),
        ("- a\n\n  more about a\n\n- b", [Block("list", ("- a more about a", "- b"))]),
        ("- a\n  - a1\n- b", [Block("list", ("- a", "  - a1", "- b"))]),
        ("```\nx\n- y", [Block("code", ("x\n- y",))]),
        ("~~~\na\n```\nb\n~~~", [Block("code", ("a\n```\nb",))]),
        ("````\na\n```\n````", [Block("code", ("a\n```",))]),
        ("", []),
        ("\n \n\t\n", []),
    ],
    ids=[
        "sentences",
        "version-is-no-sentence-end",
        "wrapped-paragraph",
        "blank-line-splits",
        "heading",
        "quote",
        "list-wrapped-item",
        "ordered-and-starred-items",
        "lead-in-then-list",
        "table-with-header",
        "table-aligned-rule",
        "table-one-dash-rule-no-trailing-pipe",
        "table-without-header",
        "table-header-only",
        "paragraph-then-row",
        "fenced-code",
        "setext-heading",
        "indented-code",
        "loose-list",
        "nested-list",
        "unclosed-fence",
        "tilde-fence",
        "longer-fence",
        "empty",
        "blank",
    ],
)
def test_parse_blocks(text: str, blocks: list[Block]) -> None:
    assert parse_blocks(text) == blocks


FRAGMENT = st.sampled_from(
    [
        "```",
        "~~~",
        "````",
        "```bash",
        "|",
        "| --- |",
        "|---|---|",
        "| a | b |",
        "- ",
        "* ",
        "1. ",
        "# ",
        "> ",
        "  ",
        "\t",
        "\n",
        "\n\n",
        ":",
        ".",
        "…",
        "[1]",
        "server",
        "Install",
        "port",
        "Redis",
        "the",
    ]
)
TEXT = st.lists(st.one_of(FRAGMENT, st.text(max_size=6)), max_size=40).map("".join)
QUERY = st.one_of(TEXT, st.sampled_from(["How do I install the server?", "redis port", "a"]))


@settings(max_examples=400, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    query=QUERY,
    pages=st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=4),
    max_sections=st.integers(1, 8),
    max_chars=st.integers(1, 1000),
)
def test_any_text_composes_without_failing(
    query: str, pages: list[tuple[str, str]], max_sections: int, max_chars: int
) -> None:
    try:
        sources = [
            GroundedSource(id=f"s{n}", title=title, href=f"/docs/s{n}", excerpt=excerpt)
            for n, (excerpt, title) in enumerate(pages, 1)
        ]
    except ValidationError:
        assume(False)
        raise
    for _, excerpt in pages:
        parse_blocks(excerpt)
    answer = compose_answer(query, sources, max_sections=max_sections, max_chars=max_chars)
    assert answer == compose_answer(query, sources, max_sections=max_sections, max_chars=max_chars)
    if answer == NO_GROUNDED_ANSWER:
        return
    heard = {word for s in sources for word in words(s.excerpt + " " + s.title)}
    assert set(words(re.sub(r" \[\d+\]", " ", answer))) <= heard


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (
            "What is the default deadline, and what does the client deadline cover?",
            [("default", "deadlin"), ("client", "deadlin", "cover")],
        ),
        ("How do I declare a route and then capture it?", [("declar", "rout"), ("captur",)]),
        ("Is it signed; when does it expire?", [("sign",), ("expir",)]),
        ("Is it signed? When does it expire?", [("sign",), ("expir",)]),
        # Nouns joined by "and" are one part.
        ("How do I start onboarding and operations?", [("start", "onboard", "oper")]),
        # What comes before a colon is context, lent only to a part with no term of its own.
        ("Angular: which peers go in, and which versions work?", [("peer",), ("version",)]),
        ("Angular: which peers, and which?", [("peer",), ("angular",)]),
        # The same part twice is one part; a part with no content term is dropped.
        ("Is it fast, and is it fast?", [("fast",)]),
        ("What is it?", [()]),
    ],
)
def test_question_parts(question: str, parts: list[tuple[str, ...]]) -> None:
    assert question_parts(question) == parts
