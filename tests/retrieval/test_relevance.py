"""The relevance rule, judged both ways: what may ground an answer and what may not."""

from __future__ import annotations

from collections.abc import Iterator
from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat._terms import STOP_WORDS, name_terms, stem, words
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.retrieval import (
    MarkdownCorpus,
    RelevanceRule,
    RelevantRetriever,
    RetrievedChunk,
    SQLiteFTSRetriever,
    TermWeights,
    content_terms,
)

from ._support import chunk_weights

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
        # "How many" asks for a number: the quantity, never the word, is what is looked for.
        ("How many retries, and how much time?", ("retri", "time")),
        ("ＣＡＣＨＥ sizes, size", ("cach", "size")),
        # Prepositions say where, not what: "inside" is "within", which was always dropped.
        ("A shell inside my environment, outside the project", ("shell", "environ", "project")),
        ("", ()),
    ],
)
def test_content_terms(text: str, terms: tuple[str, ...]) -> None:
    assert content_terms(text) == terms


@given(st.text(max_size=200))
def test_content_terms_never_raise_and_come_from_no_stop_word(text: str) -> None:
    terms = content_terms(text)
    assert len(set(terms)) == len(terms)
    # Each term is the stem of a word that is not a stop word. A stem may spell one ("ATS"
    # stems to "at", "owns" to "own"): the word was not one, so it stays.
    kept = {stem(word) for word in words(text) if word not in STOP_WORDS}
    assert set(terms) <= kept
    assert not content_terms(" ".join(sorted(STOP_WORDS)))


def test_a_word_whose_stem_spells_a_stop_word_is_kept() -> None:
    assert content_terms("ATS owns it") == ("at", "own")


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("How do I send metrics to Datadog?", {"datadog"}),
        ("Is there a GraphQL or CORS option?", {"graphql", "cor"}),
        ("Which @acme/web-ui version?", {"acm", "web", "ui"}),
        ("set cache_size and Auth0", {"cach", "size", "auth0"}),
        # A capital at the start of a sentence, or a lone letter, is no name.
        ("Datadog? Never. What is X?", set()),
        ("plain words only", set()),
        ("", set()),
    ],
)
def test_name_terms(text: str, names: set[str]) -> None:
    assert name_terms(text) == names


@given(st.text(max_size=200))
def test_name_terms_never_raise(text: str) -> None:
    assert all(name for name in name_terms(text))


def test_rare_terms_weigh_more_than_common_ones() -> None:
    assert WEIGHTS.sections == len(SECTIONS)
    common, rare, absent = WEIGHTS.weight("widget"), WEIGHTS.weight("licens"), WEIGHTS.weight("x9")
    assert 0 < common < rare < absent


@pytest.mark.parametrize(
    ("question", "chunk", "relevant"),
    [
        # Passes: the section holds the words that carry the question.
        ("How do I set the cache size?", CACHE, True),
        ("Which license is the widget released under?", LICENSE, True),
        # The heading does not have to name the topic: the text is read too.
        ("How do I set the cache size?", BURIED, True),
        # Coverage: common words match, the words that carry the question do not.
        ("How big is the cache of the MIT theme?", BURIED, False),
        ("What is the weather forecast for the cache conference in Paris?", CACHE, False),
        ("Which license covers the cache of the weather station?", LICENSE, False),
        ("Is there a Windows installer for the widget?", LICENSE, False),
        # No content word at all grounds nothing.
        ("What is it?", CACHE, False),
    ],
)
def test_rule_judges_both_ways(question: str, chunk: RetrievedChunk, relevant: bool) -> None:
    verdict = RelevanceRule().judge(question, chunk, WEIGHTS)
    assert verdict.relevant is relevant, verdict


@pytest.mark.parametrize(
    ("question", "unknown"),
    [
        ("How do I set the cache size for Datadog?", ("datadog",)),
        ("Does the cache size work with GraphQL?", ("graphql",)),
        ("How do I set cache_size from @acme/zeppelin?", ("acm", "zeppelin")),
    ],
)
def test_a_name_the_docs_never_write_makes_the_question_relevant_to_nothing(
    question: str, unknown: tuple[str, ...]
) -> None:
    verdict = RelevanceRule().judge(question, CACHE, WEIGHTS)
    assert verdict.unknown_names == unknown
    assert verdict.coverage == 0.0
    assert not verdict.relevant
    # The same words written plainly are only words: they lower the coverage, no more.
    written_plainly = question.lower().replace("@", "").replace("/", " ").replace("_", " ")
    plain = RelevanceRule().judge(written_plainly, CACHE, WEIGHTS)
    assert plain.unknown_names == () and plain.coverage > 0


