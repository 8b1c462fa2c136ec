"""Answer quality of the docs assistant over documents we did not write, beside two baselines.

Run with ``.venv/bin/python bench/ask_quality.py``. For each corpus (``--corpus NAME``,
repeatable; by default every corpus of ``bench/_corpora.py`` that is present: the seed corpus,
Starlette, Hatch and PyMdown Extensions) it builds the docs assistant
(:func:`agentskit_chat.assistant.create_docs_assistant`: knowledge artifact, chunk index,
extractive generator) over the corpus's docs folder, puts every question of its frozen question
file to it, and scores three systems on the same questions (``--docs DIR --questions FILE``,
repeatable in pairs, measures folders of your own instead):

- **assistant**: what ``ask()`` answers (an exact answer, a grounded answer, or a refusal);
- **best section**: the best retrieved section shown whole, as a search box would show it;
- **top 3 sections**: the three best retrieved sections shown whole.

For each split (``dev``, tuned on; ``test``, only reported) and each question type it prints:

- **recall@5**: one of the question's pages is among the pages of the top five retrieved
  sections (retrieval only, the same for every system);
- **answered**: the share of answerable questions that got an answer (not an escalation);
- **facts**: fact coverage, the mean share of a question's facts that the answer states (a
  refusal states none); a fact is stated when one of its accepted phrases is in the answer
  (case-insensitive, after NFKC, Markdown code and emphasis marks removed, whitespace collapsed);
- **refused**: the share of unanswerable questions that were refused;
- **false**: the share of answers given that are wrong: an answer to an unanswerable question,
  or an answer to an answerable one that cites none of its pages and states none of its facts;
- **length**: the mean length of the answers given, in characters;
- **p50 / p95**: the latency of ``ask()`` (of ``retrieve()`` for the baselines), in ms.

A question file is JSON: ``{"version": 1, "questions": [{"id", "split", "type", "question",
"pages", "facts"}]}``: ``type`` is ``lookup``, ``numeric``, ``multi-page``, ``negative`` or
``unanswerable``; ``pages`` are file paths inside the docs folder that answer the question (none
for an unanswerable one); ``facts`` is a list of facts, each a list of accepted phrases.
``--project`` runs the regression questions of ``tests/assistant/test_docs_questions.py`` over
the project's own ``docs/`` instead (pages only, no facts).

A corpus that is not present is skipped with a message saying where it was looked for;
``--fetch`` downloads the missing ones from the package registry first (see ``_corpora.py``).
After the per-corpus tables, a summary puts every corpus side by side: fact coverage and mean
length of the assistant as ratios of the best section shown whole.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

import _corpora
from _corpus_checks import syntax_in_answers, unstated_facts
from _quality import (
    HREF_PREFIX,
    SPLITS,
    SYSTEMS,
    TOP_K,
    TYPES,
    Figures,
    Group,
    Question,
    Reply,
    Score,
    Section,
    contains_fact,
    envelope_view,
    figures,
    first_match,
    from_pairs,
    href_matches,
    href_path,
    load_questions,
    normalize_text,
    page_stem,
    parse_questions,
    percentile,
    recall,
    recall_at,
    score,
    shown_whole,
    states,
    summarize,
)

ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "HREF_PREFIX",
    "SPLITS",
    "SYSTEMS",
    "TOP_K",
    "TRADEOFF",
    "TYPES",
    "CorpusRun",
    "Figures",
    "Group",
    "Question",
    "Reply",
    "Score",
    "Section",
    "contains_fact",
    "details",
    "envelope_view",
    "figures",
    "first_match",
    "format_report",
    "from_pairs",
    "href_matches",
    "href_path",
    "load_questions",
    "main",
    "normalize_text",
    "page_stem",
    "parse_questions",
    "percentile",
    "project_questions",
    "recall",
    "recall_at",
    "run",
    "score",
    "shown_whole",
    "states",
    "summarize",
    "summary",
    "tradeoff",
]


def project_questions() -> tuple[Question, ...]:
    """The regression questions about ``docs/`` kept in ``tests/assistant``."""
    import importlib  # noqa: PLC0415

    sys.path.insert(0, str(ROOT))
    module = importlib.import_module("tests.assistant.test_docs_questions")
    return from_pairs(module.QUESTIONS, module.UNANSWERABLE)


# --- the report ----------------------------------------------------------------------------------


def _share(value: float) -> str:
    return "   -" if math.isnan(value) else f"{value:4.2f}"


def _number(value: float) -> str:
    return "    -" if math.isnan(value) else f"{value:5.0f}"


def format_report(groups: Sequence[Group]) -> str:
    """The groups as the harness prints them: one table per split."""
    lines: list[str] = []
    split = None
    for group in groups:
        if group.split != split:
            split = group.split
            lines += [
                "",
                f"split: {split}",
                f"{'type':<13}{'n':>4} {'rec@5':>5} | {'assistant':^44} | "
                f"{'best section':^16} | {'top 3 sections':^16}",
                f"{'':<13}{'':>4} {'':>5} | ans  facts refus false   len   p50   p95 | "
                "facts false  len | facts false  len",
            ]
        ours = group.systems["assistant"]
        best = group.systems.get("best section")
        top3 = group.systems.get("top 3 sections")
        row = (
            f"{group.type:<13}{ours.questions:>4} {_share(group.recall):>5} | "
            f"{_share(ours.answered)} {_share(ours.coverage):>5} {_share(ours.refused):>5} "
            f"{_share(ours.false_answers):>5} {_number(ours.mean_length)} "
            f"{_number(ours.p50_ms)} {_number(ours.p95_ms)}"
        )
        for base in (best, top3):
            if base is not None:
                row += (
                    f" | {_share(base.coverage):>5} {_share(base.false_answers):>5}"
                    f"{_number(base.mean_length)}"
                )
        lines.append(row)
    lines += [
        "",
        "ans: answered share of answerable; facts: fact coverage; refus: refused share of",
        "unanswerable; false: wrong answers among answers given; len: mean answer characters;",
        "p50/p95: ask() in ms. Baselines show retrieved sections whole and never refuse.",
    ]
    return "\n".join(lines)


def details(
    questions: Sequence[Question],
    retrieved: Mapping[str, Sequence[str]],
    replies: Mapping[str, Reply],
) -> list[str]:
    """One line per question of the assistant's replies (``--verbose``)."""
    lines = []
    for question in questions:
        reply = replies[question.id]
        judged = score(question, reply)
        rank = first_match(retrieved[question.id], question.pages) if question.answerable else None
        facts = "-" if math.isnan(judged.coverage) else f"{judged.coverage:.2f}"
        lines.append(
            f"  {question.split:<4} {question.type:<12} {question.id:<40} rank {rank or '-':>2} "
            f"{reply.outcome:<10} facts {facts:<4}{'  WRONG' if judged.wrong else ''}"
        )
    return lines


