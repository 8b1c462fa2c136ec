"""What a chat client is sent of a session: a turn's NDJSON stream, or the stored conversation.

A turn's stream is full ``server.turn.snapshot`` lines (see :mod:`._snapshot_lines`),
coalesced to the newest, sent only while the turn streams; the final state is sent once the
turn's cleanup stored it, so a stream cut before that never shows the client a turn as
complete. A refusal of the turn's action, a failure, the deadline or the client gone end the
stream with one ``server.turn.diagnostic``.

A client that resumes a session (a reload, another device) reads the stored conversation as one
snapshot, numbered at the stored cursor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

import anyio

from agentskit_chat.conversation import ChatSession
from agentskit_chat.errors import ConversationTooLargeError, ProtocolError
from agentskit_chat.protocol import create_snapshot_event, encode_turn_event
from agentskit_chat.runtime import ChatMessage, ChatState
from agentskit_chat.runtime._messages import format_message_timestamp

from ._asgi import Send
from ._chat_failures import Failure, aborted, classify, diagnostic, turn_outcome
from ._chat_turn import Abort, Turn, status_of
from ._history import exceeds_record_limits

__all__ = ["SessionLines"]

_NDJSON_HEADERS: Final = (
    (b"content-type", b"application/x-ndjson; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
)
_TURN_FAILED: Final = {
    "version": 1,
    "code": "CHAT_TURN_FAILED",
    "message": "The chat turn failed.",
    "retryable": True,
}
#: The turn id of a resumed snapshot of a session that has not finished a turn yet.
_RESUME_TURN_ID: Final = "resume"


@dataclass(frozen=True, slots=True)
class SessionLines:
    """Writes what a client is sent of a session: a turn's stream, a resumed snapshot.

    Attributes:
        create_id: Makes event ids.
        now: The clock of the lines' timestamps (UTC).
    """

    create_id: Callable[[], str]
    now: Callable[[], datetime]

    def resumed(
        self, session_id: str, session: ChatSession, messages: Sequence[ChatMessage]
    ) -> str:
        """The stored ``messages`` of ``session`` as one snapshot (JSON), numbered at the
        stored cursor and named for the session's last finished turn."""
        finished = session.terminal_turns
        status: Literal["idle", "complete", "error"] = "idle"
        if messages:
            status = "error" if messages[-1].status == "error" else "complete"
        event = create_snapshot_event(
            event_id=self.create_id(),
            session_id=session_id,
            turn_id=finished[-1].turn_id if finished else _RESUME_TURN_ID,
            sequence=session.get_cursor(),
            emitted_at=self.now(),
            messages=[message.to_record() for message in messages],
            status=status,
            usage={"promptTokens": 0, "completionTokens": 0, "totalTokens": 0},
        )
        return event.to_json()

    async def run(self, send: Send, turn: Turn, abort: Abort) -> None:
        """Stream ``turn``: its states as snapshot lines, then its end; cleanup runs on every
        path (a client gone while we wrote included)."""
        try:
            await send(
                {"type": "http.response.start", "status": 200, "headers": list(_NDJSON_HEADERS)}
            )
            with anyio.CancelScope() as pump_scope:
                turn.pump_scope = pump_scope
                await self._pump(send, turn, abort)
        except OSError:
            # The client went away while we wrote; cleanup still runs below.
            pass
        finally:
            turn.pump_finished.set()
            await turn.cleanup_quietly(stop=True)

    async def _pump(self, send: Send, turn: Turn, abort: Abort) -> None:
        try:
            while True:
                await turn.wait()
                if abort.reason is not None:
                    turn.outcome, turn.code = abort.reason, aborted(abort.reason).code
                    await self._line(send, self._diagnostic_line(turn, aborted(abort.reason)))
                    await turn.cleanup_quietly(stop=True)
                    break
                state = turn.pending
                if state is not None:
                    turn.pending = None
                    if status_of(state) != "streaming":
                        # A final state is sent once cleanup stored the turn: a stream cut
                        # before that never shows the client a turn as complete.
                        turn.final = state
                        continue
                    turn.final = None
                    await turn.reserve_sequence()
                    await self._line(send, self._snapshot_line(turn, state))
                    continue
                await turn.cleanup(stop=False)
                final = turn.final
                if final is not None:
                    await self._line(send, self._snapshot_line(turn, final))
                if turn.failure is not None:
                    await self._line(send, self._diagnostic_line(turn, turn.failure))
                turn.outcome = (
                    "refused"
                    if turn.failure is not None
                    else "error"
                    if final is not None and final.status == "error"
                    else "completed"
                )
                break
        except OSError:
            raise
        except Exception as error:
            failure = aborted(abort.reason) if abort.reason else classify(error)
            turn.outcome = abort.reason or turn_outcome(error)
            turn.error, turn.code = error, failure.code
            try:
                await self._line(send, self._diagnostic_line(turn, failure))
            finally:
                await turn.cleanup_quietly(stop=True)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _line(self, send: Send, text: str) -> None:
        await send(
            {"type": "http.response.body", "body": (text + "\n").encode(), "more_body": True}
        )

    def _snapshot_line(self, turn: Turn, state: ChatState) -> str:
        try:
            return self._encode_snapshot(turn, state)
        except ProtocolError:
            if exceeds_record_limits(state.messages):
                # Only a turn larger than the room compaction leaves (see _history).
                raise ConversationTooLargeError() from None
            raise

    def _encode_snapshot(self, turn: Turn, state: ChatState) -> str:
        return turn.lines.encode(
            event_id=self.create_id(),
            session_id=turn.submission.session_id,
            turn_id=turn.submission.turn_id,
            sequence=turn.take_sequence(),
            emitted_at=self.now(),
            messages=state.messages,
            status=status_of(state),
            usage=state.usage,
            lineage=turn.lineage or None,
            error=_TURN_FAILED if state.error is not None else None,
        )

    def _diagnostic_line(self, turn: Turn, failure: Failure) -> str:
        return encode_turn_event(
            {
                "protocol": "agentskit.chat.turn",
                "version": 1,
                "eventId": self.create_id(),
                "sessionId": turn.submission.session_id,
                "turnId": turn.submission.turn_id,
                "sequence": turn.session.get_cursor() + 1,
                "emittedAt": format_message_timestamp(self.now()),
                "event": "server.turn.diagnostic",
                "payload": diagnostic(failure),
            }
        )
