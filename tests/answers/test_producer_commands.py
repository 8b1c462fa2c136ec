"""Commands and package names a page mentions: exact entries of that page, when unambiguous."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from agentskit_chat.answers import (
    ArtifactBuild,
    DeterministicAnswerResolver,
    LeftOut,
    SourceDocument,
    build_local_knowledge_artifact,
    create_deterministic_answer_resolver,
)
from agentskit_chat.answers._candidates import CLAIMED, MENTION_SHARED, MENTION_TAKEN
from agentskit_chat.answers._mentions import MENTION_UNITS, code_span_mentions
from agentskit_chat.protocol import EscalationAnswer, ExactAnswer, KnowledgeEntry
from tests.answers._producer_support import STAMP, assert_valid, entry, lookup


def build_pages(pages: Mapping[str, str]) -> ArtifactBuild:
    documents = [SourceDocument.from_text(path, text) for path, text in pages.items()]
    return build_local_knowledge_artifact(documents, site_id="docs-site", generated_at=STAMP)


def resolver_of(result: ArtifactBuild) -> DeterministicAnswerResolver:
    return create_deterministic_answer_resolver(
        result.artifact_json,
        expected_content_hash=result.site_config.artifact.content_hash,
        expected_site_id=result.site_config.site_id,
        now=lambda: datetime(2026, 7, 13, 12, tzinfo=UTC),
    )


def mentions(result: ArtifactBuild) -> list[KnowledgeEntry]:
    return [e for e in result.artifact.entries if e.id.startswith(("code-", "pkg-"))]


def assert_answers_page(result: ArtifactBuild, query: str, page: str) -> None:
    """``query`` answers ``page`` exactly, with the page's own answer and link."""
    envelope = resolver_of(result).resolve(query)
    assert isinstance(envelope, ExactAnswer), (query, envelope)
    document = entry(result, f"doc-{page}")
    assert envelope.answer.markdown == document.answer.markdown
    assert [c.href for c in envelope.answer.citations] == [f"/docs/{page}"]
    assert [c.title for c in envelope.answer.citations] == [document.label]


# --- which code spans are mentions ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        ("pnpm catalog:report", [("pnpm catalog:report", "command")]),
        ("  make serve ", [("make serve", "command")]),
        ("@scope/name", [("@scope/name", "package")]),
        ("@agentskit/chat/react", [("@agentskit/chat/react", "package")]),
        (
            "pip install agentskit-chat",
            [("pip install agentskit-chat", "command"), ("agentskit-chat", "package")],
        ),
        (
            "npm install @agentskit/chat",
            [("npm install @agentskit/chat", "command"), ("@agentskit/chat", "package")],
        ),
        (
            "npm i -D @s/cli@1.2 react",
            [("npm i -D @s/cli@1.2 react", "command"), ("@s/cli", "package"), ("react", "package")],
        ),
        (
            "pip install 'agentskit-chat[llm]>=1'",
            [
                ("pip install 'agentskit-chat[llm]>=1'", "command"),
                ("agentskit-chat[llm]", "package"),
            ],
        ),
        (
            "python -m pip install httpx",
            [("python -m pip install httpx", "command"), ("httpx", "package")],
        ),
        (
            "pip install -r requirements.txt",
            [("pip install -r requirements.txt", "command")],
        ),
        ("pnpm add x && pnpm build", [("pnpm add x && pnpm build", "command"), ("x", "package")]),
        ("pip install ./dist/x.whl", [("pip install ./dist/x.whl", "command")]),
        ("go test ./...", [("go test ./...", "command")]),
        # Not mentions: no arguments, not a known tool, placeholders, too long, not a name.
        ("make", []),
        ("pnpm", []),
        ("cat notes.txt", []),
        ("agentskit-chat artifact build docs", []),
        ("pnpm add <package>", []),
        ("pip install {name}", []),
        ("npm run [script]", []),
        ("make ...", []),
        ("npm run …", []),
        ("pnpm " + "x" * (MENTION_UNITS - 5), [("pnpm " + "x" * (MENTION_UNITS - 5), "command")]),
        ("pnpm " + "x" * (MENTION_UNITS - 4), []),
        ("@Scope/Name", []),
        ("@scope", []),
        ("@scope/name@1.2.3", []),
        ("agentskit-chat", []),
        ("   ", []),
        ("", []),
    ],
)
def test_which_code_spans_are_mentions(span: str, expected: list[tuple[str, str]]) -> None:
    assert list(code_span_mentions(span)) == expected


