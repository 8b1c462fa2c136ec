"""The timing protocol shared by the benchmarks (``../shared/bench-data/REFERENCE.md`` §2).

Each group runs in a fresh process; ``gc.collect()`` runs before each timed run, warm-up runs
first, then five timed runs, and the median is reported. Tables print every figure beside a
floor measured in the same process, as a cost ratio, and beside the reference's figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

TIMED_RUNS = 5

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
