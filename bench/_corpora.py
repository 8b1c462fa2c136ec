"""The documentation corpora ``bench/ask_quality.py`` measures on, and where to find them.

None of them is copied into the repository. Each corpus is a docs folder from a published
source distribution, found under one of two roots:

- ``../shared/corpora`` beside the repository (the team's shared copy; CI has it too);
- ``$AGENTSKIT_CORPORA_DIR`` (by default ``../corpora`` beside the repository), where
  ``--fetch`` downloads the source distributions with ``pip download --no-deps --no-binary
  :all:`` and unpacks them.

The seed corpus (documents written for this project by others) is at
``$AGENTSKIT_SEED_DOCS``, by default ``../shared/seeds/agentskit-chat-docs``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
BENCH: Final = ROOT / "bench"
SHARED_CORPORA: Final = ROOT.parent / "shared" / "corpora"
#: Where ``--fetch`` puts source distributions, and where corpora are looked for first.
CORPORA_ENV: Final = "AGENTSKIT_CORPORA_DIR"
SEED_ENV: Final = "AGENTSKIT_SEED_DOCS"


def corpora_dir() -> Path:
    """``$AGENTSKIT_CORPORA_DIR``, else ``../corpora`` beside the repository."""
    value = os.environ.get(CORPORA_ENV, "").strip()
    return Path(value) if value else ROOT.parent / "corpora"


@dataclass(frozen=True, slots=True)
class Corpus:
    """One documentation corpus and its frozen question set.

    Attributes:
        name: What ``--corpus`` calls it.
        questions: The question file, in ``bench/``.
        folder: The unpacked distribution's folder name (``hatch-1.18.2``); empty for the seed.
        docs: The docs folder inside it (``docs``, ``docs/src/markdown``).
        requirement: What ``pip download`` fetches (``hatch==1.18.2``); empty when not fetched.
        licence: The documents' licence, as the distribution states it.
    """

    name: str
    questions: Path
    folder: str = ""
    docs: str = "docs"
    requirement: str = ""
    licence: str = ""

    def candidates(self) -> list[Path]:
        """Where the docs folder may be, in the order they are tried."""
        if not self.folder:
            seed = os.environ.get(SEED_ENV, "").strip()
            return [
                Path(seed) if seed else ROOT.parent / "shared" / "seeds" / "agentskit-chat-docs"
            ]
        return [root / self.folder / self.docs for root in (corpora_dir(), SHARED_CORPORA)]

    def locate(self) -> Path | None:
        """The docs folder, or ``None`` when no candidate exists."""
        return next((path for path in self.candidates() if path.is_dir()), None)


CORPORA: Final = (
    Corpus("seed", BENCH / "quality_questions.json"),
    Corpus(
        "starlette",
        BENCH / "quality_questions_starlette.json",
        folder="starlette-1.10.0",
        licence="BSD-3-Clause",
    ),
    Corpus(
        "hatch",
        BENCH / "quality_questions_hatch.json",
        folder="hatch-1.18.2",
        requirement="hatch==1.18.2",
        licence="MIT",
    ),
    Corpus(
        "pymdown",
        BENCH / "quality_questions_pymdown.json",
        folder="pymdown_extensions-13.1.2",
        docs="docs/src/markdown",
        requirement="pymdown-extensions==13.1.2",
        licence="MIT",
    ),
)
BY_NAME: Final = {corpus.name: corpus for corpus in CORPORA}


def _pip() -> list[str]:
    found = shutil.which("pip3") or shutil.which("pip")
    return [found] if found else [sys.executable, "-m", "pip"]


def _safe_members(archive: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """The archive's regular files and folders whose paths stay inside the target."""
    kept = []
    for member in archive.getmembers():
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts:
            continue
        if member.isfile() or member.isdir():
            kept.append(member)
    return kept


def fetch(corpus: Corpus, target: Path) -> Path:
    """Download ``corpus``'s source distribution into ``target`` and unpack it there.

    Returns:
        The docs folder.

    Raises:
        RuntimeError: the corpus is not fetched from a registry, pip failed, or the
            distribution holds no such docs folder.
    """
    if not corpus.requirement:
        raise RuntimeError(f"corpus {corpus.name!r} is not fetched from a package registry")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agentskit-corpus-") as scratch:
        command = [*_pip(), "download", "--no-deps", "--no-binary", ":all:", "-d", scratch]
        done = subprocess.run([*command, corpus.requirement], check=False, capture_output=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip download {corpus.requirement} failed")
        archives = sorted(Path(scratch).glob("*.tar.gz"))
        if not archives:
            raise RuntimeError(f"no source distribution of {corpus.requirement} was downloaded")
        with tarfile.open(archives[0]) as archive:
            archive.extractall(target, members=_safe_members(archive))
    docs = target / corpus.folder / corpus.docs
    if not docs.is_dir():
        raise RuntimeError(f"{corpus.requirement} ships no {corpus.docs}/ folder")
    return docs
