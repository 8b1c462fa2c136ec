"""The benchmark scripts' pure helpers, on fixed data: percentiles, ratios, recall, facts.

The scripts live in ``bench/`` (not a package); they are loaded from their files. Nothing here
times anything.
"""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.protocol import (
    EscalationAnswer,
    decode_ask_events,
    decode_ask_request,
    normalize_knowledge_key,
)

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # the scripts import their shared ``_harness``
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up in sys.modules while the class is built.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ask: Any = _load("ask")
quality: Any = _load("ask_quality")
corpora: Any = _load("_corpora")
checks: Any = _load("_corpus_checks")


# --- bench/ask.py --------------------------------------------------------------------------------


def test_latency_percentiles_of_fixed_samples() -> None:
    samples = [ms * 1_000_000 for ms in range(1, 101)]  # 1..100 ms, in ns
    latency = ask.latency_of(list(reversed(samples)))
    assert (latency.p50_ms, latency.p95_ms, latency.p99_ms) == pytest.approx((50.5, 95.05, 99.01))


@pytest.mark.parametrize("samples", [[], [5]])
def test_latency_needs_two_samples(samples: list[int]) -> None:
    with pytest.raises(ValueError):
        ask.latency_of(samples)


@pytest.mark.parametrize(
    ("ours", "floor", "higher", "expected"),
    [
        (10.0, 5.0, False, 2.0),  # twice the floor's milliseconds
        (5.0, 10.0, False, 0.5),
        (100.0, 400.0, True, 4.0),  # a quarter of the floor's requests per second
        (400.0, 100.0, True, 0.25),
    ],
)
def test_cost_ratio(ours: float, floor: float, higher: bool, expected: float) -> None:
    assert ask.cost_ratio(ours, floor, higher_is_better=higher) == pytest.approx(expected)


@pytest.mark.parametrize(("ours", "floor"), [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0)])
def test_cost_ratio_of_nothing_is_nan(ours: float, floor: float) -> None:
    assert math.isnan(ask.cost_ratio(ours, floor, higher_is_better=False))


@pytest.mark.parametrize(
    ("first_many", "whole_single", "streams", "expected"),
    [(100.0, 10.0, 20, 0.5), (400.0, 10.0, 20, 2.0), (10.0, 10.0, 1, 1.0)],
)
def test_fairness(first_many: float, whole_single: float, streams: int, expected: float) -> None:
    assert ask.fairness(first_many, whole_single, streams) == pytest.approx(expected)


def test_floor_body_is_three_ask_events_ending_in_done() -> None:
    decoded = decode_ask_events(b"".join(ask.FLOOR_LINES).decode())
    assert [event.type for event in decoded.events] == ["text", "text", "done"]
    assert decoded.rest == ""


@pytest.mark.parametrize("session_id", [None, "bench-0123abcd"])
def test_ask_body_is_a_valid_ask_request(session_id: str | None) -> None:
    decoded = decode_ask_request(ask.ask_body("How do I start?", session_id))
    assert decoded.ok
    assert decoded.value.messages[-1].content == "How do I start?"
    assert decoded.value.session_id == session_id


def test_answer_body() -> None:
    assert json.loads(ask.answer_body("Exact title")) == {"question": "Exact title"}


@pytest.mark.parametrize(
    ("chunk", "ends"), [(b'{"type":"text"', False), (b'{"type":"done"}\n', True), (b"", False)]
)
def test_first_line_ends(chunk: bytes, ends: bool) -> None:
    assert ask.first_line_ends(chunk) is ends


def test_report_prints_every_row_beside_its_floor() -> None:
    results = {key: 10.0 for _, ours, floor, _, _ in ask.ROWS for key in (ours, floor)}
    results |= {"exact_rps": 100.0, "floor_rps": 400.0, "ask_ttfb20_p95": 40.0}
    results |= {"ask_fair": 0.2, "floor_fair": 0.05}
    text = ask.report(results)
    rows = [line for line in text.splitlines() if line.endswith(("(ms)", "(req/s)"))]
    assert len(rows) == len(ask.ROWS)
    assert "4.00x  (req/s)" in text  # a quarter of the floor's rate costs four times as much
    assert "20 streams vs 1: ours 4.00x, floor 1.00x" in text
    assert "ours 0.20, floor 0.05" in text


# --- bench/ask_quality.py ------------------------------------------------------------------------


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50))
def test_percentile_50_is_the_median(values: list[float]) -> None:
    assert quality.percentile(values, 50) == pytest.approx(statistics.median(values), abs=1e-6)


def test_percentile_of_fixed_data() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert [quality.percentile(values, p) for p in (0, 25, 50, 95, 100)] == pytest.approx(
        [1.0, 1.75, 2.5, 3.85, 4.0]
    )


