"""Command line start-up: ``agentskit-chat --version``, ``--help`` and ``ask`` in fresh processes.

Run with ``.venv/bin/python bench/cli.py``. Every figure is the median wall time of
``RUNS`` fresh processes (after ``WARMUP`` unmeasured ones, so the files are in the page cache
and the bytecode is compiled and written, as after ``make install``, even when the shell sets
``PYTHONDONTWRITEBYTECODE``), beside the floor measured in the same run: ``python -c pass``
with the same interpreter. Processes of the measurements take turns, so a busy moment of the
machine falls on all of them alike.

- ``--version`` and ``--help``: the command line alone (no sub-command's module imported);
- ``ask`` over the project's ``docs/``: import, read the folder, then answer one question with
  the model-free generator. ``ask (start cached)`` runs with a cache folder that a previous run
  filled (the usual case: the pages are read and hashed, and the chunks, artifact, weights and
  index come from the cache, no page parsed); ``ask (cold cache)`` with a fresh, empty cache
  folder every time (every page parsed, the artifact built, the index written).

A second floor, ``read+hash docs/``, starts the same interpreter, reads every page of ``docs/``
and hashes it (SHA-256): the least any start of the docs assistant does besides importing it.
The ``ask`` rows show their ratio to it too.

The goals of issue 24 are printed beside each figure: ``--version`` at most 0.15 s and a cold
``ask`` at most 0.4 s.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _harness import cost_ratio

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COMMAND = Path(sys.executable).with_name("agentskit-chat")
QUESTION = "How are the chunks of a Markdown page ranked when a question is asked?"
WARMUP = 2
RUNS = 9

#: (label, goal in seconds or None)
GOALS = {"--version": 0.15, "ask (cold cache)": 0.4, "ask (start cached)": 0.4}
READ_AND_HASH = (
    "import hashlib, pathlib, sys\n"
    "for page in sorted(pathlib.Path(sys.argv[1]).rglob('*.md')):\n"
    "    hashlib.sha256(page.read_bytes()).hexdigest()\n"
)


def _wall(argv: Sequence[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{done.stderr.decode(errors='replace')}")
    return elapsed


def main() -> None:
    if not COMMAND.exists():
        sys.exit(f"{COMMAND} not found: run `make install` first")

    cached = tempfile.mkdtemp(prefix="agentskit-bench-cache-")
    base = {**os.environ, "AGENTSKIT_CACHE_DIR": cached}
    # PYTHONDONTWRITEBYTECODE (set in some shells and CI) would have every run compile each
    # module edited since its bytecode was written: the warm-up rounds write it, as an install
    # does.
    for name in ("AGENTSKIT_MODEL", "AGENTSKIT_AGENT", "PYTHONDONTWRITEBYTECODE"):
        base.pop(name, None)
    ask = [str(COMMAND), "ask", QUESTION, "--docs", str(DOCS)]
    cases: dict[str, tuple[list[str], bool]] = {
        "floor: python -c pass": ([sys.executable, "-c", "pass"], False),
        "floor: read+hash docs/": ([sys.executable, "-c", READ_AND_HASH, str(DOCS)], False),
        "--version": ([str(COMMAND), "--version"], False),
        "--help": ([str(COMMAND), "--help"], False),
        "ask (start cached)": (ask, False),
        "ask (cold cache)": (ask, True),
    }
    samples: dict[str, list[float]] = {label: [] for label in cases}
    try:
        for round_ in range(WARMUP + RUNS):
            for label, (argv, cold) in cases.items():
                env = base
                if cold:
                    env = {**base, "AGENTSKIT_CACHE_DIR": tempfile.mkdtemp(prefix="agentskit-")}
                elapsed = _wall(argv, env)
                if cold:
                    shutil.rmtree(env["AGENTSKIT_CACHE_DIR"], ignore_errors=True)
                if round_ >= WARMUP:
                    samples[label].append(elapsed)
    finally:
        shutil.rmtree(cached, ignore_errors=True)
    medians = {label: statistics.median(values) for label, values in samples.items()}
    floor = medians["floor: python -c pass"]
    pages = medians["floor: read+hash docs/"]
    print(f"median of {RUNS} fresh processes, after {WARMUP} warm-up rounds")
    header = (
        f"{'measurement':<26} {'seconds':>9} {'floor':>9} {'ours/floor':>11} "
        f"{'ours/read+hash':>15} {'goal':>7}"
    )
    print(header)
    print("-" * len(header))
    for label, value in medians.items():
        goal = GOALS.get(label)
        mark = "-" if goal is None else f"{goal:.2f}" + (" ok" if value <= goal else " MISS")
        ratio = cost_ratio(value, floor, higher_is_better=False)
        read = "-"
        if label.startswith("ask"):
            read = f"{cost_ratio(value, pages, higher_is_better=False):.1f}x"
        print(f"{label:<26} {value:>9.3f} {floor:>9.3f} {ratio:>10.1f}x {read:>15} {mark:>7}")
    print()
    print("The floor starts the same interpreter and does nothing: what any Python command costs.")
    print("read+hash docs/: the same interpreter reading and hashing every page of docs/.")


if __name__ == "__main__":
    main()
