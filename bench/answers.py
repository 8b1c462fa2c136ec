"""Answer-plane benchmarks: the resolver on the same bytes as the TypeScript reference's anchors.

Run with ``.venv/bin/python bench/answers.py``. Inputs are the shared benchmark files
(``../shared/bench-data`` next to the repository, or ``$AGENTSKIT_BENCH_DATA``), used as
``REFERENCE.md`` §3.3 describes: the three query sets are rebuilt and their digests checked, the
resolver's output for each set is checked against the reference's output digests, then
construction and ``resolve()`` are timed. Each group runs in a fresh process; ``gc.collect()``
runs before each timed run, warm-up runs come first, and the median of five timed runs is
reported beside a floor measured in the same process and beside the reference's figure.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from markdown_it import MarkdownIt

from _harness import Row, collect, measure, print_table
from agentskit_chat.answers import (
    DeterministicAnswerResolver,
    build_local_knowledge_artifact,
    create_deterministic_answer_resolver,
)
from agentskit_chat.protocol import (
    ChoicesAnswer,
    EscalationAnswer,
    ExactAnswer,
    verify_local_knowledge_artifact,
)
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.protocol._text import normalize_knowledge_key
from agentskit_chat.retrieval import read_docs_folder

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("AGENTSKIT_BENCH_DATA", ROOT.parent / "shared" / "bench-data"))
SEEDS = Path(
    os.environ.get("AGENTSKIT_SEED_DOCS", ROOT.parent / "shared" / "seeds" / "agentskit-chat-docs")
)
SITE_ID = "agentskit-bench"
NOW_MS = 1784073600000  # 2026-07-14T00:00:00.000Z, as the reference fixes it

# The reference's medians (../shared/bench-data/REFERENCE.md, §1).
REFERENCE = {
    "construct_object": (83.57, "ms"),
    "construct_text": (73.08, "ms"),
    "hits": (44_415.0, "calls/s"),
    "misses": (55_876.0, "calls/s"),
    "choices": (32_141.0, "calls/s"),
}
QUERIES_SHA256 = "fd34c9eb2733a8d8b34f7a288b8dd9bb728e09e18e519dbcd1ddef3509ebb8e7"
SET_DIGESTS = {
    "hits": "a07df458fb447f8b64439bcfdd88211f800e0b1bf2f748b19f82c76f43873e3b",
    "choices": "178161d6a89076a9fba633a51bdcccbedb8d69b885cc729eb37747502fd62a8b",
}
OUTPUT_DIGESTS = {
    "hits": "24ccdbde2418a44eec8e3da48bd7e120bee54258dd4d017c3074808435a4726b",
    "misses": "5a9cefe34fd653a7861311cf48aff7c9ded2c44a67f4ce49ebaf6c73c7c221e4",
    "choices": "4c01b73fd5e9a450a68119fd6537dec6139255237a1abd7d0b423953b6531dcb",
}


def sha256_json(value: Any) -> str:
    return hashlib.sha256(js_stringify(value).encode("utf-8")).hexdigest()


def load_artifact() -> tuple[str, dict[str, Any]]:
    text = (DATA / "artifact-1024.json").read_bytes().decode("utf-8")
    return text, json.loads(text)


def create(artifact: object, content_hash: str) -> DeterministicAnswerResolver:
    return create_deterministic_answer_resolver(
        artifact, expected_content_hash=content_hash, expected_site_id=SITE_ID, now=lambda: NOW_MS
    )


def query_sets(parsed: dict[str, Any]) -> dict[str, list[str]]:
    """The three query sets of REFERENCE.md §3.3, with their digests checked."""
    entries = parsed["entries"]
    owners: dict[str, list[str]] = {}
    for entry in entries:
        for value in entry["match"]["values"]:
            owners.setdefault(normalize_knowledge_key(value), []).append(entry["id"])
    hits = []
    for k in range(10_000):
        entry = entries[(k * 389) % 1024]
        unique = [
            v for v in entry["match"]["values"] if len(owners[normalize_knowledge_key(v)]) == 1
        ]
        hits.append(unique[k % len(unique)])
    shared: list[str] = []
    for entry in entries:
        for value in entry["match"]["values"]:
            if len(owners[normalize_knowledge_key(value)]) > 1 and value not in shared:
                shared.append(value)
    assert len(shared) == 64, len(shared)
    choices = [shared[k % 64] for k in range(10_000)]
    raw = (DATA / "queries.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == QUERIES_SHA256
    misses: list[str] = json.loads(raw.decode("utf-8"))
    sets = {"hits": hits, "misses": misses, "choices": choices}
    for name, digest in SET_DIGESTS.items():
        assert sha256_json(sets[name]) == digest, f"{name} query set digest differs"
    return sets


def check_outputs(resolver: DeterministicAnswerResolver, sets: dict[str, list[str]]) -> None:
    """Every outcome as expected, and the output digests of the reference."""
    for name, queries in sets.items():
        envelopes = [resolver.resolve(q) for q in queries]
        if name == "hits":
            assert all(isinstance(e, ExactAnswer) for e in envelopes)
        elif name == "misses":
            assert all(isinstance(e, EscalationAnswer) and e.reason == "miss" for e in envelopes)
        else:
            assert all(isinstance(e, ChoicesAnswer) and len(e.suggestions) == 3 for e in envelopes)
        digest = sha256_json([e.to_wire() for e in envelopes])
        assert digest == OUTPUT_DIGESTS[name], f"{name} output digest differs"


# --- groups --------------------------------------------------------------------------------------


def group_construct() -> dict[str, float]:
    text, parsed = load_artifact()
    content_hash = parsed["contentHash"]
    assert not create(parsed, content_hash).is_corrupt
    assert not create(text, content_hash).is_corrupt
    sink = 0

    def from_object() -> None:
        nonlocal sink
        for _ in range(10):
            sink += create(parsed, content_hash).is_corrupt

    def from_text() -> None:
        nonlocal sink
        for _ in range(10):
            sink += create(text, content_hash).is_corrupt

    def floor() -> None:
        # Parse, write the canonical text (the parsed keys minus contentHash are already in
        # canonical order), hash it: the least any verification has to do.
        nonlocal sink
        for _ in range(20):
            value = orjson.loads(text)
            expected = value.pop("contentHash")
            sink += "sha256:" + hashlib.sha256(orjson.dumps(value)).hexdigest() == expected

    return {
        "construct_object": measure(from_object, warmup=2, work=10, rate=False),
        "construct_text": measure(from_text, warmup=2, work=10, rate=False),
        "construct_floor": measure(floor, warmup=3, work=20, rate=False),
        "sink": sink,
    }


def group_resolve() -> dict[str, float]:
    _, parsed = load_artifact()
    resolver = create(parsed, parsed["contentHash"])
    sets = query_sets(parsed)
    check_outputs(resolver, sets)
    assert resolver.artifact is not None
    index = dict(resolver.artifact.alias_index)
    results: dict[str, float] = {}
    sink = 0
    for name, queries in sets.items():
        resolve = resolver.resolve

        def ours(queries: list[str] = queries, resolve: Any = resolve) -> None:
            nonlocal sink
            for _ in range(2):
                for q in queries:
                    sink += len(resolve(q).outcome)

        def floor(queries: list[str] = queries) -> None:
            nonlocal sink
            get = index.get
            for _ in range(2):
                for q in queries:
                    sink += get(normalize_knowledge_key(q)) is None

        work = 2 * len(queries)
        results[name] = measure(ours, warmup=2, work=work, rate=True)
        results[f"{name}_floor"] = measure(floor, warmup=2, work=work, rate=True)
        latencies = []
        clock = time.perf_counter_ns
        gc.collect()
        for _ in range(2):
            for q in queries:
                start = clock()
                resolve(q)
                latencies.append(clock() - start)
        cuts = statistics.quantiles(latencies, n=100)
        results[f"{name}_p50"] = cuts[49] / 1000
        results[f"{name}_p99"] = cuts[98] / 1000
    results["sink"] = sink
    return results


def group_build() -> dict[str, float]:
    """Artifact build time for the 110 seed documents, beside reading and parsing them alone."""
    if not SEEDS.is_dir():
        return {}
    files = sorted(SEEDS.rglob("*.md"))
    parser = MarkdownIt("commonmark")
    build = build_local_knowledge_artifact(
        read_docs_folder(SEEDS), site_id="agentskit-seeds", generated_at="2026-07-13T00:00:00.000Z"
    )
    assert verify_local_knowledge_artifact(
        build.artifact_json,
        expected_content_hash=build.artifact.content_hash,
        expected_site_id="agentskit-seeds",
    ).ok
    sink = 0

    def ours() -> None:
        nonlocal sink
        result = build_local_knowledge_artifact(
            read_docs_folder(SEEDS),
            site_id="agentskit-seeds",
            generated_at="2026-07-13T00:00:00.000Z",
        )
        sink += len(result.artifact_json)

    def floor() -> None:
        # The least a Markdown-derived build does: read every file and tokenize it.
        nonlocal sink
        for path in files:
            sink += len(parser.parse(path.read_text("utf-8")))

    return {
        "build": measure(ours, warmup=1, work=1, rate=False),
        "build_floor": measure(floor, warmup=1, work=1, rate=False),
        "build_entries": float(len(build.artifact.entries)),
        "build_bytes": float(len(build.artifact_json.encode())),
        "sink": float(sink),
    }


GROUPS: dict[str, Callable[[], dict[str, float]]] = {
    "construct": group_construct,
    "resolve": group_resolve,
    "build": group_build,
}

# (label, our key, floor key, reference key or None, unit, higher is better)
ROWS: list[Row] = [
    (
        "resolver construction (parsed object)",
        "construct_object",
        "construct_floor",
        "construct_object",
        "ms",
        False,
    ),
    (
        "resolver construction (artifact text)",
        "construct_text",
        "construct_floor",
        "construct_text",
        "ms",
        False,
    ),
    ("resolve(), exact hits", "hits", "hits_floor", "hits", "calls/s", True),
    ("resolve(), misses", "misses", "misses_floor", "misses", "calls/s", True),
    ("resolve(), choices (3 suggestions)", "choices", "choices_floor", "choices", "calls/s", True),
    ("artifact build, seed docs", "build", "build_floor", None, "ms", False),
]
FLOORS = {
    "construct_floor": "orjson parse + canonical dump + hashlib sha256",
    "hits_floor / misses_floor / choices_floor": "dict lookup of normalize_knowledge_key(q)",
}


def main() -> None:
    results = collect(__file__, __doc__, GROUPS, DATA)
    if results is None:
        return
    print("query sets and output digests match the reference (hits, misses, choices)")
    print_table(ROWS, results, REFERENCE, width=40)
    print()
    print(f"{'resolve() latency (µs)':<40} {'p50':>12} {'p99':>12} {'ref mean':>10}")
    for name in ("hits", "misses", "choices"):
        reference_mean = 1e6 / REFERENCE[name][0]
        print(
            f"{name:<40} {results[name + '_p50']:>12,.2f} {results[name + '_p99']:>12,.2f} "
            f"{reference_mean:>10,.2f}"
        )
    print()
    print("Ratios are cost multiples: ours/floor 2.00x = twice the floor's time per unit of work;")
    print("vs ref 0.50x = half the reference's time. The reference reports no percentiles, only")
    print("its mean time per call. Floors, measured in the same process:")
    for key, what in FLOORS.items():
        print(f"  {key}: {what}")


if __name__ == "__main__":
    main()
