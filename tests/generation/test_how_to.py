"""A question asking how to do something shows the section's example code."""

from __future__ import annotations

from agentskit_chat.generation._compose import compose_answer
from agentskit_chat.protocol import GroundedSource

GZIP = GroundedSource(
    id="s1",
    title="Middleware › GZipMiddleware",
    href="/docs/middleware#gzipmiddleware",
    excerpt=(
        "Handles compressed responses for any request that accepts gzip.\n\n"
        "On streaming responses, the middleware compresses every chunk the application "
        "sends, so chunks reach the client as they are produced.\n\n"
        "```python\napp = Starlette(middleware=[Middleware(GZipMiddleware)])\n```\n\n"
        "- `minimum_size` - Smaller responses are not compressed. Defaults to `500`.\n"
        "- `compresslevel` - How hard responses are compressed. Defaults to `9`.\n"
        "- `exclude_content_types` - Content types whose responses are never compressed.\n"
    ),
)


def test_how_do_i_shows_the_example_right_after_the_passage_that_answers() -> None:
    answer = compose_answer("How do I compress my responses?", [GZIP], max_chars=420)
    # The code names no question word, but it is what "how do I" asks for: it comes before
    # the option list that repeats the question's words.
    assert "Middleware(GZipMiddleware)" in answer
    assert answer.index("compresses every chunk") < answer.index("GZipMiddleware)")


def test_a_question_asking_what_is_not_given_the_example_first() -> None:
    answer = compose_answer("Which responses are compressed?", [GZIP], max_chars=420)
    assert answer.startswith("Handles compressed responses")
    assert "Middleware(GZipMiddleware)" not in answer


def source(number: int, title: str, excerpt: str) -> GroundedSource:
    return GroundedSource(id=f"s{number}", title=title, href=f"/docs/p{number}", excerpt=excerpt)


# Search put the section showing the command first; the other names every word of the question
# in one sentence, about fault tests.
WORKERS = source(
    1,
    "Deployment › Many workers",
    "Each worker of the server shares the PostgreSQL or Redis store.\n\n"
    "```sh\nagentskit-chat serve docs --workers 4 --store postgresql://app@db/chat\n```\n",
)
OUTAGES = source(
    2,
    "Fault tests › Store outages",
    "The fault test runs a real server on each store: SQLite, PostgreSQL and Redis.",
)


def test_a_how_to_answer_leads_with_the_first_source_showing_a_command_of_the_question() -> None:
    answer = compose_answer("How do I run the server with PostgreSQL?", [WORKERS, OUTAGES])
    assert answer.startswith("Each worker of the server shares the PostgreSQL or Redis store [1].")
    assert "--store postgresql://" in answer
    # The code must hold a name the question writes, not a word any code may hold.
    plain = compose_answer("How do I run the server with postgresql?", [WORKERS, OUTAGES])
    assert plain.startswith("The fault test runs a real server")
    # A question not asking how keeps the sentence that says the most of it first.
    told = compose_answer(
        "Which server does the fault test stop on PostgreSQL?", [WORKERS, OUTAGES]
    )
    assert told.startswith("The fault test runs a real server")


def test_a_how_to_section_left_alone_has_room_for_its_command() -> None:
    prose = "The server keeps each session in PostgreSQL, " + "turn by turn, " * 34 + "to the end."
    lone = source(
        1, "Deployment › Workers", f"{prose}\n\n```sh\nserve --store postgresql://db\n```"
    )
    # Good enough to be chosen beside it (it brings "run"), too long to fit beside it.
    other = source(2, "Guides › Managers", "Run it under " + "the host's process manager, " * 20)
    answer = compose_answer("How do I run the server with PostgreSQL?", [lone, other])
    assert "[2]" not in answer
    # The room kept for the section that did not fit is the command's.
    assert answer.endswith("```sh\nserve --store postgresql://db\n```")


# Chosen for its code naming Redis; its best sentence says "store", not Redis.
BACKENDS = source(
    1,
    "Sessions › Backends",
    "All four backends pass one suite, the Redis one against a real server.\n\n"
    "```python\nexpiring = RedisStorage('redis://127.0.0.1:6379/0', ttl_seconds=60)\n```\n\n"
    "Saving must be atomic: a last-write-wins store is unsafe, and a store that overwrites "
    "loses turns.",
)
NOTES = source(
    2,
    "Operations › Cluster notes",
    "Each call touches one key, so the store works with Redis Cluster and any store client.",
)


def test_a_section_led_for_its_command_naming_the_thing_shows_that_command_first() -> None:
    answer = compose_answer("How do I use Redis as the store?", [BACKENDS, NOTES])
    # Not the sentence about stores that names no Redis: the code using it comes first.
    assert answer.startswith("Sessions › Backends [1]:\n\n```python\nexpiring = RedisStorage(")
    assert answer.index("RedisStorage(") < answer.index("Saving must be atomic")
    # Not asking how: the sentence that says the most of the question leads.
    told = compose_answer("Which store works with Redis?", [BACKENDS, NOTES])
    assert not told.startswith("Sessions › Backends [1]:")
