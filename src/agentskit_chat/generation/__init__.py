"""Generators behind the Ask service's ``Generator`` port that need no model.

:class:`ExtractiveGenerator` answers with the best-matching passages of the retrieved sources
and cites each one. The model-backed generators (``PydanticAIGenerator``, ``AnalystGenerator``)
live with the rest of the pydantic-ai code in :mod:`agentskit_chat.agents`.
"""

from __future__ import annotations

from ._extractive import NO_GROUNDED_ANSWER, ExtractiveGenerator

__all__ = ["NO_GROUNDED_ANSWER", "ExtractiveGenerator"]
