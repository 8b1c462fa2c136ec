"""Ask backend benchmarks over real HTTP: the docs assistant beside a bare Starlette floor.

Run with ``.venv/bin/python bench/ask.py``. Each group runs in a fresh process, and each group
starts two fresh server processes on 127.0.0.1, port 0, served by uvicorn:

- **ours**: the docs assistant's ASGI app (``create_docs_assistant`` over the project's
  ``docs/``): ``POST /api/answer`` (the answer envelope) and ``POST /api/ask`` (the Ask NDJSON
  stream);
- **floor**: a bare Starlette app whose ``POST`` endpoints read the body and answer a fixed
  3-line NDJSON body, whole (``/floor``) or streamed line by line (``/floor/stream``).

The clients are ``httpx.AsyncClient`` objects in the group's process, one per concurrent user.
``gc.collect()`` runs before each timed run, warm-up requests come first, and the targets take
turns. Figures:

- **latency**: p50/p99 of one request at a time, the three targets interleaved, for an exact
  answer (a page title the knowledge artifact answers), a backend answer (a question the
  artifact escalates, answered by retrieval and the extractive generator), and the floor;
- **throughput**: requests per second with 32 concurrent clients, median of seven short runs;
- **chat turns**: p50/p99 of one ``POST /api/chat`` turn at a time (the turn protocol: a lease
  claimed and released through the SQLite session storage, a snapshot saved before every line,
  the messages saved to the SQLite chat memory), for an exact answer and an Ask answer, each
  turn in a fresh session, beside the floor's streamed endpoint;
- **streams**: time to the first NDJSON line of ``/api/ask`` (p95), one stream at a time vs 20
  streams started together, beside the floor's stream endpoint. Their ratio says how much a
  stream waits for its neighbours; ``fair`` compares the p95 first line of 20 streams with 20
  whole streams served one after another (below 1: no stream waited for others to finish).

Every figure is printed beside the floor measured in the same run, as a cost ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _harness import HOST, run_and_report, serve_app, server_process, turn_body

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

LATENCY_REQUESTS = 300
THROUGHPUT_CLIENTS = 32
THROUGHPUT_REQUESTS = 160
THROUGHPUT_RUNS = 7
STREAMS = 20
STREAM_ROUNDS = 10
SINGLE_STREAMS = 60

#: The floor's fixed body: three Ask-shaped NDJSON lines.
FLOOR_LINES = (
    b'{"type":"text","delta":"The floor answers "}\n',
    b'{"type":"text","delta":"with three fixed lines."}\n',
    b'{"type":"done","model":"floor"}\n',
)

#: Questions expected to miss the artifact and be answered from the docs by the backend; the
#: first that does is used.
BACKEND_QUESTIONS = (
    "How does the service refuse a request that is over its rate limit?",
    "How are the chunks of a Markdown page ranked when a question is asked?",
    "What does the extractive generator do when nothing relevant was retrieved?",
    "Which storage backends can keep Ask conversations?",
)


# --- pure helpers --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles of a sample of durations, in milliseconds."""

    p50_ms: float
    p95_ms: float
    p99_ms: float


def latency_of(samples_ns: Sequence[int]) -> Latency:
    """p50/p95/p99 (inclusive quantiles) of durations in nanoseconds.

    Raises:
        ValueError: fewer than two samples.
    """
    if len(samples_ns) < 2:
        raise ValueError("percentiles need at least two samples")
    cuts = statistics.quantiles(samples_ns, n=100, method="inclusive")
    return Latency(cuts[49] / 1e6, cuts[94] / 1e6, cuts[98] / 1e6)


def cost_ratio(ours: float, floor: float, *, higher_is_better: bool) -> float:
    """How many times the floor's cost ours is: above 1 is slower than the floor."""
    if ours <= 0 or floor <= 0:
        return math.nan
    return floor / ours if higher_is_better else ours / floor


def fairness(ttfb_p95_many_ms: float, whole_p50_single_ms: float, streams: int) -> float:
    """p95 first line with ``streams`` concurrent streams over ``streams`` whole streams in a row.

    Serving streams strictly one after another would put the last first line near
    ``streams x`` one whole stream: a value well below 1 means streams interleave.
    """
    if whole_p50_single_ms <= 0 or streams < 1:
        return math.nan
    return ttfb_p95_many_ms / (streams * whole_p50_single_ms)


def first_line_ends(chunk: bytes) -> bool:
    """Whether a received chunk completes the first NDJSON line."""
    return b"\n" in chunk


