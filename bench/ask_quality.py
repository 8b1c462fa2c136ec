"""Answer quality of the docs assistant over documents we did not write.

Run with ``.venv/bin/python bench/ask_quality.py``. It builds the docs assistant
(:func:`agentskit_chat.create_docs_assistant`: knowledge artifact, chunk index, extractive
generator) over ``--docs`` (default ``../shared/seeds/agentskit-chat-docs`` next to the
repository, or ``$AGENTSKIT_SEED_DOCS``), asks every question of ``--questions`` (default
``bench/seed_questions.json``) and prints:

- **recall@5**: the expected page is among the pages of the top five ``retrieve`` hits;
- **answered, citing the expected page**: the outcome is ``answer`` and one of its citations
  links the expected page;
- **answers containing the fact**: the answer's Markdown contains the question's key phrase
  (case-insensitive, after NFKC, with Markdown code and emphasis marks removed and whitespace
  collapsed);
- **unanswerable questions refused**: the outcome is an ``escalation`` (no answer was made up);
- the time per question: p50 and p95 of ``ask()``, and of ``retrieve()`` alone.

A question file is JSON: ``{"answerable": [{"id", "question", "pages", "fact"}],
"unanswerable": [{"id", "question"}]}``; ``pages`` are file paths inside the docs folder, any one
of which answers the question; ``fact`` may be left out (the question then counts for recall
and citations only). ``--project`` runs the regression questions of
``tests/assistant/test_docs_questions.py`` over the project's own ``docs/`` instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DOCS = Path(
    os.environ.get("AGENTSKIT_SEED_DOCS", ROOT.parent / "shared" / "seeds" / "agentskit-chat-docs")
)
DEFAULT_QUESTIONS = ROOT / "bench" / "seed_questions.json"
TOP_K = 5

_MARKUP = re.compile(r"[`*]+")
_INDEX_STEMS = frozenset({"index", "readme"})


# --- questions -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnswerableQuestion:
    """A question the docs answer: the pages that answer it and the fact an answer must state."""

    id: str
    question: str
    pages: tuple[str, ...]
    fact: str | None


@dataclass(frozen=True, slots=True)
class UnanswerableQuestion:
    """A plausible question the docs do not answer: it must be refused."""

    id: str
    question: str


@dataclass(frozen=True, slots=True)
class QuestionSet:
    """Both kinds of questions, in file order."""

    answerable: tuple[AnswerableQuestion, ...]
    unanswerable: tuple[UnanswerableQuestion, ...]


def _text(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"question {entry.get('id')!r}: {key!r} must be a non-empty string")
    return value


def parse_questions(data: object) -> QuestionSet:
    """Validate a decoded question file.

    Raises:
        ValueError: the structure is not the one described in the module docstring, or two
            questions share an id.
    """
    if not isinstance(data, Mapping):
        raise ValueError("a question file is a JSON object")
    answerable_raw = data.get("answerable", [])
    unanswerable_raw = data.get("unanswerable", [])
    if not isinstance(answerable_raw, list) or not isinstance(unanswerable_raw, list):
        raise ValueError("'answerable' and 'unanswerable' must be lists")
    answerable = []
    for entry in answerable_raw:
        if not isinstance(entry, Mapping):
            raise ValueError("every question is an object")
        pages = entry.get("pages")
        if (
            not isinstance(pages, list)
            or not pages
            or not all(isinstance(p, str) and p.strip() for p in pages)
        ):
            raise ValueError(f"question {entry.get('id')!r}: 'pages' must list page paths")
        answerable.append(
            AnswerableQuestion(
                id=_text(entry, "id"),
                question=_text(entry, "question"),
                pages=tuple(pages),
                fact=None if entry.get("fact") is None else _text(entry, "fact"),
            )
        )
    unanswerable = []
    for entry in unanswerable_raw:
        if not isinstance(entry, Mapping):
            raise ValueError("every question is an object")
        unanswerable.append(
            UnanswerableQuestion(id=_text(entry, "id"), question=_text(entry, "question"))
        )
    ids = [q.id for q in answerable] + [q.id for q in unanswerable]
    if len(set(ids)) != len(ids):
        raise ValueError("question ids must be unique")
    return QuestionSet(tuple(answerable), tuple(unanswerable))


def load_questions(path: Path) -> QuestionSet:
    """Read and validate a question file (see :func:`parse_questions`)."""
    return parse_questions(json.loads(path.read_text("utf-8")))


def from_pairs(pairs: Sequence[tuple[str, str]], refused: Sequence[str]) -> QuestionSet:
    """Questions given as ``(question, page link)`` pairs (``/docs/storage`` -> ``storage.md``)
    and unanswerable questions, without facts."""
    answerable = tuple(
        AnswerableQuestion(
            id=f"q{n:02d}",
            question=question,
            pages=(href_path(link).rsplit("/", 1)[-1] + ".md",),
            fact=None,
        )
        for n, (question, link) in enumerate(pairs, start=1)
    )
    unanswerable = tuple(
        UnanswerableQuestion(id=f"u{n:02d}", question=question)
        for n, question in enumerate(refused, start=1)
    )
    return QuestionSet(answerable, unanswerable)


def project_questions() -> QuestionSet:
    """The regression questions about ``docs/`` kept in ``tests/assistant``."""
    import importlib  # noqa: PLC0415

    sys.path.insert(0, str(ROOT))
    module = importlib.import_module("tests.assistant.test_docs_questions")
    return from_pairs(module.QUESTIONS, module.UNANSWERABLE)


# --- scoring -------------------------------------------------------------------------------------


def normalize_text(text: str) -> str:
    """NFKC, case-folded, Markdown code and emphasis marks removed, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_MARKUP.sub("", folded).split())


