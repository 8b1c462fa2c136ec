"""Typed actions behind a human's confirmation, and the capability policy that authorizes them.

A model, a component frame or a tool argument can only *propose* an action; a confirmation
bound to the session and an expiry must approve it, and the host's trusted context must hold
the action's capabilities both when it is proposed and when it executes.
"""

from __future__ import annotations

__all__: list[str] = []