def ask_body(question: str, session_id: str | None = None) -> bytes:
    """An ``agentskit.chat.ask`` v1 request body with one user message."""
    body: dict[str, Any] = {
        "protocol": "agentskit.chat.ask",
        "version": 1,
        "messages": [{"role": "user", "content": question}],
    }
    if session_id is not None:
        body["sessionId"] = session_id
    return json.dumps(body).encode()


def answer_body(question: str) -> bytes:
    """A ``POST /api/answer`` body."""
    return json.dumps({"question": question}).encode()


# --- the servers (child processes) ---------------------------------------------------------------


def floor_app() -> Any:
    """The floor: the least a Starlette NDJSON endpoint does."""
    from starlette.applications import Starlette  # noqa: PLC0415 - server side only
    from starlette.responses import Response, StreamingResponse  # noqa: PLC0415
    from starlette.routing import Route  # noqa: PLC0415

    body = b"".join(FLOOR_LINES)

    async def whole(request: Any) -> Response:
        await request.body()
        return Response(body, media_type="application/x-ndjson")

    async def lines() -> AsyncIterator[bytes]:
        for line in FLOOR_LINES:
            yield line

    async def streamed(request: Any) -> StreamingResponse:
        await request.body()
        return StreamingResponse(lines(), media_type="application/x-ndjson")

    return Starlette(
        routes=[
            Route("/floor", whole, methods=["POST"]),
            Route("/floor/stream", streamed, methods=["POST"]),
        ]
    )


async def assistant_app(stack: AsyncExitStack) -> Any:
    """The docs assistant's app over ``docs/``, its index in a scratch folder.

    The assistant's default rate limit (60 requests, then 5 per second per subject) would
    refuse most of a benchmark: it gets a bucket no benchmark empties, still consulted on
    every request.
    """
    from agentskit_chat.assistant import create_docs_assistant  # noqa: PLC0415
    from agentskit_chat.server import create_docs_assistant_app  # noqa: PLC0415
    from agentskit_chat.service import InMemoryRateLimiter  # noqa: PLC0415 - server side only
    from agentskit_chat.storage import open_chat_stores  # noqa: PLC0415

    scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agentskit-bench-")))
    unlimited = InMemoryRateLimiter(capacity=10**9, refill_per_second=1e9)
    stores = await stack.enter_async_context(open_chat_stores(f"sqlite:///{scratch / 'chat.db'}"))
    assistant = await stack.enter_async_context(
        create_docs_assistant(DOCS, index_path=scratch / "index.sqlite3", rate_limiter=unlimited)
    )
    return create_docs_assistant_app(assistant, stores=stores)


async def _serve(kind: str) -> None:
    async with AsyncExitStack() as stack:
        await serve_app(floor_app() if kind == "floor" else await assistant_app(stack))


@contextmanager
def running(kind: str) -> Iterator[str]:
    """A server child process: yields its base URL."""
    with server_process(__file__, kind) as (port, _):
        yield f"http://{HOST}:{port}"


# --- the client ----------------------------------------------------------------------------------


Request = Callable[[], Awaitable[None]]


def _client() -> Any:
    import httpx  # noqa: PLC0415

    return httpx.AsyncClient(timeout=60.0)


def _poster(client: Any, url: str, body: bytes) -> Request:
    headers = {"content-type": "application/json"}

    async def post() -> None:
        response = await client.post(url, content=body, headers=headers)
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}")

    return post


async def _envelope(client: Any, url: str, question: str) -> dict[str, Any]:
    response = await client.post(
        url, content=answer_body(question), headers={"content-type": "application/json"}
    )
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def _is_exact(envelope: dict[str, Any]) -> bool:
    provenance = envelope.get("provenance") or {}
    return envelope.get("outcome") == "answer" and provenance.get("source") == "local"


def _is_backend(envelope: dict[str, Any]) -> bool:
    provenance = envelope.get("provenance") or {}
    return envelope.get("outcome") == "answer" and provenance.get("source") == "backend"


