"""A how-to question naming a thing is answered by the command holding it, not by prose."""

from __future__ import annotations

import pytest

from agentskit_chat._terms import command_terms
from agentskit_chat.retrieval import (
    MarkdownCorpus,
    RelevanceRule,
    RelevantRetriever,
    RetrievedChunk,
    SQLiteFTSRetriever,
    TermWeights,
)
from agentskit_chat.retrieval._command_lead import CommandSections, code_terms, uses_thing

from ._support import chunk_weights

# Every page runs a server; two name PostgreSQL.
SECTIONS = [
    *(f"Guide › Part {n}\nThe server runs page {n} of the guide." for n in range(8)),
    "Fault tests › Store outages\nThe fault test runs a server on PostgreSQL and stops it.",
    "Deployment › Many workers\nserve docs --store postgresql://db/chat",
]
WEIGHTS = TermWeights.from_texts(SECTIONS)


def hit(id_: str, title: str, text: str) -> RetrievedChunk:
    return RetrievedChunk(id=id_, title=title, href=f"/docs/{id_}", text=text, score=5.0)


# Prose naming every word of the question, about something else.
PROSE = hit(
    "outages",
    "Fault tests › Store outages",
    "The fault test runs a real server on each store: SQLite, PostgreSQL and Redis. "
    "PostgreSQL is stopped with a fast shutdown, and the server keeps answering.",
)
# The command the question asks for.
COMMAND = hit(
    "workers",
    "Deployment › Many workers",
    "Each worker of the server runs on the shared store.\n\n"
    "```sh\nagentskit-chat serve docs --workers 4 --store postgresql://app@db/chat\n```\n",
)
# A command holding the thing too, covering less of the question (no server).
LIBRARY = hit(
    "retriever",
    "Retrieval › The PostgreSQL retriever",
    "Run it to index the pages in a table.\n\n```python\nRetriever('postgresql://app@db/app')\n```\n",
)
# A command naming the thing only in its comment.
INSTALL = hit(
    "install",
    "Getting started › Installing",
    "Install the server extra.\n\n```sh\npip install 'app[server]'  # and PostgreSQL stores\n```\n",
)
QUESTION = "How do I run the server with PostgreSQL?"


def test_code_terms_are_the_fenced_code_without_comments() -> None:
    assert code_terms(INSTALL.text) == command_terms("pip install 'app[server]'")
    assert "postgresql" not in code_terms(INSTALL.text)
    assert "postgresql" in code_terms(COMMAND.text)
    # Prose is no code, even when it writes commands' words.
    assert code_terms(PROSE.text) == frozenset()
    assert code_terms("~~~\nmake soak\n~~~") == command_terms("make soak")


def test_a_command_holding_the_thing_comes_before_prose_about_it() -> None:
    rule = RelevanceRule()
    assert all(rule.judge(QUESTION, found, WEIGHTS).relevant for found in (PROSE, COMMAND))
    # Search put the prose first; the command naming PostgreSQL leads, then the one that
    # covers less of the question (no server), then the others in their order. A comment
    # naming PostgreSQL runs nothing with it.
    kept = rule.select(QUESTION, [PROSE, INSTALL, LIBRARY, COMMAND], WEIGHTS)
    assert kept == [COMMAND, LIBRARY, PROSE, INSTALL]


@pytest.mark.parametrize(
    "question",
    [
        # Not asking how to do something.
        "Which server uses PostgreSQL?",
        # Its rarest term is not written as a name: no thing to run it with.
        "How do I run the server with postgresql?",
    ],
)
def test_other_questions_keep_the_search_order(question: str) -> None:
    rule = RelevanceRule()
    assert rule.select(question, [PROSE, COMMAND], WEIGHTS)[0] == PROSE


def test_a_best_hit_showing_a_command_of_the_question_keeps_its_place() -> None:
    rule = RelevanceRule()
    assert rule.select(QUESTION, [INSTALL, COMMAND], WEIGHTS) == [INSTALL, COMMAND]


# --- the command the question asks for: a code line using the thing, doing what is asked -----


