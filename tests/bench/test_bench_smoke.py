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
        ("/docs", "README.md", False),
    ],
)
def test_href_matches(href: str, page: str, matches: bool) -> None:
    assert quality.href_matches(href, page) is matches


def test_recall_counts_only_the_first_k_hits() -> None:
    hrefs = [f"/docs/page-{n}#intro" for n in range(1, 8)]
    assert quality.first_match(hrefs, ["page-6.md"]) == 6
    assert not quality.recall_at(hrefs, ["page-6.md"], 5)
    assert quality.recall_at(hrefs, ["page-6.md"], 6)
    assert quality.recall_at(hrefs, ["nowhere.md", "page-1.md"], 1)
    assert quality.first_match(hrefs, ["nowhere.md"]) is None


def _reply(question_id: str, outcome: str, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "retrieved": (),
        "text": "",
        "citations": (),
        "ask_seconds": 0.01,
        "retrieve_seconds": 0.002,
        **fields,
    }
    return quality.Reply(question_id=question_id, outcome=outcome, **values)


def test_summarize_fixed_replies() -> None:
    questions = quality.parse_questions(
        {
            "answerable": [
                {"id": "a", "question": "A?", "pages": ["a.md"], "fact": "alpha fact"},
                {"id": "b", "question": "B?", "pages": ["b.md", "b2.md"], "fact": "beta"},
                {"id": "c", "question": "C?", "pages": ["c.md"], "fact": "gamma"},
            ],
            "unanswerable": [{"id": "u", "question": "U?"}, {"id": "v", "question": "V?"}],
        }
    )
    replies = {
        # Recalled, answered, cites its page, states the fact.
        "a": _reply(
            "a",
            "answer",
            retrieved=("/docs/x", "/docs/a#one"),
            text="The **alpha  fact** [1].",
            citations=("/docs/a#one",),
        ),
        # Recalled at rank 6 only; answered from another page, without the fact.
        "b": _reply(
            "b",
            "answer",
            retrieved=(*(f"/docs/o{n}" for n in range(5)), "/docs/b2"),
            text="Something else [1].",
            citations=("/docs/o1",),
        ),
        # Recalled, but refused: states the fact nowhere that counts.
        "c": _reply("c", "escalation", retrieved=("/docs/c",), text="gamma"),
        "u": _reply("u", "escalation"),
        "v": _reply("v", "answer", text="Made up."),
    }
    report = quality.summarize(questions, replies)
    assert (report.answerable, report.recalled, report.answered) == (3, 2, 2)
    assert (report.cited_expected, report.fact_found) == (1, 1)
    assert (report.unanswerable, report.refused) == (2, 1)
    assert report.misses == ("b",)
    assert report.wrongly_answered == ("v",)
    assert report.ask_p50_ms == pytest.approx(10.0)
    assert "recall@5" in quality.format_report(report)


def test_questions_without_facts_count_for_recall_and_citations_only() -> None:
    questions = quality.from_pairs(
        [("How do sessions expire?", "/docs/storage#ttl"), ("What is a guide?", "/docs/guide")],
        ["What is the capital of France?"],
    )
    assert [q.pages for q in questions.answerable] == [("storage.md",), ("guide.md",)]
    assert all(q.fact is None for q in questions.answerable)
    replies = {
        "q01": _reply("q01", "answer", retrieved=("/docs/storage",), citations=("/docs/storage",)),
        "q02": _reply("q02", "escalation", retrieved=("/docs/other",)),
        "u01": _reply("u01", "escalation"),
    }
    report = quality.summarize(questions, replies)
    assert (report.recalled, report.cited_expected, report.refused) == (1, 1, 1)
    assert (report.with_fact, report.fact_found) == (0, 0)
    assert "(no facts)" in quality.format_report(report)
    assert (
        quality.parse_questions({"answerable": [{"id": "a", "question": "A?", "pages": ["a.md"]}]})
        .answerable[0]
        .fact
        is None
    )


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


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"answerable": {}},
        {"answerable": [{"id": "a", "question": "A?", "pages": [], "fact": "x"}]},
        {"answerable": [{"id": "a", "question": " ", "pages": ["a.md"], "fact": "x"}]},
        {"answerable": [{"id": "a", "question": "A?", "pages": ["a.md"], "fact": ""}]},
        {"unanswerable": [{"id": "u"}]},
        {"unanswerable": [{"id": "u", "question": "U?"}, {"id": "u", "question": "V?"}]},
    ],
)
def test_parse_questions_rejects(data: object) -> None:
    with pytest.raises(ValueError):
        quality.parse_questions(data)


def test_seed_questions_are_thirty_plus_ten_and_grounded() -> None:
    questions = quality.load_questions(quality.DEFAULT_QUESTIONS)
    assert (len(questions.answerable), len(questions.unanswerable)) == (30, 10)
    docs = quality.DEFAULT_DOCS
    if not docs.is_dir():
        pytest.skip(f"the seed docs are not at {docs}")
    for question in questions.answerable:
        texts = [(docs / page).read_text("utf-8") for page in question.pages]
        assert any(quality.contains_fact(text, question.fact) for text in texts), question.id
