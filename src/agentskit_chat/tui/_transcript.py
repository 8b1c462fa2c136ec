"""The conversation as the terminal shows it: every message drawn, and who owns the keyboard.

Only the latest unresolved component may take keys: a tool call waiting for a decision, else
the last choice list, form or row of buttons not answered yet, and only among the messages
after the user's last one (an older one was superseded by the conversation). While an answer
streams, nothing does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agentskit_chat.components import DARK_CHAT_THEME, ChatTheme
from agentskit_chat.protocol import SnapshotEvent

from ._render import (
    CHOICE_METADATA_KEY,
    INTERACTION_METADATA_KEY,
    PendingConfirmation,
    Prompt,
    RenderedMessage,
    render_message,
)

__all__ = ["Transcript", "build_transcript"]


@dataclass(frozen=True, slots=True)
class Transcript:
    """One snapshot, drawn.

    Attributes:
        messages: Every message, in order.
        active: The component that owns the keyboard, if any.
        last_user_message_id: The id of the user's last message (what ``/edit`` changes).
        streaming: Whether the answer is still arriving.
    """

    messages: tuple[RenderedMessage, ...]
    active: Prompt | PendingConfirmation | None
    last_user_message_id: str | None
    streaming: bool


def answered_choices(snapshot: SnapshotEvent) -> dict[str, str]:
    """The components the stored conversation marks as answered (a choice list clicked, a form
    submitted, a button pressed), with the answer's text."""
    answered: dict[str, str] = {}
    for record in snapshot.payload.messages:
        if record.role != "user":
            continue
        metadata = record.metadata or {}
        marker = metadata.get(CHOICE_METADATA_KEY)
        if isinstance(marker, str):
            answered[marker] = record.content
        interaction = metadata.get(INTERACTION_METADATA_KEY)
        event = interaction.get("event") if isinstance(interaction, Mapping) else None
        instance = event.get("instanceId") if isinstance(event, Mapping) else None
        if isinstance(instance, str):
            answered[instance] = record.content
    return answered


def build_transcript(
    snapshot: SnapshotEvent,
    *,
    theme: ChatTheme = DARK_CHAT_THEME,
    resolve_href: Callable[[str], str] = lambda href: href,
    picked: Mapping[str, str] | None = None,
) -> Transcript:
    """Draw ``snapshot`` and find the component that owns the keyboard.

    ``picked`` names the components this client already answered (instance id → text); with
    the ones the stored conversation marks, they are drawn as answered and never active.
    """
    used = {**answered_choices(snapshot), **(picked or {})}
    records = snapshot.payload.messages
    messages = tuple(
        render_message(record, theme=theme, resolve_href=resolve_href, used_choices=used)
        for record in records
    )
    last_user = max((i for i, r in enumerate(records) if r.role == "user"), default=-1)
    streaming = snapshot.payload.status == "streaming"
    active: Prompt | PendingConfirmation | None = None
    if not streaming:
        recent = messages[last_user + 1 :]
        confirmations = [c for m in recent for c in m.confirmations]
        prompts = [p for m in recent for p in m.prompts if p.instance_id not in used]
        if confirmations:
            active = confirmations[-1]
        elif prompts:
            active = prompts[-1]
    return Transcript(
        messages,
        active,
        records[last_user].id if last_user >= 0 else None,
        streaming,
    )