@pytest.mark.parametrize(("values", "p"), [([], 50), ([1.0], -1), ([1.0], 100.5)])
def test_percentile_rejects(values: list[float], p: float) -> None:
    with pytest.raises(ValueError):
        quality.percentile(values, p)


@pytest.mark.parametrize(
    ("answer", "fact", "found"),
    [
        ("Press **Escape** to stop.", "escape", True),
        ("Call `stop()` to cancel [1].", "stop()", True),
        ("The limit is 64\u00a0KiB\nper body.", "64 KiB per body", True),
        ("ＮＦＫＣ first, then case folding.", "NFKC", True),
        ("at most 10,000 traces", "10,000 traces", True),
        ("at most 10 000 traces", "10,000 traces", False),
        ("No grounded sources were found.", "64 KiB", False),
    ],
)
def test_contains_fact(answer: str, fact: str, found: bool) -> None:
    assert quality.contains_fact(answer, fact) is found


@pytest.mark.parametrize(
    ("href", "page", "matches"),
    [
        ("/docs/actions__confirmation#typed-action-confirmation", "actions__confirmation.md", True),
        ("/docs/actions__confirmation", "actions__confirmation.md", True),
        ("https://example.com/docs/guides/setup?x=1#install", "guides/setup.md", True),
        ("/docs/guides", "guides/README.md", True),
        ("/docs/guides/", "guides/index.md", True),
        ("/docs/a%20b#c", "a b.md", True),
        ("/actions__confirmation", "actions__confirmation.md", True),
        ("/docs/actions__confirmation-2", "actions__confirmation.md", False),
        ("/docs/xactions__confirmation", "actions__confirmation.md", False),
        ("/docs/actions__policy#actions__confirmation", "actions__confirmation.md", False),
        # A root index or README stands for the folder: the link prefix itself.
        ("/docs", "README.md", True),
        ("https://example.com/docs/", "index.md", True),
        ("/docs/guides", "index.md", False),
        ("/elsewhere", "index.md", False),
    ],
)
def test_href_matches(href: str, page: str, matches: bool) -> None:
    assert quality.href_matches(href, page) is matches


def test_a_root_index_under_an_empty_prefix_is_the_site_root() -> None:
    assert quality.href_matches("/", "index.md", prefix="")
    assert not quality.href_matches("/guide", "index.md", prefix="")


def test_recall_counts_only_the_first_k_hits() -> None:
    hrefs = [f"/docs/page-{n}#intro" for n in range(1, 8)]
    assert quality.first_match(hrefs, ["page-6.md"]) == 6
    assert not quality.recall_at(hrefs, ["page-6.md"], 5)
    assert quality.recall_at(hrefs, ["page-6.md"], 6)
    assert quality.recall_at(hrefs, ["nowhere.md", "page-1.md"], 1)
    assert quality.first_match(hrefs, ["nowhere.md"]) is None


def _question(qid: str, kind: str, pages: tuple[str, ...] = (), *facts: tuple[str, ...]) -> Any:
    return quality.Question(qid, "dev", kind, f"{qid}?", pages, tuple(facts))


def _reply(outcome: str, text: str = "", *citations: str, ms: float = 10.0) -> Any:
    return quality.Reply(outcome, text, tuple(citations), ms / 1000)


def test_score_judges_answers_refusals_and_made_up_answers() -> None:
    lookup = _question("a", "lookup", ("a.md",), ("alpha fact", "alpha"), ("second",))
    none = _question("u", "unanswerable")
    full = quality.score(lookup, _reply("answer", "The **alpha  fact** and second [1].", "/docs/a"))
    half = quality.score(lookup, _reply("answer", "Only alpha here.", "/docs/other"))
    off = quality.score(lookup, _reply("answer", "Unrelated.", "/docs/other"))
    refused = quality.score(lookup, _reply("escalation", "alpha"))
    made_up = quality.score(none, _reply("answer", "Made up."))
    kept_quiet = quality.score(none, _reply("escalation", "No grounded sources."))
    assert (full.coverage, full.wrong, full.answered) == (1.0, False, True)
    assert (half.coverage, half.wrong) == (0.5, False)  # states a fact, cites another page
    assert (off.coverage, off.wrong) == (0.0, True)  # neither cites nor states anything right
    assert (refused.coverage, refused.wrong, refused.answered, refused.length) == (
        0.0,
        False,
        False,
        0,
    )
    assert made_up.wrong and not kept_quiet.wrong and not kept_quiet.answered
    assert math.isnan(quality.score(_question("p", "lookup", ("p.md",)), _reply("answer")).coverage)