# --- a mention on one page answers that page ------------------------------------------------------

ONE_PAGE = [
    ("Run `pnpm catalog:report` to list it.", "pnpm catalog:report", "command"),
    ("Import `@scope/name`.", "@scope/name", "package"),
    ("Install with `pip install agentskit-chat`.", "pip install agentskit-chat", "command"),
    ("Install with `pip install agentskit-chat`.", "agentskit-chat", "package"),
    ("Add `npm install @agentskit/chat`.", "npm install @agentskit/chat", "command"),
    ("Add `npm install @agentskit/chat`.", "@agentskit/chat", "package"),
    ("Start `make serve`, then `make serve` again.", "make serve", "command"),
    ("Add `pnpm add @x/y left-pad` first.", "left-pad", "package"),
    ("- `npm install --save-dev left-pad@2`", "left-pad", "package"),
    ("## Use `uv add httpx`\n", "httpx", "package"),
]


@pytest.mark.parametrize(("body", "query", "kind"), ONE_PAGE)
def test_a_mention_on_one_page_answers_that_page(body: str, query: str, kind: str) -> None:
    result = build_pages(
        {"guide.md": f"# Guide\n\nThe intro.\n\n{body}\n", "other.md": "# Other\n"}
    )
    assert_answers_page(result, query, "guide")
    assert_answers_page(result, f"  {query.upper()} ", "guide")  # normalized like any alias
    (found,) = [e for e in mentions(result) if e.match.values == (query,)]
    assert (found.kind, found.label) == (kind, query)
    assert_valid(result)


def test_a_mention_written_several_times_on_one_page_is_one_entry() -> None:
    body = "`make serve` here, `make  serve` there, and\n\n`pnpm add @x/y`, then `@x/y`.\n"
    result = build_pages({"guide.md": f"# Guide\n\n{body}"})
    assert [(e.kind, e.match.values) for e in mentions(result)] == [
        ("command", ("make serve",)),
        ("command", ("pnpm add @x/y",)),
        ("package", ("@x/y",)),
    ]
    assert result.stats.mentions == 3
    assert result.left_out == ()


def test_mentions_come_after_every_other_entry() -> None:
    page = "# {0}\n\nRun `make {0}`.\n\n## {0} section\n\n```sh\n{0}-cmd\n```\n"
    result = build_pages({"a.md": page.format("A"), "b.md": page.format("B")})
    assert [e.kind for e in result.artifact.entries] == [
        "document",
        "document",
        "command",
        "command",
        "navigation",
        "navigation",
        "command",
        "command",
    ]
    assert [e.id for e in mentions(result)] == ["code-a-make-a", "code-b-make-b"]


# --- ambiguity and collisions: no entry, and a reason ---------------------------------------------

SHARED = [
    ("inline on both", "Run `make serve`.", "Run `make serve`.", "make serve", "command"),
    ("letter case", "Run `make serve`.", "Run `make  Serve`.", "make serve", "command"),
    ("named and installed", "Use `@x/y`.", "Run `npm install @x/y`.", "@x/y", "package"),
    ("installed on both", "`pip install rich`", "`pip install -U rich`", "rich", "package"),
]


@pytest.mark.parametrize(
    ("first", "second", "query", "kind"),
    [case[1:] for case in SHARED],
    ids=[case[0] for case in SHARED],
)
def test_a_mention_on_two_pages_answers_neither(
    first: str, second: str, query: str, kind: str
) -> None:
    result = build_pages({"a.md": f"# A\n\n{first}\n", "b.md": f"# B\n\n{second}\n"})
    assert lookup(result, query) == ()
    escalation = resolver_of(result).resolve(query)
    assert isinstance(escalation, EscalationAnswer)
    assert escalation.reason == "miss"
    left = [item for item in result.left_out if item.reason == MENTION_SHARED]
    assert [(item.kind, item.file) for item in left if item.kind == kind] == [
        (kind, "a.md"),
        (kind, "b.md"),
    ]
    assert_valid(result)