def test_a_name_counts_more_than_a_word() -> None:
    question = "How do I set the cache size of the Widget?"  # 'Widget' is written as a name
    plain = RelevanceRule(name_weight=1.0).judge(question, CACHE, WEIGHTS)
    named = RelevanceRule(name_weight=4.0).judge(question, CACHE, WEIGHTS)
    assert plain.unknown_names == named.unknown_names == ()
    assert named.coverage < plain.coverage  # the section lacks the name, which now weighs more


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
    assert not RelevanceRule().judge(question, chunk, WEIGHTS).relevant


@given(st.text(max_size=300), st.sampled_from(CHUNKS))
def test_judging_never_raises_and_coverage_is_a_share(question: str, chunk: RetrievedChunk) -> None:
    verdict = RelevanceRule().judge(question, chunk, WEIGHTS)
    assert 0.0 <= verdict.coverage <= 1.0
    assert verdict.relevant is (
        verdict.coverage >= RelevanceRule().min_coverage and verdict.coverage > 0
    )


def test_select_keeps_the_hits_that_share_the_answer_in_order() -> None:
    other = hit("FAQ › Themes", "The widget ships a light theme and a dark theme.")
    kept = RelevanceRule().select("How do I set the cache size?", [other, CACHE, BURIED], WEIGHTS)
    assert kept == [CACHE, BURIED]


def test_once_one_hit_is_relevant_a_weaker_companion_is_kept_too() -> None:
    # 'cache' alone covers less than min_coverage of the question, but enough to be the
    # other part of a two-part question once a relevant section answers it.
    question = "How do I set the cache size, and which license is it under?"
    rule = RelevanceRule(min_coverage=0.4, keep_share=0.6)
    cache_part = rule.judge(question, CACHE, WEIGHTS)
    license_part = rule.judge(question, LICENSE, WEIGHTS)
    assert cache_part.relevant and not license_part.relevant
    assert license_part.coverage >= rule.keep_share * rule.min_coverage
    assert rule.select(question, [CACHE, LICENSE], WEIGHTS) == [CACHE, LICENSE]
    only_relevant = RelevanceRule(min_coverage=0.4, keep_share=1.0)
    assert only_relevant.select(question, [CACHE, LICENSE], WEIGHTS) == [CACHE]
    # Nothing relevant: nothing kept, however close the companions come.
    assert rule.select(question, [LICENSE], WEIGHTS) == []


@pytest.mark.parametrize(
    "options",
    [
        {"min_coverage": 1.5},
        {"min_coverage": -0.1},
        {"min_coverage": True},
        {"keep_share": 1.01},
        {"keep_share": float("nan")},
        {"name_weight": 0.5},
        {"name_weight": float("inf")},
        {"name_weight": "2"},
    ],
)
def test_invalid_thresholds_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        RelevanceRule(**options)


# A page that says a lot about the cache, and one short page about the license.
PARTS_CORPUS = {
    "cache.md": (
        "# Cache\n\n## Cache size\n\nSet cache_size to the number of pages the cache holds.\n\n"
        "## Cache lifetime\n\nA cached page stays in the cache for cache_ttl seconds.\n\n"
        "## Cache eviction\n\nA full cache drops the page read least recently.\n"
    ),
    "license.md": "# License\n\nThe widget is released under the MIT license.\n",
    "themes.md": "# Themes\n\nThe widget ships a light theme and a dark theme.\n",
}


@pytest.fixture
def parts_index() -> Iterator[tuple[SQLiteFTSRetriever, TermWeights]]:
    corpus = MarkdownCorpus.from_texts(PARTS_CORPUS)
    weights = chunk_weights(corpus)
    index = SQLiteFTSRetriever(corpus=corpus)
    yield index, weights
    index.close()


@pytest.mark.anyio
async def test_each_part_of_a_question_brings_its_own_section(
    parts_index: tuple[SQLiteFTSRetriever, TermWeights],
) -> None:
    # The whole question's one best hit is a cache section; the license part is searched on
    # its own, and its section comes in the parts' order.
    retriever = RelevantRetriever(*parts_index, top_k=1)
    question = "How do I set the cache size, and which license is the widget under?"
    kept = [hit.href for hit in await retriever.relevant(question)]
    assert kept[:2] == ["/docs/cache#cache-size", "/docs/license"]