def test_figures_and_groups_of_fixed_replies() -> None:
    questions = [
        _question("a", "lookup", ("a.md",), ("alpha",)),
        _question("b", "lookup", ("b.md",), ("beta",)),
        _question("n", "numeric", ("n.md",), ("64 KiB",)),
        _question("u", "unanswerable"),
        _question("v", "unanswerable"),
    ]
    replies = {
        "a": _reply("answer", "alpha [1]", "/docs/a", ms=10),
        "b": _reply("escalation", ms=20),
        "n": _reply("answer", "Nothing right.", "/docs/x", ms=30),
        "u": _reply("escalation", ms=40),
        "v": _reply("answer", "Made up, twenty chars", ms=50),
    }
    retrieved = {"a": ("/docs/a",), "b": ("/docs/x",), "n": ("/docs/n#limits",), "u": (), "v": ()}
    figures = quality.figures(questions, replies)
    assert figures.questions == 5
    assert figures.answered == pytest.approx(2 / 3)
    assert figures.coverage == pytest.approx(1 / 3)
    assert figures.refused == pytest.approx(1 / 2)
    assert figures.false_answers == pytest.approx(2 / 3)  # "n" and "v" of three answers
    assert figures.mean_length == pytest.approx((9 + 14 + 21) / 3)
    assert figures.p50_ms == pytest.approx(30.0)
    groups = quality.summarize(questions, retrieved, {"assistant": replies})
    assert [(g.split, g.type) for g in groups] == [
        ("dev", "lookup"),
        ("dev", "numeric"),
        ("dev", "unanswerable"),
        ("dev", "answerable"),
        ("dev", "all"),
    ]
    assert groups[0].recall == pytest.approx(0.5)
    assert math.isnan(groups[2].recall)
    assert "split: dev" in quality.format_report(groups)


def test_a_baseline_shows_sections_whole_and_never_refuses_while_it_has_one() -> None:
    sections = [quality.Section(f"/docs/p{n}", f"P{n}", f"text {n}") for n in range(3)]
    best = quality.shown_whole(sections[:1], 0.002)
    top3 = quality.shown_whole(sections, 0.002)
    assert (best.outcome, best.text, best.citations) == ("answer", "P0\n\ntext 0", ("/docs/p0",))
    assert top3.citations == ("/docs/p0", "/docs/p1", "/docs/p2")
    assert quality.shown_whole([], 0.002).outcome == "escalation"


def test_project_questions_have_pages_and_no_facts() -> None:
    questions = quality.from_pairs(
        [("How do sessions expire?", "/docs/storage#ttl")], ["What is the capital of France?"]
    )
    assert [(q.split, q.type, q.pages, q.facts) for q in questions] == [
        ("project", "lookup", ("storage.md",), ()),
        ("project", "unanswerable", (), ()),
    ]


def test_envelope_view_of_a_model_and_of_a_mapping() -> None:
    refusal = EscalationAnswer.model_validate(
        {
            "protocol": "agentskit.chat.answer",
            "version": 1,
            "outcome": "escalation",
            "query": "Flutter?",
            "normalizedQuery": normalize_knowledge_key("Flutter?"),
            "message": "No grounded sources were found for this question.",
            "reason": "miss",
            "confidence": {"level": "low", "basis": "miss"},
        }
    )
    assert quality.envelope_view(refusal) == (
        "escalation",
        "No grounded sources were found for this question.",
        (),
    )
    answer = {
        "outcome": "answer",
        "answer": {
            "markdown": "Use it [1].",
            "citations": [{"id": "a", "title": "A", "href": "/docs/a#x"}],
        },
    }
    assert quality.envelope_view(answer) == ("answer", "Use it [1].", ("/docs/a#x",))
    with pytest.raises(TypeError):
        quality.envelope_view(["not", "an", "envelope"])


_GOOD = {"id": "a", "split": "dev", "type": "lookup", "question": "A?", "pages": ["a.md"]}


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"questions": {}},
        {"questions": [{**_GOOD, "pages": []}]},
        {"questions": [{**_GOOD, "question": " "}]},
        {"questions": [{**_GOOD, "type": "trivia"}]},
        {"questions": [{**_GOOD, "split": "train"}]},
        {"questions": [{**_GOOD, "facts": [[]]}]},
        {"questions": [{**_GOOD, "facts": [["x", ""]]}]},
        {"questions": [{**_GOOD, "type": "unanswerable"}]},
        {"questions": [_GOOD, _GOOD]},
    ],
)
def test_parse_questions_rejects(data: object) -> None:
    with pytest.raises(ValueError):
        quality.parse_questions(data)


