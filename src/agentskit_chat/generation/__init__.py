"""Generators behind the Ask service's ``Generator`` port.

:class:`ExtractiveGenerator` needs no model: it answers with the best-matching sentences of the
retrieved sources and cites each one.
"""

from __future__ import annotations

from ._extractive import NO_GROUNDED_ANSWER, ExtractiveGenerator

__all__ = ["NO_GROUNDED_ANSWER", "ExtractiveGenerator"]
