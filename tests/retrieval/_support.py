"""A small corpus whose questions each have one right page, and requests to ask it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from agentskit_chat.protocol import AskMessage, decode_backend_site_config
from agentskit_chat.protocol.fixtures import BACKEND_SITE_CONFIG_FIXTURE
from agentskit_chat.retrieval import MarkdownCorpus, TermWeights
from agentskit_chat.service import RetrievalRequest

#: The project's own documentation folder (also the docs assistant's demo corpus).
PROJECT_DOCS = Path(__file__).resolve().parents[2] / "docs"

CORPUS: dict[str, str] = {
    "index.md": "# Welcome\n\nThis site documents the Acme widget toolkit for newcomers.\n",
    "install.md": (
        "---\ntitle: Installing Acme\n---\n"
        "# Installation\n\n"
        "Install the toolkit with pip: `pip install acme-widgets`. It needs Python 3.11.\n\n"
        "## Upgrading\n\nRun pip with the upgrade flag to move to a newer release.\n"
    ),
    "operations/rate-limits.md": (
        "# Rate limits\n\n"
        "A token bucket limiter guards every subject. When a subject exceeds its limit, the "
        "server answers 429 and sends a retry-after header in seconds.\n\n"
        "## Redis limiter\n\nShared deployments keep the buckets in Redis.\n"
    ),
    "storage/postgres.md": (
        "# PostgreSQL storage\n\n"
        "Sessions are saved with compare-and-set on a revision number, so concurrent writers "
        "never lose an update.\n\n"
        "```sql\nUPDATE sessions SET revision = revision + 1 WHERE revision = %s\n```\n"
    ),
    "theming.md": (
        "# Theming\n\n## Colors\n\nPick a palette of accent colours for buttons.\n\n"
        "## Fonts\n\nChoose a typeface and a font size for the transcript.\n"
    ),
    "glossary.md": (
        "# Glossary\n\n"
        "Many words appear here once each: widget, palette, session, pip, bucket, typeface, "
        "snapshot, cursor, adapter.\n"
    ),
}

#: (question, the href that answers it): the right page must rank first.
QUESTIONS: list[tuple[str, str]] = [
    ("How do I install it with pip?", "/docs/install"),
    ("What happens when the rate limit is exceeded?", "/docs/operations/rate-limits"),
    ("compare and set revisions in PostgreSQL", "/docs/storage/postgres"),
    ("How can I change the font size?", "/docs/theming#fonts"),
    (
        "where are buckets stored for shared deployments with redis",
        ("/docs/operations/rate-limits#redis-limiter"),
    ),
    ("upgrade to a newer release", "/docs/install#upgrading"),
]

#: Queries that are syntax to a naive search engine; none may raise.
HOSTILE_QUERIES: list[str] = [
    "what's-up?",
    "foo AND",
    "AND OR NOT",
    '"',
    '""""',
    "NEAR(",
    "NEAR(a b, 3)",
    "*",
    "a*",
    "^start",
    "title:install",
    "{title body}: pip",
    "-pip",
    "(",
    ")",
    "",
    "   ",
    "\x00\x01",
    "'; DROP TABLE chunks; --",
    "x" * 10_000,
    "pip " * 2_500,
    "😀 emoji ☃",
    "\ud800 lone surrogate",
]


def write_corpus(root: Path, texts: dict[str, str] | None = None) -> Path:
    """Write ``texts`` (default: :data:`CORPUS`) as Markdown files under ``root``."""
    for path, text in (CORPUS if texts is None else texts).items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, "utf-8")
    return root


def site(**limits: Any) -> Any:
    """The reference site configuration, with some ``limits`` changed."""
    raw = copy.deepcopy(BACKEND_SITE_CONFIG_FIXTURE)
    raw["limits"].update(limits)
    return decode_backend_site_config(raw).unwrap()


def request(query: str, **limits: Any) -> RetrievalRequest:
    """A retrieval request for ``query`` on the reference site."""
    message = AskMessage(role="user", content=query)
    return RetrievalRequest(query=query, messages=(message,), site=site(**limits))


def chunk_weights(corpus: MarkdownCorpus) -> TermWeights:
    """The term weights of ``corpus``'s chunks, each counted with its title."""
    return TermWeights.from_texts(f"{c.title}\n{c.text}" for c in corpus.chunks)
