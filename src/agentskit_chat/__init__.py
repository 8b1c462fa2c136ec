"""agentskit-chat: one chat definition, every interface, wire-compatible with AgentsKit Chat."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
