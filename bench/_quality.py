"""The questions, the scoring and the figures of ``bench/ask_quality.py`` (see its documentation).

Kept apart from the run so the smoke tests import them without building an assistant.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlsplit

TOP_K = 5
#: What every citation link starts with: the assistant's default ``href_prefix``.
HREF_PREFIX: Final = "/docs"

#: The question types, in the order the report lists them.
TYPES: Final = ("lookup", "numeric", "multi-page", "negative", "unanswerable")
SPLITS: Final = ("dev", "test", "project")
#: The systems scored on every question, in report order.
SYSTEMS: Final = ("assistant", "best section", "top 3 sections")

_MARKUP = re.compile(r"[`*]+")
_INDEX_STEMS = frozenset({"index", "readme"})

# --- questions -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Question:
    """One question: where it belongs, what answers it and what a right answer states."""

    id: str
    split: str
    type: str
    question: str
    pages: tuple[str, ...]
    facts: tuple[tuple[str, ...], ...]

    @property
    def answerable(self) -> bool:
        """Whether the docs answer it."""
        return self.type != "unanswerable"


def _text(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"question {entry.get('id')!r}: {key!r} must be a non-empty string")
    return value


def _strings(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        return None
    return tuple(value)


def _question(entry: object) -> Question:
    if not isinstance(entry, Mapping):
        raise ValueError("every question is an object")
    kind, split = _text(entry, "type"), _text(entry, "split")
    if kind not in TYPES or split not in SPLITS:
        raise ValueError(f"question {entry.get('id')!r}: unknown type or split")
    pages = _strings(entry.get("pages", []))
    raw_facts = entry.get("facts", [])
    facts = [_strings(fact) for fact in raw_facts] if isinstance(raw_facts, list) else [None]
    if pages is None or any(not fact for fact in facts):
        raise ValueError(f"question {entry.get('id')!r}: 'pages' and 'facts' hold strings")
    if (kind == "unanswerable") != (not pages) or (kind == "unanswerable" and facts):
        raise ValueError(
            f"question {entry.get('id')!r}: only unanswerable questions have no pages or facts"
        )
    return Question(
        id=_text(entry, "id"),
        split=split,
        type=kind,
        question=_text(entry, "question"),
        pages=pages,
        facts=tuple(fact for fact in facts if fact is not None),
    )


def parse_questions(data: object) -> tuple[Question, ...]:
    """Validate a decoded question file (see the module documentation).

    Raises:
        ValueError: the structure is not the one described, or two questions share an id.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("questions"), list):
        raise ValueError("a question file is a JSON object with a 'questions' list")
    questions = tuple(_question(entry) for entry in data["questions"])
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise ValueError("question ids must be unique")
    return questions


def load_questions(path: Path) -> tuple[Question, ...]:
    """Read and validate a question file (see :func:`parse_questions`)."""
    return parse_questions(json.loads(path.read_text("utf-8")))


def from_pairs(pairs: Sequence[tuple[str, str]], refused: Sequence[str]) -> tuple[Question, ...]:
    """Questions given as ``(question, page link)`` pairs (``/docs/storage`` -> ``storage.md``)
    and unanswerable questions, without facts (the ``project`` split)."""
    answerable = tuple(
        Question(
            id=f"q{n:02d}",
            split="project",
            type="lookup",
            question=question,
            pages=(href_path(link).rsplit("/", 1)[-1] + ".md",),
            facts=(),
        )
        for n, (question, link) in enumerate(pairs, start=1)
    )
    unanswerable = tuple(
        Question(f"u{n:02d}", "project", "unanswerable", question, (), ())
        for n, question in enumerate(refused, start=1)
    )
    return answerable + unanswerable


# --- scoring -------------------------------------------------------------------------------------


def normalize_text(text: str) -> str:
    """NFKC, case-folded, Markdown code and emphasis marks removed, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_MARKUP.sub("", folded).split())


def contains_fact(answer: str, fact: str) -> bool:
    """Whether ``answer`` states ``fact``: a substring match after :func:`normalize_text`."""
    return normalize_text(fact) in normalize_text(answer)


def states(answer: str, alternatives: Iterable[str]) -> bool:
    """Whether ``answer`` states one of a fact's accepted phrases."""
    return any(contains_fact(answer, phrase) for phrase in alternatives)


def page_stem(page: str) -> str:
    """The link path of a page: its path without ``.md``; an index or README stands for its
    folder (``guides/README.md`` -> ``guides``)."""
    path = page.strip("/")
    for suffix in (".md", ".markdown"):
        if path.lower().endswith(suffix):
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