def contains_fact(answer: str, fact: str) -> bool:
    """Whether ``answer`` states ``fact``: a substring match after :func:`normalize_text`."""
    return normalize_text(fact) in normalize_text(answer)


def page_stem(page: str) -> str:
    """The link path of a page: its path without ``.md``; an index or README stands for its
    folder (``guides/README.md`` -> ``guides``)."""
    path = page.strip("/")
    for suffix in (".md", ".markdown"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    parts = path.split("/")
    if parts[-1].lower() in _INDEX_STEMS:
        parts = parts[:-1]
    return "/".join(parts)


def href_path(href: str) -> str:
    """The decoded path of a link, without origin, query or fragment, and without a trailing
    slash (``/docs/a%20b#x`` -> ``/docs/a b``)."""
    path = unquote(urlsplit(href).path)
    return path.rstrip("/") or "/"


def href_matches(href: str, page: str) -> bool:
    """Whether ``href`` links ``page`` (a path in the docs folder), under any link prefix."""
    stem = page_stem(page)
    path = href_path(href)
    if not stem:
        return False
    return path == "/" + stem or path == stem or path.endswith("/" + stem)


def first_match(hrefs: Sequence[str], pages: Iterable[str]) -> int | None:
    """The 1-based rank of the first of ``hrefs`` that links one of ``pages``, or ``None``."""
    wanted = tuple(pages)
    for rank, href in enumerate(hrefs, start=1):
        if any(href_matches(href, page) for page in wanted):
            return rank
    return None


def recall_at(hrefs: Sequence[str], pages: Iterable[str], k: int = TOP_K) -> bool:
    """Whether one of the first ``k`` links points at one of ``pages``."""
    rank = first_match(hrefs[:k], pages)
    return rank is not None


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) by linear interpolation between closest ranks.

    Raises:
        ValueError: no values, or ``p`` outside 0..100.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError("p must be within 0..100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


# --- results -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """What the assistant did with one question."""

    question_id: str
    retrieved: tuple[str, ...]
    outcome: str
    text: str
    citations: tuple[str, ...]
    ask_seconds: float
    retrieve_seconds: float


@dataclass(frozen=True, slots=True)
class QualityReport:
    """The harness's figures; counts are out of ``answerable`` or ``unanswerable``."""

    answerable: int
    recalled: int
    answered: int
    cited_expected: int
    with_fact: int
    fact_found: int
    unanswerable: int
    refused: int
    ask_p50_ms: float
    ask_p95_ms: float
    retrieve_p50_ms: float
    misses: tuple[str, ...]
    wrongly_answered: tuple[str, ...]


def envelope_view(envelope: object) -> tuple[str, str, tuple[str, ...]]:
    """``(outcome, text, citation hrefs)`` of an answer envelope (a model or its wire mapping).

    The text is the answer's Markdown, or the message of choices and escalations.
    """
    to_wire = getattr(envelope, "to_wire", None)
    wire = to_wire() if callable(to_wire) else envelope
    if not isinstance(wire, Mapping):
        raise TypeError("an answer envelope is a model with to_wire() or a mapping")
    outcome = str(wire.get("outcome", ""))
    answer = wire.get("answer")
    if isinstance(answer, Mapping):
        text = str(answer.get("markdown", ""))
        citations = tuple(
            str(c.get("href", "")) for c in answer.get("citations", ()) if isinstance(c, Mapping)
        )
        return outcome, text, citations
    return outcome, str(wire.get("message", "")), ()


def summarize(
    questions: QuestionSet, replies: Mapping[str, Reply], *, k: int = TOP_K
) -> QualityReport:
    """Score every reply against its question."""
    recalled = answered = cited = facts = refused = 0
    misses: list[str] = []
    wrong: list[str] = []
    for question in questions.answerable:
        reply = replies[question.id]
        if recall_at(reply.retrieved, question.pages, k):
            recalled += 1
        else:
            misses.append(question.id)
        if reply.outcome == "answer":
            answered += 1
            if first_match(reply.citations, question.pages) is not None:
                cited += 1
            if question.fact is not None and contains_fact(reply.text, question.fact):
                facts += 1
    for unanswerable in questions.unanswerable:
        if replies[unanswerable.id].outcome == "escalation":
            refused += 1
        else:
            wrong.append(unanswerable.id)
    asked = [reply.ask_seconds * 1000 for reply in replies.values()]
    searched = [reply.retrieve_seconds * 1000 for reply in replies.values()]
    return QualityReport(
        answerable=len(questions.answerable),
        recalled=recalled,
        answered=answered,
        cited_expected=cited,
        with_fact=sum(1 for q in questions.answerable if q.fact is not None),
        fact_found=facts,
        unanswerable=len(questions.unanswerable),
        refused=refused,
        ask_p50_ms=percentile(asked, 50) if asked else math.nan,
        ask_p95_ms=percentile(asked, 95) if asked else math.nan,
        retrieve_p50_ms=percentile(searched, 50) if searched else math.nan,
        misses=tuple(misses),
        wrongly_answered=tuple(wrong),
    )


def _ratio(part: int, whole: int) -> str:
    share = part / whole if whole else 0.0
    return f"{part:>3}/{whole:<3} {share:>6.1%}"


def format_report(report: QualityReport, *, k: int = TOP_K) -> str:
    """The report as the harness prints it."""
    lines = [
        f"recall@{k} (expected page among top-{k} retrieve hits) "
        f"{_ratio(report.recalled, report.answerable)}",
        f"answered                                        "
        f"{_ratio(report.answered, report.answerable)}",
        f"answered, citing the expected page              "
        f"{_ratio(report.cited_expected, report.answerable)}",
        f"answers containing the fact                     "
        f"{_ratio(report.fact_found, report.with_fact) if report.with_fact else '(no facts)'}",
        f"unanswerable questions refused (escalation)     "
        f"{_ratio(report.refused, report.unanswerable)}",
        f"time per question: ask() p50 {report.ask_p50_ms:.1f} ms, p95 "
        f"{report.ask_p95_ms:.1f} ms; retrieve() p50 {report.retrieve_p50_ms:.1f} ms",
    ]
    if report.misses:
        lines.append(f"not recalled@{k}: {', '.join(report.misses)}")
    if report.wrongly_answered:
        lines.append(f"unanswerable but answered: {', '.join(report.wrongly_answered)}")
    return "\n".join(lines)


# --- the run -------------------------------------------------------------------------------------


async def run(docs: Path, questions: QuestionSet, *, k: int = TOP_K) -> dict[str, Reply]:
    """Build the docs assistant over ``docs`` and put every question to it."""
    from agentskit_chat.assistant import (  # noqa: PLC0415 - only the run needs it
        create_docs_assistant,
    )

    replies: dict[str, Reply] = {}
    clock = time.perf_counter
    with tempfile.TemporaryDirectory(prefix="agentskit-quality-") as scratch:
        index_path = Path(scratch) / "index.sqlite3"
        async with create_docs_assistant(docs, index_path=index_path) as assistant:
            asked: list[tuple[str, str]] = [(q.id, q.question) for q in questions.answerable]
            asked += [(q.id, q.question) for q in questions.unanswerable]
            for question_id, question in asked:
                started = clock()
                hits = await assistant.retrieve(question, top_k=k)
                searched = clock() - started
                started = clock()
                envelope = await assistant.ask(question)
                answered = clock() - started
                outcome, text, citations = envelope_view(envelope)
                replies[question_id] = Reply(
                    question_id=question_id,
                    retrieved=tuple(hit.href for hit in hits),
                    outcome=outcome,
                    text=text,
                    citations=citations,
                    ask_seconds=answered,
                    retrieve_seconds=searched,
                )
    return replies


def _details(questions: QuestionSet, replies: Mapping[str, Reply]) -> list[str]:
    lines = []
    for question in questions.answerable:
        reply = replies[question.id]
        rank = first_match(reply.retrieved, question.pages)
        cited = first_match(reply.citations, question.pages) is not None
        if question.fact is None:
            fact = "-"
        else:
            found = reply.outcome == "answer" and contains_fact(reply.text, question.fact)
            fact = "yes" if found else "no"
        lines.append(
            f"  {question.id:<32} rank {rank or '-':>2}  {reply.outcome:<10} "
            f"cited {'yes' if cited else 'no ':<3}  fact {fact}"
        )
    for unanswerable in questions.unanswerable:
        lines.append(f"  {unanswerable.id:<32} (unanswerable)  {replies[unanswerable.id].outcome}")
    return lines


def main() -> None:
    import anyio  # noqa: PLC0415 - keep the helpers importable without the run's dependencies

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, default=DEFAULT_DOCS)
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument(
        "--project", action="store_true", help="the tests' questions over the project's docs/"
    )
    parser.add_argument("--verbose", action="store_true", help="one line per question")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    if args.project:
        args.docs = ROOT / "docs"
        questions = project_questions()
    else:
        questions = load_questions(args.questions)
    if not args.docs.is_dir():
        sys.exit(f"docs folder not found: {args.docs} (pass --docs or set AGENTSKIT_SEED_DOCS)")
    started = time.perf_counter()
    replies = anyio.run(run, args.docs, questions)
    report = summarize(questions, replies)
    if args.json:
        print(json.dumps(dataclasses.asdict(report)))
        return
    print(
        f"{len(questions.answerable)} answerable and {len(questions.unanswerable)} unanswerable "
        f"questions over {args.docs} ({time.perf_counter() - started:.1f} s in all)"
    )
    print(format_report(report))
    if args.verbose:
        print("\n".join(_details(questions, replies)))


if __name__ == "__main__":
    main()