TAKEN = [
    ("a heading", {"a.md": "# A\n\n## make serve\n", "b.md": "# B\n\nRun `make serve`.\n"}, "nav"),
    ("a heading, same page", {"a.md": "# A\n\n## make serve\n\nRun `make serve`.\n"}, "nav"),
    ("a title", {"a.md": "# make serve\n", "b.md": "# B\n\nRun `make serve`.\n"}, "doc"),
    ("a command block", {"a.md": "# A\n\n```sh\nmake serve\n```\n\nRun `make serve`.\n"}, "cmd"),
    (
        "a command block elsewhere",
        {"a.md": "# A\n\n```sh\nmake serve\n```\n", "b.md": "# B\n\nRun `make serve`.\n"},
        "cmd",
    ),
]


@pytest.mark.parametrize(
    ("pages", "winner"), [case[1:] for case in TAKEN], ids=[case[0] for case in TAKEN]
)
def test_titles_headings_and_command_blocks_keep_their_alias(
    pages: dict[str, str], winner: str
) -> None:
    result = build_pages(pages)
    (owner,) = lookup(result, "make serve")
    assert owner.startswith(f"{winner}-")
    assert mentions(result) == []
    assert [item.reason for item in result.left_out if item.kind == "command"] == [MENTION_TAKEN]
    assert_valid(result)


def test_a_declared_alias_keeps_it() -> None:
    front = "---\nknowledge:\n  - {kind: command, label: Serve, aliases: [make serve], answer: X}\n"
    result = build_pages({"a.md": f"{front}---\n# A\n", "b.md": "# B\n\nRun `make serve`.\n"})
    assert lookup(result, "make serve") == (result.artifact.entries[0].id,)
    assert mentions(result) == []
    assert LeftOut("command", "b.md", "make serve", CLAIMED) in result.left_out


@pytest.mark.parametrize(
    "body",
    [
        "Run `pnpm add <package>`.",
        "Run `pip install {name}`.",
        "Run `make ...`.",
        "Run `pnpm " + "x" * MENTION_UNITS + "`.",
        "Run `cat notes.txt` and `make`.",
        "Run `@Scope/Name`.",
        "```python\npip install in-python\n```",
        "```sh\npnpm add @x/y\n```",  # a command block's line is a command entry, not a mention
    ],
)
def test_placeholders_and_long_or_unknown_spans_make_no_entry(body: str) -> None:
    result = build_pages({"a.md": f"# A\n\n{body}\n"})
    assert mentions(result) == []
    assert lookup(result, "@x/y") == ()
    assert result.left_out == ()


# --- nothing approximate answers ------------------------------------------------------------------

NEAR_PAGE = """# Guide

Run `pnpm catalog:report`, import `@scope/name` and install `pip install agentskit-chat`.
"""


@pytest.mark.parametrize(
    "query",
    [
        "pnpm catalog:reporr",  # one letter off
        "pnpm catalog:repor",  # one letter short
        "pnpm catalog report",
        "catalog:report pnpm",  # reordered
        "pnpm catalog:report now",  # an extra word
        "run pnpm catalog:report",
        "catalog:report",
        "@scope/nane",
        "scope/name",
        "@scope/name/extra",
        "pip install agentskit-chats",
        "install pip agentskit-chat",
        "agentskit-chat pip install",
        "pip install agentskit-chat --upgrade",
        "agentskit-cha",
        "agentskit chat",
    ],
)
def test_near_misses_escalate(query: str) -> None:
    result = build_pages({"guide.md": NEAR_PAGE})
    assert len(mentions(result)) == 4
    envelope = resolver_of(result).resolve(query)
    assert isinstance(envelope, EscalationAnswer), envelope
    assert envelope.reason == "miss"