def href_matches(href: str, page: str, prefix: str = HREF_PREFIX) -> bool:
    """Whether ``href`` links ``page`` (a path in the docs folder), under any link prefix.

    A root ``index.md`` or ``README.md`` stands for the folder itself: the link ``prefix``
    (``/docs``), with or without an origin.
    """
    stem = page_stem(page)
    path = href_path(href)
    if not stem:
        return path == (href_path(prefix) if prefix.strip("/") else "/")
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
    return first_match(hrefs[:k], pages) is not None


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


# --- replies and figures -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Section:
    """A retrieved section: its link, its title and its whole text."""

    href: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class Reply:
    """What one system did with one question."""

    outcome: str
    text: str
    citations: tuple[str, ...]
    seconds: float


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


def shown_whole(sections: Sequence[Section], seconds: float) -> Reply:
    """A baseline's reply: ``sections`` shown whole (title and text), nothing when none."""
    if not sections:
        return Reply("escalation", "", (), seconds)
    text = "\n\n".join(f"{s.title}\n\n{s.text}" for s in sections)
    return Reply("answer", text, tuple(s.href for s in sections), seconds)


@dataclass(frozen=True, slots=True)
class Score:
    """One reply judged against its question."""

    answered: bool
    coverage: float  # share of the facts stated (0 when refused; NaN without facts)
    wrong: bool  # an answer that should not have been given, or states and cites nothing right
    length: int


def score(question: Question, reply: Reply) -> Score:
    """Judge ``reply`` to ``question`` (see the module documentation for each figure)."""
    answered = reply.outcome == "answer"
    if not question.facts:
        coverage = math.nan
    elif not answered:
        coverage = 0.0
    else:
        stated = sum(1 for fact in question.facts if states(reply.text, fact))
        coverage = stated / len(question.facts)
    if not answered:
        wrong = False
    elif not question.answerable:
        wrong = True
    else:
        cited = first_match(reply.citations, question.pages) is not None
        wrong = not cited and not (coverage > 0)
    return Score(answered, coverage, wrong, len(reply.text) if answered else 0)


@dataclass(frozen=True, slots=True)
class Figures:
    """One system's figures over one group of questions (NaN where a figure does not apply)."""

    questions: int
    answered: float
    coverage: float
    refused: float
    false_answers: float
    mean_length: float
    p50_ms: float
    p95_ms: float


def _mean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def figures(questions: Sequence[Question], replies: Mapping[str, Reply]) -> Figures:
    """The figures of ``replies`` (by question id) over ``questions``."""
    scores = [(q, score(q, replies[q.id])) for q in questions]
    answerable = [s for q, s in scores if q.answerable]
    unanswerable = [s for q, s in scores if not q.answerable]
    given = [s for _, s in scores if s.answered]
    latencies = [replies[q.id].seconds * 1000 for q in questions]
    return Figures(
        questions=len(questions),
        answered=_mean([float(s.answered) for s in answerable]),
        coverage=_mean([s.coverage for s in answerable]),
        refused=_mean([float(not s.answered) for s in unanswerable]),
        false_answers=_mean([float(s.wrong) for s in given]),
        mean_length=_mean([float(s.length) for s in given]),
        p50_ms=percentile(latencies, 50) if latencies else math.nan,
        p95_ms=percentile(latencies, 95) if latencies else math.nan,
    )


def recall(questions: Sequence[Question], retrieved: Mapping[str, Sequence[str]]) -> float:
    """recall@5 of the answerable ``questions`` (NaN when there are none)."""
    return _mean([float(recall_at(retrieved[q.id], q.pages)) for q in questions if q.answerable])


@dataclass(frozen=True, slots=True)
class Group:
    """A split and a question type (``all`` for every type), with every system's figures."""

    split: str
    type: str
    recall: float
    systems: dict[str, Figures]


def summarize(
    questions: Sequence[Question],
    retrieved: Mapping[str, Sequence[str]],
    replies: Mapping[str, Mapping[str, Reply]],
) -> list[Group]:
    """Every split's groups: each question type, then ``answerable`` and ``all``."""
    groups: list[Group] = []
    for split in SPLITS:
        in_split = [q for q in questions if q.split == split]
        if not in_split:
            continue
        selections = [(kind, [q for q in in_split if q.type == kind]) for kind in TYPES]
        selections.append(("answerable", [q for q in in_split if q.answerable]))
        selections.append(("all", in_split))
        for kind, chosen in selections:
            if not chosen:
                continue
            groups.append(
                Group(
                    split,
                    kind,
                    recall(chosen, retrieved),
                    {name: figures(chosen, replies[name]) for name in replies},
                )
            )
    return groups
