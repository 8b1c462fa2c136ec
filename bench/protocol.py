"""Protocol benchmarks: the same work on the same bytes as the TypeScript reference's anchors.

Run with ``make bench`` (or ``.venv/bin/python bench/protocol.py``). Inputs are the shared
benchmark files (``../shared/bench-data`` next to the repository, or ``$AGENTSKIT_BENCH_DATA``).
Each group runs in a fresh process, as the reference's protocol asks: ``gc.collect()`` before
each timed run, warm-up runs first, then five timed runs; the median is reported. Every figure
is printed beside a floor measured in the same process, as a ratio, and beside the reference's.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import unicodedata
from collections.abc import Callable
from pathlib import Path

import orjson

from _harness import Row, collect, measure, print_table
from agentskit_chat.ask._client_response import AskResponseReader
from agentskit_chat.protocol import (
    AskEventDecoder,
    _ask_ndjson,
    decode_ask_events,
    normalize_knowledge_key,
    verify_local_knowledge_artifact,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("AGENTSKIT_BENCH_DATA", ROOT.parent / "shared" / "bench-data"))

# The reference's medians (../shared/bench-data/REFERENCE.md, headline anchors).
REFERENCE = {
    "normalize": (420_759.0, "calls/s"),
    "verify_text": (68.85, "ms/verify"),
    "verify_object": (70.69, "ms/verify"),
    "ask_bytes": (26.4, "MB/s"),
}


# --- groups --------------------------------------------------------------------------------------


def group_normalize() -> dict[str, float]:
    queries: list[str] = json.loads((DATA / "queries.json").read_text("utf-8"))
    normalized = [normalize_knowledge_key(q) for q in queries]
    digest = hashlib.sha256(
        json.dumps(normalized, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()
    assert digest == "a9a60c53c380348b80351607c0f5a1c2334e626e46ce59582cc681a616e37cc4", digest
    sink = 0

    def ours() -> None:
        nonlocal sink
        for _ in range(20):
            for q in queries:
                sink += len(normalize_knowledge_key(q))

    def floor() -> None:
        nonlocal sink
        for _ in range(20):
            for q in queries:
                sink += len(unicodedata.normalize("NFKC", q).lower())

    work = 20 * len(queries)
    return {
        "normalize": measure(ours, warmup=3, work=work, rate=True),
        "normalize_floor": measure(floor, warmup=3, work=work, rate=True),
        "sink": sink,
    }


def group_verify() -> dict[str, float]:
    raw = (DATA / "artifact-1024.json").read_bytes()
    text = raw.decode("utf-8")
    parsed = json.loads(text)
    options = {
        "expected_content_hash": parsed["contentHash"],
        "expected_site_id": "agentskit-bench",
    }
    assert verify_local_knowledge_artifact(text, **options).ok
    assert verify_local_knowledge_artifact(parsed, **options).ok
    sink = 0

    def ours_text() -> None:
        nonlocal sink
        for _ in range(10):
            sink += verify_local_knowledge_artifact(text, **options).ok

    def ours_object() -> None:
        nonlocal sink
        for _ in range(10):
            sink += verify_local_knowledge_artifact(parsed, **options).ok

    def floor() -> None:
        # Parse, write the canonical text (the parsed keys minus contentHash are already in
        # canonical order), hash it: the least any verification has to do.
        nonlocal sink
        for _ in range(20):
            value = orjson.loads(text)
            expected = value.pop("contentHash")
            digest = "sha256:" + hashlib.sha256(orjson.dumps(value)).hexdigest()
            sink += digest == expected

    return {
        "verify_text": measure(ours_text, warmup=2, work=10, rate=False),
        "verify_object": measure(ours_object, warmup=2, work=10, rate=False),
        "verify_floor": measure(floor, warmup=3, work=20, rate=False),
        "sink": sink,
    }


def group_ask() -> dict[str, float]:
    data = (DATA / "ask-events.ndjson").read_bytes()
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    megabytes = len(data) / 1e6
    expected_events = 291_263

    def ours() -> int:
        decoder = codecs.getincrementaldecoder("utf-8")()
        buffer, n = "", 0
        for chunk in chunks:
            buffer += decoder.decode(chunk)
            result = decode_ask_events(buffer)
            buffer = result.rest
            n += len(result.events)
        buffer += decoder.decode(b"", final=True)
        n += len(decode_ask_events(buffer + "\n").events)
        return n

    def sans_io() -> int:
        decoder, n = AskEventDecoder(), 0
        for chunk in chunks:
            decoder.feed(chunk)
            while decoder.next_event() is not None:
                n += 1
        decoder.end_of_stream()
        while decoder.next_event() is not None:
            n += 1
        return n

    def client() -> int:
        # The Ask client's read loop without HTTP or projection: feed each transport read to
        # the response reader (the service's content type), take items until it needs data.
        reader, n = AskResponseReader("application/x-ndjson"), 0
        for chunk in [*chunks, None]:
            if chunk is None:
                reader.end()
            else:
                reader.feed(chunk)
            while not reader.needs_data:
                n += len(reader.take())
        return n

    def client_unremembered() -> int:
        # The same with the decoder's memo of recent short lines switched off, so every line is
        # parsed: what a stream whose lines never repeat would cost.
        chars = _ask_ndjson._MEMO_CHARS
        _ask_ndjson._MEMO_CHARS = -1  # type: ignore[misc]
        try:
            return client()
        finally:
            _ask_ndjson._MEMO_CHARS = chars  # type: ignore[misc]

    def floor() -> int:
        decoder = codecs.getincrementaldecoder("utf-8")()
        buffer, n = "", 0
        for chunk in chunks:
            buffer += decoder.decode(chunk)
            cursor = 0
            while (end := buffer.find("\n", cursor)) >= 0:
                orjson.loads(buffer[cursor:end])
                n += 1
                cursor = end + 1
            buffer = buffer[cursor:]
        return n

    assert ours() == expected_events
    assert sans_io() == expected_events
    assert client() == expected_events
    assert client_unremembered() == expected_events
    assert floor() == expected_events
    return {
        "ask_bytes": measure(ours, warmup=2, work=megabytes, rate=True),
        "ask_sans_io": measure(sans_io, warmup=2, work=megabytes, rate=True),
        "ask_client": measure(client, warmup=2, work=megabytes, rate=True),
        "ask_client_unremembered": measure(
            client_unremembered, warmup=2, work=megabytes, rate=True
        ),
        "ask_floor": measure(floor, warmup=2, work=megabytes, rate=True),
    }


GROUPS: dict[str, Callable[[], dict[str, float]]] = {
    "normalize": group_normalize,
    "verify": group_verify,
    "ask": group_ask,
}

# (label, our key, floor key, reference key, unit, higher is better)
ROWS: list[Row] = [
    (
        "normalize_knowledge_key, 10,000 queries",
        "normalize",
        "normalize_floor",
        "normalize",
        "calls/s",
        True,
    ),
    (
        "verify_local_knowledge_artifact(text), 1,024 entries",
        "verify_text",
        "verify_floor",
        "verify_text",
        "ms",
        False,
    ),
    (
        "verify_local_knowledge_artifact(object)",
        "verify_object",
        "verify_floor",
        "verify_object",
        "ms",
        False,
    ),
    ("decode_ask_events client loop, 10.5 MB", "ask_bytes", "ask_floor", "ask_bytes", "MB/s", True),
    (
        "AskEventDecoder (sans-IO), same bytes",
        "ask_sans_io",
        "ask_floor",
        "ask_bytes",
        "MB/s",
        True,
    ),
    (
        "Ask client reader (AskResponseReader), same bytes",
        "ask_client",
        "ask_floor",
        "ask_bytes",
        "MB/s",
        True,
    ),
    (
        "  the same, every line parsed (no line memo)",
        "ask_client_unremembered",
        "ask_floor",
        "ask_bytes",
        "MB/s",
        True,
    ),
]
FLOORS = {
    "normalize_floor": "unicodedata NFKC + str.lower",
    "verify_floor": "orjson parse + canonical dump + hashlib sha256",
    "ask_floor": "bare orjson line split",
}


def main() -> None:
    results = collect(__file__, __doc__, GROUPS, DATA)
    if results is None:
        return
    print_table(ROWS, results, REFERENCE, width=52)
    print()
    print("Ratios are cost multiples: ours/floor 2.00x = twice the floor's time per unit of work;")
    print("vs ref 0.50x = half the reference's time. Floors, measured in the same process:")
    for key, what in FLOORS.items():
        print(f"  {key}: {what}")


if __name__ == "__main__":
    main()
