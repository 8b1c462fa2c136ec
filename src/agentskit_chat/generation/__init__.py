"""Generators behind the Ask service's ``Generator`` port.

:class:`ExtractiveGenerator` needs no model: it answers with the best-matching sentences of the
retrieved sources and cites each one. :class:`PydanticAIGenerator` streams from any model
pydantic-ai supports (the ``llm`` extra; imported only when a generator is built).
:class:`AnalystGenerator` answers through an analyst agent that finishes with ``answer_commit``,
so the answer's text is rendered by code.
"""

from __future__ import annotations

from ._analyst import ANALYST_GROUNDING_RULES, AnalystGenerator
from ._extractive import NO_GROUNDED_ANSWER, ExtractiveGenerator
from ._pydantic_ai import GROUNDING_RULES, PydanticAIGenerator

__all__ = [
    "ANALYST_GROUNDING_RULES",
    "GROUNDING_RULES",
    "NO_GROUNDED_ANSWER",
    "AnalystGenerator",
    "ExtractiveGenerator",
    "PydanticAIGenerator",
]
