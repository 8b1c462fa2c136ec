"""Building a docs assistant: :func:`create_docs_assistant`, and :func:`ask_docs` for scripts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agentskit_chat.retrieval import RelevanceRule
from agentskit_chat.service import AskSessionStore, Generator, RateLimiter

from ._assistant import AnswerOutcome, DocsAgent, DocsAssistant

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = ["ask_docs", "create_docs_assistant"]


def create_docs_assistant(
    docs_dir: str | Path = "docs",
    *,
    site_id: str = "docs",
    index_path: str | Path | None = None,
    generator: Generator | None = None,
    model: str | Model | None = None,
    agent: DocsAgent | None = None,
    session_store: AskSessionStore | None = None,
    now: Callable[[], datetime] | None = None,
    api_key: str | None = None,
    rate_limiter: RateLimiter | None = None,
    relevance: RelevanceRule | None = None,
    href_prefix: str = "/docs",
    max_sources: int = 5,
) -> DocsAssistant:
    """An assistant that answers questions about the Markdown under ``docs_dir``.

    Nothing is read until the assistant is entered (``async with``); then the knowledge
    artifact is built (``generatedAt`` from ``SOURCE_DATE_EPOCH``, else ``now``) and verified,
    every page is chunked and indexed, and the Ask service starts in process.

    Args:
        docs_dir: The folder of Markdown.
        site_id: The site's safe identifier (artifact, Ask site and metrics).
        index_path: The SQLite index file, kept between runs and updated incrementally
            (``":memory:"``: in memory). By default the index cache is used: a read-only file
            per version of the folder, in ``$AGENTSKIT_CACHE_DIR`` (else
            ``~/.cache/agentskit-chat``), reused by the next start while no page changes.
        generator: What writes grounded answers; by default the model-free
            :class:`~agentskit_chat.generation.ExtractiveGenerator`.
        model: A pydantic-ai model string (``openai:gpt-4.1-mini``, ...) or model object,
            built into a generator when the assistant opens (``llm`` extra). When neither
            ``model`` nor ``generator`` is given, the ``AGENTSKIT_MODEL`` environment
            variable is used if set.
        agent: Which generator a model gets (:data:`DocsAgent`): ``writer`` (a
            ``PydanticAIGenerator``, streaming the model's prose) or ``analyst`` (an
            ``AnalystGenerator``, whose answer ``answer_commit`` renders). By default the
            ``AGENTSKIT_AGENT`` environment variable, else ``writer``. Without a model the
            writer is the model-free extractive generator; the analyst needs a model.
        session_store: Keeps Ask conversations (the site then requires persistence); by
            default nothing is stored. The store is borrowed: the assistant never closes it.
        now: The clock of the artifact (when ``SOURCE_DATE_EPOCH`` is unset) and resolver.
        api_key: The key HTTP clients must send as ``Authorization: Bearer <key>``. Without
            one, the web app answers loopback clients only.
        rate_limiter: Limits HTTP callers per subject; by default a token bucket of 60
            requests refilled at 5 per second. In-process calls are never limited.
        relevance: The relevance rule's thresholds (:class:`RelevanceRule`).
        href_prefix: What citation links start with (``/docs``: ``guide.md`` → ``/docs/guide``).
        max_sources: How many sources an answer may cite (1..8).

    Raises:
        ConfigurationError: an invalid ``site_id``, ``api_key``, ``agent`` or
            ``max_sources``, or ``generator`` with ``model`` or ``agent``. Opening raises it
            too when the analyst is chosen without a model, or ``AGENTSKIT_AGENT`` names no
            agent.

    Example::

        async with create_docs_assistant("docs") as assistant:
            envelope = await assistant.ask("How do I rate limit users?")
            print(envelope.to_json())
    """
    return DocsAssistant(
        docs_dir,
        site_id=site_id,
        index_path=index_path,
        generator=generator,
        model=model,
        agent=agent,
        session_store=session_store,
        now=now,
        api_key=api_key,
        rate_limiter=rate_limiter,
        relevance=relevance,
        href_prefix=href_prefix,
        max_sources=max_sources,
    )


def ask_docs(question: str, docs_dir: str | Path = "docs", **options: Any) -> AnswerOutcome:
    """Answer one question synchronously: open an assistant, ask, close it.

    For scripts and the command line; ``options`` are :func:`create_docs_assistant`'s.
    Must not be called from inside a running event loop.

    Raises:
        The errors of :func:`create_docs_assistant`, :meth:`DocsAssistant.open` and
        :meth:`DocsAssistant.ask`.
    """

    async def run() -> AnswerOutcome:
        async with create_docs_assistant(docs_dir, **options) as assistant:
            return await assistant.ask(question)

    return anyio.run(run)