# --- the run -------------------------------------------------------------------------------------


async def run(
    docs: Path, questions: Sequence[Question], *, k: int = TOP_K, min_coverage: float | None = None
) -> tuple[dict[str, tuple[str, ...]], dict[str, dict[str, Reply]]]:
    """Build the docs assistant over ``docs`` and put every question to every system.

    ``min_coverage`` replaces the relevance rule's threshold (the default rule otherwise).
    """
    from agentskit_chat.assistant import (  # noqa: PLC0415 - only the run needs it
        create_docs_assistant,
    )
    from agentskit_chat.retrieval import RelevanceRule  # noqa: PLC0415

    retrieved: dict[str, tuple[str, ...]] = {}
    replies: dict[str, dict[str, Reply]] = {name: {} for name in SYSTEMS}
    clock = time.perf_counter
    with tempfile.TemporaryDirectory(prefix="agentskit-quality-") as scratch:
        index_path = Path(scratch) / "index.sqlite3"
        rule = None if min_coverage is None else RelevanceRule(min_coverage=min_coverage)
        async with create_docs_assistant(docs, index_path=index_path, relevance=rule) as assistant:
            for question in questions:
                started = clock()
                hits = await assistant.retrieve(question.question, top_k=k)
                searched = clock() - started
                started = clock()
                envelope = await assistant.ask(question.question)
                answered = clock() - started
                outcome, text, citations = envelope_view(envelope)
                retrieved[question.id] = tuple(hit.href for hit in hits)
                sections = [Section(hit.href, hit.title, hit.text) for hit in hits]
                replies["assistant"][question.id] = Reply(outcome, text, citations, answered)
                replies["best section"][question.id] = shown_whole(sections[:1], searched)
                replies["top 3 sections"][question.id] = shown_whole(sections[:3], searched)
    return retrieved, replies


