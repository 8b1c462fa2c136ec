"""The package's version, in a module of its own so that the command line can print it without
importing anything else (``importlib.metadata`` alone costs tens of milliseconds a start)."""

from __future__ import annotations

from typing import Final

__all__ = ["__version__"]

#: The version of the agentskit-chat distribution (``pyproject.toml``; a test keeps them equal).
__version__: Final = "0.1.0"
