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