#: The relevance thresholds ``--tradeoff`` tries (the rule's default among them).
TRADEOFF: Final = (0.35, 0.40, 0.45, 0.50, 0.55)


def tradeoff(docs: Path, questions: Sequence[Question]) -> str:
    """For each threshold of :data:`TRADEOFF`, the assistant's figures on every split."""
    import anyio  # noqa: PLC0415

    lines = [
        f"{'min_coverage':>12} {'split':<8} {'answered':>8} {'facts':>6} {'refused':>7} "
        f"{'false':>6}"
    ]
    for threshold in TRADEOFF:
        _, replies = anyio.run(functools.partial(run, docs, questions, min_coverage=threshold))
        groups = summarize(
            questions, {q.id: () for q in questions}, {"assistant": replies["assistant"]}
        )
        for group in groups:
            if group.type == "all":
                ours = group.systems["assistant"]
                lines.append(
                    f"{threshold:>12.2f} {group.split:<8} {ours.answered:>8.2f} "
                    f"{ours.coverage:>6.2f} {ours.refused:>7.2f} {ours.false_answers:>6.2f}"
                )
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class CorpusRun:
    """One corpus's questions, what was retrieved and every system's replies."""

    name: str
    docs: Path
    questions: tuple[Question, ...]
    groups: list[Group]
    seconds: float


def _ratio(ours: float, base: float) -> str:
    if math.isnan(ours) or math.isnan(base) or base == 0:
        return "    -"
    return f"{ours / base:5.2f}"


def summary(runs: Sequence[CorpusRun]) -> str:
    """Every corpus side by side, per split: the assistant against the best section shown
    whole (facts and length as ratios), and the acceptance figures."""
    lines = [
        f"{'corpus':<10} {'split':<5} {'n':>4} {'rec@5':>5} | {'facts':>5} {'best':>5} "
        f"{'top3':>5} {'ratio':>5} | {'len':>5} {'best':>5} {'ratio':>5} | "
        f"{'ans':>4} {'refus':>5} {'false':>5}",
    ]
    for item in runs:
        for group in item.groups:
            if group.type != "all":
                continue
            ours = group.systems["assistant"]
            best = group.systems["best section"]
            top3 = group.systems["top 3 sections"]
            lines.append(
                f"{item.name:<10} {group.split:<5} {ours.questions:>4} {_share(group.recall):>5} | "
                f"{_share(ours.coverage):>5} {_share(best.coverage):>5} "
                f"{_share(top3.coverage):>5} {_ratio(ours.coverage, best.coverage)} | "
                f"{_number(ours.mean_length)} {_number(best.mean_length)} "
                f"{_ratio(ours.mean_length, best.mean_length)} | "
                f"{_share(ours.answered):>4} {_share(ours.refused):>5} "
                f"{_share(ours.false_answers):>5}"
            )
    lines += [
        "",
        "facts/best/top3: fact coverage of the assistant, the best section and the top 3 shown",
        "whole; ratio: assistant / best section. len: mean answer characters.",
    ]
    return "\n".join(lines)


