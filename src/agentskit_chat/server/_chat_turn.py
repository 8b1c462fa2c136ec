"""One running turn of the chat turn handler: its controller, the newest state, its cleanup.

A :class:`Turn` keeps only its controller's newest state for the stream to send, numbers the
stream's lines from sequences reserved below the stored cursor, and runs its cleanup once on
every path (see the handler's module, ``_chat_app``, for what cleanup does and in which
order). An :class:`Abort` (the deadline or the client gone) stops the controller and runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Final, Literal

import anyio
import anyio.abc

from agentskit_chat.conversation import ChatSession
from agentskit_chat.errors import (
    ConfirmationResolvedElsewhereError,
    ConversationTooLargeError,
    ToolError,
)
from agentskit_chat.protocol import SubmitEvent
from agentskit_chat.runtime import ChatController, ChatMemory, ChatState

from ._chat_approvals import record_waiting_calls
from ._chat_choices import ReservedChoice, mark_choice
from ._chat_failures import Failure, Reason, action_refusal, unavailable
from ._chat_leases import Lease
from ._history import exceeds_record_limits
from ._snapshot_lines import SnapshotLines

if TYPE_CHECKING:
    from ._chat_app import ChatApp

__all__ = ["SUBMIT_LINEAGE", "Abort", "Turn", "status_of"]

#: The lineage of a plain submission.
SUBMIT_LINEAGE: Final = {"operation": "submit"}
#: How many line sequences one session save reserves for a turn's stream: its lines are
#: numbered below the stored cursor without a save per line.
_RESERVED_SEQUENCES: Final = 64
#: The longest a streaming turn goes without saving its session (a takeover by another worker
#: or a changed session is found within this bound), in seconds.
_SAVE_INTERVAL_S: Final = 1.0


def status_of(state: ChatState) -> str:
    """The snapshot status of ``state``: ``streaming``, ``error``, ``complete`` or ``idle``."""
    if state.status == "error":
        return "error"
    if state.status == "streaming":
        return "streaming"
    return "complete" if state.messages else "idle"


class Abort:
    """Why the request stopped early (the deadline or the client), told to whoever waits."""

    def __init__(self) -> None:
        self.reason: Reason | None = None
        self.listeners: list[Callable[[Reason], None]] = []

    def fire(self, reason: Reason) -> None:
        """Stop the turn for ``reason``; the first reason given is the one kept."""
        if self.reason is not None:
            return
        self.reason = reason
        for listener in tuple(self.listeners):
            listener(reason)


class Turn:
    """One running turn: its controller, the pending state, and its once-only cleanup."""

    def __init__(
        self,
        app: ChatApp,
        *,
        submission: SubmitEvent,
        session: ChatSession,
        controller: ChatController,
        memory: ChatMemory | None,
        reservation: ReservedChoice | None,
        operation: Callable[[], Awaitable[object]] | None = None,
        lineage: Mapping[str, str] = SUBMIT_LINEAGE,
        abort: Abort,
        group: anyio.abc.TaskGroup,
        lease: Lease | None = None,
    ) -> None:
        self._app = app
        self._operation = operation
        #: The claimed lease, marked ``unreleased`` when cleanup could not release it.
        self.lease = lease
        #: The turn's final state, sent only once cleanup stored the turn.
        self.final: ChatState | None = None
        #: How the turn ended, for the metrics (``None`` until it did), and why it failed.
        self.outcome: str | None = None
        self.error: BaseException | None = None
        self.code: str | None = None
        #: The snapshot's lineage: how this turn's answer came about.
        self.lineage = lineage
        #: A refusal of the turn's action, told to the client in the stream.
        self.failure: Failure | None = None
        self.submission = submission
        self.session = session
        self.controller = controller
        self._memory = memory
        self._reservation = reservation
        self._abort = abort
        self._group = group
        self.pending: ChatState | None = None
        self.started = False
        self.done = False
        self.send_failed = False
        self._wake = anyio.Event()
        self._settled = anyio.Event()
        self._cleanup_done: anyio.Event | None = None
        self._cleanup_error: BaseException | None = None
        self.pump_finished = anyio.Event()
        self.pump_scope: anyio.CancelScope | None = None
        self._numbered = 0  # the sequence of the last line numbered from a reservation
        self._line_sequence: int | None = None  # reserved for the line being written
        self._saved_at: float | None = None  # when the stream last saved the session
        #: Encodes the stream's lines, each message once.
        self.lines = SnapshotLines()
        self._unsubscribe = controller.subscribe(self._on_state)
        abort.listeners.append(self._on_abort)

    # --- events ---------------------------------------------------------------------------

    def _on_state(self, state: ChatState) -> None:
        self.pending = state  # only the newest state is ever sent
        self._wake.set()

    def _on_abort(self, _reason: Reason) -> None:
        self.controller.stop()
        self._wake.set()
        self._group.start_soon(self._abort_cleanup)

    async def _abort_cleanup(self) -> None:
        await self.cleanup_quietly(stop=True)
        # Give the stream a moment to write its diagnostic, then stop it even when the client
        # reads nothing (a write blocked by backpressure would otherwise wait forever).
        with anyio.move_on_after(self._app.cleanup_timeout):
            await self.pump_finished.wait()
        if self.pump_scope is not None:
            self.pump_scope.cancel()

    async def run(self) -> None:
        """Run the turn (a new message, or the operation it asks for) to its end."""
        self.started = True
        try:
            if self._operation is None:
                await self.controller.send(self.submission.payload.input)
            else:
                await self._operation()
        except ToolError as error:
            self.send_failed = True
            self.failure = action_refusal(error)
        except ConfirmationResolvedElsewhereError:
            # Another client decided the call first: nothing ran here.
            self.send_failed = True
            self.failure = unavailable()
        except Exception:
            self.send_failed = True
        finally:
            self.done = True
            self._settled.set()
            self._wake.set()

    async def reserve_sequence(self) -> None:
        """Number the next streamed line below the stored cursor.

        The session is saved (with :data:`_RESERVED_SEQUENCES` numbers reserved past its
        cursor) for the turn's first line, when the reserved numbers run out, and at least
        every :data:`_SAVE_INTERVAL_S`; other lines take the next reserved number without a
        save. Every line's sequence is below the stored cursor, so a later turn, or a
        ``GET`` after a cut stream, is numbered above everything this stream sent.

        Raises:
            SessionConflictError: the stored session changed (another worker took it over).
        """
        cursor = self.session.get_cursor()
        saved_at = self._saved_at
        if (
            saved_at is None
            or self._numbered + 1 >= cursor
            or anyio.current_time() - saved_at >= _SAVE_INTERVAL_S
        ):
            await self.session.persist(ahead=_RESERVED_SEQUENCES)
            self._saved_at = anyio.current_time()
            self._numbered = max(self._numbered, cursor)
        self._numbered += 1
        self._line_sequence = self._numbered

    def take_sequence(self) -> int:
        """The sequence of the line being written: its reserved number, or the stored cursor
        for a line written without a reservation (the final one, once the turn is stored)."""
        reserved, self._line_sequence = self._line_sequence, None
        return self.session.get_cursor() if reserved is None else reserved

    async def wait(self) -> None:
        """Until there is a state to send, the turn is done, or the request was aborted."""
        while self.pending is None and not self.done and self._abort.reason is None:
            await self._wake.wait()
            self._wake = anyio.Event()

    # --- cleanup --------------------------------------------------------------------------

    async def cleanup(self, *, stop: bool) -> None:
        """Run cleanup once (later callers wait for the first); re-raise a memory failure."""
        if self._cleanup_done is None:
            self._cleanup_done = anyio.Event()
            try:
                with anyio.CancelScope(shield=True):
                    await self._cleanup(stop=stop)
            except BaseException as error:
                self._cleanup_error = error
            finally:
                self._cleanup_done.set()
        else:
            await self._cleanup_done.wait()
        if self._cleanup_error is not None:
            raise self._cleanup_error

    async def cleanup_quietly(self, *, stop: bool) -> None:
        """:meth:`cleanup`, with what it raises left out: for a turn being stopped, whose
        stream reports its end itself."""
        try:
            await self.cleanup(stop=stop)
        except Exception:
            return

    async def _cleanup(self, *, stop: bool) -> None:
        bound = self._app.cleanup_timeout
        self._unsubscribe()
        if self._on_abort in self._abort.listeners:
            self._abort.listeners.remove(self._on_abort)
        if stop and self._abort.reason is None:
            self.controller.stop()
        if not self.started:
            # Aborted before the model ran: the turn did nothing, so it may be submitted again.
            self._settle_choice(self.controller.state, lost=True)
            await self._app.close_memory(self._memory)
            await self._app.give_back(self.session, self.submission.turn_id, None, self.lease)
            return
        with anyio.move_on_after(bound):
            await self._settled.wait()
        state = self.controller.state
        try:
            if self._memory is not None:
                # Messages are written only while this turn holds the session: a save of the
                # session (compare-and-set) first proves no other worker took the lease over.
                with anyio.fail_after(bound):
                    await self.session.persist()
                    # Each call left waiting for a human gets a record any worker can decide.
                    await record_waiting_calls(self.session, state.messages)
        except BaseException:
            self._settle_choice(state, lost=True)
            await self._app.close_memory(self._memory)
            self._unreleased("indeterminate")  # released after the response, when it can be
            raise
        outcome: Literal["completed", "indeterminate"] = "completed"
        failure: BaseException | None = None
        messages = state.messages
        if self._reservation is not None and self._choice_succeeded(state):
            # Stored, so that no worker offers this choice again.
            messages = mark_choice(messages, self._reservation.instance_id)
        if self._memory is not None:
            try:
                if exceeds_record_limits(messages):
                    # Whatever the memory would do with it: no snapshot could ever carry it.
                    raise ConversationTooLargeError()
                with anyio.fail_after(bound):
                    await self._memory.save(messages)
            except BaseException as error:
                outcome = "indeterminate"
                failure = error
        self._settle_choice(state, lost=False)
        try:
            with anyio.fail_after(bound):
                await self.session.release_turn(self.submission.turn_id, outcome)
        except BaseException:
            self._unreleased(outcome)
            raise
        finally:
            await self._app.close_memory(self._memory)
        if failure is not None:
            raise failure

    def _unreleased(self, outcome: Literal["completed", "indeterminate"]) -> None:
        """The store failed before the lease was released: release it after the response."""
        if self.lease is not None:
            self.lease.outcome = outcome
            self.lease.unreleased = True

    def _choice_succeeded(self, state: ChatState) -> bool:
        return (
            self._reservation is not None
            and self.done
            and not self.send_failed
            and state.status != "error"
            and self._abort.reason is None
        )

    def _settle_choice(self, state: ChatState, *, lost: bool) -> None:
        choice = self._reservation
        if choice is None:
            return
        try:
            if not lost and self._choice_succeeded(state):
                choice.reservation.commit()
            else:
                choice.reservation.release()
        except Exception:
            return