def test_the_seed_questions_cover_every_type_in_both_splits() -> None:
    questions = quality.load_questions(corpora.BY_NAME["seed"].questions)
    assert len(questions) >= 150
    for split in ("dev", "test"):
        kinds = {q.type for q in questions if q.split == split}
        assert kinds == set(quality.TYPES), split


@pytest.mark.parametrize("name", ["seed", "starlette"])
def test_every_fact_is_stated_on_one_of_its_pages(name: str) -> None:
    """The corpora CI has beside the repository; bench/ask_quality.py runs the same check on
    every corpus it measures (the fetched ones too) and fails when one does not hold."""
    corpus = corpora.BY_NAME[name]
    docs = corpus.locate()
    assert docs is not None, f"the {name} corpus is not at {corpus.candidates()}"
    answerable = [q for q in quality.load_questions(corpus.questions) if q.answerable]
    assert answerable
    assert checks.unstated_facts(docs, answerable, quality.states) == []


def test_the_fact_check_names_a_stale_question(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("# Page\n\nThe default port is 8000.\n", "utf-8")
    good = quality.Question("q1", "dev", "lookup", "Port?", ("page.md",), (("8000",),))
    stale = quality.Question("q2", "dev", "lookup", "Port?", ("page.md",), (("9000", "nine"),))
    missing = quality.Question("q3", "dev", "lookup", "Port?", ("gone.md",), (("8000",),))
    problems = checks.unstated_facts(tmp_path, [good, stale, missing], quality.states)
    assert problems == [
        "q2: fact 1 is on none of its pages",
        "q3: page gone.md is not in the corpus",
    ]


def test_the_syntax_check_names_an_answer_holding_mkdocs_syntax() -> None:
    answers = {"clean": "Run `!!! note` in code.", "dirty": '!!! note "Careful"\n    text'}
    problems = checks.syntax_in_answers(answers)
    assert len(problems) == 1
    assert problems[0].startswith("dirty: the answer holds")


def test_every_corpus_has_its_frozen_question_file() -> None:
    assert corpora.CORPORA
    for corpus in corpora.CORPORA:
        questions = quality.load_questions(corpus.questions)
        types = {q.type for q in questions}
        assert types == set(quality.TYPES), corpus.name
        assert {q.split for q in questions} == {"dev", "test"}, corpus.name


def test_a_corpus_is_looked_for_under_the_corpora_folder_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTSKIT_CORPORA_DIR", str(tmp_path))
    hatch = corpora.BY_NAME["hatch"]
    assert hatch.candidates()[0] == tmp_path / "hatch-1.18.2" / "docs"
    assert hatch.locate() is None or hatch.locate() != tmp_path / "hatch-1.18.2" / "docs"
    (tmp_path / "hatch-1.18.2" / "docs").mkdir(parents=True)
    assert hatch.locate() == tmp_path / "hatch-1.18.2" / "docs"


def test_the_seed_corpus_is_not_fetched(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        corpora.fetch(corpora.BY_NAME["seed"], tmp_path)


def test_unpacking_keeps_only_files_inside_the_target(tmp_path: Path) -> None:
    import io  # noqa: PLC0415
    import tarfile  # noqa: PLC0415

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name in ("pkg-1/docs/a.md", "../escape.md", "/abs.md"):
            info = tarfile.TarInfo(name)
            info.size = 1
            archive.addfile(info, io.BytesIO(b"x"))
        link = tarfile.TarInfo("pkg-1/docs/link.md")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        archive.addfile(link)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as archive:
        kept = [member.name for member in corpora._safe_members(archive)]
    assert kept == ["pkg-1/docs/a.md"]


def test_the_summary_puts_corpora_side_by_side() -> None:
    questions = [_question("a", "lookup", ("a.md",), ("alpha",)), _question("u", "unanswerable")]
    replies = {
        "assistant": {"a": _reply("answer", "alpha [1]", "/docs/a"), "u": _reply("escalation")},
        "best section": {
            "a": _reply("answer", "alpha and a long section", "/docs/a"),
            "u": _reply("answer", "x"),
        },
        "top 3 sections": {"a": _reply("answer", "alpha", "/docs/a"), "u": _reply("answer", "x")},
    }
    groups = quality.summarize(questions, {"a": ("/docs/a",), "u": ()}, replies)
    run = quality.CorpusRun("demo", Path("demo"), tuple(questions), groups, 0.1)
    text = quality.summary([run])
    [row] = [line for line in text.splitlines() if line.startswith("demo")]
    # facts 1.00 for all three; the assistant's answer is 9 characters against 12.5 on average
    # for the best section (24 and 1 over its two answers): a ratio of 0.72.
    assert (
        " ".join(row.split())
        == "demo dev 2 1.00 | 1.00 1.00 1.00 1.00 | 9 12 0.72 | 1.00 1.00 0.00"
    )
