"""The docs assistant: ask questions about a folder of Markdown (the main job).

:func:`create_docs_assistant` builds everything from one folder: the verified knowledge
artifact for exact answers, the chunk index, and the Ask service in process behind them, with a
relevance rule (:class:`~agentskit_chat.retrieval.RelevanceRule`) that refuses to answer from
weakly related text. :func:`agentskit_chat.server.create_docs_assistant_app` serves it over
HTTP. See ``docs/getting-started.md``.
"""

from __future__ import annotations

from ._assistant import (
    AGENT_ENV,
    MODEL_ENV,
    AnswerOutcome,
    DocsAgent,
    DocsAssistant,
    DocsPage,
)
from ._backend import ASSISTANT_ID, CORPUS_ID, NO_GROUNDED_SOURCES, PROVIDER, Caller
from ._factory import ask_docs, create_docs_assistant

__all__ = [
    "AGENT_ENV",
    "ASSISTANT_ID",
    "CORPUS_ID",
    "MODEL_ENV",
    "NO_GROUNDED_SOURCES",
    "PROVIDER",
    "AnswerOutcome",
    "Caller",
    "DocsAgent",
    "DocsAssistant",
    "DocsPage",
    "ask_docs",
    "create_docs_assistant",
]
