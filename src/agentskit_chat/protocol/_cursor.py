"""The monotonic turn-snapshot cursor: reconnects, duplicates and stale deliveries.

A client that may see the same snapshot twice (a retried request, a reconnect that replays the
stream) keeps one cursor per session and applies every incoming event to it. Only a newer
snapshot of the cursor's own session replaces the held one.
"""

from __future__ import annotations

from typing import Final

from agentskit_chat.errors import ProtocolError

from ._turn import SnapshotEvent, decode_turn_event
from ._types import is_safe_id

__all__ = ["TurnSnapshotCursor", "create_turn_snapshot_cursor"]

INVALID_SESSION_CODE: Final = "PROTOCOL_INVALID_PAYLOAD"
INVALID_SESSION_MESSAGE: Final = "Turn snapshot cursor session id is invalid."


class TurnSnapshotCursor:
    """Holds the newest valid snapshot of one session; everything else is ignored.

    The first accepted snapshot may have any sequence, which is what makes reconnecting work.
    After that a snapshot is accepted only when its ``sequence`` is strictly greater than the
    held one. The held snapshot is a frozen model (tuples and read-only mappings inside), so
    consumers cannot change it.

    >>> cursor = TurnSnapshotCursor("session-1")
    >>> cursor.apply("{"), cursor.snapshot is None
    (False, True)

    Raises:
        ProtocolError: ``PROTOCOL_INVALID_PAYLOAD`` when ``session_id`` is not a safe identifier.
    """

    __slots__ = ("_session_id", "_snapshot")

    def __init__(self, session_id: str) -> None:
        if not is_safe_id(session_id):
            raise ProtocolError(INVALID_SESSION_CODE, INVALID_SESSION_MESSAGE)
        self._session_id: str = session_id
        self._snapshot: SnapshotEvent | None = None

    @property
    def session_id(self) -> str:
        """The session whose snapshots this cursor accepts."""
        return self._session_id

    @property
    def snapshot(self) -> SnapshotEvent | None:
        """The held snapshot, or ``None`` before the first one is accepted."""
        return self._snapshot

    def get_snapshot(self) -> SnapshotEvent | None:
        """The held snapshot, or ``None`` before the first one is accepted."""
        return self._snapshot

    def apply(self, payload: object) -> bool:
        """Offer an incoming turn event (JSON text, bytes, a mapping or a decoded event).

        Returns:
            ``True`` when it was stored as the new snapshot. ``False``, leaving the cursor
            unchanged, when it does not decode, is not a snapshot, belongs to another session,
            or is not newer than the held snapshot (a duplicate or a stale delivery).
            Never raises.
        """
        result = decode_turn_event(payload)
        event = result.value
        if not isinstance(event, SnapshotEvent) or event.session_id != self._session_id:
            return False
        if self._snapshot is not None and event.sequence <= self._snapshot.sequence:
            return False
        self._snapshot = event
        return True


def create_turn_snapshot_cursor(session_id: str) -> TurnSnapshotCursor:
    """Create a :class:`TurnSnapshotCursor` for ``session_id``.

    Raises:
        ProtocolError: when ``session_id`` is not a safe identifier.
    """
    return TurnSnapshotCursor(session_id)
