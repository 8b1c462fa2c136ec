"""Agent frameworks behind the chat adapter seam.

:func:`from_pydantic_ai` turns any pydantic-ai agent into a
:class:`~agentskit_chat.runtime.ChatAdapter`: streamed text, tool calls as tool-call records,
tools that wait for a human's approval, usage and cancellation. :func:`create_agent` builds a
pydantic-ai agent whose analysts finish with ``answer_commit``: the final answer rendered by
code. :class:`PydanticAIGenerator` (the writer) and :class:`AnalystGenerator` put a model behind
the Ask service's ``Generator`` port, and :func:`resolve_model` reads a model string the same
way for all of them. pydantic-ai is the ``llm`` extra; it is imported when an adapter, agent
or generator is built, not when this package is. See ``docs/agents.md`` and
``docs/answer-commit.md``.
"""

from __future__ import annotations

from ._analyst import ANALYST_GROUNDING_RULES, AnalystGenerator
from ._answer_commit import (
    ANALYST_AGENT_NAME,
    ANSWER_COMMIT_ENV,
    ANSWER_COMMIT_INSTRUCTIONS,
    ANSWER_COMMIT_METADATA_KEY,
    ANSWER_PROSE_INSTRUCTIONS,
    answer_commit_enabled,
    committed_answer,
    create_agent,
    mask_answer_commits,
)
from ._models import OPENAI_COMPATIBLE_PREFIX, resolve_model
from ._pydantic_ai import (
    RUN_FAILED_MESSAGE,
    PydanticAIChatAdapter,
    PydanticAISource,
    from_pydantic_ai,
)
from ._writer import GROUNDING_RULES, PydanticAIGenerator

__all__ = [
    "ANALYST_AGENT_NAME",
    "ANALYST_GROUNDING_RULES",
    "ANSWER_COMMIT_ENV",
    "ANSWER_COMMIT_INSTRUCTIONS",
    "ANSWER_COMMIT_METADATA_KEY",
    "ANSWER_PROSE_INSTRUCTIONS",
    "GROUNDING_RULES",
    "OPENAI_COMPATIBLE_PREFIX",
    "RUN_FAILED_MESSAGE",
    "AnalystGenerator",
    "PydanticAIChatAdapter",
    "PydanticAIGenerator",
    "PydanticAISource",
    "answer_commit_enabled",
    "committed_answer",
    "create_agent",
    "from_pydantic_ai",
    "mask_answer_commits",
    "resolve_model",
]
