"""Chat server benchmarks over real HTTP: concurrent turns beside bare Starlette floors.

Run with ``.venv/bin/python bench/serve.py``. Each group runs in a fresh process and starts two
server processes on 127.0.0.1 (port 0, uvicorn); they stop when the group ends. Clients are
``httpx.AsyncClient`` objects in the group's process, one per concurrent user; the two targets
take turns run by run, so a busy neighbour on the machine costs them alike, and every figure
is the median over repeats.

- **fairness**: ``POST /api/chat`` of ``create_app`` (SQLite store) over a chat whose adapter
  streams 20 text chunks, each turn in a new session. Its time to the first NDJSON line (p95)
  with 20 turns started together, over the same with one turn alone. The floor is a bare
  Starlette endpoint streaming the same 20 chunks as lines, with its own 20-vs-1 ratio. Target
  (issue 24): ours at most 3x the floor's ratio.
- **ask turns**: turns per second at 8 concurrent clients of the docs chat (what
  ``agentskit-chat serve docs/`` serves, on SQLite) over a question the knowledge artifact
  escalates to the Ask service, each turn in a new session. The floor is a bare Starlette
  endpoint that makes the same Ask service call in process (same assistant, same SQLite Ask
  store) and streams its lines: the retrieval and the answer without the chat around them.
  Target: at least 0.3 of the floor's rate.

Beside each, the server process's CPU time per turn (user and system, from ``/proc``): on a
machine shared with other work it moves much less than wall-clock figures do.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _harness import HOST, run_and_report, serve_app, server_process, turn_body

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

STREAMS = 20
CHUNKS = [f"word{i} " for i in range(20)]
#: The pause before each chunk, as a model writing about 100 chunks a second.
CHUNK_PAUSE_S = 0.01
FAIR_REPEATS = 7
FAIR_SINGLES = 15  # single turns per repeat
FAIR_ROUNDS = 2  # rounds of STREAMS turns per repeat
ASK_CLIENTS = 8
ASK_TURNS = 48  # turns per timed run
ASK_RUNS = 7
#: Questions the knowledge artifact escalates to the Ask service; the first that is answered
#: by the service is used.
ASK_QUESTIONS = (
    "How does the service refuse a request that is over its rate limit?",
    "How are the chunks of a Markdown page ranked when a question is asked?",
    "Which storage backends can keep Ask conversations?",
)
JSON_HEADERS = {"content-type": "application/json"}


# --- the servers (child processes) ---------------------------------------------------------------


def _stream_chat() -> Any:
    """A chat definition whose adapter streams :data:`CHUNKS`, then ``done``."""
    from agentskit_chat.conversation import define_chat  # noqa: PLC0415
    from agentskit_chat.runtime import (  # noqa: PLC0415
        AdapterRequest,
        ChatConfig,
        ChatSource,
        StreamChunk,
    )

    class Source:
        async def stream(self) -> AsyncIterator[StreamChunk]:
            for part in CHUNKS:
                await asyncio.sleep(CHUNK_PAUSE_S)
                yield StreamChunk("text", content=part)
            yield StreamChunk("done")

        def abort(self) -> None:
            return None

    class Adapter:
        capabilities = None

        def create_source(self, request: AdapterRequest) -> ChatSource:
            return Source()

    return define_chat(id="bench-stream", chat=ChatConfig(adapter=Adapter()))


def _stream_floor() -> Any:
    """The floor of fairness: the same chunks as NDJSON lines, nothing else."""
    from starlette.applications import Starlette  # noqa: PLC0415 - server side only
    from starlette.responses import StreamingResponse  # noqa: PLC0415
    from starlette.routing import Route  # noqa: PLC0415

    async def lines() -> AsyncIterator[bytes]:
        yield b'{"type":"start"}\n'  # as the chat's first snapshot: before the first chunk
        for part in CHUNKS:
            await asyncio.sleep(CHUNK_PAUSE_S)
            yield json.dumps({"type": "text", "delta": part}).encode() + b"\n"

    async def streamed(request: Any) -> StreamingResponse:
        await request.body()
        return StreamingResponse(lines(), media_type="application/x-ndjson")

    return Starlette(routes=[Route("/api/chat", streamed, methods=["POST"])])


async def _docs(stack: AsyncExitStack, scratch: Path) -> Any:
    """The docs assistant on SQLite stores, as ``serve docs/`` builds it (no rate limits)."""
    from agentskit_chat.assistant import create_docs_assistant  # noqa: PLC0415
    from agentskit_chat.service import InMemoryRateLimiter  # noqa: PLC0415
    from agentskit_chat.storage import open_chat_stores  # noqa: PLC0415

    stores = await stack.enter_async_context(open_chat_stores(f"sqlite:///{scratch / 'chat.db'}"))
    unlimited = InMemoryRateLimiter(capacity=10**9, refill_per_second=1e9)
    assistant = await stack.enter_async_context(
        create_docs_assistant(
            DOCS,
            index_path=scratch / "index.sqlite3",
            session_store=stores.ask_sessions,
            rate_limiter=unlimited,
        )
    )
    return assistant, stores


def _ask_floor(assistant: Any) -> Any:
    """The floor of Ask turns: the docs chat's Ask call in process, its lines streamed."""
    from starlette.applications import Starlette  # noqa: PLC0415 - server side only
    from starlette.responses import StreamingResponse  # noqa: PLC0415
    from starlette.routing import Route  # noqa: PLC0415

    from agentskit_chat.assistant import Caller  # noqa: PLC0415
    from agentskit_chat.protocol import decode_ask_request  # noqa: PLC0415

    caller = Caller("in-process", "chat")

    async def answer(request: Any) -> StreamingResponse:
        submitted = json.loads(await request.body())
        body = {
            "protocol": "agentskit.chat.ask",
            "version": 1,
            "sessionId": submitted["sessionId"],
            "messages": [{"role": "user", "content": submitted["payload"]["input"]}],
        }
        response = await assistant.service.answer(caller, decode_ask_request(body).value)

        async def lines() -> AsyncIterator[bytes]:
            async with response:
                async for line in response:
                    yield line.encode()

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    return Starlette(routes=[Route("/api/chat", answer, methods=["POST"])])