@pytest.mark.parametrize(
    ("code", "uses"),
    [
        # The thing as an option's value, beside the question's server ("serve" shares its
        # stem's start).
        ("serve docs --store redis://cache/0", True),
        # Installing the thing writes the question's words, and runs nothing.
        ("pip install 'app[server,redis]'", False),
        # The thing alone on its line: nothing of what is asked with it.
        ("client = Redis('redis://cache/0')", False),
        # The thing only in a comment.
        ("serve docs  # with Redis", False),
        # Running is what is asked: a line that runs it is the command.
        ("app run --server --redis cache", True),
    ],
)
def test_a_code_line_uses_the_thing_for_what_is_asked(code: str, uses: bool) -> None:
    assert uses_thing(f"```sh\n{code}\n```", {"redi"}, ("run", "server", "redi")) is uses
    # Prose is no code.
    assert not uses_thing(code, {"redi"}, ("run", "server", "redi"))


# Many sections run the server with Redis in prose; the one command using it is a short
# section search does not reach.
REDIS_CORPUS = {
    "getting-started.md": (
        "# Getting started\n\n## Installing\n\nInstall the server and Redis extras to run the "
        "server with Redis:\n\n```sh\npip install 'app[server,redis]'  # server and Redis\n```\n"
    ),
    **{
        f"guide-{n}.md": (
            f"# Guide {n}\n\n## Running {n}\n\nThe server runs on Redis here too, and the "
            f"server keeps running while Redis runs: part {n} of the guide to the server.\n"
        )
        for n in range(2)
    },
    "deployment.md": (
        "# Deployment\n\n## Many workers\n\nEach worker of the server runs on one store.\n\n"
        "```sh\napp serve docs --workers 4 --store redis://cache:6379/0\n```\n"
    ),
}


@pytest.mark.anyio
async def test_the_command_using_the_thing_leads_even_beyond_the_hits() -> None:
    corpus = MarkdownCorpus.from_texts(REDIS_CORPUS)
    weights = chunk_weights(corpus)
    question = "How do I run the server with Redis?"
    async with SQLiteFTSRetriever(corpus=corpus, top_k=3) as index:
        found = [hit.href for hit in await index.search(question, 3)]
        # Search does not reach the deployment section's short command.
        assert "/docs/deployment#many-workers" not in found
        assert "/docs/getting-started#installing" in found
        retriever = RelevantRetriever(index, weights, top_k=3, sections=corpus.chunks)
        kept = [hit.href for hit in await retriever.relevant(question)]
        assert kept[0] == "/docs/deployment#many-workers"
        assert sorted(kept[1:]) == sorted(found)
        # Asked how to install it: the install line is what is asked, and leads.
        asked = "How do I install the server with Redis?"
        installed = [hit.href for hit in await retriever.relevant(asked)]
        assert installed[0] == "/docs/getting-started#installing"
        # Not asking how: nothing is looked up beyond the hits.
        told = [hit.href for hit in await retriever.relevant("What does the server keep in Redis?")]
        assert told
        assert "/docs/deployment#many-workers" not in told
        # Without the corpus's sections, only the hits are looked at: the install line,
        # whose code holds the thing, leads them.
        bare = RelevantRetriever(index, weights, top_k=3)
        alone = [hit.href for hit in await bare.relevant(question)]
        assert alone[0] == "/docs/getting-started#installing"
        assert sorted(alone) == sorted(found)


def test_a_relevant_hit_using_the_thing_comes_first() -> None:
    install = hit("install", "Installing", "Run:\n\n```sh\npip install 'app[server,redis]'\n```\n")
    serve = hit("serve", "Workers", "```sh\napp serve --store redis://cache\n```\n")
    sections = CommandSections([])
    asked = (("run", "server", "redi"), frozenset({"redi"}), lambda term: 1.0)
    question = "How do I run the server with Redis?"
    assert sections.leading(question, asked, [install, PROSE, serve], lambda _: True) == [
        serve,
        install,
        PROSE,
    ]
    # Not relevant: nothing moves.
    assert sections.leading(question, asked, [install, serve], lambda _: False) == [install, serve]
    # No name in the question: no thing to run it with.
    plain = (asked[0], frozenset[str](), asked[2])
    assert sections.leading(question, plain, [install, serve], lambda _: True) == [install, serve]
