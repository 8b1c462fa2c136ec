"""Soak: ``agentskit-chat serve --workers 2`` under 32 chat clients for N minutes, on loopback.

Run with ``.venv/bin/python bench/soak.py --minutes 10`` (or ``make soak``); CI runs it for two
minutes (``tests/soak/test_soak.py``). It starts the support desk example
(``examples/support/app.py:chat``, its scripted model: no API key, no network) with two worker
processes on 127.0.0.1 and a SQLite file in a temporary folder, drives it with 32 clients, stops
the server and exits by itself.

Each client behaves like a busy user: it starts a conversation, asks follow-up questions (now
and then the ``support`` command, whose answer is a choice list), reads the conversation back
with ``GET /api/chat?sessionId=`` every few turns and when it leaves it, and starts another.
Every turn must stream to a ``complete`` snapshot with an answer, and every read must hold the
question just asked, with as many messages as the turns so far.

The limits per client: the 32 clients share one address (127.0.0.1), and the server's limits
count per address — by default one user's allowance (5 requests a second, 360 new
conversations an hour). The soak stands for 32 users, so it starts the server with 32 users'
allowance (``--rate-limit 160 --new-sessions-per-hour 11520``), and each client keeps to one
user's: at most 4 requests a second, and a new conversation at most every 10 seconds. A 429
is then not expected; one that comes anyway is counted and reported (the client waits its
``Retry-After`` and goes on), and is not an error.

Passes when there were no errors (anything but a stored, complete turn, a matching read or a
429: a 5xx, a broken or cut stream, a turn that did not complete, a read that lost a turn, a
worker that died) and the workers' memory grew by less than 5 %: the resident set of both
worker processes (``/proc/<pid>/status``), summed, sampled every 5 seconds; the median of the
first minute after the warm-up (a quarter of the run, at most a minute) against the median of
the last minute (when less than two minutes follow the warm-up, as in CI's run, the median of
each half of them). Prints turns a second,
turn latency (p50, p95), the 429 count and the memory figures; exits 1 on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

ROOT: Final = Path(__file__).resolve().parents[1]
TARGET: Final = f"{ROOT / 'examples' / 'support' / 'app.py'}:chat"
CLIENTS: Final = 32
WORKERS: Final = 2
#: One user's allowance (the server's defaults) and the server's, for 32 users on one address.
USER_REQUESTS_PER_S: Final = 4.0
USER_NEW_CONVERSATION_EVERY_S: Final = 10.0
SERVER_RATE_LIMIT: Final = 5 * CLIENTS
SERVER_NEW_SESSIONS_PER_HOUR: Final = 360 * CLIENTS
#: Memory: sampled this often; the limit on growth, first minute to last.
SAMPLE_EVERY_S: Final = 5.0
GROWTH_LIMIT: Final = 0.05
#: The longest warm-up whose memory samples are not counted (a quarter of a shorter run).
WARMUP_MAX_S: Final = 60.0
REQUEST_TIMEOUT_S: Final = 30.0
QUESTIONS: Final = (
    "Where is my order 4411?",
    "How do I reset my password?",
    "Can I change the delivery address of an order that shipped yesterday?",
    "What is your refund policy for damaged items?",
    "My invoice shows the wrong VAT number.",
    "Do you ship to Norway, and how long does it take?",
    "How long does a refund take to reach my card?",
    "Can I pay by bank transfer?",
    "The discount code SPRING10 does not work at checkout.",
    "How do I close my account?",
)
SUPPORT_COMMAND: Final = "support"


@dataclass
class Figures:
    """What the clients saw."""

    turns: int = 0
    reads: int = 0
    conversations: int = 0
    rate_limited: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


@dataclass
class Memory:
    """RSS samples of the worker processes: (seconds since the start, summed bytes)."""

    samples: list[tuple[float, int]] = field(default_factory=list)
    workers: tuple[int, ...] = ()


# --- the server ---------------------------------------------------------------------------------


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def worker_pids(parent: int) -> tuple[int, ...]:
    """The uvicorn worker processes of ``parent`` (its children but the resource tracker)."""
    children = []
    for entry in Path("/proc").iterdir():
        if (
            entry.name.isdigit()
            and _ppid(int(entry.name)) == parent
            and "resource_tracker" not in _cmdline(int(entry.name))
        ):
            children.append(int(entry.name))
    return tuple(sorted(children))


def rss_bytes(pid: int) -> int | None:
    """The resident set of ``pid`` (``VmRSS``), or ``None`` when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


