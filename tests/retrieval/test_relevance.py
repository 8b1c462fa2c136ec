"""The relevance rule, judged both ways: what may ground an answer and what may not."""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat._terms import STOP_WORDS
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.retrieval import RelevanceRule, RetrievedChunk, TermWeights, content_terms

SECTIONS = [
    "Setup guide › Configuring the cache\nSet cache_size to the number of pages the cache holds.",
    "Setup guide › Installing\nRun the installer to put the widget on your machine.",
    "Options › Logging\nSet log_level to debug to see every render of the widget.",
    "FAQ › Licensing\nThe widget is released under the MIT license.",
    "FAQ › Themes\nThe widget ships a light theme and a dark theme.",
]
WEIGHTS = TermWeights.from_texts(SECTIONS)


def hit(title: str, text: str, score: float = 5.0) -> RetrievedChunk:
    return RetrievedChunk(id="c1", title=title, href="/docs/x", text=text, score=score)


CACHE = hit(
    "Setup guide › Configuring the cache",
    "Set cache_size to the number of pages the cache holds.",
)
LICENSE = hit("FAQ › Licensing", "The widget is released under the MIT license.")
# Covers the question's words in its text only, under a heading that names none of them.
BURIED = hit("FAQ › Miscellaneous", "Set cache_size to the number of pages the cache holds.")


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("How do I configure the rate limiter?", ("configur", "rate", "limit")),
        ("Limits, limiting, LIMITER", ("limit",)),
        ("What happens when it works?", ()),
        ("Serve the server while serving", ("serv", "server")),
        ("Error 429 and x", ("error", "429")),
        ("ＣＡＣＨＥ sizes, size", ("cach", "size")),
        ("", ()),
    ],
)
def test_content_terms(text: str, terms: tuple[str, ...]) -> None:
    assert content_terms(text) == terms


@given(st.text(max_size=200))
def test_content_terms_never_raise_and_hold_no_stop_word(text: str) -> None:
    terms = content_terms(text)
    assert len(set(terms)) == len(terms)
    assert not STOP_WORDS.intersection(terms)


def test_rare_terms_weigh_more_than_common_ones() -> None:
    assert WEIGHTS.sections == len(SECTIONS)
    common, rare, absent = WEIGHTS.weight("widget"), WEIGHTS.weight("licens"), WEIGHTS.weight("x9")
    assert 0 < common < rare < absent


@pytest.mark.parametrize(
    ("question", "chunk", "relevant"),
    [
        # Passes: the section covers the question and its heading names the topic.
        ("How do I set the cache size?", CACHE, True),
        ("Which license is the widget released under?", LICENSE, True),
        # Title: the same words, but nothing of the question in the heading. Coverage is
        # strong enough (three quarters) to stand on its own only when it is complete.
        ("How big is the cache of the MIT theme?", BURIED, False),
        ("How do I set the cache size?", BURIED, True),
        # Coverage: common words match, the words that carry the question do not.
        ("What is the weather forecast for the cache conference in Paris?", CACHE, False),
        ("Which license covers the cache of the weather station?", LICENSE, False),
        ("Is there a Windows installer for the widget?", LICENSE, False),
        # No content word at all grounds nothing.
        ("What is it?", CACHE, False),
    ],
)
def test_rule_judges_both_ways(question: str, chunk: RetrievedChunk, relevant: bool) -> None:
    verdict = RelevanceRule().judge(content_terms(question), chunk, WEIGHTS)
    assert verdict.relevant is relevant, verdict


KNOWN = ("cache", "widget", "theme", "license", "installer", "pages", "debug")
UNKNOWN = ("zeppelin", "quasar", "marmalade", "tundra", "origami", "walrus", "kazoo")
CHUNKS = [hit(title, text) for title, text in (s.split("\n", 1) for s in SECTIONS)]


@given(
    st.sampled_from(KNOWN),
    st.lists(st.sampled_from(UNKNOWN), min_size=2, max_size=5, unique=True),
    st.sampled_from(CHUNKS),
    st.randoms(use_true_random=False),
)
def test_a_question_mostly_unknown_to_the_docs_is_never_relevant(
    known: str, unknown: list[str], chunk: RetrievedChunk, shuffle: Random
) -> None:
    # One word the docs use cannot outweigh two or more they never use.
    words = [known, *unknown]
    shuffle.shuffle(words)
    question = "How does the " + " ".join(words) + " work?"
    assert not RelevanceRule().judge(content_terms(question), chunk, WEIGHTS).relevant


def test_score_floor_refuses_a_section_that_matches_only_by_everywhere_words() -> None:
    terms = content_terms("How do I set the cache size?")
    weak = hit(CACHE.title, CACHE.text, score=0.2)
    assert RelevanceRule().judge(terms, CACHE, WEIGHTS).relevant
    assert not RelevanceRule().judge(terms, weak, WEIGHTS).relevant
    assert RelevanceRule(min_score=0.1).judge(terms, weak, WEIGHTS).relevant


def test_select_keeps_relevant_hits_in_order() -> None:
    other = hit("FAQ › Themes", "The widget ships a light theme and a dark theme.")
    kept = RelevanceRule().select("How do I set the cache size?", [other, CACHE, BURIED], WEIGHTS)
    assert kept == [CACHE, BURIED]


@pytest.mark.parametrize(
    "options",
    [
        {"min_coverage": 1.5},
        {"min_coverage": -0.1},
        {"min_title_terms": -1},
        {"min_title_terms": 1.5},
        {"min_score": float("nan")},
        {"strong_coverage": -1.0},
    ],
)
def test_invalid_thresholds_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        RelevanceRule(**options)  # type: ignore[arg-type]