def _exact_candidates() -> list[str]:
    """Page titles of ``docs/`` that the artifact answers on their own."""
    from agentskit_chat.answers import build_local_knowledge_artifact  # noqa: PLC0415
    from agentskit_chat.protocol import normalize_knowledge_key  # noqa: PLC0415
    from agentskit_chat.retrieval import read_docs_folder  # noqa: PLC0415

    built = json.loads(
        build_local_knowledge_artifact(read_docs_folder(DOCS), site_id="bench").artifact_json
    )
    owners: dict[str, int] = {}
    for entry in built["entries"]:
        for value in entry["match"]["values"]:
            key = normalize_knowledge_key(value)
            owners[key] = owners.get(key, 0) + 1
    return [
        value
        for entry in built["entries"]
        if entry.get("kind") == "document"
        for value in entry["match"]["values"]
        if owners[normalize_knowledge_key(value)] == 1 and "/" not in value
    ]


async def pick_questions(client: Any, base: str) -> tuple[str, str]:
    """An exact question and a backend question, each checked against the running app."""
    url = f"{base}/api/answer"
    exact = backend = None
    for candidate in _exact_candidates()[:20]:
        if _is_exact(await _envelope(client, url, candidate)):
            exact = candidate
            break
    for candidate in BACKEND_QUESTIONS:
        if _is_backend(await _envelope(client, url, candidate)):
            backend = candidate
            break
    if exact is None or backend is None:
        raise RuntimeError("no exact or no backend question is answered as expected")
    return exact, backend


async def sequential_ns(request: Request, count: int) -> list[int]:
    """Durations of ``count`` requests made one after another."""
    clock = time.perf_counter_ns
    samples = []
    for _ in range(count):
        start = clock()
        await request()
        samples.append(clock() - start)
    return samples


async def concurrent_rate(requests: Sequence[Request], *, total: int) -> float:
    """Requests per second for ``total`` requests made by one concurrent loop per request."""
    import anyio  # noqa: PLC0415

    remaining = total

    async def loop(request: Request) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await request()

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for request in requests:
            group.start_soon(loop, request)
    return total / (time.perf_counter() - start)


async def stream_times(client: Any, url: str, body: bytes) -> tuple[int, int]:
    """``(first line, whole stream)`` durations of one streamed POST, in nanoseconds."""
    clock = time.perf_counter_ns
    start = clock()
    first = 0
    headers = {"content-type": "application/json"}
    async with client.stream("POST", url, content=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}")
        async for chunk in response.aiter_raw():
            if not first and first_line_ends(chunk):
                first = clock() - start
    return first, clock() - start


async def stream_rounds(
    clients: Sequence[Any], url: str, bodies: Callable[[], bytes], *, rounds: int
) -> tuple[list[int], list[int]]:
    """First-line and whole-stream durations of ``rounds`` rounds of one stream per client,
    started together (an event releases each round's streams at once)."""
    import anyio  # noqa: PLC0415

    firsts: list[int] = []
    wholes: list[int] = []
    for _ in range(rounds):
        go = anyio.Event()

        async def one(client: Any, body: bytes, go: anyio.Event = go) -> None:
            await go.wait()
            first, whole = await stream_times(client, url, body)
            firsts.append(first)
            wholes.append(whole)

        async with anyio.create_task_group() as group:
            for client in clients:
                group.start_soon(one, client, bodies())
            await anyio.sleep(0.01)
            go.set()
    return firsts, wholes


# --- groups --------------------------------------------------------------------------------------


def _measure_in_servers(
    body: Callable[[Sequence[Any], str, str], Awaitable[dict[str, float]]],
) -> dict[str, float]:
    """Run ``body(clients, ours, floor)`` against fresh servers.

    Each of the ``THROUGHPUT_CLIENTS`` clients is an ``httpx.AsyncClient`` of its own, as
    separate users would be: with one shared client, its connection pool, not the servers,
    limited 32 concurrent requests to a third of the rate.
    """
    import anyio  # noqa: PLC0415

    with running("assistant") as ours, running("floor") as floor:

        async def main() -> dict[str, float]:
            async with AsyncExitStack() as stack:
                clients = [
                    await stack.enter_async_context(_client()) for _ in range(THROUGHPUT_CLIENTS)
                ]
                return await body(clients, ours, floor)

        return anyio.run(main)


async def _latency(clients: Sequence[Any], ours: str, floor: str) -> dict[str, float]:
    client = clients[0]
    exact, backend = await pick_questions(client, ours)
    targets = {
        "exact": _poster(client, f"{ours}/api/answer", answer_body(exact)),
        "backend": _poster(client, f"{ours}/api/answer", answer_body(backend)),
        "floor": _poster(client, f"{floor}/floor", answer_body(backend)),
    }
    return await interleaved_latency(targets, warmup=30, requests=LATENCY_REQUESTS)


