"""The artifact producer: entries declared in front matter, and every malformed block."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat.answers._candidates import ALIAS_LIMIT, CLAIMED
from agentskit_chat.answers._producer import LeftOut
from agentskit_chat.errors import BuildError
from tests.answers._producer_support import (
    assert_valid,
    build,
    entry,
    kinds,
    lookup,
    tree,
)

# --- declared entries -----------------------------------------------------------------------------

DECLARED = """---
knowledge:
  - id: install-cli
    kind: command
    label: Install the CLI
    aliases: [install cli, Install]
    answer: |
      Run `pip install agentskit-chat`.
    citations:
      - id: quickstart
        title: Quickstart
        href: "#setup"
      - title: PyPI page
        href: https://pypi.org/project/agentskit-chat/
  - kind: restricted-faq
    label: Who maintains this?
    answer: The agentskit-chat developers.
---
# Install

## Setup

## Install
"""


def test_declared_entries_come_first_and_win_their_aliases(tmp_path: Path) -> None:
    result = build(tree(tmp_path, {"getting-started.md": DECLARED}))
    first, second = result.artifact.entries[:2]
    assert first.to_wire() == {
        "id": "install-cli",
        "kind": "command",
        "label": "Install the CLI",
        "match": {"type": "exact", "values": ["install cli", "Install"]},
        "answer": {
            "markdown": "Run `pip install agentskit-chat`.",
            "citations": [
                {
                    "id": "quickstart",
                    "title": "Quickstart",
                    "href": "/docs/getting-started#setup",
                },
                {
                    "id": "pypi-page",
                    "title": "PyPI page",
                    "href": "https://pypi.org/project/agentskit-chat/",
                },
            ],
        },
    }
    assert second.id == "getting-started-who-maintains-this"
    assert second.match.values == ("Who maintains this?",)
    assert [c.href for c in second.answer.citations] == ["/docs/getting-started"]
    # "Install" is claimed: the document keeps its path alias, the heading is left out.
    assert lookup(result, "install") == ("install-cli",)
    assert entry(result, "doc-getting-started").match.values == ("getting-started",)
    assert [n.label for n in kinds(result, "navigation")] == ["Setup"]
    assert result.left_out == (
        LeftOut("alias", "getting-started.md", "Install", CLAIMED),
        LeftOut("navigation", "getting-started.md", "Install", CLAIMED),
    )
    assert result.stats.declared == 2
    assert_valid(result)


def test_declared_entries_sharing_an_alias_get_unique_aliases(tmp_path: Path) -> None:
    entries = "".join(
        f"  - kind: document\n    label: Docs {n}\n    aliases: [docs]\n    answer: Docs {n}.\n"
        for n in (1, 2)
    )
    result = build(tree(tmp_path, {"a.md": f"---\nknowledge:\n{entries}---\n# Home\n"}))
    ids = lookup(result, "docs")
    assert len(ids) == 2
    assert [entry(result, i).match.values for i in ids] == [
        ("docs", "docs (Home)"),
        ("docs", "docs (Home 2)"),
    ]


def test_an_entry_with_sixteen_shared_aliases_trades_one_for_a_unique_alias(
    tmp_path: Path,
) -> None:
    aliases = ", ".join(f"a{i}" for i in range(16))
    item = f"  - kind: document\n    label: L\n    aliases: [{aliases}]\n    answer: x\n"
    result = build(tree(tmp_path, {"a.md": f"---\nknowledge:\n{item}{item}---\n# Home\n"}))
    values = [e.match.values for e in result.artifact.entries[:2]]
    assert [len(v) for v in values] == [16, 16]
    assert values[0][-1] == "a0 (Home)"
    assert LeftOut("alias", "a.md", "a15", ALIAS_LIMIT) in result.left_out
    assert_valid(result)


LONG = "x" * 257
BAD_FRONT_MATTER: list[tuple[str, str, int, str]] = [
    ("unclosed", "---\ntitle: x\n# T\n", 1, "never closed"),
    ("yaml syntax", "---\ntitle: ok\nother: [a, b\n---\n# T\n", 3, "not valid YAML"),
    ("yaml tab", "---\ntitle: ok\n\tfoo: bar\n---\n", 3, "not valid YAML"),
    ("yaml control character", "---\n\x1f\n---\n# T\n", 1, "not valid YAML"),
    ("not a mapping", "---\n- a\n---\n", 2, "must be a YAML mapping"),
    ("title type", "---\nx: 1\ntitle: 3\n---\n", 3, "`title` must be a non-blank string"),
    ("knowledge type", "---\nknowledge: yes\n---\n", 2, "`knowledge` must be a list"),
    ("entry type", "---\nknowledge:\n  - just text\n---\n", 3, "must be a mapping"),
    (
        "unknown key",
        "---\nknowledge:\n  - kind: command\n    label: L\n    alias: [x]\n    answer: A\n---\n",
        5,
        "unknown key `alias`",
    ),
    (
        "bad kind",
        "---\nknowledge:\n  - label: L\n    kind: faq\n    answer: A\n---\n",
        4,
        "`kind` must be one of command, package",
    ),
    (
        "label too long",
        f"---\nknowledge:\n  - kind: command\n    label: {LONG}\n    answer: A\n---\n",
        4,
        "`label` is longer than 256",
    ),
    (
        "blank label",
        "---\nknowledge:\n  - kind: command\n    label: '  '\n    answer: A\n---\n",
        4,
        "`label` must be a non-blank string",
    ),
    (
        "missing answer",
        "---\nknowledge:\n  - kind: command\n    label: L\n---\n",
        3,
        "`answer` must be a non-blank string",
    ),
    (
        "answer too long",
        "---\nknowledge:\n  - kind: command\n    label: L\n    answer: " + "y" * 16385 + "\n---\n",
        5,
        "`answer` is longer than 16384",
    ),
    (
        "too many aliases",
        "---\nknowledge:\n  - kind: command\n    label: L\n    answer: A\n    aliases: ["
        + ", ".join(f"a{i}" for i in range(17))
        + "]\n---\n",
        6,
        "`aliases` must be a list of 1 to 16",
    ),
    (
        "alias too long once normalized",
        "---\nknowledge:\n  - kind: command\n    label: L\n    answer: A\n    aliases:\n"
        "      - ok\n      - " + "\ufdfa" * 100 + "\n---\n",
        8,
        "`aliases[2]` is longer than 512 UTF-16 code units once normalized",
    ),
    (
        "duplicate alias",
        "---\nknowledge:\n  - kind: command\n    label: L\n    answer: A\n    aliases:\n"
        "      - Install CLI\n      - install  cli\n---\n",
        8,
        "`aliases[2]` repeats an earlier alias",
    ),
    (
        "too many citations",
        "---\nknowledge:\n  - kind: command\n    label: L\n    answer: A\n    citations:\n"
        + "      - {title: T, href: /x}\n" * 9
        + "---\n",
        6,
        "`citations` must be a list of at most 8",
    ),
    (
        "unsafe citation",
        "---\nknowledge:\n  - kind: command\n    label: L\n    answer: A\n    citations:\n"
        "      - {title: T, href: /x}\n      - {title: T, href: 'javascript:alert(1)'}\n---\n",
        8,
        "citation 2: `href` is not a safe link",
    ),
    (
        "citation shape",
        "---\nknowledge:\n  - kind: command\n    label: L\n    answer: A\n    citations:\n"
        "      - {title: T, url: /x}\n---\n",
        7,
        "citation 1 must be a mapping",
    ),
    (
        "bad id",
        "---\nknowledge:\n  - kind: command\n    id: -bad\n    label: L\n    answer: A\n---\n",
        4,
        "`id` must be a safe identifier",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [case[1:] for case in BAD_FRONT_MATTER],
    ids=[case[0] for case in BAD_FRONT_MATTER],
)
def test_bad_front_matter_names_the_file_and_line(
    tmp_path: Path, text: str, line: int, reason: str
) -> None:
    tree(tmp_path, {"a.md": "# A\n", "sub/bad.md": text})
    with pytest.raises(BuildError) as caught:
        build(tmp_path)
    error = caught.value
    assert (error.file, error.line) == (str(tmp_path / "sub" / "bad.md"), line)
    assert reason in error.reason
    assert str(error) == f"{tmp_path / 'sub' / 'bad.md'}:{line}: {error.reason}"


def test_a_declared_id_used_twice_names_the_second_place(tmp_path: Path) -> None:
    same = "  - id: same\n    kind: command\n    label: L\n    answer: A\n"
    other = "  - kind: command\n    label: Other\n    answer: B\n"
    tree(
        tmp_path,
        {
            "a.md": f"---\nknowledge:\n{same}---\n",
            "b.md": f"---\nknowledge:\n{other}{same}---\n",
        },
    )
    with pytest.raises(BuildError, match="`same` is declared twice") as caught:
        build(tmp_path)
    assert (caught.value.file, caught.value.line) == (str(tmp_path / "b.md"), 6)


def test_invalid_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    tree(tmp_path, {"a.md": b"# A\n\nok\n\xff\n"})
    with pytest.raises(BuildError, match="not valid UTF-8") as caught:
        build(tmp_path)
    assert (caught.value.file, caught.value.line) == (str(tmp_path / "a.md"), 4)


def test_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    tree(tmp_path, {"a.md": b"\xef\xbb\xbf---\r\ntitle: x\r\n---\r\n# Title\r\n\r\n## Part\r\n"})
    result = build(tmp_path)
    assert kinds(result, "document")[0].label == "Title"
    assert kinds(result, "navigation")[0].label == "Part"


def test_a_document_whose_aliases_are_all_claimed_is_left_out(tmp_path: Path) -> None:
    text = "---\nknowledge:\n  - kind: document\n    label: Mine\n    aliases: [FAQ]\n"
    result = build(tree(tmp_path, {"faq.md": text + "    answer: Mine.\n---\n# FAQ\n"}))
    assert [e.kind for e in result.artifact.entries] == ["document"]
    assert result.artifact.entries[0].label == "Mine"
    assert LeftOut("document", "faq.md", "FAQ", CLAIMED) in result.left_out
