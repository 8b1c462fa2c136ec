"""Choice-submission reservations: a deterministic ChoiceList click becomes one send, once.

``docs/answers.md``. When the adapter shows a ``choice-list`` frame for
an ambiguous question, it remembers that exact frame for that session. A click on it can then
be turned into sending the chosen entry's unique alias: the host gets a reservation, sends the
alias, and commits the reservation when the send succeeded (or releases it so that a retry can
use it again).

All methods are synchronous and hold a lock only for their own duration, so the store is safe
for any number of anyio tasks in one event loop, and for threads.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentskit_chat.protocol import ComponentFrame, decode_component_frame
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.protocol._types import thaw

__all__ = [
    "CHOICE_FRAME_PREFIX",
    "CHOICE_UNAVAILABLE",
    "MAX_CHOICE_SESSIONS",
    "MAX_SESSION_CHOICES",
    "ChoiceReservation",
    "ChoiceReservationStore",
    "ChoiceUnavailable",
]

#: How many sessions, and how many frames per session, the store remembers.
MAX_CHOICE_SESSIONS: Final = 256
MAX_SESSION_CHOICES: Final = 256
#: Instance ids of the frames the deterministic adapter projects start with this.
CHOICE_FRAME_PREFIX: Final = "deterministic-choices-"


@dataclass(frozen=True, slots=True)
class ChoiceUnavailable:
    """A deterministic choice that can no longer be submitted: ask the question again."""

    unavailable: Literal[True] = True


#: The one ``ChoiceUnavailable`` value.
CHOICE_UNAVAILABLE: Final = ChoiceUnavailable()


class _Authorization:
    __slots__ = ("claimed", "props", "values")

    def __init__(self, props: str, values: dict[str, str]) -> None:
        self.props = props
        self.values = values
        self.claimed = False


class ChoiceReservation:
    """A claimed, single-use permission to send ``value`` for one deterministic choice.

    Settle it exactly once: :meth:`commit` after the send succeeded, :meth:`release` if it
    failed. Only the first settlement call has any effect; later calls do nothing.

    Attributes:
        value: The chosen entry's unique alias: the text to send as the user's message.
    """

    __slots__ = (
        "_auth",
        "_instance_id",
        "_lock",
        "_session",
        "_session_id",
        "_sessions",
        "_settled",
        "value",
    )

    def __init__(
        self,
        value: str,
        *,
        auth: _Authorization,
        instance_id: str,
        session: dict[str, _Authorization],
        session_id: str,
        sessions: dict[str, dict[str, _Authorization]],
        lock: threading.Lock,
    ) -> None:
        self.value = value
        self._auth = auth
        self._instance_id = instance_id
        self._session = session
        self._session_id = session_id
        self._sessions = sessions
        self._lock = lock
        self._settled = False

    def commit(self) -> None:
        """Consume the choice: the send succeeded. A committed choice is never usable again.

        Call it only when the turn succeeded (the send completed without an error state);
        otherwise call :meth:`release`. Committing after the session was released, and even
        after the same session id was used again, only touches the old session's state.
        """
        with self._lock:
            if self._settled:
                return
            self._settled = True
            if self._session.get(self._instance_id) is self._auth:
                del self._session[self._instance_id]
            if not self._session and self._sessions.get(self._session_id) is self._session:
                del self._sessions[self._session_id]

    def release(self) -> None:
        """Give the choice back: the send failed, so the user can select it again."""
        with self._lock:
            if self._settled:
                return
            self._settled = True
            self._auth.claimed = False

    @property
    def settled(self) -> bool:
        """True once :meth:`commit` or :meth:`release` was called."""
        return self._settled


def props_text(props: Any) -> str:
    """The compact JSON text of frame props, which is what a submission must match exactly."""
    return js_stringify(thaw(props))


class ChoiceReservationStore:
    """Remembers the ChoiceList frames shown per session and hands out reservations.

    Sessions are kept in least-recently-used order, at most ``max_sessions`` of them, each with
    at most ``max_choices`` frames. A frame whose reservation is claimed and unsettled is never
    evicted or overwritten.
    """

    def __init__(
        self, *, max_sessions: int = MAX_CHOICE_SESSIONS, max_choices: int = MAX_SESSION_CHOICES
    ) -> None:
        if max_sessions < 1 or max_choices < 1:
            raise ValueError("the store bounds must be positive")
        self._max_sessions = max_sessions
        self._max_choices = max_choices
        self._sessions: dict[str, dict[str, _Authorization]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many sessions are remembered."""
        return len(self._sessions)

    def remember(self, session_id: str, frame: ComponentFrame, values: Mapping[str, str]) -> bool:
        """Remember ``frame`` for ``session_id``; ``values`` maps choice id → alias to send.

        Returns:
            True when the frame is now reservable; False when the bounds left no room (every
            remembered session, or every frame of this session, holds a claimed reservation)
            or a claimed reservation already holds this instance id. The frame can still be
            shown; a selection will be unavailable.
        """
        auth = _Authorization(props_text(frame.props), dict(values))
        with self._lock:
            session = self._sessions.pop(session_id, None)
            if session is None:
                if len(self._sessions) >= self._max_sessions and not self._evict_session():
                    return False
                session = {}
            try:
                existing = session.get(frame.instance_id)
                if existing is not None and existing.claimed:
                    return False
                if (
                    existing is None
                    and len(session) >= self._max_choices
                    and not self._evict_choice(session)
                ):
                    return False
                session[frame.instance_id] = auth
                return True
            finally:
                self._sessions[session_id] = session

    def _evict_session(self) -> bool:
        for session_id, session in self._sessions.items():
            if not any(auth.claimed for auth in session.values()):
                del self._sessions[session_id]
                return True
        return False

    @staticmethod
    def _evict_choice(session: dict[str, _Authorization]) -> bool:
        for instance_id, auth in session.items():
            if not auth.claimed:
                del session[instance_id]
                return True
        return False

    def resolve(
        self, frame: ComponentFrame | Mapping[str, Any], choice_id: str, *, session_id: str
    ) -> ChoiceReservation | ChoiceUnavailable | None:
        """Claim the reservation for ``choice_id`` in ``frame``, shown in ``session_id``.

        Returns:
            A :class:`ChoiceReservation` when this exact frame (same instance id, same props
            text) was shown in this session, is not claimed, and offers ``choice_id``.
            Otherwise :data:`CHOICE_UNAVAILABLE` for a deterministic frame (instance id starting
            with ``deterministic-choices-``), or ``None`` for any other frame: it is not ours,
            and the host handles it as usual.
        """
        decoded = _frame(frame)
        instance_id = _instance_id(frame, decoded)
        unavailable = CHOICE_UNAVAILABLE if instance_id.startswith(CHOICE_FRAME_PREFIX) else None
        if decoded is None:
            return unavailable
        submitted = props_text(decoded.props)
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return unavailable
            auth = session.get(decoded.instance_id)
            if auth is None or auth.claimed or auth.props != submitted:
                return unavailable
            value = auth.values.get(choice_id) if type(choice_id) is str else None
            if value is None:
                return unavailable
            del self._sessions[session_id]
            self._sessions[session_id] = session
            auth.claimed = True
            return ChoiceReservation(
                value,
                auth=auth,
                instance_id=decoded.instance_id,
                session=session,
                session_id=session_id,
                sessions=self._sessions,
                lock=self._lock,
            )

    def release_session(self, session_id: str) -> None:
        """Forget everything remembered for ``session_id``, claimed reservations included.

        Outstanding reservations keep working on the forgotten state and cannot affect a
        session that later reuses the id.
        """
        with self._lock:
            self._sessions.pop(session_id, None)


def _frame(frame: ComponentFrame | Mapping[str, Any]) -> ComponentFrame | None:
    if isinstance(frame, ComponentFrame):
        return frame
    result = decode_component_frame(frame)
    return result.value if result.ok else None


def _instance_id(frame: ComponentFrame | Mapping[str, Any], decoded: ComponentFrame | None) -> str:
    if decoded is not None:
        return decoded.instance_id
    try:
        value = frame.get("instanceId") if isinstance(frame, Mapping) else None
    except Exception:
        value = None
    return value if type(value) is str else ""