async def interleaved_latency(
    targets: dict[str, Request], *, warmup: int, requests: int
) -> dict[str, float]:
    """p50/p99 of one request at a time to each target, the targets taking turns."""
    for request in targets.values():
        await sequential_ns(request, warmup)
    samples: dict[str, list[int]] = {name: [] for name in targets}
    gc.collect()
    for _ in range(requests):
        for name, request in targets.items():
            samples[name] += await sequential_ns(request, 1)
    results: dict[str, float] = {}
    for name, values in samples.items():
        latency = latency_of(values)
        results[f"{name}_p50"] = latency.p50_ms
        results[f"{name}_p99"] = latency.p99_ms
    return results


def _chat_poster(client: Any, url: str, question: str) -> Request:
    headers = {"content-type": "application/json"}

    async def post() -> None:
        response = await client.post(url, content=turn_body(question), headers=headers)
        last = json.loads(response.text.splitlines()[-1]) if response.status_code == 200 else {}
        if last.get("payload", {}).get("status") != "complete":
            raise RuntimeError(f"{url} did not complete a turn ({response.status_code})")

    return post


async def _chat(clients: Sequence[Any], ours: str, floor: str) -> dict[str, float]:
    client = clients[0]
    exact, backend = await pick_questions(client, ours)
    targets = {
        "chat_exact": _chat_poster(client, f"{ours}/api/chat", exact),
        "chat_backend": _chat_poster(client, f"{ours}/api/chat", backend),
        "chat_floor": _poster(client, f"{floor}/floor/stream", answer_body(backend)),
    }
    return await interleaved_latency(targets, warmup=20, requests=LATENCY_REQUESTS // 2)


async def _throughput(clients: Sequence[Any], ours: str, floor: str) -> dict[str, float]:
    exact, backend = await pick_questions(clients[0], ours)
    targets = {
        "exact": [_poster(c, f"{ours}/api/answer", answer_body(exact)) for c in clients],
        "backend": [_poster(c, f"{ours}/api/answer", answer_body(backend)) for c in clients],
        "floor": [_poster(c, f"{floor}/floor", answer_body(backend)) for c in clients],
    }
    for requests in targets.values():
        await concurrent_rate(requests, total=2 * len(requests))
    # Runs interleave the targets, so a busy neighbour on the machine costs them alike.
    rates: dict[str, list[float]] = {name: [] for name in targets}
    for _ in range(THROUGHPUT_RUNS):
        for name, requests in targets.items():
            gc.collect()
            rates[name].append(await concurrent_rate(requests, total=THROUGHPUT_REQUESTS))
    return {f"{name}_rps": statistics.median(values) for name, values in rates.items()}


async def _streams(clients: Sequence[Any], ours: str, floor: str) -> dict[str, float]:
    client, streams = clients[0], clients[:STREAMS]
    _, question = await pick_questions(client, ours)

    def fresh() -> bytes:
        # A session of its own per stream, so persistence never makes two streams conflict.
        return ask_body(question, f"bench-{uuid.uuid4().hex}")

    check = [line async for line in _lines(client, f"{ours}/api/ask", fresh())]
    kinds = [json.loads(line).get("type") for line in check]
    if not kinds or kinds[-1] != "done" or "text" not in kinds:
        raise RuntimeError(f"/api/ask did not stream an answer: {kinds}")
    urls = {"ask": f"{ours}/api/ask", "floor": f"{floor}/floor/stream"}
    for url in urls.values():
        await stream_rounds(streams, url, fresh, rounds=1)
        for _ in range(10):
            await stream_times(client, url, fresh())
    # Targets interleave (stream by stream, then round by round), as in the other groups.
    singles: dict[str, list[tuple[int, int]]] = {name: [] for name in urls}
    gc.collect()
    for _ in range(SINGLE_STREAMS):
        for name, url in urls.items():
            singles[name].append(await stream_times(client, url, fresh()))
    firsts: dict[str, list[int]] = {name: [] for name in urls}
    wholes: dict[str, list[int]] = {name: [] for name in urls}
    for _ in range(STREAM_ROUNDS):
        for name, url in urls.items():
            gc.collect()
            round_firsts, round_wholes = await stream_rounds(streams, url, fresh, rounds=1)
            firsts[name] += round_firsts
            wholes[name] += round_wholes
    results: dict[str, float] = {}
    for name in urls:
        single_first = latency_of([first for first, _ in singles[name]])
        single_whole = latency_of([whole for _, whole in singles[name]])
        many_first = latency_of(firsts[name])
        results[f"{name}_ttfb1_p95"] = single_first.p95_ms
        results[f"{name}_ttfb20_p95"] = many_first.p95_ms
        results[f"{name}_whole1_p50"] = single_whole.p50_ms
        results[f"{name}_whole20_p95"] = latency_of(wholes[name]).p95_ms
        results[f"{name}_fair"] = fairness(many_first.p95_ms, single_whole.p50_ms, STREAMS)
    return results


async def _lines(client: Any, url: str, body: bytes) -> AsyncIterator[str]:
    headers = {"content-type": "application/json"}
    async with client.stream("POST", url, content=body, headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line:
                yield line


GROUPS: dict[str, Callable[[Sequence[Any], str, str], Awaitable[dict[str, float]]]] = {
    "latency": _latency,
    "throughput": _throughput,
    "chat": _chat,
    "streams": _streams,
}

# (label, our key, floor key, unit, higher is better)
ROWS = [
    ("POST /api/answer, exact: p50", "exact_p50", "floor_p50", "ms", False),
    ("POST /api/answer, exact: p99", "exact_p99", "floor_p99", "ms", False),
    ("POST /api/answer, backend: p50", "backend_p50", "floor_p50", "ms", False),
    ("POST /api/answer, backend: p99", "backend_p99", "floor_p99", "ms", False),
    (f"exact, {THROUGHPUT_CLIENTS} concurrent clients", "exact_rps", "floor_rps", "req/s", True),
    (
        f"backend, {THROUGHPUT_CLIENTS} concurrent clients",
        "backend_rps",
        "floor_rps",
        "req/s",
        True,
    ),
    ("POST /api/chat turn, exact: p50", "chat_exact_p50", "chat_floor_p50", "ms", False),
    ("POST /api/chat turn, exact: p99", "chat_exact_p99", "chat_floor_p99", "ms", False),
    ("POST /api/chat turn, Ask answer: p50", "chat_backend_p50", "chat_floor_p50", "ms", False),
    ("POST /api/chat turn, Ask answer: p99", "chat_backend_p99", "chat_floor_p99", "ms", False),
    ("/api/ask first line p95, 1 stream", "ask_ttfb1_p95", "floor_ttfb1_p95", "ms", False),
    (
        f"/api/ask first line p95, {STREAMS} streams",
        "ask_ttfb20_p95",
        "floor_ttfb20_p95",
        "ms",
        False,
    ),
    ("/api/ask whole stream p50, 1 stream", "ask_whole1_p50", "floor_whole1_p50", "ms", False),
    (
        f"/api/ask whole stream p95, {STREAMS} streams",
        "ask_whole20_p95",
        "floor_whole20_p95",
        "ms",
        False,
    ),
]


def report(results: dict[str, float]) -> str:
    """The table the benchmark prints."""
    header = f"{'measurement':<44} {'ours':>10} {'floor':>10} {'ours/floor':>10}"
    lines = [header, "-" * len(header)]
    for label, ours_key, floor_key, unit, higher in ROWS:
        ours, floor = results[ours_key], results[floor_key]
        ratio = cost_ratio(ours, floor, higher_is_better=higher)
        lines.append(f"{label:<44} {ours:>10,.2f} {floor:>10,.2f} {ratio:>9.2f}x  ({unit})")
    ours_growth = results["ask_ttfb20_p95"] / results["ask_ttfb1_p95"]
    floor_growth = results["floor_ttfb20_p95"] / results["floor_ttfb1_p95"]
    lines += [
        "",
        f"first line p95, {STREAMS} streams vs 1: ours {ours_growth:.2f}x, "
        f"floor {floor_growth:.2f}x",
        f"fair (p95 first line of {STREAMS} / {STREAMS} whole streams in a row): "
        f"ours {results['ask_fair']:.2f}, floor {results['floor_fair']:.2f} "
        "(below 1: streams interleave, none waits for the others to finish)",
        "",
        "Ratios are cost multiples: 2.00x = twice the floor's time per request (or half its",
        "requests per second). The floor is a bare Starlette POST endpoint answering a fixed",
        "3-line NDJSON body, on its own uvicorn process, measured in the same run.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", choices=sorted(GROUPS))
    parser.add_argument("--serve", choices=("assistant", "floor"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return
    if args.group:
        print(json.dumps(_measure_in_servers(GROUPS[args.group])))
        return
    run_and_report(__file__, GROUPS, report)


if __name__ == "__main__":
    main()
