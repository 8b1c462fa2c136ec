"""Putting a capability policy in front of a chat definition's tools."""

from __future__ import annotations

from dataclasses import replace

from agentskit_chat.actions import CapabilityPolicy

from ._definition import ChatDefinition

__all__ = ["with_action_policy"]


def with_action_policy(definition: ChatDefinition, policy: CapabilityPolicy) -> ChatDefinition:
    """A copy of ``definition`` whose chat authorizes every tool call through ``policy``.

    The policy decides first; the chat's own ``authorize_tool_call``, if any, is asked only
    when the policy allows (see :meth:`~agentskit_chat.actions.CapabilityPolicy.compose`).
    ``definition`` itself is not changed. Build one per authenticated session, from the host's
    trusted context.

    Example:
        >>> protected = with_action_policy(definition, policy)  # doctest: +SKIP
    """
    existing = definition.chat.authorize_tool_call
    chat = definition.chat.with_changes(authorize_tool_call=policy.compose(existing))
    return replace(definition, chat=chat)