@pytest.mark.anyio
async def test_a_question_whose_parts_each_have_a_section_is_answered(
    parts_index: tuple[SQLiteFTSRetriever, TermWeights],
) -> None:
    # No section covers enough of the whole question, but each part has one that does.
    retriever = RelevantRetriever(*parts_index)
    question = (
        "Which theme is dark, and which license is the widget under, and how many seconds "
        "does a page stay cached?"
    )
    kept = {hit.href for hit in await retriever.relevant(question)}
    assert {"/docs/themes", "/docs/license", "/docs/cache#cache-lifetime"} <= kept
    # A part that nothing answers leaves the question to the whole-question rule.
    assert await retriever.relevant("Which theme is dark, and which GPU does it need?") == []


THEMES_QUESTION = "Which colour schemes come as dark themes out of the box?"


def test_a_first_hit_whose_heading_the_question_names_is_relevant_when_well_ahead() -> None:
    # The question paraphrases the section: few of its words are the section's, but the
    # section's heading is one of them and search ranks it well ahead of the rest.
    rule = RelevanceRule()
    themes = hit("FAQ › Dark themes", "The widget ships a light and a dark theme.", score=10.0)
    license_ = hit("FAQ › Licensing", "The widget is released under the MIT license.", 5.0)
    assert not rule.judge(THEMES_QUESTION, themes, WEIGHTS).relevant
    assert rule.select(THEMES_QUESTION, [themes, license_], WEIGHTS) == [themes]
    # Not well ahead: nothing to go on but the words.
    close = hit("FAQ › Dark themes", "The widget ships a light and a dark theme.", score=5.5)
    assert rule.select(THEMES_QUESTION, [close, license_], WEIGHTS) == []
    # A heading with a word the question does not use, or of one word, says too little.
    for heading in ("FAQ › Dark themes for apps", "FAQ › Themes"):
        other = hit(heading, "The widget ships a light and a dark theme.", 10.0)
        assert rule.select(THEMES_QUESTION, [other, license_], WEIGHTS) == []


def test_a_landing_pages_opening_answers_only_when_ranked_first() -> None:
    rule = RelevanceRule()
    overview = RetrievedChunk(
        id="index",
        title="Widget",
        href="/docs",
        text="- Themes: colour schemes out of the box\n- Caching\n- Logging",
        score=5.0,
    )
    license_ = hit("FAQ › Licensing", "The widget is released under the MIT license.", 6.0)
    assert rule.judge(THEMES_QUESTION, overview, WEIGHTS).relevant
    landing = frozenset({"/docs"})
    assert rule.select(THEMES_QUESTION, [license_, overview], WEIGHTS, overviews=landing) == []
    assert rule.select(THEMES_QUESTION, [license_, overview], WEIGHTS) == [overview]
    assert rule.select(THEMES_QUESTION, [overview, license_], WEIGHTS, overviews=landing) == [
        overview
    ]


# A long section cut into two parts: the command in the first, what it prints in the second.
_FILLER = " ".join(f"Lamp {n} of the harbour stays steady while the crews rest." for n in range(20))
DRILL_CORPUS = {
    "operations.md": (
        "# Operations\n\n## The drill\n\n```sh\nmake drill\n```\n\n"
        f"{_FILLER}\n\n{_FILLER}\n\n"
        "When the drill runs it prints the lamp count and exits with 1 if a lamp failed.\n"
    ),
    "license.md": "# License\n\nThe harbour widget is released under the MIT license.\n",
}


@pytest.fixture
def drill_corpus() -> MarkdownCorpus:
    corpus = MarkdownCorpus.from_texts(DRILL_CORPUS)
    parts = [chunk for chunk in corpus.chunks if chunk.href == "/docs/operations#the-drill"]
    assert len(parts) == 2, "the section is cut into two parts"
    assert "```" in parts[0].text and "```" not in parts[1].text
    return corpus