@contextlib.contextmanager
def serving(store: str, workers: int) -> Any:
    """``agentskit-chat serve`` the support example; yields (process, URL, worker pids)."""
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTSKIT_API_KEY", "AGENTSKIT_MODEL")}
    command = [sys.executable, "-c", "from agentskit_chat.cli import main; main()", "serve"]
    command += [TARGET, "--host", "127.0.0.1", "--port", "0", "--workers", str(workers)]
    command += ["--store", store, "--rate-limit", str(SERVER_RATE_LIMIT)]
    command += ["--new-sessions-per-hour", str(SERVER_NEW_SESSIONS_PER_HOUR)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline and not line.startswith("Serving"):
            ready, _, _ = select.select([process.stdout], [], [], 0.2)
            if ready:
                line = process.stdout.readline()
            elif process.poll() is not None:
                break
        if not line.startswith("Serving"):
            error = process.stderr.read() if process.stderr else ""
            raise SystemExit(f"soak: the server did not start:\n{error[-4000:]}")
        url = line.split(" at ", 1)[1].split()[0]
        pids: tuple[int, ...] = ()
        while time.monotonic() < deadline and len(pids) < workers:
            pids = worker_pids(process.pid)
            time.sleep(0.1)
        if len(pids) != workers:
            raise SystemExit(f"soak: expected {workers} worker processes, found {len(pids)}")
        yield process, url, pids
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# --- the clients --------------------------------------------------------------------------------


class Client:
    """One user: conversations of follow-up turns, reads, at one user's allowance."""

    def __init__(self, number: int, url: str, figures: Figures, until: float) -> None:
        self.number = number
        self.figures = figures
        self.until = until
        self.http = httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S)
        self.random = random.Random(number)
        self.last_request = 0.0
        self.conversation = 0

    async def pace(self) -> None:
        """At most :data:`USER_REQUESTS_PER_S`, plus a short, random think time."""
        gap = 1 / USER_REQUESTS_PER_S + self.random.uniform(0, 0.25)
        wait = self.last_request + gap - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self.last_request = time.monotonic()

    async def run(self) -> None:
        async with self.http:
            while time.monotonic() < self.until:
                await self.one_conversation()

    async def one_conversation(self) -> None:
        self.conversation += 1
        self.figures.conversations += 1
        session_id = f"soak-c{self.number}-s{self.conversation}"
        started = time.monotonic()
        wanted = self.random.randint(4, 12)
        texts: list[str] = []
        turn = 0
        # One user's rate of new conversations: this one lasts at least 10 seconds.
        while time.monotonic() < self.until and (
            turn < wanted or time.monotonic() - started < USER_NEW_CONVERSATION_EVERY_S
        ):
            turn += 1
            text = SUPPORT_COMMAND if self.random.random() < 0.1 else self.random.choice(QUESTIONS)
            if await self.turn(session_id, turn, text):
                texts.append(text)
            if turn % 3 == 0:
                await self.read(session_id, texts)
        if texts and time.monotonic() < self.until:
            await self.read(session_id, texts)

    async def request(self, method: str, path: str, **options: Any) -> httpx.Response | None:
        """One request at the user's pace; a 429 waits its Retry-After and is asked again."""
        for _ in range(20):
            await self.pace()
            try:
                response = await self.http.request(method, path, **options)
            except httpx.HTTPError as error:
                self.figures.error(f"transport {type(error).__name__}")
                return None
            if response.status_code != 429:
                return response
            self.figures.rate_limited += 1
            await asyncio.sleep(float(response.headers.get("retry-after", "1")))
        self.figures.error("429 twenty times in a row")
        return None

    async def turn(self, session_id: str, turn: int, text: str) -> bool:
        body = {
            "protocol": "agentskit.chat.turn",
            "version": 1,
            "eventId": f"e{turn}",
            "sessionId": session_id,
            "turnId": f"t{turn}",
            "sequence": 0,
            "emittedAt": "2026-07-11T00:00:00.000Z",
            "event": "client.turn.submit",
            "payload": {"input": text},
        }
        started = time.monotonic()
        response = await self.request(
            "POST",
            "/api/chat",
            content=json.dumps(body),
            headers={"content-type": "application/json"},
        )
        if response is None:
            return False
        if response.status_code != 200:
            self.figures.error(f"turn {response.status_code} {_code(response)}")
            return False
        try:
            last = json.loads(response.text.splitlines()[-1])
        except (ValueError, IndexError):
            self.figures.error("turn: a stream that is not NDJSON")
            return False
        payload = last.get("payload") or {}
        messages = payload.get("messages") or []
        if last.get("event") != "server.turn.snapshot" or payload.get("status") != "complete":
            self.figures.error(f"turn ended on {last.get('event')} {payload.get('code', '')}")
            return False
        if (
            not messages
            or messages[-1].get("role") != "assistant"
            or not messages[-1].get("content")
        ):
            self.figures.error("turn: no answer")
            return False
        self.figures.turns += 1
        self.figures.latencies.append(time.monotonic() - started)
        return True

    async def read(self, session_id: str, texts: list[str]) -> None:
        response = await self.request("GET", "/api/chat", params={"sessionId": session_id})
        if response is None:
            return
        if response.status_code != 200:
            self.figures.error(f"read {response.status_code} {_code(response)}")
            return
        messages = (response.json().get("payload") or {}).get("messages") or []
        asked = [m.get("content") for m in messages if m.get("role") == "user"]
        if asked != texts:
            self.figures.error("read: the stored conversation is not the one the client had")
            return
        self.figures.reads += 1


