"""The extractive generator: answers that keep the sources' structure (paragraphs, lists, tables,
commands), cite each section, stay within bounds, are deterministic, and are honest when nothing
matches."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat._terms import content_terms, term_set, words
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.generation import NO_GROUNDED_ANSWER, ExtractiveGenerator
from agentskit_chat.protocol import AskMessage, AskUsage, BackendSiteConfig, GroundedSource
from agentskit_chat.service import (
    AskService,
    CitedSources,
    GenerationRequest,
    TextDelta,
    UsageReport,
)

pytestmark = pytest.mark.anyio

SITE = BackendSiteConfig.model_validate(
    {
        "protocol": "agentskit.chat.backend-site",
        "version": 1,
        "siteId": "docs",
        "assistant": {"id": "docs-guide", "name": "Docs", "suggestions": []},
        "corpus": {"id": "docs-public", "mode": "local"},
        "components": [],
        "actions": [],
        "limits": {
            "requestTimeoutMs": 5000,
            "retrievalTimeoutMs": 1000,
            "generationTimeoutMs": 5000,
            "maxSources": 5,
        },
        "persistence": {"mode": "disabled"},
    }
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def source(n: int, excerpt: str, title: str | None = None) -> GroundedSource:
    return GroundedSource(
        id=f"s{n}", title=title or f"Source {n}", href=f"/docs/s{n}", excerpt=excerpt
    )


SERVING = source(
    1,
    "# Serving\n\nRun `make serve` to start the server. The server listens on port 8000 by "
    "default.\nIt reloads when files change.\n\n- Pass --port to choose another port.\n",
)
SERVING_LEAD = (
    "Run `make serve` to start the server. The server listens on port 8000 by default. "
    "It reloads when files change"
)
STORAGE = source(
    2,
    "Sessions are stored in SQLite by default. PostgreSQL and Redis stores are available "
    "for shared deployments.\n\n```python\nstore = open_store('redis://localhost')\n```\n",
)
LIMITS = source(3, "Each site has a request timeout. Retrieval has its own timeout too.")
RETRIEVAL = source(
    1,
    "Retrieval reads the corpus index before every question and keeps the ranked sections "
    "in memory. Retrieval reads the corpus index again when the artifact changes on disk. "
    "The retrieval timeout is one second by default. It can be raised per site. Other "
    "settings live in the site file and are read at startup by the service process.",
    "Retrieval",
)
TOKENS = source(
    1, "Tokens expire after one hour. Refresh them with the refresh endpoint.", "Tokens"
)
TOKENS_LEAD = "Tokens expire after one hour. Refresh them with the refresh endpoint"
ORIGINS = source(
    2,
    "Allowed origins are listed in the site config. Requests from other origins are refused.",
    "Origins",
)
ORIGINS_LEAD = (
    "Allowed origins are listed in the site config. Requests from other origins are refused"
)


def request(query: str, *sources: GroundedSource) -> GenerationRequest:
    return GenerationRequest(
        query=query,
        messages=(AskMessage(role="user", content=query),),
        site=SITE,
        sources=tuple(sources),
    )


async def run(generator: ExtractiveGenerator, req: GenerationRequest) -> tuple[str, AskUsage]:
    text: list[str] = []
    usage: list[Any] = []
    async for chunk in generator.generate(req):
        if isinstance(chunk, TextDelta):
            text.append(chunk.delta)
        elif isinstance(chunk, UsageReport):
            usage.append(chunk.usage)
    assert len(usage) == 1
    return "".join(text), usage[0]


def compose(query: str, *sources: GroundedSource, **options: Any) -> str:
    return ExtractiveGenerator(**options).compose(query, sources)


# --- paragraphs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "sources", "options", "lead"),
    [
        (
            "Which port does the server listen on?",
            [SERVING, STORAGE, LIMITS],
            {},
            SERVING_LEAD + " [1].",
        ),
        (
            "Where are sessions stored?",
            [SERVING, STORAGE, LIMITS],
            {},
            "Sessions are stored in SQLite by default. PostgreSQL and Redis stores are "
            "available for shared deployments [2].",
        ),
        (
            "What is the retrieval timeout?",
            [SERVING, STORAGE, LIMITS],
            {},
            "Each site has a request timeout. Retrieval has its own timeout too [3].",
        ),
        (
            "When do tokens expire?",
            [ORIGINS, TOKENS],
            {},
            TOKENS_LEAD + " [2].",
        ),
        (
            "How is a server configured?",
            [source(1, "Configuring the SERVERS happens in one file.")],
            {},
            "Configuring the SERVERS happens in one file [1].",
        ),
        (
            "Is the serving page there?",
            [source(1, "# Serving\n\nRun it.")],
            {},
            "Serving [1].",
        ),
        (
            # A paragraph too long for the budget: the best sentence and the next one.
            "What is the retrieval timeout?",
            [RETRIEVAL],
            {"max_answer_chars": 200},
            "The retrieval timeout is one second by default. It can be raised per site [1].",
        ),
        (
            # The same paragraph within budget comes whole.
            "What is the retrieval timeout?",
            [RETRIEVAL],
            {},
            RETRIEVAL.excerpt[:-1] + " [1].",
        ),
    ],
    ids=[
        "first-source",
        "second-source",
        "third-source",
        "cites-position-not-id",
        "inflections-and-case",
        "heading-without-marker",
        "long-paragraph-windowed",
        "short-paragraph-whole",
    ],
)
def test_a_paragraph_answer_leads_with_the_best_sentences_paragraph_cited(
    query: str, sources: list[GroundedSource], options: dict[str, Any], lead: str
) -> None:
    answer = compose(query, *sources, **options)
    assert answer.split("\n\n")[0] == lead
    assert "#" not in answer


def test_a_passage_two_sections_share_is_quoted_once() -> None:
    reload = "```\nagentskit reload\n```"
    tokens = source(1, f"Tokens expire after one hour.\n\n{reload}", "Tokens")
    origins = source(2, f"Allowed origins are listed in the site config.\n\n{reload}", "Origins")
    answer = compose(
        "How do I configure when tokens expire and which origins are allowed?", tokens, origins
    )
    assert answer.split("\n\n") == [
        "Tokens expire after one hour [1].",
        reload,
        "Allowed origins are listed in the site config [2].",
    ]


def test_duplicate_passages_are_quoted_once() -> None:
    twice = [source(1, "Tokens expire after one hour."), source(2, "Tokens expire after one hour.")]
    assert ExtractiveGenerator().compose("When do tokens expire?", twice) == (
        "Tokens expire after one hour [1]."
    )


# --- lists --------------------------------------------------------------------------------------

STORES = source(
    1,
    "Sessions can live in several places.\n\nThe supported stores are:\n\n"
    "- SQLite for a single node.\n- PostgreSQL for shared deployments.\n"
    "- Redis for fast sessions.\n",
    "Stores",
)
STORES_LIST = (
    "- SQLite for a single node.\n- PostgreSQL for shared deployments.\n- Redis for fast sessions."
)
MANY_STORES = source(
    1,
    "The supported stores are:\n\n"
    + "\n".join(f"- Store number {i} keeps item{i}{' warm' * (i == 7)}." for i in range(10))
    + "\n",
    "Stores",
)


@pytest.mark.parametrize(
    ("query", "src", "options", "expected"),
    [
        (
            "Which stores are supported?",
            STORES,
            {},
            "The supported stores are [1]:\n\n" + STORES_LIST,
        ),
        (
            # An item is the best match: the lead-in still comes first, the list whole.
            "Which one suits shared deployments?",
            STORES,
            {},
            "The supported stores are [1]:\n\n" + STORES_LIST,
        ),
        (
            "How do I tag a release?",
            source(
                1,
                "Release steps:\n\n1. Bump the version.\n2. Tag the release.\n3. Push the tag.",
                "Releasing",
            ),
            {},
            "Release steps [1]:\n\n1. Bump the version.\n2. Tag the release.\n3. Push the tag.",
        ),
        (
            # No lead-in: the section's title leads, cited.
            "Which is for fast sessions?",
            source(1, "- SQLite for a single node.\n- Redis for fast sessions.", "Stores"),
            {},
            "Stores [1]:\n\n- SQLite for a single node.\n- Redis for fast sessions.",
        ),
        (
            # Over budget: the best-matching items, in the list's order (not the question's).
            "Which store keeps item3 or item7 warm?",
            MANY_STORES,
            {"max_answer_chars": 100},
            "The supported stores are [1]:\n\n- Store number 3 keeps item3.\n"
            "- Store number 7 keeps item7 warm.\n- …",
        ),
        (
            # Over budget, numbered: the "…" item takes the next number.
            "How do I push the tag to the remote?",
            source(
                1,
                "Release steps:\n\n1. Bump the version in the package metadata.\n"
                "2. Tag the release with its version.\n3. Push the tag to the remote.\n"
                "4. Announce the release on the list.\n5. Close the milestone of the release.",
                "Releasing",
            ),
            {"max_answer_chars": 60},
            "Release steps [1]:\n\n3. Push the tag to the remote.\n4. …",
        ),
    ],
    ids=[
        "lead-in-matches",
        "item-matches",
        "numbered",
        "no-lead-in",
        "over-budget",
        "numbered-over-budget",
    ],
)
def test_a_list_answer_keeps_its_lead_in_and_items(
    query: str, src: GroundedSource, options: dict[str, Any], expected: str
) -> None:
    assert compose(query, src, **options) == expected


# --- tables -------------------------------------------------------------------------------------

PLANS_TABLE = (
    "| Plan | Requests per minute |\n| --- | --- |\n| Free | 60 |\n| Team | 600 |\n"
    "| Enterprise | 6000 |"
)
PLANS = source(1, "Each plan has its own limits:\n\n" + PLANS_TABLE + "\n", "Rate limits")
BARE_PLANS = source(1, PLANS_TABLE.replace("| --- | --- |", "|:---|---:|") + "\n", "Rate limits")
MANY_PLANS = source(
    1,
    "| Plan | Limit | Burst |\n|---|---|---|\n"
    + "\n".join(f"| Plan{i} | {i * 10} | {i} |" for i in range(12))
    + "\n",
    "Plans",
)


@pytest.mark.parametrize(
    ("query", "src", "options", "expected"),
    [
        (
            "What limit does the Team plan have?",
            PLANS,
            {},
            (
                "Each plan has its own limits [1]:",
                "| Plan | Requests per minute |",
                ["| Free | 60 |", "| Team | 600 |", "| Enterprise | 6000 |"],
            ),
        ),
        (
            "How much does the Enterprise tier allow?",
            BARE_PLANS,
            {},
            (
                "Rate limits [1]:",
                "| Plan | Requests per minute |",
                ["| Free | 60 |", "| Team | 600 |", "| Enterprise | 6000 |"],
            ),
        ),
        (
            "What is the burst of plan4 and plan9?",
            MANY_PLANS,
            # Room for the title, the header and its rule, two rows and the row "…".
            {"max_answer_chars": 113},
            (
                "Plans [1]:",
                "| Plan | Limit | Burst |",
                ["| Plan4 | 40 | 4 |", "| Plan9 | 90 | 9 |"],
            ),
        ),
    ],
    ids=["lead-in", "title-leads", "over-budget"],
)
def test_a_table_answer_stays_a_markdown_table(
    query: str,
    src: GroundedSource,
    options: dict[str, Any],
    expected: tuple[str, str, list[str]],
) -> None:
    lead, header, rows = expected
    answer = compose(query, src, **options)
    first, table, *rest = answer.split("\n\n")
    assert first == lead
    assert not rest
    header_line, rule, *body = table.split("\n")
    columns = header.count("|") - 1
    assert header_line == header
    assert rule == "|" + " --- |" * columns
    # Row by row, every line one row: never a flattened line of pipes.
    assert all(line.count("|") == columns + 1 for line in body)
    if options:
        # Rows were left out, and the last row says so.
        assert len(body) < 12
        assert body.pop() == "| … |" + "  |" * (columns - 1)
    assert set(rows) <= set(body)
    assert body == sorted(body, key=src.excerpt.index)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            "| Plan | Rate |\n|:-|-:|\n| Free | 60 |\n| Team | 600 |",
            "| Plan | Rate |\n| --- | --- |\n| Free | 60 |\n| Team | 600 |",
        ),
        (
            # Rows are written again from their cells: every one closed by its pipe.
            "| Plan | Rate\n| --- | ---\n| Free | 60\n| Team | 600",
            "| Plan | Rate |\n| --- | --- |\n| Free | 60 |\n| Team | 600 |",
        ),
    ],
    ids=["short-aligned-rule", "no-trailing-pipes"],
)
def test_a_table_keeps_its_header_however_its_rule_is_written(table: str, expected: str) -> None:
    answer = compose("What rate does the Team plan get?", source(1, table, "Limits"))
    assert answer == f"Limits [1]:\n\n{expected}"


def test_a_cut_table_counts_its_title_and_header_so_a_second_section_still_fits() -> None:
    # The second part's table did not fit whole; its title, header and best row do.
    install = source(1, "Install the widget with the installer:\n\n```\npip install widget\n```\n")
    matrix = source(
        2,
        "| Renderer | Needs |\n| --- | --- |\n| Web | React 18+ |\n| Terminal | Ink 7.1+ |\n"
        "| Mobile | Expo 50 |\n",
        "Compatibility matrix",
    )
    question = "How do I install the widget, and which Ink version does the terminal need?"
    answer = compose(question, install, matrix, max_answer_chars=170)
    assert len(answer) <= 170
    assert answer.split("\n\n") == [
        "Install the widget with the installer [1]:",
        "```\npip install widget\n```",
        "Compatibility matrix [2]:",
        "| Renderer | Needs |\n| --- | --- |\n| Terminal | Ink 7.1+ |\n| … |  |",
    ]


# --- code ---------------------------------------------------------------------------------------

SETUP = source(1, "Set up the CLI from PyPI.\n\n```bash\npip install agentskit-chat\n```\n", "CLI")
INSTALL = source(
    1,
    "The CLI ships as a Python package.\n\n```bash\npipx run agentskit-chat --version\n```\n",
    "CLI",
)
# Code keeps its language.
COMMAND = "```bash\npip install agentskit-chat\n```"


@pytest.mark.parametrize(
    ("query", "src", "expected"),
    [
        ("How do I set up the CLI?", SETUP, f"Set up the CLI from PyPI [1].\n\n{COMMAND}"),
        ("How do I deploy the CLI?", SETUP, f"Set up the CLI from PyPI [1].\n\n{COMMAND}"),
        (
            "How do I install the CLI?",
            INSTALL,
            "The CLI ships as a Python package [1].\n\n"
            "```bash\npipx run agentskit-chat --version\n```",
        ),
        ("What is the CLI?", SETUP, "Set up the CLI from PyPI [1]."),
        ("Where does the CLI come from?", INSTALL, "The CLI ships as a Python package [1]."),
        # The code is the best match: shown whatever the question asks.
        ("Which package name goes to pip?", SETUP, f"CLI [1]:\n\n{COMMAND}"),
        (
            # ... and the prose around it that answers too leads, in the page's order.
            "What does open_store take?",
            STORAGE,
            "Sessions are stored in SQLite by default. PostgreSQL and Redis stores are "
            "available for shared deployments [1].\n\n"
            "```python\nstore = open_store('redis://localhost')\n```",
        ),
    ],
    ids=[
        "set-up",
        "deploy",
        "install",
        "not-doing",
        "not-doing-install-page",
        "code-best-match",
        "code-best-match-prose-first",
    ],
)
def test_code_is_shown_for_doing_questions_or_when_it_matches_best(
    query: str, src: GroundedSource, expected: str
) -> None:
    assert ExtractiveGenerator().compose(query, [src]) == expected


def test_the_code_that_answers_is_shown_whole() -> None:
    script = "\n".join(f"step{i} --flag" for i in range(20))
    answer = compose("How do I run step3?", source(1, f"```sh\n{script}\n```", "Script"))
    assert answer.split("\n\n")[1] == f"```sh\n{script}\n```"


def test_very_long_code_is_cut_with_a_mark() -> None:
    script = "\n".join(f"step{i} --flag" for i in range(50))
    answer = compose("How do I run step3?", source(1, f"```sh\n{script}\n```", "Script"))
    code = answer.split("\n\n")[1]
    assert code.startswith("```sh\nstep0 --flag\n")
    assert code.endswith("step39 --flag\n…\n```")


# --- sections -----------------------------------------------------------------------------------

KEYS = source(2, "Keys are rotated monthly.", "Keys")
SIGNING = source(2, "Tokens are signed with the site key.", "Signing")
EXPIRY = source(2, "Signed tokens expire with the site key.", "Signing")
REPORTS = source(2, "A monthly report is sent.", "Reports")


@pytest.mark.parametrize(
    ("query", "sources", "options", "expected"),
    [
        (
            "When do tokens expire and which origins are allowed?",
            [TOKENS, ORIGINS],
            {},
            [TOKENS_LEAD + " [1].", ORIGINS_LEAD + " [2]."],
        ),
        (
            # A question with parts is answered part by part, in the question's order.
            "Are keys rotated, and when do refresh tokens expire?",
            [TOKENS, KEYS],
            {},
            ["Keys are rotated monthly [2].", TOKENS_LEAD + " [1]."],
        ),
        ("When do tokens expire?", [TOKENS, ORIGINS], {}, [TOKENS_LEAD + " [1]."]),
        # The second section holds only terms the first covers: no padding.
        ("When do tokens expire?", [TOKENS, SIGNING], {}, [TOKENS_LEAD + " [1]."]),
        ("When do tokens expire?", [TOKENS, EXPIRY], {}, [TOKENS_LEAD + " [1]."]),
        # A new term, but its section is less than half as good as the first.
        (
            "When do refresh tokens expire after an hour for the report?",
            [TOKENS, REPORTS],
            {},
            [TOKENS_LEAD + " [1]."],
        ),
        # As a part of its own, the same weak section answers that part.
        (
            "When do refresh tokens expire after an hour, and what is the report?",
            [TOKENS, REPORTS],
            {},
            [TOKENS_LEAD + " [1].", "A monthly report is sent [2]."],
        ),
        (
            "When do tokens expire and which origins are allowed?",
            [TOKENS, ORIGINS],
            {"max_sections": 1},
            [TOKENS_LEAD + " [1]."],
        ),
        # The budget bounds further parts; the first section's best part always comes.
        (
            "When do tokens expire and which origins are allowed?",
            [TOKENS, ORIGINS],
            {"max_answer_chars": 90},
            [TOKENS_LEAD + " [1]."],
        ),
        (
            "When do tokens expire and which origins are allowed?",
            [TOKENS, ORIGINS],
            {"max_answer_chars": 1},
            [TOKENS_LEAD + " [1]."],
        ),
        (
            "When do tokens expire and which origins are allowed?",
            [TOKENS, ORIGINS],
            {"max_answer_chars": 200},
            [TOKENS_LEAD + " [1].", ORIGINS_LEAD + " [2]."],
        ),
    ],
    ids=[
        "two-parts",
        "two-parts-second-asked-first",
        "one-part",
        "no-new-term-weak",
        "no-new-term-as-good",
        "new-term-too-weak",
        "weak-section-answers-its-own-part",
        "max-sections",
        "budget-drops-second",
        "budget-keeps-first",
        "budget-fits-both",
    ],
)
def test_each_part_of_the_question_draws_on_its_own_section(
    query: str, sources: list[GroundedSource], options: dict[str, Any], expected: list[str]
) -> None:
    assert compose(query, *sources, **options).split("\n\n") == expected


@pytest.mark.parametrize(
    ("query", "sources"),
    [
        ("How do I bake bread?", [SERVING, STORAGE]),
        ("What is it?", [SERVING, STORAGE]),
        ("   ", [SERVING, STORAGE]),
        ("¿?", [SERVING, STORAGE]),
        ("server port", []),
        # A term only in a title or a table header is no passage that answers.
        ("What about origins?", [source(1, "Nothing here.", "Origins")]),
        ("What is the burst?", [source(1, "| Burst |\n| --- |\n| 5 |", "Limits")]),
    ],
    ids=["unrelated", "only-stop-words", "blank", "punctuation", "no-sources", "title", "header"],
)
def test_no_overlap_says_no_grounded_sources(query: str, sources: list[GroundedSource]) -> None:
    assert ExtractiveGenerator().compose(query, sources) == NO_GROUNDED_ANSWER


# --- quantities ---------------------------------------------------------------------------------

LIMITS = source(
    1,
    "The protocol owns these boundaries:\n\n"
    "- knowledge: immutable entries that declare exact aliases\n"
    "- answer: citations and confidence\n\n"
    "Artifacts are capped at 512 KiB, 1,024 entries, and 16 aliases per entry.\n\n"
    "A site declares its knowledge in one file.",
    "Protocol",
)
VERSIONS = source(
    1,
    "| Renderer | Needs |\n| --- | --- |\n| Web | React 18+ |\n| Terminal | Ink 7.1+ |\n\n"
    "The terminal renderer draws with Ink in an interactive terminal.",
    "Compatibility",
)


@pytest.mark.parametrize(
    ("query", "sources", "lead"),
    [
        # Asked for a quantity, the passage that states the asked term with a number leads,
        # though another holds more of the question's words.
        (
            "How many aliases can one knowledge entry declare?",
            [LIMITS],
            "Artifacts are capped at 512 KiB, 1,024 entries, and 16 aliases per entry [1].",
        ),
        ("Which Ink version does the terminal renderer need?", [VERSIONS], "Compatibility [1]:"),
        # Asked for no quantity, the passage with most of the question's words leads.
        (
            "Which knowledge entries declare aliases?",
            [LIMITS],
            "The protocol owns these boundaries [1]:",
        ),
        (
            "Which terminal renderer draws with Ink?",
            [VERSIONS],
            "The terminal renderer draws with Ink in an interactive terminal [1].",
        ),
    ],
    ids=["how-many", "which-version", "no-quantity", "no-version"],
)
def test_a_question_asking_for_a_quantity_leads_with_the_passage_stating_it(
    query: str, sources: list[GroundedSource], lead: str
) -> None:
    answer = compose(query, *sources)
    assert answer.split("\n\n")[0] == lead


SNIPPETS = source(
    1,
    "Remote snippets are fetched over HTTPS with a timeout.\n\n"
    "Remote snippets are not fetched unless `url_download` is enabled.\n",
    "Snippets",
)


@pytest.mark.parametrize(
    ("query", "lead"),
    [
        # Asked yes or no, the passage that says no (or sets a limit) leads.
        ("Are remote snippets fetched out of the box?", "Remote snippets are not fetched"),
        ("Can remote snippets be fetched right away?", "Remote snippets are not fetched"),
        # Asked something else, the page's order stands between equally good passages.
        ("How are remote snippets fetched?", "Remote snippets are fetched over HTTPS"),
    ],
)
def test_a_yes_or_no_question_leads_with_the_passage_that_says_no(query: str, lead: str) -> None:
    assert compose(query, SNIPPETS).startswith(lead)


SHELL = source(
    1,
    "Run `hatch shell` to enter the project's environment.\n\n"
    "The shell starts with the environment's paths first.\n\n"
    "Exit the shell to leave the environment.",
    "Shell",
)
# ("inside" is a function word like "within": the word shared is "quickly".)
QUICK = source(2, "Builds run quickly in a container, in the output folder.", "Quick builds")


def test_a_section_shown_whole_is_not_padded_with_one_more_word() -> None:
    # The first section answers whole; the second shares one word with the question.
    query = "How do I quickly get a shell in my project's environment?"
    assert compose(query, SHELL, QUICK).split("\n\n") == [
        "Run `hatch shell` to enter the project's environment [1].",
        "The shell starts with the environment's paths first.",
        "Exit the shell to leave the environment.",
    ]
    # Cut to fit, the first section leaves room for the second, which may say what it left out.
    longer = source(1, SHELL.excerpt + "\n\n" + "The shell keeps its history. " * 20, "Shell")
    assert compose(query, longer, QUICK).endswith("in the output folder [2].")


# --- properties ---------------------------------------------------------------------------------

WORD = st.sampled_from(
    ["server", "port", "token", "session", "store", "redis", "the", "a", "runs", "stored", "is"]
)
PHRASE = st.lists(WORD, min_size=1, max_size=8).map(" ".join)
SENTENCE = PHRASE.map(lambda text: text.capitalize() + ".")
PARAGRAPH = st.lists(SENTENCE, min_size=1, max_size=4).map(" ".join)
LIST = st.tuples(
    st.one_of(st.just(""), SENTENCE.map(lambda s: s[:-1] + ":\n")),
    st.lists(PHRASE, min_size=1, max_size=5),
).map(lambda parts: parts[0] + "\n".join(f"- {item}" for item in parts[1]))
TABLE = st.lists(st.tuples(PHRASE, PHRASE), min_size=1, max_size=5).map(
    lambda rows: "| Name | Value |\n| --- | --- |\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)
)
CODE = st.lists(PHRASE, min_size=1, max_size=4).map(
    lambda lines: "```\n" + "\n".join(lines) + "\n```"
)
EXCERPT = st.lists(st.one_of(PARAGRAPH, LIST, TABLE, CODE), min_size=1, max_size=4).map("\n\n".join)


@settings(max_examples=200, deadline=None)
@given(
    query=st.lists(WORD, min_size=1, max_size=5).map(" ".join),
    excerpts=st.lists(EXCERPT, min_size=1, max_size=5),
    max_sections=st.integers(1, 8),
    max_chars=st.integers(1, 1200),
)
def test_answers_are_extractive_cited_and_deterministic(
    query: str, excerpts: list[str], max_sections: int, max_chars: int
) -> None:
    sources = [source(n, text) for n, text in enumerate(excerpts, 1)]
    generator = ExtractiveGenerator(max_sections=max_sections, max_answer_chars=max_chars)
    answer = generator.compose(query, sources)
    assert answer == generator.compose(query, sources)
    # Table headers only frame rows; every other word can answer.
    answerable = term_set(" ".join(excerpts).replace("| Name | Value |", ""))
    if answer == NO_GROUNDED_ANSWER:
        assert not set(content_terms(query)) & answerable
        return
    cited = [int(n) for n in re.findall(r"\[(\d+)\]", answer)]
    assert cited
    assert all(1 <= n <= len(sources) for n in cited)
    assert len(set(cited)) == len(cited) <= max_sections
    current = 0
    for part in answer.split("\n\n"):
        numbers = [int(n) for n in re.findall(r" \[(\d+)\]", part)]
        current = numbers[0] if numbers else current
        assert current, "the first part is cited"
        said = re.sub(r" \[\d+\]", " ", part)
        cited_source = sources[current - 1]
        assert set(words(said)) <= set(words(cited_source.excerpt + " " + cited_source.title))


# --- streaming and the service ------------------------------------------------------------------


async def test_deltas_are_lines_and_usage_counts_words() -> None:
    generator = ExtractiveGenerator()
    chunks = [chunk async for chunk in generator.generate(request("server port", SERVING))]
    cited, *texts, usage = chunks
    assert cited == CitedSources((0,))  # said first: the answer cites the first source
    assert all(isinstance(chunk, TextDelta) for chunk in texts)
    deltas = [chunk.delta for chunk in texts if isinstance(chunk, TextDelta)]
    assert deltas
    assert all(delta.count("\n") <= 1 and "\n" not in delta[:-1] for delta in deltas)
    assert "".join(deltas) == generator.compose("server port", [SERVING])
    assert isinstance(usage, UsageReport)
    assert isinstance(usage.usage, AskUsage)
    assert usage.usage.model == "extractive"
    assert usage.usage.output_tokens == len("".join(deltas).split())
    assert usage.usage.cost_usd == 0
    total = usage.usage.total_tokens
    assert total == (usage.usage.input_tokens or 0) + len("".join(deltas).split())


async def test_structure_survives_streaming() -> None:
    text, _ = await run(ExtractiveGenerator(), request("Which stores are supported?", STORES))
    assert text == "The supported stores are [1]:\n\n" + STORES_LIST


async def test_closing_the_stream_early_stops_it() -> None:
    stream = ExtractiveGenerator().generate(request("server port", SERVING))
    assert isinstance(await stream.__anext__(), CitedSources)
    first = await stream.__anext__()
    assert isinstance(first, TextDelta)
    await stream.aclose()  # type: ignore[attr-defined]
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


async def test_through_the_service_the_answer_is_cited_and_model_free() -> None:
    class Retriever:
        async def retrieve(self, request: Any) -> list[GroundedSource]:
            return [STORAGE, SERVING]

    service = AskService(
        resolve_site=lambda context: SITE,
        resolve_subject_id=lambda context: "user-1",
        retrievers={"local": Retriever()},
        generator=ExtractiveGenerator(model="extractive-test"),
        create_id=lambda: "r1",
    )
    body = b'{"messages":[{"role":"user","content":"Which port does the server use?"}]}'
    events = [event.to_wire() async for event in (await service.stream({}, body)).events()]
    text = "".join(e["delta"] for e in events if e["type"] == "text")
    # Only the source the answer uses is cited: the second one retrieved is its [1].
    assert text.split("\n\n")[0] == SERVING_LEAD + " [1]."
    assert "[2]" not in text
    assert events[-2]["args"]["sources"] == [{"id": "s1", "title": "Source 1", "path": "/docs/s1"}]
    assert events[-1] == {"type": "done", "model": "extractive-test"}


@pytest.mark.parametrize(
    "options",
    [
        {"max_answer_chars": 0},
        {"max_answer_chars": -1},
        {"max_answer_chars": True},
        {"max_answer_chars": 900.0},
        {"max_sections": 0},
        {"max_sections": 9},
        {"max_sections": True},
        {"model": "  "},
        {"model": ""},
    ],
    ids=repr,
)
def test_invalid_options_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        ExtractiveGenerator(**options)


@pytest.mark.parametrize(
    "options", [{"max_answer_chars": 1}, {"max_sections": 1}, {"max_sections": 8}]
)
def test_bounds_at_the_edges_are_accepted(options: dict[str, Any]) -> None:
    assert ExtractiveGenerator(**options).compose("server port", [SERVING]).endswith(".")


@pytest.mark.parametrize(("size", "threaded"), [(1, False), (3, True)])
async def test_large_excerpts_are_scored_off_the_event_loop(size: int, threaded: bool) -> None:
    threads: list[int] = []

    class Probe(ExtractiveGenerator):
        def compose_cited(
            self, query: str, sources: Sequence[GroundedSource]
        ) -> tuple[str, tuple[int, ...]]:
            threads.append(threading.get_ident())
            return super().compose_cited(query, sources)

    big = [source(n, ("The server port is set here. " * 100)[:2000]) for n in range(1, size + 1)]
    text, _ = await run(Probe(), request("server port", *big))
    assert text == ExtractiveGenerator().compose("server port", big)
    assert (threads[0] != threading.get_ident()) is threaded


def test_an_answer_cites_only_the_sources_it_uses_once_each() -> None:
    first_part = source(1, "Run `make serve` to start the server on port 8000.", "Serving")
    second_part = GroundedSource(
        id="s1-2", title="Serving", href="/docs/s1", excerpt="The server port can be changed."
    )
    unrelated = source(3, "Keys are rotated monthly.", "Keys")
    answer, cited = ExtractiveGenerator().compose_cited(
        "Which server port, and how is the port changed?", [unrelated, first_part, second_part]
    )
    # Two parts of one section (one link) are one citation; the unrelated source is not cited.
    assert cited == (1,)
    assert set(re.findall(r"\[(\d+)\]", answer)) == {"1"}


async def test_the_service_refuses_cited_positions_outside_the_sources() -> None:
    class Liar(ExtractiveGenerator):
        async def generate(self, request: GenerationRequest) -> Any:
            yield CitedSources((5,))
            yield TextDelta("Made up [1].")

    class Retriever:
        async def retrieve(self, request: Any) -> list[GroundedSource]:
            return [SERVING]

    service = AskService(
        resolve_site=lambda context: SITE,
        resolve_subject_id=lambda context: "user-1",
        retrievers={"local": Retriever()},
        generator=Liar(),
        create_id=lambda: "r1",
    )
    body = b'{"messages":[{"role":"user","content":"Which port does the server use?"}]}'
    events = [event.to_wire() async for event in (await service.stream({}, body)).events()]
    assert events[-1]["type"] == "error"
    assert not any(event["type"] == "tool" for event in events)


# --- parts of one section, and values asked for by name -----------------------------------------

#: One long section cut in two by the index: the sentence introducing the options, then the
#: options themselves, both with the section's one link.
COMPRESSION_PARTS = (
    GroundedSource(
        id="gzip-1",
        title="Middleware › GZip",
        href="/docs/middleware#gzip",
        excerpt="Compresses responses for clients that accept gzip. The middleware skips "
        "responses that already carry an encoding, and partial content responses, and "
        "streaming responses of server-sent events.\n\nThe following arguments are supported:",
    ),
    GroundedSource(
        id="gzip-2",
        title="Middleware › GZip",
        href="/docs/middleware#gzip",
        excerpt="- `minimum_size` - Do not compress responses smaller than this. Defaults to "
        "`500`.\n- `compresslevel` - Used during gzip compression, from 1 to 9. Defaults to "
        "`9`.",
    ),
)


def test_the_parts_of_one_section_are_read_as_one_section() -> None:
    answer, cited = ExtractiveGenerator().compose_cited(
        "Which arguments does the gzip middleware support?", COMPRESSION_PARTS
    )
    assert cited == (0,)
    # The list follows the sentence that introduces it, though the index cut them apart.
    assert "The following arguments are supported [1]:\n\n- `minimum_size`" in answer
    assert "[2]" not in answer


@pytest.mark.parametrize(
    ("query", "stated"),
    [
        ("What compression level does the gzip middleware use?", "Defaults to `9`"),
        ("Which status code does the server send for a large upload?", "413"),
    ],
    ids=["level", "status-code"],
)
def test_a_level_or_a_status_code_is_asked_for_as_a_value(query: str, stated: str) -> None:
    gzip = source(
        1,
        "Gzip compression leaves alone responses that already use an encoding of their "
        "own.\n\n- `compresslevel` - Used during gzip compression. Defaults to `9`.",
    )
    upload = source(
        2,
        "The server reads the body of each request, checks every large upload against the "
        "configured limit, and streams what fits to the handler in chunks as they arrive. "
        "Handlers see the chunks in order and may stop reading at any point, which closes "
        "the connection once the response is sent back to the client that made it. "
        "Over the limit, the upload gets status 413.",
    )
    answer = compose(query, gzip if "gzip" in query else upload, max_answer_chars=100)
    # The passage stating the value leads, though another holds as many of the question's words.
    assert stated in answer.split("\n\n")[1 if "level" in query else 0]


def test_a_label_does_not_lead_the_answer() -> None:
    # An admonition's title, read as a paragraph of its own, holds the question's words
    # without saying anything.
    streaming = source(
        1,
        "Compression of streaming responses\n\n"
        "On streaming responses, the middleware compresses every chunk the application "
        "sends, so chunks reach the client as they are produced.",
    )
    answer = compose("How are streaming responses compressed?", streaming, max_answer_chars=120)
    assert answer.startswith("On streaming responses, the middleware compresses")
