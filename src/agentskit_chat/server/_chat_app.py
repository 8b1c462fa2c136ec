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

The parts live beside this module: the refusals and their bodies (``_chat_failures``), reading
and routing a submission (``_chat_submission``, with ``_chat_operations``, ``_chat_approvals``,
``_chat_choices``, ``_chat_actions`` and ``_chat_interactions``), the running turn
(``_chat_turn``), its stream (``_chat_stream``) and its lease (``_chat_leases``).
"""

from __future__ import annotations

import inspect
import math
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias, TypeVar

import anyio
import anyio.abc

from agentskit_chat.conversation import ChatDefinition, ChatSession, SessionStorage
from agentskit_chat.conversation import resume_chat_session as _resume
from agentskit_chat.conversation._factory import check_memory_for
from agentskit_chat.errors import ChatHandlerError, StorageError
from agentskit_chat.protocol._json import MAX_SAFE_INTEGER
from agentskit_chat.protocol._types import build_wire_models, is_safe_id
from agentskit_chat.runtime import ChatController, ChatMemory
from agentskit_chat.service import Authenticated, AuthResult, RateLimitDecision, Refused

from ._asgi import Receive, Scope, Send, handle_non_http, header, query_params, send_response
from ._auth import request_class
from ._body import RequestBody
from ._chat_failures import (
    JSON_HEADERS,
    Failure,
    HostRefused,
    Reason,
    aborted,
    classify,
    no_body,
    refusal,
    send_failure,
)
from ._chat_leases import Lease, release_late
from ._chat_leases import give_back as _give_back
from ._chat_stream import SessionLines
from ._chat_submission import read_submission, route_submission
from ._chat_turn import Abort, Turn
from ._history import compact_history
from ._observe import TurnEvents, note_error

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


_INVALID_CONFIG: Final = "Chat handler configuration is invalid."
_BUSY: Final = "Another turn is active for this session."
_COMPLETED: Final = "This turn already completed."
_INDETERMINATE: Final = "This turn already ended without a known outcome; start a new turn."
_SESSIONS_LIMITED: Final = "Too many new conversations; wait before starting another."
_INVALID_QUERY: Final = "The query must name one valid sessionId."


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


def _refuse_replay(session: ChatSession, turn_id: str) -> None:
    """Refuse a turn that already finished, saying whether it completed."""
    finished = next((turn for turn in session.terminal_turns if turn.turn_id == turn_id), None)
    if finished is not None:
        message = _COMPLETED if finished.outcome == "completed" else _INDETERMINATE
        raise refusal(409, "SESSION_BUSY", message)


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
        self._lines = SessionLines(self._create_id, self._now)

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
            await send_failure(
                scope,
                send,
                refusal(405, "REQUEST_METHOD_NOT_ALLOWED", "Only GET and POST are supported."),
            )
            return
        content_type = (header(scope, b"content-type") or "").lower()
        if not content_type.startswith("application/json"):
            await send_failure(
                scope,
                send,
                refusal(
                    415, "REQUEST_UNSUPPORTED_MEDIA_TYPE", "Content-Type must be application/json."
                ),
            )
            return
        abort = Abort()
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
        except HostRefused as refused:
            await refused.response(scope, no_body, send)
            return
        except TimeoutError:
            await send_failure(scope, send, aborted("timeout"))
            return
        except Exception as error:
            note_error(scope, error)
            await send_failure(scope, send, classify(error))
            return
        try:
            await send_response(scope, send, 200, list(JSON_HEADERS), line.encode())
        except OSError:
            return

    async def _read_snapshot(self, scope: Scope) -> str:
        context = await self._admit(scope)
        session_id = query_params(scope).get("sessionId")
        if session_id is None or not is_safe_id(session_id):
            raise refusal(400, "REQUEST_INVALID_QUERY", _INVALID_QUERY)
        definition = await _resolve(self._resolve_definition(context, session_id))
        storage = await _resolve(self._session_storage(context))
        session = await _resume(definition, session_id=session_id, storage=storage, now=self._now)
        memory = await self._memory_for(context, session_id, definition)
        try:
            loaded = tuple(await memory.load()) if memory is not None else ()
        finally:
            await self.close_memory(memory)
        messages = compact_history(loaded or tuple(definition.chat.initial_messages))
        return self._lines.resumed(session_id, session, messages)

    async def _admit(self, scope: Scope) -> Any:
        """The trusted context ``authenticate`` gives this request (``None`` without one)."""
        if self._authenticate is None:
            return None
        verdict = await _resolve(self._authenticate(self._request_class(scope)))
        if isinstance(verdict, Refused):
            raise HostRefused(verdict.response)
        if not isinstance(verdict, Authenticated):
            raise TypeError("authenticate must return Authenticated or Refused")
        return verdict.context

    async def _watch(self, body: RequestBody, abort: Abort, deadline: float) -> None:
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
        abort: Abort,
        group: anyio.abc.TaskGroup,
    ) -> None:
        turn: Turn | Exception | None = None
        start = anyio.current_time()
        leases: list[Lease] = []
        with anyio.CancelScope() as prestream:

            def cancel_prestream(_reason: Reason) -> None:
                prestream.cancel()

            abort.listeners.append(cancel_prestream)
            try:
                turn = await self._prepare(scope, body, abort, group, leases)
            except Exception as error:
                turn = error
            finally:
                abort.listeners.remove(cancel_prestream)
        if isinstance(turn, HostRefused):
            await turn.response(scope, no_body, send)
            return
        if abort.reason is not None or turn is None:
            # Deadline or client gone before the stream started; a turn made meanwhile is
            # already being cleaned up by its abort listener.
            await send_failure(scope, send, aborted(abort.reason or "timeout"))
        elif isinstance(turn, Exception):
            note_error(scope, turn)
            await send_failure(scope, send, classify(turn))
        else:
            self.watch.turn_started()
            group.start_soon(turn.run)
            await self._lines.run(send, turn, abort)
            elapsed = anyio.current_time() - start
            self.watch.turn_finished(
                turn.outcome or "cancelled", elapsed, error=turn.error, code=turn.code
            )
        for lease in leases:
            await release_late(lease, bound=self.cleanup_timeout, now=self._now, watch=self.watch)

    async def _prepare(
        self,
        scope: Scope,
        body: RequestBody,
        abort: Abort,
        group: anyio.abc.TaskGroup,
        leases: list[Lease],
    ) -> Turn:
        context = await self._admit(scope)
        submission, candidate = await read_submission(body)
        session_id = submission.session_id
        definition = await _resolve(self._resolve_definition(context, session_id))
        storage = await _resolve(self._session_storage(context))
        session = await _resume(definition, session_id=session_id, storage=storage, now=self._now)
        turn_id = submission.turn_id
        _refuse_replay(session, turn_id)
        if session.get_cursor() == 0:
            await self._admit_new_session(scope)  # nothing stored yet: the claim creates it
        before = session.active_turn
        lease = Lease(
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
            raise refusal(409, "SESSION_BUSY", _BUSY, retryable=True)
        memory: ChatMemory | None = None
        try:
            memory = await self._memory_for(context, session_id, definition)
            loaded = tuple(await memory.load()) if memory is not None else ()
            # The newest messages within fixed bounds: the turn saves what it starts from.
            messages = compact_history(loaded or tuple(definition.chat.initial_messages))
            route = route_submission(definition, session_id, submission, candidate, messages)
            config = session.update_chat(
                definition.chat.with_changes(memory=None, initial_messages=messages)
            )
            controller = ChatController(config)
            operation, lineage = route.operation(session, controller)
            return Turn(
                self,
                submission=route.submission,
                session=session,
                controller=controller,
                memory=memory,
                reservation=route.reservation,
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
            raise Failure(
                429,
                "SESSION_RATE_LIMITED",
                _SESSIONS_LIMITED,
                retryable=True,
                retry_after=max(1, decision.retry_after_seconds or 1),
            )

    async def _memory_for(
        self, context: Any, session_id: str, definition: ChatDefinition
    ) -> ChatMemory | None:
        memory = definition.chat.memory
        if self._chat_memory is not None:
            memory = await _resolve(self._chat_memory(context, session_id)) or memory
        if memory is not None:
            check_memory_for(memory, session_id)  # one conversation's messages, never another's
        return memory

    async def give_back(
        self, session: ChatSession, turn_id: str, before: object, lease: Lease | None = None
    ) -> None:
        """Clear a lease this request claimed for a turn that never ran (bounded); when the
        store fails, ``lease`` is given back after the response."""
        await _give_back(session, turn_id, before, lease, bound=self.cleanup_timeout)

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
    build_wire_models()  # a server validates on several threads: nothing is built lazily
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