def _code(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return "(no code)"


async def sample_memory(
    pids: tuple[int, ...], memory: Memory, figures: Figures, begin: float, until: float
) -> None:
    """Sum the workers' RSS every :data:`SAMPLE_EVERY_S` seconds until ``until``."""
    memory.workers = pids
    while True:
        sizes = [rss_bytes(pid) for pid in pids]
        now = time.monotonic()
        if any(size is None for size in sizes):
            figures.error("a worker process ended")
            return
        memory.samples.append((now - begin, sum(size or 0 for size in sizes)))
        if now >= until:
            return
        await asyncio.sleep(min(SAMPLE_EVERY_S, max(0.0, until - now)))


async def drive(
    url: str, pids: tuple[int, ...], seconds: float, clients: int
) -> tuple[Figures, Memory, float]:
    figures = Figures()
    memory = Memory()
    begin = time.monotonic()
    until = begin + seconds
    tasks = [Client(n, url, figures, until).run() for n in range(clients)]
    await asyncio.gather(sample_memory(pids, memory, figures, begin, until), *tasks)
    return figures, memory, time.monotonic() - begin


# --- the verdict --------------------------------------------------------------------------------


def windows(seconds: float, warmup: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """The first minute after the warm-up and the last minute (shorter halves of what is
    after the warm-up when the run is shorter than two minutes and a warm-up)."""
    width = min(60.0, (seconds - warmup) / 2)
    return (warmup, warmup + width), (seconds - width, seconds + 1)


def verdict(
    figures: Figures, memory: Memory, elapsed: float, seconds: float, warmup: float
) -> dict[str, Any]:
    """The summary figures and whether the soak passed."""
    first_window, last_window = windows(seconds, warmup)
    first = [size for at, size in memory.samples if first_window[0] <= at < first_window[1]]
    last = [size for at, size in memory.samples if last_window[0] <= at < last_window[1]]
    rss_first = statistics.median(first) if first else 0.0
    rss_last = statistics.median(last) if last else 0.0
    growth = (rss_last - rss_first) / rss_first if rss_first else float("inf")
    latencies = sorted(figures.latencies)
    p50 = statistics.median(latencies) if latencies else 0.0
    p95 = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))] if latencies else 0.0
    errors = sum(figures.errors.values())
    by_minute: dict[int, list[int]] = {}
    for at, size in memory.samples:
        by_minute.setdefault(int(at // 60), []).append(size)
    return {
        "minutes": round(seconds / 60, 3),
        "clients": CLIENTS,
        "workers": len(memory.workers),
        "turns": figures.turns,
        "turns_per_s": round(figures.turns / elapsed, 2) if elapsed else 0.0,
        "reads": figures.reads,
        "conversations": figures.conversations,
        "p50_ms": round(p50 * 1000, 1),
        "p95_ms": round(p95 * 1000, 1),
        "rate_limited": figures.rate_limited,
        "errors": errors,
        "error_kinds": figures.errors,
        "rss_first_mb": round(rss_first / 2**20, 1),
        "rss_last_mb": round(rss_last / 2**20, 1),
        "rss_growth_pct": round(growth * 100, 2),
        "rss_samples": [len(first), len(last)],
        "rss_by_minute_mb": [
            round(statistics.median(sizes) / 2**20, 1) for _, sizes in sorted(by_minute.items())
        ],
        "passed": errors == 0
        and figures.turns > 0
        and bool(first and last)
        and growth < GROWTH_LIMIT,
    }


def report(result: dict[str, Any]) -> None:
    print(
        f"soak: {result['minutes']} min, {result['clients']} clients, "
        f"{result['workers']} workers, SQLite"
    )
    print(
        f"  turns {result['turns']} ({result['turns_per_s']}/s), reads {result['reads']}, "
        f"conversations {result['conversations']}"
    )
    print(f"  turn latency p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms")
    print(f"  429s {result['rate_limited']} (documented: per-client limits, see bench/soak.py)")
    print(f"  errors {result['errors']} {result['error_kinds'] or ''}".rstrip())
    print(
        f"  worker RSS first minute {result['rss_first_mb']} MB, last minute "
        f"{result['rss_last_mb']} MB, growth {result['rss_growth_pct']:+.2f} % "
        f"(limit {GROWTH_LIMIT * 100:.0f} %)"
    )
    print(f"  worker RSS by minute (MB): {result['rss_by_minute_mb']}")
    print(f"  server start {result['start_s']} s, stop {result['stop_s']} s")
    print("PASS" if result["passed"] else "FAIL")
    print("SOAK-RESULT " + json.dumps(result, sort_keys=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--minutes",
        type=float,
        default=float(os.environ.get("AGENTSKIT_SOAK_MINUTES", "10")),
        help="How long the clients run (default: AGENTSKIT_SOAK_MINUTES, else 10).",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="Seconds at the start whose memory samples are not counted (default: a quarter "
        "of the run, at most 60).",
    )
    options = parser.parse_args(argv)
    seconds = options.minutes * 60
    if options.warmup is None:
        # Caches fill in the first minute or two (measured: the workers' RSS steps up by
        # ~3 % in minute 2, then stays within 0.5 % for eight minutes).
        options.warmup = min(WARMUP_MAX_S, seconds / 4)
    if seconds <= options.warmup + 2 * SAMPLE_EVERY_S:
        parser.error("the run must be longer than the warm-up and two samples")
    with tempfile.TemporaryDirectory(prefix="agentskit-soak-") as folder:
        store = f"sqlite:///{Path(folder) / 'chat.db'}"
        started = time.monotonic()
        with serving(store, WORKERS) as (process, url, pids):
            ready = time.monotonic() - started
            figures, memory, elapsed = asyncio.run(drive(url, pids, seconds, CLIENTS))
            if process.poll() is not None:
                figures.error("the server exited")
            stopping = time.monotonic()
        stopped = time.monotonic() - stopping
    result = verdict(figures, memory, elapsed, seconds, options.warmup)
    result.update(start_s=round(ready, 1), stop_s=round(stopped, 1))
    report(result)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
