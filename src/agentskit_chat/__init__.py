"""agentskit-chat: one chat definition, every interface, wire-compatible with AgentsKit Chat v0.4."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
