"""Lifecycle targets for Retry, Regenerate and Edit."""

from __future__ import annotations

import pytest

from agentskit_chat.conversation import LifecycleTargets, get_lifecycle_targets
from agentskit_chat.runtime import ChatMessage

from ._support import CREATED


def message(role: str, message_id: str) -> ChatMessage:
    return ChatMessage(id=message_id, role=role, content="x", created_at=CREATED)  # type: ignore[arg-type]


CASES = [
    ("empty", [], None, None),
    ("user-last", [("user", "u1")], None, None),
    ("assistant-only", [("assistant", "a1")], None, None),
    ("pair", [("user", "u1"), ("assistant", "a1")], "u1", "a1"),
    ("last-user-wins", [("user", "u1"), ("user", "u2"), ("assistant", "a1")], "u2", "a1"),
    ("tool-between", [("user", "u1"), ("tool", "t1"), ("assistant", "a2")], "u1", "a2"),
    (
        "two-turns",
        [("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("assistant", "a2")],
        "u2",
        "a2",
    ),
    ("system-then-assistant", [("system", "s1"), ("assistant", "a1")], None, None),
    ("ends-with-system", [("user", "u1"), ("assistant", "a1"), ("system", "s1")], None, None),
]


@pytest.mark.parametrize(
    ("history", "user_id", "assistant_id"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_targets(
    history: list[tuple[str, str]], user_id: str | None, assistant_id: str | None
) -> None:
    messages = [message(role, message_id) for role, message_id in history]
    assert get_lifecycle_targets(messages) == LifecycleTargets(user_id, assistant_id)
