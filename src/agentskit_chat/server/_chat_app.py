"""The chat turn handler: one ``client.turn.submit`` in, ``server.turn.snapshot`` lines out.

Each POST runs one turn of a chat definition's session, in this order: method (405), media
type (415), the host's ``authenticate`` (before a byte of the body is read), the bounded body
(413, 400), the turn decoder (400), the host's definition, session storage and chat memory,
:func:`~agentskit_chat.conversation.resume_chat_session`, and a turn lease claimed through the
storage's compare-and-set (409 when another turn holds the session or the turn id already
finished). Only then does a controller run. Its states are streamed as full snapshots, one
NDJSON line each, coalesced to the newest while the client is not reading. Lines are numbered
from sequences a session save reserved below the stored cursor (saved for the first line, when
the numbers run out, and at least once a second, not for every line), so ``sequence`` never
goes back and whatever comes after a stream (a later turn, a ``GET``) is numbered above it.

One deadline covers the whole request; it and a client that goes away stop the controller.
Cleanup runs once on every path: it waits (bounded) for the turn to settle, saves the messages
to the chat memory, settles a choice reservation (committed only when the turn succeeded), and
releases the lease, recording the turn as ``completed`` or ``indeterminate`` (the memory save
failed). A failure after the claim but before the controller ran gives the lease back without
recording the turn, so the same turn may be submitted again.
"""

from __future__ import annotations

import inspect
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final, Literal, TypeAlias, TypeVar

import anyio
import anyio.abc

from agentskit_chat.conversation import ChatDefinition, ChatSession, SessionStorage
from agentskit_chat.conversation import resume_chat_session as _resume
from agentskit_chat.conversation._factory import check_memory_for
from agentskit_chat.errors import (
    ChatHandlerError,
    ConfigurationError,
    ConfirmationLimitError,
    ConfirmationResolvedElsewhereError,
    ConversationTooLargeError,
    ProtocolError,
    SessionConflictError,
    StorageError,
    ToolError,
)
from agentskit_chat.protocol import (
    ComponentFrame,
    ComponentSelectEvent,
    Decoded,
    SubmitEvent,
    create_snapshot_event,
    decode_turn_event,
    encode_turn_event,
)
from agentskit_chat.protocol._decode import NOT_JSON, as_text, parse_candidate, validate_model
from agentskit_chat.protocol._json import MAX_SAFE_INTEGER, js_stringify
from agentskit_chat.protocol._types import is_safe_id
from agentskit_chat.runtime import ChatController, ChatMemory, ChatMessage, ChatState
from agentskit_chat.runtime._messages import format_message_timestamp
from agentskit_chat.service import Authenticated, AuthResult, RateLimitDecision, Refused

from ._asgi import Receive, Scope, Send, handle_non_http, header, query_params, send_response
from ._auth import request_class
from ._body import BodyTimedOut, BodyTooLarge, ClientDisconnected, RequestBody
from ._chat_actions import (
    CONFIRMATION_LIMIT_MESSAGE,
    CONFIRMATION_UNAVAILABLE_MESSAGE,
    ChoiceAction,
    action_id,
    choice_action,
    confirmation_decision,
)
from ._chat_approvals import decision_operation, record_waiting_calls
from ._chat_interactions import accept_interaction, find_shown_frame
from ._chat_operations import OPERATION_UNAVAILABLE_MESSAGE, operation_target, turn_operation
from ._history import compact_history, exceeds_record_limits
from ._observe import TurnEvents, note_error
from ._snapshot_lines import SnapshotLines

__all__ = [
    "ChatApp",
    "ChatAuthenticate",
    "ChatMemoryFactory",
    "NewSessionLimit",
    "ResolveDefinition",
    "SessionStorageFactory",
    "create_chat_app",
]

T = TypeVar("T")

#: Authenticates a request (sync or async): gets a Starlette ``Request`` whose body cannot be
#: read, returns ``Authenticated(context)`` or ``Refused(response)``.
ChatAuthenticate: TypeAlias = Callable[[Any], AuthResult | Awaitable[AuthResult]]
#: ``(context, session_id)`` → the chat definition of this tenant and session (sync or async).
ResolveDefinition: TypeAlias = Callable[[Any, str], ChatDefinition | Awaitable[ChatDefinition]]
#: ``(context)`` → the compare-and-set session storage (sync or async).
SessionStorageFactory: TypeAlias = Callable[[Any], SessionStorage | Awaitable[SessionStorage]]
#: ``(context, session_id)`` → a chat memory for this one request (sync or async), or ``None``
#: to use the definition's own ``chat.memory``. The handler closes it (``aclose``) when done.
ChatMemoryFactory: TypeAlias = Callable[
    [Any, str], ChatMemory | Awaitable[ChatMemory | None] | None
]
#: ``(request)`` → whether this caller may start one more session (sync or async); asked only
#: when a submission would create its session, before anything is stored.
NewSessionLimit: TypeAlias = Callable[[Any], RateLimitDecision | Awaitable[RateLimitDecision]]

