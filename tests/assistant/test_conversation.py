"""Questions read in their conversation: elliptic follow-ups and misspelled words."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat._terms import corrected, followup_question, is_followup, prefixed, rooted
from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.assistant._backend import IN_PROCESS, read_answer
from agentskit_chat.protocol import EscalationAnswer, ExactAnswer, decode_ask_request

from ._support import NOW

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SERVING = """\
# Serving

## Serving with PostgreSQL

Run the server on PostgreSQL so that many workers share the sessions:

```sh
serve --store postgresql://db/chat
```

## Serving with Redis

Run the server on Redis when idle sessions should expire by themselves:

```sh
serve --store redis://cache:6379/0
```
"""

CACHING = """\
# Caching

## Caching answers in Redis

Answers can be kept in Redis for an hour with `cache --url redis://cache:6379/1`.

## Rate limits

Every user may ask 60 questions a minute; the limiter refills 5 tokens each second.
"""

STORAGE = """\
# Storage

## Choosing a storage backend

SQLite is the embedded default. PostgreSQL and Redis are supported for shared deployments.
"""


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in {"serving.md": SERVING, "caching.md": CACHING, "storage.md": STORAGE}.items():
        (folder / name).write_text(text, "utf-8")
    return folder


async def _turns(docs: Path, questions: list[str]) -> list[ExactAnswer | EscalationAnswer]:
    """Each question asked after the earlier ones, in one conversation of the Ask service."""
    replies: list[ExactAnswer | EscalationAnswer] = []
    messages: list[dict[str, str]] = []
    async with create_docs_assistant(docs, now=lambda: NOW) as assistant:
        for question in questions:
            messages.append({"role": "user", "content": question})
            request = decode_ask_request(
                {"protocol": "agentskit.chat.ask", "version": 1, "messages": messages}
            ).value
            assert request is not None
            decision = assistant.resolver.resolve(question)
            assert isinstance(decision, EscalationAnswer)
            response = await assistant.service.answer(IN_PROCESS, request)
            reply = await read_answer(response, decision, None)
            replies.append(reply)
            text = reply.answer.markdown if isinstance(reply, ExactAnswer) else reply.message
            messages.append({"role": "assistant", "content": text})
    return replies


async def test_and_for_redis_after_a_postgresql_question_answers_about_redis(docs: Path) -> None:
    first, second = await _turns(
        docs, ["How do I run the server with PostgreSQL?", "and for Redis?"]
    )
    assert isinstance(first, ExactAnswer) and isinstance(second, ExactAnswer)
    assert "postgresql://db/chat" in first.answer.markdown
    # The follow-up is the first question about Redis: the server on Redis, not the cache.
    assert "redis://cache:6379/0" in second.answer.markdown
    assert "postgresql://" not in second.answer.markdown
    assert [c.href for c in second.answer.citations] == ["/docs/serving#serving-with-redis"]


async def test_and_for_redis_lands_on_the_command_over_the_project_docs() -> None:
    manual = Path(__file__).resolve().parents[2] / "docs"
    first, second = await _turns(
        manual, ["How do I run the server with PostgreSQL?", "and for Redis?"]
    )
    assert isinstance(first, ExactAnswer) and isinstance(second, ExactAnswer)
    # Both land on the section running the server on the store, not on the extras to install.
    for reply, url in ((first, "--store postgresql://"), (second, "--store redis://")):
        assert reply.answer.citations[0].href == "/docs/deployment#many-workers-on-one-machine"
        assert url in reply.answer.markdown
    assert "pip install" not in second.answer.markdown


async def test_the_same_words_alone_are_not_read_as_a_follow_up(docs: Path) -> None:
    [alone] = await _turns(docs, ["and for Redis?"])
    # Without a previous question there is nothing to continue: the words are searched as they
    # are, and the answer is not the server's (the caching page says "Redis" as plainly).
    assert isinstance(alone, ExactAnswer)
    assert "serve --store redis://" not in alone.answer.markdown


@pytest.mark.parametrize(
    ("question", "page", "shown"),
    [
        ("How do I run the sever with PostgerSQL?", "/docs/serving", "postgresql://db/chat"),
        ("How many questions may a user ask a minuet?", "/docs/caching", "60 questions"),
        ("Which storgae backends are suported?", "/docs/storage", "PostgreSQL and Redis"),
    ],
)
async def test_typoed_questions_are_answered(
    docs: Path, question: str, page: str, shown: str
) -> None:
    [reply] = await _turns(docs, [question])
    assert isinstance(reply, ExactAnswer), question
    assert reply.answer.citations[0].href.startswith(page)
    assert shown in reply.answer.markdown


async def test_typoed_questions_through_ask_are_answered_too(docs: Path) -> None:
    async with create_docs_assistant(docs, now=lambda: NOW) as assistant:
        reply = await assistant.ask("Which storgae backends are suported?")
    assert isinstance(reply, ExactAnswer)
    assert "PostgreSQL and Redis" in reply.answer.markdown


# --- the text analysis ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "followup"),
    [
        ("and for Redis?", True),
        ("What about Windows?", True),
        ("And with two workers?", True),
        ("How do I use Redis?", False),
        ("and?", False),  # no content term of its own: nothing to ask about
        ("and how do I configure the cache size, the log level and the theme name?", False),
    ],
)
def test_is_followup(question: str, followup: bool) -> None:
    assert is_followup(question) is followup


@pytest.mark.parametrize(
    ("question", "earlier", "expected"),
    [
        (
            "and for Redis?",
            ["How do I run the server with PostgreSQL?"],
            "How do I run the server with Redis?",
        ),
        ("and for Redis?", [], "and for Redis?"),
        ("How do I use Redis?", ["How do I use PostgreSQL?"], "How do I use Redis?"),
        # Without names to swap, the follow-up's words are added.
        (
            "what about the timeout?",
            ["How do I set the cache size?"],
            "How do I set the cache size? the timeout",
        ),
        # A follow-up of a follow-up continues the written-out question.
        (
            "and for SQLite?",
            ["How do I run the server with PostgreSQL?", "and for Redis?"],
            "How do I run the server with SQLite?",
        ),
    ],
)
def test_followup_question(question: str, earlier: list[str], expected: str) -> None:
    assert followup_question(question, earlier) == expected


@pytest.mark.parametrize(
    ("question", "expected", "replaced"),
    [
        ("How do I confgure it?", "How do I configure it?", {"confgure": "configure"}),
        ("Which storgae works?", "Which storage works?", {"storgae": "storage"}),  # a swap
        # Shorter words are too often a different word one edit away ("cors", "core").
        ("How do I rate limt users?", "How do I rate limt users?", {}),
        ("How do I rate limmit users?", "How do I rate limit users?", {"limmit": "limit"}),
        ("Is Kafka supported?", "Is Kafka supported?", {}),  # no known word is close
        ("Use the cache", "Use the cache", {}),  # known words stay
        ("Set v2x now", "Set v2x now", {}),  # words with digits stay
    ],
)
def test_corrected(question: str, expected: str, replaced: dict[str, str]) -> None:
    vocabulary = {
        "configure": 4,
        "storage": 2,
        "limit": 3,
        "cache": 9,
        "supported": 1,
        "kafkaesque": 1,
    }
    assert corrected(question, vocabulary) == (expected, replaced)


def test_a_prefix_before_a_known_word_is_not_a_typo() -> None:
    vocabulary = {"compressed": 5, "compresses": 2, "regenerated": 1, "generate": 3}
    # Two edits from "compressed", but the edit drops "un": it would ask the opposite.
    question = "Which responses are left uncompressed?"
    assert corrected(question, vocabulary) == (question, {})
    assert prefixed("uncompressed", vocabulary) == ("un", "compressed")
    # Search reads it as the known word it negates; other prefixes are dropped for search.
    assert rooted(question, vocabulary) == "Which responses are left not compressed?"
    assert rooted("recompresses it", vocabulary) == "compresses it"
    # A correction that keeps the prefix is still a correction.
    assert corrected("regenerate", vocabulary) == ("regenerated", {"regenerate": "regenerated"})
    assert prefixed("compresed", vocabulary) is None


def test_the_most_frequent_close_word_wins() -> None:
    assert corrected("the cahce", {"cache": 1, "cached": 9, "cachet": 5})[0] == "the cache"
    assert corrected("the serer", {"server": 1, "sever": 7})[0] == "the sever"


# --- the site's own name ----------------------------------------------------------------------

SITE = {
    "index.md": "# Widget Docs\n\nWidget Docs turns a folder of Markdown into a searchable site "
    "for your team.\n",
    "themes.md": "# Themes\n\n## Picking a theme\n\nPages use the `light` theme; set "
    "`theme: dark` for the dark one.\n",
    "build.md": "# Building\n\n## Building the pages\n\nRun `widget build` to render every "
    "page into `site/`.\n",
    "search.md": "# Search\n\n## The search box\n\nThe search box finds pages by their words.\n",
    "deploy.md": "# Deploying\n\n## Static hosting\n\nCopy `site/` to any static host.\n",
}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site-docs"
    folder.mkdir()
    for name, text in SITE.items():
        (folder / name).write_text(text, "utf-8")
    return folder


async def test_the_sites_own_name_does_not_make_a_question_answerable(site: Path) -> None:
    async with create_docs_assistant(site, now=lambda: NOW) as assistant:
        # Every page is about Widget Docs: naming it says nothing about what is asked.
        # (Counted, "Widget Docs" made the overview page cover most of this question.)
        refused = await assistant.ask("How do I translate my site with Widget Docs?")
        answered = await assistant.ask("How do I build the pages with Widget Docs?")
    assert isinstance(refused, EscalationAnswer)
    assert isinstance(answered, ExactAnswer)
    assert "widget build" in answered.answer.markdown
