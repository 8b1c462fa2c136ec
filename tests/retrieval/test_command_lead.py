"""A how-to question naming a thing is answered by the command holding it, not by prose."""

from __future__ import annotations

import pytest

from agentskit_chat._terms import command_terms
from agentskit_chat.retrieval import RelevanceRule, RetrievedChunk, TermWeights
from agentskit_chat.retrieval._command_lead import code_terms

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
