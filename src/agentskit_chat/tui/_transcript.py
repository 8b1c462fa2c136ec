"""The conversation as the terminal shows it: every message drawn, and who owns the keyboard.

Only the latest unresolved component may take keys: a tool call waiting for a decision, else
the last choice list not answered yet, and only among the messages after the user's last one
(an older list was superseded by the conversation). While an answer streams, nothing does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agentskit_chat.components import DARK_CHAT_THEME, ChatTheme
from agentskit_chat.protocol import SnapshotEvent

from ._render import (
    CHOICE_METADATA_KEY,
    ChoicePrompt,
    PendingConfirmation,
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
    active: ChoicePrompt | PendingConfirmation | None
    last_user_message_id: str | None
    streaming: bool


def answered_choices(snapshot: SnapshotEvent) -> dict[str, str]:
    """The choice lists the stored conversation marks as answered, with the answer's text."""
    answered: dict[str, str] = {}
    for record in snapshot.payload.messages:
        marker = (record.metadata or {}).get(CHOICE_METADATA_KEY)
        if record.role == "user" and isinstance(marker, str):
            answered[marker] = record.content
    return answered


def build_transcript(
    snapshot: SnapshotEvent,
    *,
    theme: ChatTheme = DARK_CHAT_THEME,
    resolve_href: Callable[[str], str] = lambda href: href,
    picked: Mapping[str, str] | None = None,
) -> Transcript:
    """Draw ``snapshot`` and find the component that owns the keyboard.

    ``picked`` names the choice lists this client already answered (instance id → label);
    with the ones the stored conversation marks, they are drawn as answered and never active.
    """
    used = {**answered_choices(snapshot), **(picked or {})}
    records = snapshot.payload.messages
    messages = tuple(
        render_message(record, theme=theme, resolve_href=resolve_href, used_choices=used)
        for record in records
    )
    last_user = max((i for i, r in enumerate(records) if r.role == "user"), default=-1)
    streaming = snapshot.payload.status == "streaming"
    active: ChoicePrompt | PendingConfirmation | None = None
    if not streaming:
        recent = messages[last_user + 1 :]
        confirmations = [c for m in recent for c in m.confirmations]
        choices = [c for m in recent for c in m.choices if c.instance_id not in used]
        if confirmations:
            active = confirmations[-1]
        elif choices:
            active = choices[-1]
    return Transcript(
        messages,
        active,
        records[last_user].id if last_user >= 0 else None,
        streaming,
    )