_Reason = Literal["timeout", "cancelled"]

_NDJSON_HEADERS: Final = (
    (b"content-type", b"application/x-ndjson; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
)
_JSON_HEADERS: Final = (
    (b"content-type", b"application/json; charset=utf-8"),
    (b"x-content-type-options", b"nosniff"),
)

_INVALID_CONFIG: Final = "Chat handler configuration is invalid."
_BUSY: Final = "Another turn is active for this session."
_CONFLICT: Final = "The session changed in another request; submit the turn again."
_COMPLETED: Final = "This turn already completed."
_INDETERMINATE: Final = "This turn already ended without a known outcome; start a new turn."
_TIMEOUT: Final = "The chat request timed out."
_CANCELLED: Final = "The chat request was cancelled."
_INTERNAL: Final = "The chat request failed."
_TOO_LARGE: Final = "This turn is too large to be kept in the conversation."
_SESSIONS_LIMITED: Final = "Too many new conversations; wait before starting another."
_CHOICE_EXPIRED: Final = "This deterministic choice expired. Ask the question again."
_TURN_FAILED: Final = {
    "version": 1,
    "code": "CHAT_TURN_FAILED",
    "message": "The chat turn failed.",
    "retryable": True,
}
_SUBMIT_LINEAGE: Final = {"operation": "submit"}
_INVALID_EVENT: Final = "Request body must be a valid turn submission."
_INVALID_QUERY: Final = "The query must name one valid sessionId."
#: The turn id of a resumed snapshot of a session that has not finished a turn yet.
_RESUME_TURN_ID: Final = "resume"
#: How many line sequences one session save reserves for a turn's stream: its lines are
#: numbered below the stored cursor without a save per line.
_RESERVED_SEQUENCES: Final = 64
#: The longest a streaming turn goes without saving its session (a takeover by another worker
#: or a changed session is found within this bound), in seconds.
_SAVE_INTERVAL_S: Final = 1.0
_ACTION_FORBIDDEN: Final = "This action is not allowed."
_ACTION_INVALID: Final = "This action cannot be proposed."


class _Failure(Exception):
    """A refusal before the stream starts, with its status and diagnostic."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retryable: bool,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after


def _refusal(status: int, code: str, message: str, *, retryable: bool = False) -> _Failure:
    return _Failure(status, code, message, retryable=retryable)


def _unavailable() -> _Failure:
    return _refusal(409, "CONFIRMATION_UNAVAILABLE", CONFIRMATION_UNAVAILABLE_MESSAGE)


def _action_refusal(error: ToolError) -> _Failure:
    """What the client is told when an action could not be proposed (never the reason text,
    which the host's authorizer wrote for its own logs)."""
    if error.code == "AK_TOOL_FORBIDDEN":
        return _refusal(403, "ACTION_FORBIDDEN", _ACTION_FORBIDDEN)
    return _refusal(400, "ACTION_INVALID", _ACTION_INVALID)


def _classify(error: BaseException) -> _Failure:
    """What a failure tells the client: its code, its fixed message, and whether to retry."""
    if isinstance(error, _Failure):
        return error
    if isinstance(error, ChatHandlerError):
        return _Failure(error.status, error.code, error.message, retryable=error.retryable)
    if isinstance(error, SessionConflictError):
        return _Failure(409, "SESSION_CONFLICT", _CONFLICT, retryable=True)
    if isinstance(error, ConversationTooLargeError):
        return _Failure(409, "CONVERSATION_TOO_LARGE", _TOO_LARGE, retryable=False)
    if isinstance(error, StorageError):
        return _Failure(500, "SERVER_INTERNAL", _INTERNAL, retryable=error.retryable)
    if isinstance(error, ConfirmationLimitError):
        # The session keeps every undecided call: only deciding some of them makes room.
        return _refusal(409, "CONFIRMATION_LIMIT_REACHED", CONFIRMATION_LIMIT_MESSAGE)
    if isinstance(error, ConfigurationError):
        # An incompatible stored session or an invalid definition: retrying cannot help.
        return _Failure(500, "SERVER_INTERNAL", _INTERNAL, retryable=False)
    return _Failure(500, "SERVER_INTERNAL", _INTERNAL, retryable=True)


def _aborted(reason: _Reason) -> _Failure:
    if reason == "timeout":
        return _Failure(408, "SERVER_TIMEOUT", _TIMEOUT, retryable=True)
    return _Failure(499, "REQUEST_CANCELLED", _CANCELLED, retryable=True)


def _outcome(error: BaseException) -> str:
    """The turn-metrics outcome of a turn that failed with ``error`` after it started."""
    if isinstance(error, SessionConflictError):
        return "conflict"
    if isinstance(error, ConversationTooLargeError):
        return "too_large"
    if isinstance(error, ConfirmationLimitError):
        return "confirmation_limit"  # a full session of undecided calls: the client's to decide
    if isinstance(error, StorageError | TimeoutError):
        return "store_error"  # a store call failed, or its cleanup bound cut it off
    return "failed"


@dataclass(slots=True)
class _Lease:
    """The lease a request claimed, for a release retried after the response when the store
    failed while releasing it (``outcome`` ``None``: give it back, the turn never ran)."""

    definition: ChatDefinition
    storage: SessionStorage
    session_id: str
    turn_id: str
    expires_at: float
    outcome: Literal["completed", "indeterminate"] | None = None
    unreleased: bool = False


def _diagnostic(failure: _Failure) -> dict[str, Any]:
    return {
        "version": 1,
        "code": failure.code,
        "message": failure.message,
        "retryable": failure.retryable,
    }


async def _resolve(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return str(uuid.uuid4())


def _positive_seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ChatHandlerError(500, "SERVER_INVALID_CONFIG", _INVALID_CONFIG)
    if not math.isfinite(value) or value <= 0:
        raise ChatHandlerError(500, "SERVER_INVALID_CONFIG", _INVALID_CONFIG)
    return float(value)


def _status(state: ChatState) -> str:
    if state.status == "error":
        return "error"
    if state.status == "streaming":
        return "streaming"
    return "complete" if state.messages else "idle"


def _selection(candidate: object) -> ComponentSelectEvent | Literal[False] | None:
    """The submission's ``payload.selection``: ``None`` when absent, ``False`` when invalid."""
    payload = candidate.get("payload") if isinstance(candidate, Mapping) else None
    if not isinstance(payload, Mapping) or "selection" not in payload:
        return None
    event = validate_model(ComponentSelectEvent, payload["selection"])
    return False if event is None else event


def _lineage(session: ChatSession, kind: str, source_message_id: str) -> Mapping[str, str]:
    """``{operation, parentTurnId, sourceMessageId}``: the parent is the session's last
    finished turn. Without one (or with a message id that is not a safe id) no lineage can be
    told, and the snapshot carries none."""
    finished = session.terminal_turns
    if not finished or not is_safe_id(source_message_id):
        return {}
    return {
        "operation": kind,
        "parentTurnId": finished[-1].turn_id,
        "sourceMessageId": source_message_id,
    }


#: Metadata a choice turn's user message carries: the instance id of the choice list it used.
CHOICE_METADATA_KEY: Final = "agentskit.chat.choice"


@dataclass(frozen=True, slots=True)
class _Shown:
    """A choice list as the session's assistant showed it, and the question it answered."""

    frame: ComponentFrame
    question: ChatMessage | None
    used: bool


def _shown_frame(messages: Sequence[ChatMessage], selection: ComponentSelectEvent) -> _Shown | None:
    """The frame ``selection`` refers to, as this session's assistant showed it (newest first)."""
    found = find_shown_frame(messages, selection.instance_id, selection.component_key)
    if found is None:
        return None
    index, frame = found
    before = messages[index - 1] if index > 0 else None
    question = before if before is not None and before.role == "user" else None
    used = any(
        later.role == "user"
        and (later.metadata or {}).get(CHOICE_METADATA_KEY) == selection.instance_id
        for later in messages[index + 1 :]
    )
    return _Shown(frame, question, used)


def _accepts_question(submit: Callable[..., Any]) -> bool:
    """Whether a ``choice_submission`` takes ``question=`` and ``message_id=``."""
    try:
        parameters = inspect.signature(submit).parameters
    except (TypeError, ValueError):
        return False
    return "question" in parameters and "message_id" in parameters


def _mark_choice(messages: tuple[ChatMessage, ...], instance_id: str) -> tuple[ChatMessage, ...]:
    """``messages`` with the last user message marked as the one that used ``instance_id``."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user":
            metadata = {**(message.metadata or {}), CHOICE_METADATA_KEY: instance_id}
            marked = replace(message, metadata=metadata)
            return (*messages[:index], marked, *messages[index + 1 :])
    return messages


def _refuse_replay(session: ChatSession, turn_id: str) -> None:
    """Refuse a turn that already finished, saying whether it completed."""
    finished = next((turn for turn in session.terminal_turns if turn.turn_id == turn_id), None)
    if finished is not None:
        message = _COMPLETED if finished.outcome == "completed" else _INDETERMINATE
        raise _refusal(409, "SESSION_BUSY", message)


class _Abort:
    """Why the request stopped early (the deadline or the client), told to whoever waits."""

    def __init__(self) -> None:
        self.reason: _Reason | None = None
        self.listeners: list[Callable[[_Reason], None]] = []

    def fire(self, reason: _Reason) -> None:
        if self.reason is not None:
            return
        self.reason = reason
        for listener in tuple(self.listeners):
            listener(reason)


@dataclass(frozen=True, slots=True)
class _Choice:
    """A reserved choice of this turn: the reservation and the choice list it came from."""

    reservation: Any
    instance_id: str


class _Turn:
    """One running turn: its controller, the pending state, and its once-only cleanup."""

    def __init__(
        self,
        app: ChatApp,
        *,
        submission: SubmitEvent,
        session: ChatSession,
        controller: ChatController,
        memory: ChatMemory | None,
        reservation: _Choice | None,
        operation: Callable[[], Awaitable[object]] | None = None,
        lineage: Mapping[str, str] = _SUBMIT_LINEAGE,
        abort: _Abort,
        group: anyio.abc.TaskGroup,
        lease: _Lease | None = None,
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
        self.failure: _Failure | None = None
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

    def _on_abort(self, _reason: _Reason) -> None:
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
        self.started = True
        try:
            if self._operation is None:
                await self.controller.send(self.submission.payload.input)
            else:
                await self._operation()
        except ToolError as error:
            self.send_failed = True
            self.failure = _action_refusal(error)
        except ConfirmationResolvedElsewhereError:
            # Another client decided the call first: nothing ran here.
            self.send_failed = True
            self.failure = _unavailable()
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
            messages = _mark_choice(messages, self._reservation.instance_id)
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


class ChatApp:
    """The chat turn handler as an ASGI app, mountable at any path.

    Build it with :func:`create_chat_app`.

    Attributes:
        timeout: The whole-request deadline, in seconds.
        cleanup_timeout: The bound of each cleanup step, in seconds.
        max_body_bytes: The largest body read.
        lease_ms: How long a claimed turn holds its session (timeout plus three cleanup
            bounds), in milliseconds.
        watch: What turns report (their start, outcome and duration, a lease released late);
            ``create_app`` sets its log records and metrics here. Nothing by default.
    """

    def __init__(
        self,
        *,
        authenticate: ChatAuthenticate | None,
        resolve_definition: ResolveDefinition,
        session_storage: SessionStorageFactory,
        chat_memory: ChatMemoryFactory | None,
        timeout: float,
        cleanup_timeout: float,
        max_body_bytes: int,
        now: Callable[[], datetime] | None,
        create_id: Callable[[], str] | None,
        new_session_limit: NewSessionLimit | None = None,
    ) -> None:
        self.timeout = _positive_seconds(timeout)
        self.cleanup_timeout = _positive_seconds(cleanup_timeout)
        if (
            isinstance(max_body_bytes, bool)
            or not isinstance(max_body_bytes, int)
            or not 0 < max_body_bytes <= MAX_SAFE_INTEGER
        ):
            raise ChatHandlerError(500, "SERVER_INVALID_CONFIG", _INVALID_CONFIG)
        lease = (self.timeout + 3 * self.cleanup_timeout) * 1000
        if not lease <= MAX_SAFE_INTEGER:
            raise ChatHandlerError(500, "SERVER_INVALID_CONFIG", _INVALID_CONFIG)
        if not callable(resolve_definition) or not callable(session_storage):
            raise ChatHandlerError(500, "SERVER_INVALID_CONFIG", _INVALID_CONFIG)
        self.max_body_bytes = max_body_bytes
        self.lease_ms = max(1, math.ceil(lease))
        self._authenticate = authenticate
        self._resolve_definition = resolve_definition
        self._session_storage = session_storage
        self._chat_memory = chat_memory
        self._now = now or _utc_now
        self._create_id = create_id or _new_id
        self._new_session_limit = new_session_limit
        self._request_class = request_class("chat app")
        self.watch = TurnEvents()

    # --- the request ----------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection scope."""
        if await handle_non_http(scope, receive, send):
            return
        deadline = anyio.current_time() + self.timeout
        if scope.get("method") == "GET":
            await self._serve_read(scope, send)
            return
        if scope.get("method") != "POST":
            await self._send_error(
                scope,
                send,
                _refusal(405, "REQUEST_METHOD_NOT_ALLOWED", "Only GET and POST are supported."),
            )
            return
        content_type = (header(scope, b"content-type") or "").lower()
        if not content_type.startswith("application/json"):
            await self._send_error(
                scope,
                send,
                _refusal(
                    415, "REQUEST_UNSUPPORTED_MEDIA_TYPE", "Content-Type must be application/json."
                ),
            )
            return
        abort = _Abort()
        body = RequestBody(
            receive,
            content_length=header(scope, b"content-length"),
            limit=self.max_body_bytes,
            timeout=self.timeout,
        )
        async with anyio.create_task_group() as group:
            group.start_soon(self._watch, body, abort, deadline)
            try:
                await self._serve(scope, send, body, abort, group)
            finally:
                group.cancel_scope.cancel()

    async def _serve_read(self, scope: Scope, send: Send) -> None:
        """``GET ?sessionId=``: the stored conversation as one snapshot (JSON), for a client
        that resumes a session (a reload, another device). Nothing is claimed or saved."""
        try:
            with anyio.fail_after(self.timeout):
                line = await self._read_snapshot(scope)
        except _Refused as refused:
            await refused.response(scope, _no_body, send)
            return
        except TimeoutError:
            await self._send_error(scope, send, _aborted("timeout"))
            return
        except Exception as error:
            note_error(scope, error)
            await self._send_error(scope, send, _classify(error))
            return
        try:
            await send_response(scope, send, 200, list(_JSON_HEADERS), line.encode())
        except OSError:
            return

    async def _read_snapshot(self, scope: Scope) -> str:
        context = await self._admit(scope)
        session_id = query_params(scope).get("sessionId")
        if session_id is None or not is_safe_id(session_id):
            raise _refusal(400, "REQUEST_INVALID_QUERY", _INVALID_QUERY)
        definition = await _resolve(self._resolve_definition(context, session_id))
        storage = await _resolve(self._session_storage(context))
        session = await _resume(definition, session_id=session_id, storage=storage, now=self._now)
        memory = await self._memory_for(context, session_id, definition)
        try:
            loaded = tuple(await memory.load()) if memory is not None else ()
        finally:
            await self.close_memory(memory)
        messages = compact_history(loaded or tuple(definition.chat.initial_messages))
        finished = session.terminal_turns
        status: Literal["idle", "complete", "error"] = "idle"
        if messages:
            status = "error" if messages[-1].status == "error" else "complete"
        event = create_snapshot_event(
            event_id=self._create_id(),
            session_id=session_id,
            turn_id=finished[-1].turn_id if finished else _RESUME_TURN_ID,
            sequence=session.get_cursor(),
            emitted_at=self._now(),
            messages=[message.to_record() for message in messages],
            status=status,
            usage={"promptTokens": 0, "completionTokens": 0, "totalTokens": 0},
        )
        return event.to_json()

    async def _admit(self, scope: Scope) -> Any:
        """The trusted context ``authenticate`` gives this request (``None`` without one)."""
        if self._authenticate is None:
            return None
        verdict = await _resolve(self._authenticate(self._request_class(scope)))
        if isinstance(verdict, Refused):
            raise _Refused(verdict.response)
        if not isinstance(verdict, Authenticated):
            raise TypeError("authenticate must return Authenticated or Refused")
        return verdict.context

    async def _watch(self, body: RequestBody, abort: _Abort, deadline: float) -> None:
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            await body.wait_disconnect()
            abort.fire("cancelled")
            return
        abort.fire("timeout")

    async def _serve(
        self,
        scope: Scope,
        send: Send,
        body: RequestBody,
        abort: _Abort,
        group: anyio.abc.TaskGroup,
    ) -> None:
        turn: _Turn | Exception | None = None
        start = anyio.current_time()
        leases: list[_Lease] = []
        with anyio.CancelScope() as prestream:

            def cancel_prestream(_reason: _Reason) -> None:
                prestream.cancel()

            abort.listeners.append(cancel_prestream)
            try:
                turn = await self._prepare(scope, body, abort, group, leases)
            except Exception as error:
                turn = error
            finally:
                abort.listeners.remove(cancel_prestream)
        if isinstance(turn, _Refused):
            await turn.response(scope, _no_body, send)
            return
        if abort.reason is not None or turn is None:
            # Deadline or client gone before the stream started; a turn made meanwhile is
            # already being cleaned up by its abort listener.
            await self._send_error(scope, send, _aborted(abort.reason or "timeout"))
        elif isinstance(turn, Exception):
            note_error(scope, turn)
            await self._send_error(scope, send, _classify(turn))
        else:
            self.watch.turn_started()
            group.start_soon(turn.run)
            await self._stream(send, turn, abort)
            elapsed = anyio.current_time() - start
            self.watch.turn_finished(
                turn.outcome or "cancelled", elapsed, error=turn.error, code=turn.code
            )
        for lease in leases:
            await self._release_late(lease)

    async def _prepare(
        self,
        scope: Scope,
        body: RequestBody,
        abort: _Abort,
        group: anyio.abc.TaskGroup,
        leases: list[_Lease],
    ) -> _Turn:
        context = await self._admit(scope)
        submission, candidate = await self._read_submission(body)
        session_id = submission.session_id
        definition = await _resolve(self._resolve_definition(context, session_id))
        storage = await _resolve(self._session_storage(context))
        session = await _resume(definition, session_id=session_id, storage=storage, now=self._now)
        turn_id = submission.turn_id
        _refuse_replay(session, turn_id)
        if session.get_cursor() == 0:
            await self._admit_new_session(scope)  # nothing stored yet: the claim creates it
        before = session.active_turn
        lease = _Lease(
            definition, storage, session_id, turn_id, anyio.current_time() + self.lease_ms / 1000
        )
        leases.append(lease)
        try:
            claimed = await session.claim_turn(turn_id, self.lease_ms)
        except BaseException as error:
            if isinstance(error, StorageError):
                lease.unreleased = True  # the claim may have been stored all the same
            await self.give_back(session, turn_id, before, lease)
            raise
        if not claimed:
            _refuse_replay(session, turn_id)  # its own lease had expired: now indeterminate
            raise _refusal(409, "SESSION_BUSY", _BUSY, retryable=True)
        memory: ChatMemory | None = None
        try:
            memory = await self._memory_for(context, session_id, definition)
            loaded = tuple(await memory.load()) if memory is not None else ()
            # The newest messages within fixed bounds: the turn saves what it starts from.
            messages = compact_history(loaded or tuple(definition.chat.initial_messages))
            decision = confirmation_decision(candidate)
            requested = turn_operation(candidate)
            mixed = requested is not None and (
                decision is not None or _selection(candidate) is not None
            )
            if decision is False or requested is False or mixed:
                raise _refusal(400, "REQUEST_INVALID_EVENT", _INVALID_EVENT)
            # A component interaction checked against the frame this session showed.
            interaction = accept_interaction(candidate, messages, definition.manifest)
            action: tuple[str, ChoiceAction] | None = None
            reservation: _Choice | None = None
            target = None
            if requested is not None:
                target = operation_target(requested, messages)
                if target is None:
                    raise _refusal(409, "OPERATION_UNAVAILABLE", OPERATION_UNAVAILABLE_MESSAGE)
            elif decision is None:
                submission, reservation, action = self._choose(
                    definition, session_id, submission, candidate, messages
                )
            config = session.update_chat(
                definition.chat.with_changes(memory=None, initial_messages=messages)
            )
            controller = ChatController(config)
            operation: Callable[[], Awaitable[object]] | None = None
            lineage: Mapping[str, str] = _SUBMIT_LINEAGE
            if target is not None:
                if target.kind == "retry":
                    operation = controller.retry
                elif target.kind == "regenerate":
                    operation = partial(controller.regenerate, target.message_id)
                else:
                    assert target.message_id is not None
                    operation = partial(
                        controller.edit, target.message_id, submission.payload.input
                    )
                lineage = _lineage(session, target.kind, target.source_message_id)
            elif decision is not None:
                operation = decision_operation(session, controller, decision)
                if operation is None:
                    raise _unavailable()
            elif action is not None:
                suffix, chosen = action
                confirmation = session.create_confirmation(
                    chat=controller, create_id=lambda: suffix
                )
                if confirmation.get_by_tool_call(f"app-{suffix}") is not None:
                    raise _refusal(409, "CHOICE_UNAVAILABLE", _CHOICE_EXPIRED)
                operation = partial(confirmation.propose, name=chosen.name, input=chosen.input)
            elif interaction is not None:
                operation = partial(
                    controller.send, interaction.text, metadata=interaction.metadata
                )
            return _Turn(
                self,
                submission=submission,
                session=session,
                controller=controller,
                memory=memory,
                reservation=reservation,
                operation=operation,
                lineage=lineage,
                abort=abort,
                group=group,
                lease=lease,
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.close_memory(memory)
                await self.give_back(session, turn_id, before, lease)
            raise

    async def _admit_new_session(self, scope: Scope) -> None:
        """Refuse a caller past its new-session limit (429 with ``Retry-After``)."""
        if self._new_session_limit is None:
            return
        decision = await _resolve(self._new_session_limit(self._request_class(scope)))
        if not decision.allowed:
            raise _Failure(
                429,
                "SESSION_RATE_LIMITED",
                _SESSIONS_LIMITED,
                retryable=True,
                retry_after=max(1, decision.retry_after_seconds or 1),
            )

    async def _read_submission(self, body: RequestBody) -> tuple[SubmitEvent, object]:
        try:
            raw = await body.read()
        except BodyTooLarge:
            raise _refusal(413, "REQUEST_TOO_LARGE", "Request body is too large.") from None
        except BodyTimedOut:
            raise _aborted("timeout") from None
        except ClientDisconnected:
            raise _aborted("cancelled") from None
        try:
            candidate = parse_candidate(as_text(raw)) if raw else NOT_JSON
        except Exception:
            candidate = NOT_JSON
        if candidate is NOT_JSON:
            raise _refusal(400, "REQUEST_INVALID_JSON", "Request body is not valid JSON.")
        result = decode_turn_event(candidate)
        if not isinstance(result, Decoded) or not isinstance(result.value, SubmitEvent):
            raise _refusal(
                400, "REQUEST_INVALID_EVENT", "Request body must be a valid turn submission."
            )
        return result.value, candidate

    async def _memory_for(
        self, context: Any, session_id: str, definition: ChatDefinition
    ) -> ChatMemory | None:
        memory = definition.chat.memory
        if self._chat_memory is not None:
            memory = await _resolve(self._chat_memory(context, session_id)) or memory
        if memory is not None:
            check_memory_for(memory, session_id)  # one conversation's messages, never another's
        return memory

    def _choose(
        self,
        definition: ChatDefinition,
        session_id: str,
        submission: SubmitEvent,
        candidate: object,
        messages: Sequence[ChatMessage],
    ) -> tuple[SubmitEvent, _Choice | None, tuple[str, ChoiceAction] | None]:
        """For a click on a shown choice: the submission to run and its choice reservation,
        or the action the choice carries (its proposal id and the action)."""
        selection = _selection(candidate)
        if selection is False:
            raise _refusal(400, "REQUEST_INVALID_EVENT", _INVALID_EVENT)
        if selection is None:
            return submission, None, None
        shown = _shown_frame(messages, selection)
        # An action is read from the frame this session showed, never from the click.
        action = (
            None
            if shown is None
            else choice_action(shown.frame, selection.choice_id, definition.manifest)
        )
        if action is not None:
            return submission, None, (action_id(selection.instance_id, selection.choice_id), action)
        submit = definition.choice_submission
        if submit is None:
            return submission, None, None
        if shown is None or shown.used:
            raise _refusal(409, "CHOICE_UNAVAILABLE", _CHOICE_EXPIRED)
        if shown.question is not None and _accepts_question(submit):
            # Another worker may have shown it: the adapter can re-derive it from the question.
            result = submit(
                shown.frame,
                selection.choice_id,
                session_id=session_id,
                question=shown.question.content,
                message_id=shown.question.id,
            )
        else:
            result = submit(shown.frame, selection.choice_id, session_id=session_id)
        if result is None:
            return submission, None, None
        value = getattr(result, "value", None)
        if getattr(result, "unavailable", False) or not isinstance(value, str):
            raise _refusal(409, "CHOICE_UNAVAILABLE", _CHOICE_EXPIRED)
        chosen = submission.model_copy(
            update={"payload": submission.payload.model_copy(update={"input": value})}
        )
        return chosen, _Choice(result, shown.frame.instance_id), None

    async def give_back(
        self, session: ChatSession, turn_id: str, before: object, lease: _Lease | None = None
    ) -> None:
        """Clear a lease this request claimed for a turn that never ran (bounded); when the
        store fails, ``lease`` is given back after the response."""
        active = session.active_turn
        if active is None or active is before or active.turn_id != turn_id:
            return
        given = False
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.cleanup_timeout):
            try:
                await session.abandon_turn(turn_id)
                given = True
            except Exception:
                pass
        if not given and lease is not None:
            lease.outcome = None
            lease.unreleased = True

    async def _release_late(self, lease: _Lease) -> None:
        """Release ``lease`` once the store answers again (retried from a freshly loaded
        session, every half second at most), until the lease would have expired anyway."""
        if not lease.unreleased:
            return
        start = anyio.current_time()
        attempts = 0
        pause = 0.1
        while True:
            attempts += 1
            try:
                with anyio.fail_after(self.cleanup_timeout):
                    released = await self._release_stored(lease)
            except Exception:
                if anyio.current_time() + pause >= lease.expires_at:
                    self.watch.lease_released(
                        attempts=attempts, seconds=anyio.current_time() - start, released=False
                    )
                    return
                await anyio.sleep(pause)
                pause = min(pause * 2, 0.5)
                continue
            lease.unreleased = False
            if released:
                self.watch.lease_released(
                    attempts=attempts, seconds=anyio.current_time() - start, released=True
                )
            return

    async def _release_stored(self, lease: _Lease) -> bool:
        """Release ``lease`` in the stored session, if it still holds it (an earlier write
        whose answer was lost may have released it already)."""
        session = await _resume(
            lease.definition, session_id=lease.session_id, storage=lease.storage, now=self._now
        )
        active = session.active_turn
        if active is None or active.turn_id != lease.turn_id:
            return False
        if lease.outcome is None:
            await session.abandon_turn(lease.turn_id)
        else:
            await session.release_turn(lease.turn_id, lease.outcome)
        return True

    async def close_memory(self, memory: ChatMemory | None) -> None:
        """Close a memory the host made for one request (errors ignored)."""
        if memory is None or self._chat_memory is None:
            return
        close = getattr(memory, "aclose", None)
        if close is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.cleanup_timeout):
            try:
                await close()
            except Exception:
                return

    # --- the stream -----------------------------------------------------------------------

    async def _stream(self, send: Send, turn: _Turn, abort: _Abort) -> None:
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

    async def _pump(self, send: Send, turn: _Turn, abort: _Abort) -> None:
        try:
            while True:
                await turn.wait()
                if abort.reason is not None:
                    turn.outcome, turn.code = abort.reason, _aborted(abort.reason).code
                    await self._line(send, self._diagnostic_line(turn, _aborted(abort.reason)))
                    await turn.cleanup_quietly(stop=True)
                    break
                state = turn.pending
                if state is not None:
                    turn.pending = None
                    if _status(state) != "streaming":
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
            failure = _aborted(abort.reason) if abort.reason else _classify(error)
            turn.outcome = abort.reason or _outcome(error)
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

    def _snapshot_line(self, turn: _Turn, state: ChatState) -> str:
        try:
            return self._encode_snapshot(turn, state)
        except ProtocolError:
            if exceeds_record_limits(state.messages):
                # Only a turn larger than the room compaction leaves (see _history).
                raise ConversationTooLargeError() from None
            raise

    def _encode_snapshot(self, turn: _Turn, state: ChatState) -> str:
        return turn.lines.encode(
            event_id=self._create_id(),
            session_id=turn.submission.session_id,
            turn_id=turn.submission.turn_id,
            sequence=turn.take_sequence(),
            emitted_at=self._now(),
            messages=state.messages,
            status=_status(state),
            usage=state.usage,
            lineage=turn.lineage or None,
            error=_TURN_FAILED if state.error is not None else None,
        )

    def _diagnostic_line(self, turn: _Turn, failure: _Failure) -> str:
        return encode_turn_event(
            {
                "protocol": "agentskit.chat.turn",
                "version": 1,
                "eventId": self._create_id(),
                "sessionId": turn.submission.session_id,
                "turnId": turn.submission.turn_id,
                "sequence": turn.session.get_cursor() + 1,
                "emittedAt": format_message_timestamp(self._now()),
                "event": "server.turn.diagnostic",
                "payload": _diagnostic(failure),
            }
        )

    async def _send_error(self, scope: Scope, send: Send, failure: _Failure) -> None:
        body = js_stringify({"error": _diagnostic(failure)}).encode()
        headers = list(_JSON_HEADERS)
        if failure.status == 405:
            headers.append((b"allow", b"GET, POST"))
        if failure.retry_after is not None:
            headers.append((b"retry-after", str(failure.retry_after).encode("ascii")))
        try:
            await send_response(scope, send, failure.status, headers, body)
        except OSError:
            return


class _Refused(Exception):
    """Internal: the host refused the request; its response is sent unchanged."""

    def __init__(self, response: Any) -> None:
        super().__init__("refused")
        self.response = response


async def _no_body() -> dict[str, Any]:
    return {"type": "http.disconnect"}


def create_chat_app(
    *,
    resolve_definition: ResolveDefinition,
    session_storage: SessionStorageFactory,
    authenticate: ChatAuthenticate | None = None,
    chat_memory: ChatMemoryFactory | None = None,
    timeout: float = 30.0,
    cleanup_timeout: float = 5.0,
    max_body_bytes: int = 65536,
    now: Callable[[], datetime] | None = None,
    create_id: Callable[[], str] | None = None,
    new_session_limit: NewSessionLimit | None = None,
) -> ChatApp:
    """Build the chat turn handler as an ASGI app (mount it in Starlette or FastAPI).

    Args:
        resolve_definition: ``(context, session_id)`` → the chat definition (sync or async).
        session_storage: ``(context)`` → the compare-and-set session storage every worker
            shares (sync or async).
        authenticate: ``(request)`` → ``Authenticated(context)`` or ``Refused(response)``; the
            request's body cannot be read. The trusted context comes only from here; anything
            of the kind in the body is ignored. Without it, every request is served with a
            ``None`` context.
        chat_memory: ``(context, session_id)`` → a chat memory for this request (closed by the
            handler), or ``None`` to use the definition's ``chat.memory``. Messages are loaded
            from it after the lease is claimed and saved to it when the turn ends.
        timeout: The whole-request deadline, in seconds.
        cleanup_timeout: The bound of each cleanup step (waiting for the turn, saving the
            messages, releasing the lease), in seconds. A lease lasts
            ``timeout + 3 * cleanup_timeout``, so a worker killed mid-turn blocks its session
            for at most that long.
        max_body_bytes: The largest body read, in bytes.
        now: The clock of timestamps and leases (UTC); the wall clock by default.
        create_id: Makes event ids; random UUIDs by default.
        new_session_limit: ``(request)`` → a ``RateLimitDecision``: asked when a submission
            would create its session (before anything is stored); a refusal is 429
            ``SESSION_RATE_LIMITED`` with ``Retry-After``. ``create_app`` asks the caller's
            new-session bucket. Without it, sessions are not limited.

    Raises:
        ChatHandlerError: 500 ``SERVER_INVALID_CONFIG`` for a non-positive or non-finite
            timeout or body limit, or a lease too long to store.
        ImportError: when the ``server`` extra (Starlette) is not installed.

    Example::

        app = create_chat_app(
            resolve_definition=lambda context, session_id: DEFINITION,
            session_storage=lambda context: SQLiteSessionStorage("chat.db"),
            chat_memory=lambda context, session_id: SQLiteChatMemory("chat.db", session_id),
        )
    """
    return ChatApp(
        authenticate=authenticate,
        resolve_definition=resolve_definition,
        session_storage=session_storage,
        chat_memory=chat_memory,
        timeout=timeout,
        cleanup_timeout=cleanup_timeout,
        max_body_bytes=max_body_bytes,
        now=now,
        create_id=create_id,
        new_session_limit=new_session_limit,
    )
