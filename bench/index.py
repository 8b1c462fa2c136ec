"""Docs assistant start-up over 5,000 pages: cold build, warm start from the start cache, search.

Run with ``.venv/bin/python bench/index.py``. The corpus is synthetic and rebuilt each run: the
110 seed pages (``../shared/seeds/agentskit-chat-docs``, or ``$AGENTSKIT_SEED_DOCS``) copied
into folders ``part-00``... until there are 5,000 files, each copy with one line of its own (so
no two files hash alike). Each group runs in a fresh process.

- **build**: opening a docs assistant on the folder (read, chunk, build and verify the artifact,
  term weights, index) with an empty index cache, beside the floor: reading and hashing every
  file (SHA-256), the least any build does;
- **warm**: opening it again with the cache the cold start filled (chunks, artifact, term
  weights, vocabulary and index read back; no page parsed), beside the same floor;
- **parsed**: opening it again with an index file of its own (``index_path``: the index is kept
  and nothing in it changes, but every page is parsed, the artifact built and the weights
  counted on every start, as every start did before the start cache), beside the same floor;
- **search**: one ``search`` of the open index (worker thread, spreading over pages); its SQL
  (ranked and limited before bodies are joined) beside the plain query that joins every
  matching body before it limits, both asked for 20 rows; the floor: the FTS5 match alone,
  unranked.

Figures are medians of ``RUNS`` runs (searches: of every question, ``SEARCH_ROUNDS`` times).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import anyio

from _harness import collect, cost_ratio

ROOT = Path(__file__).resolve().parents[1]
SEEDS = Path(
    os.environ.get("AGENTSKIT_SEED_DOCS", ROOT.parent / "shared" / "seeds" / "agentskit-chat-docs")
)
FILES = 5000
RUNS = 3
SEARCH_ROUNDS = 20
QUESTIONS = (
    "How are the chunks of a Markdown page ranked?",
    "rate limit per client",
    "How do I install the server extra?",
    "knowledge artifact content hash",
    "session storage redis",
)
GOAL_BUILD_S = 5.0

#: The plain query: every matching chunk joined with its body, then ranked and cut.
PLAIN = """
SELECT c.id, c.title, c.href, c.body, bm25(chunks_fts, ?, ?, 1.0) AS score
FROM chunks_fts JOIN chunks AS c ON c.rowid = chunks_fts.rowid
WHERE chunks_fts MATCH ?
ORDER BY score, c.id
LIMIT ?
"""
MATCH_ONLY = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?"


def make_corpus(into: Path) -> Path:
    """5,000 Markdown files from the seed pages (see the module documentation)."""
    seeds = sorted(SEEDS.rglob("*.md"))
    if not seeds:
        sys.exit(f"no seed pages in {SEEDS} (set AGENTSKIT_SEED_DOCS)")
    docs = into / "docs"
    made = 0
    copy = 0
    while made < FILES:
        for seed in seeds[: FILES - made]:
            target = docs / f"part-{copy:02d}" / seed.relative_to(SEEDS)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(seed.read_text("utf-8") + f"\n\nCopy {copy} of this page.\n")
            made += 1
        copy += 1
    return docs


def read_and_hash(docs: Path) -> int:
    """The floor: every Markdown file read and hashed."""
    total = 0
    for path in sorted(docs.rglob("*.md")):
        total += len(hashlib.sha256(path.read_bytes()).digest())
    return total


def _seconds(body: Callable[[], object]) -> float:
    start = time.perf_counter()
    body()
    return time.perf_counter() - start


def _open(docs: Path, index_path: Path | None = None) -> None:
    from agentskit_chat.assistant import create_docs_assistant  # noqa: PLC0415

    async def run() -> None:
        async with create_docs_assistant(docs, index_path=index_path) as assistant:
            assert assistant.index_report is not None

    anyio.run(run)


def _with_corpus(work: Callable[[Path, Path], dict[str, float]]) -> dict[str, float]:
    scratch = Path(tempfile.mkdtemp(prefix="agentskit-bench-index-"))
    try:
        docs = make_corpus(scratch)
        return work(docs, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def group_build() -> dict[str, float]:
    """Cold starts: a fresh, empty cache folder each run."""

    def work(docs: Path, scratch: Path) -> dict[str, float]:
        floors = [_seconds(lambda: read_and_hash(docs)) for _ in range(RUNS)]
        cold: list[float] = []
        for run in range(RUNS):
            os.environ["AGENTSKIT_CACHE_DIR"] = str(scratch / f"cache-{run}")
            cold.append(_seconds(lambda: _open(docs)))
        return {"build": statistics.median(cold), "build_floor": statistics.median(floors)}

    return _with_corpus(work)


def group_warm() -> dict[str, float]:
    """Warm starts: the cache a first start filled."""

    def work(docs: Path, scratch: Path) -> dict[str, float]:
        os.environ["AGENTSKIT_CACHE_DIR"] = str(scratch / "cache")
        _open(docs)
        floors = [_seconds(lambda: read_and_hash(docs)) for _ in range(RUNS)]
        warm = [_seconds(lambda: _open(docs)) for _ in range(RUNS)]
        return {"warm": statistics.median(warm), "warm_floor": statistics.median(floors)}

    return _with_corpus(work)


def group_parsed() -> dict[str, float]:
    """Warm starts without the start cache: an index file kept, every page parsed."""

    def work(docs: Path, scratch: Path) -> dict[str, float]:
        index = scratch / "index.sqlite3"
        _open(docs, index)
        floors = [_seconds(lambda: read_and_hash(docs)) for _ in range(RUNS)]
        parsed = [_seconds(lambda: _open(docs, index)) for _ in range(RUNS)]
        return {"parsed": statistics.median(parsed), "parsed_floor": statistics.median(floors)}

    return _with_corpus(work)


def group_search() -> dict[str, float]:
    """Search latency on the 5,000-file index, beside the plain query and the bare match."""
    from agentskit_chat.retrieval import load_markdown_corpus  # noqa: PLC0415
    from agentskit_chat.retrieval._query import query_phrases, query_terms  # noqa: PLC0415
    from agentskit_chat.retrieval._sqlite_fts import (  # noqa: PLC0415
        _SEARCH,
        SQLiteFTSRetriever,
        fts5_query,
    )

    def work(docs: Path, scratch: Path) -> dict[str, float]:
        index = SQLiteFTSRetriever(scratch / "index.sqlite3", corpus=load_markdown_corpus(docs))
        connection = index._connection
        matches = [fts5_query(query_terms(q), query_phrases(q)) for q in QUESTIONS]
        times: dict[str, list[float]] = {"search": [], "ranked": [], "plain": [], "match": []}

        def run(sql: str, *args: object) -> None:
            connection.execute(sql, args).fetchall()

        for _ in range(SEARCH_ROUNDS):
            for question, match in zip(QUESTIONS, matches, strict=True):
                times["search"].append(_seconds(partial(anyio.run, index.search, question, 5)))
                times["ranked"].append(_seconds(partial(run, _SEARCH, 10.0, 2.0, match, 20)))
                times["plain"].append(_seconds(partial(run, PLAIN, 10.0, 2.0, match, 20)))
                times["match"].append(_seconds(partial(run, MATCH_ONLY, match)))
        counts = [len(connection.execute(MATCH_ONLY, (m,)).fetchall()) for m in matches]
        index.close()
        figures = {f"{name}_ms": statistics.median(v) * 1000 for name, v in times.items()}
        return {**figures, "matched": float(statistics.median(counts))}

    return _with_corpus(work)


GROUPS: dict[str, Callable[[], dict[str, float]]] = {
    "build": group_build,
    "warm": group_warm,
    "parsed": group_parsed,
    "search": group_search,
}


def main() -> None:
    results = collect(__file__, __doc__, GROUPS, SEEDS)
    if results is None:
        return
    rows = [
        (f"cold start, {FILES:,} files (s)", "build", "build_floor"),
        ("warm start, start cached (s)", "warm", "warm_floor"),
        ("warm start, pages parsed (s)", "parsed", "parsed_floor"),
        ("search(), top 5 (ms)", "search_ms", "match_ms"),
        ("SQL: rank, limit, then bodies (ms)", "ranked_ms", "match_ms"),
        ("SQL: bodies, rank, then limit (ms)", "plain_ms", "match_ms"),
    ]
    header = f"{'measurement':<38} {'ours':>9} {'floor':>9} {'ours/floor':>11}"
    print(header)
    print("-" * len(header))
    for label, ours, floor in rows:
        ratio = cost_ratio(results[ours], results[floor], higher_is_better=False)
        print(f"{label:<38} {results[ours]:>9.3f} {results[floor]:>9.3f} {ratio:>10.1f}x")
    print()
    print(f"warm start / cold start: {results['warm'] / results['build']:.2f}")
    print(f"warm start, start cached / pages parsed: {results['warm'] / results['parsed']:.2f}")
    verdict = "ok" if results["build"] <= GOAL_BUILD_S else "MISSED"
    print(f"goal: cold start of {FILES:,} files <= {GOAL_BUILD_S:.0f} s: {verdict}")
    print(f"median chunks matched per question: {results['matched']:,.0f}")
    print("Floors: build/warm = read and SHA-256 every file; search = the FTS5 match, unranked.")


if __name__ == "__main__":
    main()