def _selected(args: argparse.Namespace) -> list[tuple[str, Path | None, Path, str]]:
    """``(name, docs folder or None when missing, question file, where it was looked for)``."""
    chosen: list[tuple[str, Path | None, Path, str]] = []
    if args.docs or args.questions:
        if len(args.docs) != len(args.questions):
            sys.exit("--docs and --questions come in pairs")
        for docs, questions in zip(args.docs, args.questions, strict=True):
            chosen.append((docs.name, docs if docs.is_dir() else None, questions, str(docs)))
        return chosen
    names = args.corpus or [corpus.name for corpus in _corpora.CORPORA]
    for name in names:
        corpus = _corpora.BY_NAME.get(name)
        if corpus is None:
            sys.exit(f"unknown corpus {name!r}: one of {', '.join(_corpora.BY_NAME)}")
        docs = corpus.locate()
        if docs is None and args.fetch and corpus.requirement:
            docs = _corpora.fetch(corpus, _corpora.corpora_dir())
        where = " or ".join(str(path) for path in corpus.candidates())
        chosen.append((corpus.name, docs, corpus.questions, where))
    return chosen


def main() -> None:
    import anyio  # noqa: PLC0415 - keep the helpers importable without the run's dependencies

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus", action="append", default=[], help="a corpus of bench/_corpora.py (repeatable)"
    )
    parser.add_argument("--docs", type=Path, action="append", default=[])
    parser.add_argument("--questions", type=Path, action="append", default=[])
    parser.add_argument(
        "--fetch", action="store_true", help="download missing corpora with pip download first"
    )
    parser.add_argument(
        "--project", action="store_true", help="the tests' questions over the project's docs/"
    )
    parser.add_argument("--verbose", action="store_true", help="one line per question")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--tradeoff",
        action="store_true",
        help="the assistant's answered and false answers for several relevance thresholds",
    )
    args = parser.parse_args()
    selected: list[tuple[str, Path | None, Path, str]]
    if args.project:
        selected = [("project", ROOT / "docs", Path(), str(ROOT / "docs"))]
    else:
        selected = _selected(args)
    runs: list[CorpusRun] = []
    details_lines: list[str] = []
    problems: list[str] = []
    for name, docs, question_file, where in selected:
        if docs is None:
            print(
                f"corpus {name}: skipped, no docs folder at {where} (see bench/_corpora.py; "
                f"--fetch downloads it, ${_corpora.CORPORA_ENV} says where)",
                file=sys.stderr,
            )
            continue
        questions = project_questions() if args.project else load_questions(question_file)
        if args.tradeoff:
            print(f"corpus {name}")
            print(tradeoff(docs, questions))
            continue
        started = time.perf_counter()
        retrieved, replies = anyio.run(run, docs, questions)
        answers = {key: reply.text for key, reply in replies["assistant"].items()}
        problems += [f"corpus {name}: {line}" for line in unstated_facts(docs, questions, states)]
        problems += [f"corpus {name}: {line}" for line in syntax_in_answers(answers)]
        groups = summarize(questions, retrieved, replies)
        runs.append(CorpusRun(name, docs, questions, groups, time.perf_counter() - started))
        if args.verbose:
            details_lines += [f"corpus {name}"]
            details_lines += details(questions, retrieved, replies["assistant"])
    if args.tradeoff:
        return
    if not runs:
        sys.exit("no corpus to measure")
    if args.json:
        if problems:
            sys.exit("checks failed:\n" + "\n".join(problems))
        print(json.dumps({r.name: [asdict(group) for group in r.groups] for r in runs}))
        return
    for item in runs:
        print(
            f"\ncorpus {item.name}: {len(item.questions)} questions over {item.docs} "
            f"({item.seconds:.1f} s in all)"
        )
        print(format_report(item.groups))
    print("\nsummary")
    print(summary(runs))
    if args.verbose:
        print("\n".join(details_lines))
    if problems:
        sys.exit("checks failed:\n" + "\n".join(problems))
    print(f"\nchecks: every fact on its pages, no MkDocs syntax in {len(runs)} corpora's answers")


if __name__ == "__main__":
    main()