async def _app(kind: str, stack: AsyncExitStack) -> Any:
    from agentskit_chat.server import create_app, create_docs_assistant_app  # noqa: PLC0415

    scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agentskit-bench-")))
    if kind == "stream":
        app = create_app(_stream_chat(), store=f"sqlite:///{scratch / 'chat.db'}", rate_limits=None)
        await stack.enter_async_context(app.state.chat_site)
        return app
    if kind == "stream_floor":
        return _stream_floor()
    assistant, stores = await _docs(stack, scratch)
    if kind == "docs":
        return create_docs_assistant_app(assistant, stores=stores, rate_limits=None)
    return _ask_floor(assistant)


async def _serve(kind: str) -> None:
    async with AsyncExitStack() as stack:
        await serve_app(await _app(kind, stack))


@dataclass(frozen=True, slots=True)
class Server:
    """A running server child process."""

    url: str
    pid: int

    def cpu_seconds(self) -> float:
        """The CPU time (user and system) the process has used so far (Linux; NaN elsewhere)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return math.nan
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def running(kind: str) -> Iterator[Server]:
    """A server child process; it stops when the block ends."""
    with server_process(__file__, kind) as (port, pid):
        yield Server(f"http://{HOST}:{port}/api/chat", pid)


# --- the clients ---------------------------------------------------------------------------------


def p95(samples: Sequence[float]) -> float:
    """The 95th percentile (inclusive) of at least two samples."""
    return statistics.quantiles(samples, n=100, method="inclusive")[94]


async def first_line_ms(client: Any, url: str, body: bytes) -> float:
    """Milliseconds to the first NDJSON line of one streamed POST (read to its end)."""
    start = time.perf_counter()
    first = 0.0
    async with client.stream("POST", url, content=body, headers=JSON_HEADERS) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}")
        async for chunk in response.aiter_raw():
            if not first and b"\n" in chunk:
                first = (time.perf_counter() - start) * 1000
    return first


async def together(clients: Sequence[Any], url: str, question: str) -> list[float]:
    """First-line times of one turn per client, released at once."""
    import anyio  # noqa: PLC0415

    go = anyio.Event()
    firsts: list[float] = []

    async def one(client: Any) -> None:
        await go.wait()
        firsts.append(await first_line_ms(client, url, turn_body(question)))

    async with anyio.create_task_group() as group:
        for client in clients:
            group.start_soon(one, client)
        await anyio.sleep(0.01)
        go.set()
    return firsts


async def turn_rate(clients: Sequence[Any], url: str, question: str, total: int) -> float:
    """Completed turns per second for ``total`` turns made by one loop per client."""
    import anyio  # noqa: PLC0415

    remaining = total

    async def loop(client: Any) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            response = await client.post(url, content=turn_body(question), headers=JSON_HEADERS)
            last = json.loads(response.text.splitlines()[-1]) if response.status_code == 200 else {}
            if last.get("type") != "done" and last.get("payload", {}).get("status") != "complete":
                raise RuntimeError(f"{url} did not complete a turn ({response.status_code})")

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for client in clients:
            group.start_soon(loop, client)
    return total / (time.perf_counter() - start)


def _in_servers(
    kinds: tuple[str, str],
    clients: int,
    body: Callable[[Sequence[Any], Server, Server], Awaitable[dict[str, float]]],
) -> dict[str, float]:
    import anyio  # noqa: PLC0415
    import httpx  # noqa: PLC0415

    with running(kinds[0]) as ours, running(kinds[1]) as floor:

        async def main() -> dict[str, float]:
            async with AsyncExitStack() as stack:
                made = [
                    await stack.enter_async_context(httpx.AsyncClient(timeout=60.0))
                    for _ in range(clients)
                ]
                return await body(made, ours, floor)

        return anyio.run(main)


# --- groups --------------------------------------------------------------------------------------


async def _fairness(clients: Sequence[Any], ours: Server, floor: Server) -> dict[str, float]:
    servers = {"ours": ours, "floor": floor}
    for server in servers.values():  # warm-up
        await together(clients, server.url, "hello")
        for _ in range(5):
            await first_line_ms(clients[0], server.url, turn_body("hello"))
    figures: dict[str, dict[str, list[float]]] = {
        name: {"one": [], "many": [], "ratio": [], "cpu": []} for name in servers
    }
    for _ in range(FAIR_REPEATS):
        for name, server in servers.items():
            url = server.url
            gc.collect()
            cpu = server.cpu_seconds()
            singles = [
                await first_line_ms(clients[0], url, turn_body("hello"))
                for _ in range(FAIR_SINGLES)
            ]
            many: list[float] = []
            for _ in range(FAIR_ROUNDS):
                many += await together(clients, url, "hello")
            turns = FAIR_SINGLES + FAIR_ROUNDS * len(clients)
            figures[name]["cpu"].append((server.cpu_seconds() - cpu) * 1000 / turns)
            one, both = p95(singles), p95(many)
            figures[name]["one"].append(one)
            figures[name]["many"].append(both)
            figures[name]["ratio"].append(both / one)
    return {
        f"{name}_{key}": statistics.median(values)
        for name, series in figures.items()
        for key, values in series.items()
    }


async def _ask_turns(clients: Sequence[Any], ours: Server, floor: Server) -> dict[str, float]:
    question = await _escalated_question(clients[0], ours.url)
    servers = {"ours": ours, "floor": floor}
    for server in servers.values():  # warm-up
        await turn_rate(clients, server.url, question, 2 * len(clients))
    rates: dict[str, list[float]] = {name: [] for name in servers}
    cpus: dict[str, list[float]] = {name: [] for name in servers}
    for _ in range(ASK_RUNS):
        for name, server in servers.items():
            gc.collect()
            cpu = server.cpu_seconds()
            rates[name].append(await turn_rate(clients, server.url, question, ASK_TURNS))
            cpus[name].append((server.cpu_seconds() - cpu) * 1000 / ASK_TURNS)
    results = {f"{name}_ask_tps": statistics.median(values) for name, values in rates.items()}
    results.update({f"{name}_ask_cpu": statistics.median(cpus[name]) for name in servers})
    return results


async def _escalated_question(client: Any, ours: str) -> str:
    """The first of :data:`ASK_QUESTIONS` whose chat turn is answered by the Ask service."""
    for question in ASK_QUESTIONS:
        response = await client.post(ours, content=turn_body(question), headers=JSON_HEADERS)
        last = json.loads(response.text.splitlines()[-1])
        content = last["payload"]["messages"][-1]["content"]
        if last["payload"]["status"] == "complete" and '"source-list"' in content:
            return question
    raise RuntimeError("no question was answered by the Ask service")


GROUPS: dict[str, Callable[[], dict[str, float]]] = {
    "fairness": lambda: _in_servers(("stream", "stream_floor"), STREAMS, _fairness),
    "ask_turns": lambda: _in_servers(("docs", "ask_floor"), ASK_CLIENTS, _ask_turns),
}


def report(results: dict[str, float]) -> str:
    """The table the benchmark prints: each figure, its floor, and their ratio."""
    header = f"{'measurement':<46} {'ours':>9} {'floor':>9} {'ours/floor':>11}"
    rows = [
        ("chat turn first line p95, 1 alone (ms)", "ours_one", "floor_one"),
        (f"chat turn first line p95, {STREAMS} together (ms)", "ours_many", "floor_many"),
        (f"  {STREAMS}-vs-1 ratio (target: ours/floor <= 3)", "ours_ratio", "floor_ratio"),
        ("  server CPU per turn (ms)", "ours_cpu", "floor_cpu"),
        (
            f"Ask-answer turns/s, {ASK_CLIENTS} clients (target >= 0.3)",
            "ours_ask_tps",
            "floor_ask_tps",
        ),
        ("  server CPU per turn (ms)", "ours_ask_cpu", "floor_ask_cpu"),
    ]
    lines = [header, "-" * len(header)]
    for label, ours_key, floor_key in rows:
        ours, floor = results[ours_key], results[floor_key]
        lines.append(f"{label:<46} {ours:>9.2f} {floor:>9.2f} {ours / floor:>10.2f}x")
    lines += [
        "",
        f"Fairness floor: bare Starlette streaming the same {len(CHUNKS)} chunks; Ask floor: bare",
        "Starlette making the same in-process Ask service call. Medians over repeats, the",
        "targets interleaved, servers on their own uvicorn processes, measured in this run.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", choices=sorted(GROUPS))
    parser.add_argument(
        "--serve",
        choices=("stream", "stream_floor", "docs", "ask_floor"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return
    if args.group:
        print(json.dumps(GROUPS[args.group]()))
        return
    run_and_report(__file__, GROUPS, report)


if __name__ == "__main__":
    main()
