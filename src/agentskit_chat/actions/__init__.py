"""Typed actions behind a human's confirmation, and the capability policy that authorizes them.

A model, a component frame or a tool argument can only *propose* an action; a confirmation
bound to the session and an expiry must approve it, and the host's trusted context must hold
the action's capabilities both when it is proposed and when it executes.

:func:`create_action_confirmation` proposes actions as confirmation-gated tool calls and
approves or rejects them by token (see ``docs/actions.md``).
"""

from __future__ import annotations

from agentskit_chat.protocol import ConfirmationStatus

from ._confirmation import MAX_CONFIRMATIONS, ActionConfirmation
from ._confirmation_factory import DEFAULT_CONFIRMATION_TTL_MS, create_action_confirmation
from ._policy import (
    CapabilityPolicy,
    PolicyContext,
    PolicyDecision,
    PolicyReason,
    PolicyTrace,
    PolicyTraceObserver,
    create_capability_policy,
)
from ._records import (
    CONFIRMATION_HINT,
    ClaimLost,
    ClaimStatus,
    ConfirmationChangeObserver,
    ConfirmationChat,
    ConfirmationRecord,
    SettleRecord,
    TerminalConfirmationStatus,
)

__all__ = [
    "CONFIRMATION_HINT",
    "DEFAULT_CONFIRMATION_TTL_MS",
    "MAX_CONFIRMATIONS",
    "ActionConfirmation",
    "CapabilityPolicy",
    "ClaimLost",
    "ClaimStatus",
    "ConfirmationChangeObserver",
    "ConfirmationChat",
    "ConfirmationRecord",
    "ConfirmationStatus",
    "PolicyContext",
    "PolicyDecision",
    "PolicyReason",
    "PolicyTrace",
    "PolicyTraceObserver",
    "SettleRecord",
    "TerminalConfirmationStatus",
    "create_action_confirmation",
    "create_capability_policy",
]