@pytest.mark.anyio
async def test_a_how_to_question_brings_the_code_part_of_a_long_section(
    drill_corpus: MarkdownCorpus,
) -> None:
    weights = chunk_weights(drill_corpus)
    parts = [c.id for c in drill_corpus.chunks if c.href == "/docs/operations#the-drill"]
    async with SQLiteFTSRetriever(corpus=drill_corpus, top_k=1) as index:
        # Search finds only the part telling what the drill prints.
        found = [hit.id for hit in await index.search("How do I run the drill?", 1)]
        assert found == [parts[1]]
        retriever = RelevantRetriever(index, weights, top_k=1, sections=drill_corpus.chunks)
        # Asked how to run it: the part holding the command joins, in the page's order.
        kept = [hit.id for hit in await retriever.relevant("How do I run the drill?")]
        assert kept == parts
        # Asked what it prints: only the part found.
        told = [hit.id for hit in await retriever.relevant("What does the drill print?")]
        assert told == [parts[1]]
        # Without the corpus's sections there is nothing to look the parts up in.
        bare = RelevantRetriever(index, weights, top_k=1)
        assert [hit.id for hit in await bare.relevant("How do I run the drill?")] == [parts[1]]


# Every page publishes packages; only the install page names the conda-forge channel.
CHANNEL_SECTIONS = [
    *(f"Publishing › Index {n}\nPublish the package to index {n}." for n in range(6)),
    "Installation › Conda\nInstall the widget from conda-forge: conda install -c conda-forge x",
    "Installation › Pip\nInstall the widget with pip install widget.",
]
CHANNEL_WEIGHTS = TermWeights.from_texts(CHANNEL_SECTIONS)
CONDA_INSTALL = hit(
    "Installation › Conda",
    "Install the widget from conda-forge: conda install -c conda-forge widget",
)
CONDA_PUBLISH = hit(
    "Publishing › Conda",
    "Publish the package to conda-forge with a recipe in the feedstock.",
)


def test_a_section_holding_one_of_the_things_a_question_names_is_not_relevant() -> None:
    rule = RelevanceRule()
    question = "How do I publish my package to conda-forge?"
    # The channel's rare words alone cover well over the threshold ...
    install = rule.judge(question, CONDA_INSTALL, CHANNEL_WEIGHTS)
    assert install.coverage >= rule.min_coverage
    # ... but the section holds only that one thing ("conda-forge" is one word), not what the
    # question asks of it.
    assert not install.relevant
    assert rule.judge(question, CONDA_PUBLISH, CHANNEL_WEIGHTS).relevant
    # A question naming one thing is judged on coverage alone.
    assert rule.judge("Where is conda-forge?", CONDA_INSTALL, CHANNEL_WEIGHTS).relevant
    assert rule.select(question, [CONDA_INSTALL], CHANNEL_WEIGHTS) == []


# An option named in prose, its default in the page's table, under another heading.
OPTIONS_CORPUS = {
    "downloads.md": (
        "# Downloads\n\n## Remote files\n\nRemote files are fetched when downloads are enabled. "
        "How long a download may wait is set with `fetch_timeout`, and the retries with "
        "`fetch_retries`.\n\n## Options\n\n"
        "| Option | Type | Default | Description |\n| --- | --- | --- | --- |\n"
        "| `fetch_timeout` | float | `10.0` | Seconds to wait before giving up on a server. |\n"
        "| `fetch_retries` | int | `3` | Attempts made. |\n"
    ),
    "license.md": "# License\n\nThe downloads widget is released under the MIT license.\n",
}


@pytest.mark.anyio
async def test_an_option_named_in_the_best_section_brings_its_table_row() -> None:
    corpus = MarkdownCorpus.from_texts(OPTIONS_CORPUS)
    weights = chunk_weights(corpus)
    question = "How long may a remote file download wait before giving up?"
    async with SQLiteFTSRetriever(corpus=corpus, top_k=1) as index:
        found = [hit.href for hit in await index.search(question, 1)]
        assert found == ["/docs/downloads#remote-files"]
        retriever = RelevantRetriever(index, weights, top_k=1, sections=corpus.chunks)
        # The table's row says what the prose leaves out: the default, right after it.
        kept = [hit.href for hit in await retriever.relevant(question)]
        assert kept == ["/docs/downloads#remote-files", "/docs/downloads#options"]
        # A row that says nothing more of the question than its option's name stays out.
        other = "How are remote file retries fetched?"
        assert [hit.href for hit in await retriever.relevant(other)] == [
            "/docs/downloads#remote-files"
        ]
