"""The timing protocol shared by the benchmarks (``../shared/bench-data/REFERENCE.md`` §2).

Each group runs in a fresh process; ``gc.collect()`` runs before each timed run, warm-up runs
first, then five timed runs, and the median is reported. Tables print every figure beside a
floor measured in the same process, as a cost ratio, and beside the reference's figure.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TIMED_RUNS = 5
#: Where the benchmarks' server child processes listen.
HOST = "127.0.0.1"

#: (label, our key, floor key, reference key or None, unit, higher is better)
Row = tuple[str, str, str, str | None, str, bool]


def measure(body: Callable[[], Any], *, warmup: int, work: float, rate: bool) -> float:
    """Median over five timed runs of ``work / elapsed`` (rate) or ``elapsed / work`` in ms."""
    for _ in range(warmup):
        body()
    values = []
    for _ in range(TIMED_RUNS):
        gc.collect()
        start = time.perf_counter()
        body()
        elapsed = time.perf_counter() - start
        values.append(work / elapsed if rate else elapsed * 1000 / work)
    return statistics.median(values)


def cost_ratio(ours: float, other: float, *, higher_is_better: bool) -> float:
    """How many times ``other``'s cost ours is: above 1 means slower."""
    return other / ours if higher_is_better else ours / other


def run_group(script: str, name: str) -> dict[str, float]:
    """Run one group of ``script`` in a fresh process and return its figures."""
    done = subprocess.run(
        [sys.executable, script, "--group", name], check=False, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"group {name} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run_and_report(
    script: str, groups: Iterable[str], report: Callable[[dict[str, float]], str]
) -> None:
    """Run each group of ``script`` in a fresh process; print ``report`` of all their figures
    and the time it all took."""
    started = time.perf_counter()
    results: dict[str, float] = {}
    for name in groups:
        results.update(run_group(script, name))
    print(report(results))
    print(f"\n({time.perf_counter() - started:.0f} s in all)")


def print_table(
    rows: Sequence[Row],
    results: Mapping[str, float],
    reference: Mapping[str, tuple[float, str]],
    *,
    width: int,
) -> None:
    """Each row: ours, the floor, ours/floor, the reference's figure and ours/reference."""
    header = (
        f"{'measurement':<{width}} {'ours':>12} {'floor':>12} {'ours/floor':>10} "
        f"{'reference':>10} {'vs ref':>7}"
    )
    print(header)
    print("-" * len(header))
    for label, ours_key, floor_key, ref_key, unit, higher in rows:
        if ours_key not in results or floor_key not in results:
            print(f"{label:<{width}} {'(not measured)':>12}")
            continue
        ours, floor = results[ours_key], results[floor_key]
        vs_floor = cost_ratio(ours, floor, higher_is_better=higher)
        line = f"{label:<{width}} {ours:>12,.2f} {floor:>12,.2f} {vs_floor:>9.2f}x "
        if ref_key is None:
            print(f"{line}{'-':>10} {'-':>7}  ({unit})")
            continue
        figure = reference[ref_key][0]
        vs_ref = cost_ratio(ours, figure, higher_is_better=higher)
        print(f"{line}{figure:>10,.2f} {vs_ref:>6.2f}x  ({unit})")


def collect(
    script: str,
    description: str | None,
    groups: Mapping[str, Callable[[], dict[str, float]]],
    data: Path,
) -> dict[str, float] | None:
    """The command line of a benchmark script.

    With ``--group NAME`` (the child process) it runs that group, prints its figures as JSON and
    returns ``None``; otherwise it runs every group in a fresh process and returns all figures.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--group", choices=sorted(groups))
    args = parser.parse_args()
    if not data.is_dir():
        sys.exit(f"benchmark inputs not found in {data} (set AGENTSKIT_BENCH_DATA)")
    if args.group:
        print(json.dumps(groups[args.group]()))
        return None
    results: dict[str, float] = {}
    for name in groups:
        results.update(run_group(script, name))
    return results


# --- server child processes ----------------------------------------------------------------------


async def serve_app(app: Any) -> None:
    """Serve ``app`` with uvicorn on :data:`HOST` (a free port), in a server child process.

    Prints ``{"port": N}`` once it listens, and serves until the parent closes our stdin (no
    signal handling to race with uvicorn's).
    """
    import anyio.to_thread  # noqa: PLC0415
    import uvicorn  # noqa: PLC0415

    config = uvicorn.Config(
        app, host=HOST, port=0, log_level="warning", access_log=False, backlog=2048
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            raise RuntimeError("the server stopped before it started")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(json.dumps({"port": port}), flush=True)
    await anyio.to_thread.run_sync(sys.stdin.read)
    server.should_exit = True
    await serving


@contextmanager
def server_process(script: str, kind: str) -> Iterator[tuple[int, int]]:
    """Run ``script --serve KIND`` (which calls :func:`serve_app`); yields its port and pid,
    and stops it when the block ends."""
    child = subprocess.Popen(
        [sys.executable, script, "--serve", kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        line = child.stdout.readline()
        if not line:
            raise RuntimeError(f"the {kind} server did not start")
        yield int(json.loads(line)["port"]), child.pid
    finally:
        child.stdin.close()
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def turn_body(question: str) -> bytes:
    """A ``client.turn.submit`` of ``question`` in a session of its own."""
    turn = uuid.uuid4().hex
    return json.dumps(
        {
            "protocol": "agentskit.chat.turn",
            "version": 1,
            "eventId": f"e-{turn}",
            "sessionId": f"s-{turn}",
            "turnId": f"t-{turn}",
            "sequence": 0,
            "emittedAt": "2026-07-11T00:00:00.000Z",
            "event": "client.turn.submit",
            "payload": {"input": question},
        }
    ).encode()
