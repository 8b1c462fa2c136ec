"""The chat turn client: one conversation with a chat handler over HTTP, no user interface.

Every turn is one ``client.turn.submit`` posted as JSON; the NDJSON answer is read line by line
and every snapshot goes through one :class:`~agentskit_chat.protocol.TurnSnapshotCursor`, so a
stale or repeated line never replaces a newer state. Refusals before the stream (a JSON error
body) and diagnostics inside it come back as a :class:`TurnFailure` value, never as an
exception, so a user interface can show them as they are.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal
from urllib.parse import urlsplit

import anyio
from pydantic import BaseModel, ConfigDict, Field

from agentskit_chat._drivers import require_extra
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import (
    TURN_PROTOCOL,
    TURN_PROTOCOL_VERSION,
    DiagnosticEvent,
    SnapshotEvent,
    TurnSnapshotCursor,
    decode_turn_event,
)
from agentskit_chat.protocol._decode import as_text, parse_candidate, validate_model
from agentskit_chat.runtime._messages import format_message_timestamp

if TYPE_CHECKING:
    import httpx

__all__ = [
    "BUSY",
    "INVALID_RESPONSE",
    "UNREACHABLE",
    "ChatPageWords",
    "ChatTurnClient",
    "Decision",
    "OperationKind",
    "TurnFailure",
    "TurnResult",
]

#: A turn is already running in this client: stop it first.
BUSY: Final = "CLIENT_BUSY"
#: The server could not be reached (refused, reset, timed out).
UNREACHABLE: Final = "CLIENT_UNREACHABLE"
#: The server answered something that is not the turn protocol.
INVALID_RESPONSE: Final = "CLIENT_INVALID_RESPONSE"

#: How a human decided on a tool call that waits for a confirmation.
Decision = Literal["approve", "reject"]
#: What ``payload.operation`` asks for.
OperationKind = Literal["retry", "regenerate", "edit"]

_BUSY_MESSAGE: Final = "An answer is still streaming: stop it (Escape) before sending another."
_SESSION_BUSY: Final = "SESSION_BUSY"
_RETRY_PAUSE_S: Final = 0.1
_NDJSON: Final = "application/x-ndjson"


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """Why a turn did not run or did not finish.

    Attributes:
        code: The server's code (``SESSION_BUSY``, ``CHOICE_UNAVAILABLE``, ...) or one of the
            client's own (:data:`BUSY`, :data:`UNREACHABLE`, :data:`INVALID_RESPONSE`).
        message: A sentence to show the user.
        retryable: Whether the same request may succeed later.
        status: The HTTP status of a refusal before the stream; ``None`` inside the stream or
            when no answer came.
    """

    code: str
    message: str
    retryable: bool
    status: int | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How one turn ended, as this client saw it.

    Attributes:
        snapshot: The newest snapshot the cursor holds once the turn is over (``None`` when
            the session has none yet).
        failure: Why the turn failed or was refused, if it was.
        stopped: ``True`` when :meth:`ChatTurnClient.stop` closed the stream.
        accepted: How many snapshots of this turn the cursor accepted.
    """

    snapshot: SnapshotEvent | None
    failure: TurnFailure | None = None
    stopped: bool = False
    accepted: int = 0

    @property
    def ok(self) -> bool:
        """The turn ran to its end, without a failure and without being stopped."""
        return self.failure is None and not self.stopped


class ChatPageWords(BaseModel):
    """The words of a chat as its server's ``/static/page.json`` gives them (unknown keys
    ignored; every text bounded)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    title: Annotated[str, Field(min_length=1, max_length=80)]
    subtitle: Annotated[str, Field(max_length=200)] | None = None
    welcome_title: Annotated[str | None, Field(alias="welcomeTitle", max_length=120)] = None
    welcome: Annotated[str, Field(max_length=1000)] | None = None
    suggestions: Annotated[
        tuple[Annotated[str, Field(min_length=1, max_length=200)], ...], Field(max_length=8)
    ] = ()
    placeholder: Annotated[str, Field(max_length=120)] | None = None


def _new_id() -> str:
    return uuid.uuid4().hex


def _now() -> str:
    return format_message_timestamp(datetime.now(UTC))


def _error_body(status: int, body: bytes) -> TurnFailure:
    """The failure a JSON error body describes, or a generic one for anything else."""
    try:
        error = json.loads(body)["error"]
        code, message = error["code"], error["message"]
        if isinstance(code, str) and isinstance(message, str) and code and message:
            return TurnFailure(code, message, error.get("retryable") is True, status)
    except (ValueError, KeyError, TypeError):
        pass
    return TurnFailure(
        INVALID_RESPONSE, f"The server answered HTTP {status} without a chat error.", False, status
    )


class ChatTurnClient:
    """One chat session with a chat handler (``POST``/``GET`` on ``{base_url}{endpoint}``).

    The client keeps the session id and one snapshot cursor; run one turn at a time with
    :meth:`submit`, :meth:`select`, :meth:`interact`, :meth:`decide` or :meth:`operation`,
    stop the running one with :meth:`stop`, and load a stored conversation with
    :meth:`resume`. Each turn method calls ``on_snapshot`` with every snapshot the cursor
    accepts, while the answer streams, and returns a :class:`TurnResult`. It needs httpx (the
    ``server`` extra).

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000``.
        api_key: Sent as ``Authorization: Bearer <key>`` when given.
        session_id: The session to continue; a new random one by default.
        endpoint: The chat handler's path.
        http: An ``httpx.AsyncClient`` to borrow (it is not closed); by default the client
            opens its own.
        busy_wait_s: How long a turn waits for a session that is still finishing the previous
            turn (``409 SESSION_BUSY``, retryable) before giving up.

    Raises:
        ConfigurationError: ``base_url`` is not an ``http``/``https`` URL, or ``session_id``
            is not a safe identifier.
        ImportError: httpx is not installed (names the ``server`` extra).

    Example::

        async with ChatTurnClient("http://127.0.0.1:8000") as client:
            result = await client.submit("How do I install it?")
            print(result.snapshot.payload.messages[-1].content)
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        session_id: str | None = None,
        endpoint: str = "/api/chat",
        http: httpx.AsyncClient | None = None,
        busy_wait_s: float = 5.0,
    ) -> None:
        require_extra("The terminal chat client", "tui", "httpx")
        import httpx  # noqa: PLC0415 - the server extra is optional

        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"{base_url!r} is not an http:// or https:// URL")
        self._base_url = base_url.rstrip("/")
        parts = urlsplit(self._base_url)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        try:
            self._cursor = TurnSnapshotCursor(session_id or _new_id())
        except ValueError:
            raise ConfigurationError(f"{session_id!r} is not a valid session id") from None
        self._url = self._base_url + endpoint
        headers = {"accept": f"{_NDJSON}, application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._owned = http is None
        self._http = http or httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=300.0))
        self._busy_wait_s = busy_wait_s
        self._scope: anyio.CancelScope | None = None
        self.requests = 0

    @property
    def base_url(self) -> str:
        """The server this client talks to (no trailing slash)."""
        return self._base_url

    @property
    def session_id(self) -> str:
        """The session this client continues."""
        return self._cursor.session_id

    @property
    def snapshot(self) -> SnapshotEvent | None:
        """The newest snapshot accepted so far."""
        return self._cursor.snapshot

    @property
    def running(self) -> bool:
        """Whether a turn is in progress."""
        return self._scope is not None

    def absolute_url(self, href: str) -> str:
        """``href`` resolved against the server's origin (site-relative links such as
        ``/docs/guide``), as the page resolves them, also for a chat mounted under a prefix."""
        if href.startswith("/") and not href.startswith("//"):
            return self._origin + href
        return href

    async def __aenter__(self) -> ChatTurnClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop a running turn and close the HTTP client (when the client opened it)."""
        self.stop()
        if self._owned:
            await self._http.aclose()

    def stop(self) -> bool:
        """Stop the running turn by closing its stream; ``False`` when none was running.

        The server stops the model and saves what was streamed; the turn method returns a
        :class:`TurnResult` with ``stopped`` set.
        """
        if self._scope is None:
            return False
        self._scope.cancel()
        return True

    # --- turns -----------------------------------------------------------------------------

    async def submit(
        self, text: str, *, on_snapshot: Callable[[SnapshotEvent], None] | None = None
    ) -> TurnResult:
        """Ask ``text`` (a new user message)."""
        return await self._turn({"input": text}, on_snapshot)

    async def select(
        self,
        selection: Mapping[str, Any],
        text: str,
        *,
        on_snapshot: Callable[[SnapshotEvent], None] | None = None,
    ) -> TurnResult:
        """Pick a choice: ``selection`` is the component ``select`` event (wire form), ``text``
        the choice as the user reads it (what a server that ignores selections answers)."""
        return await self._turn({"input": text, "selection": dict(selection)}, on_snapshot)

    async def interact(
        self,
        interaction: Mapping[str, Any],
        text: str,
        *,
        on_snapshot: Callable[[SnapshotEvent], None] | None = None,
    ) -> TurnResult:
        """Answer a form or a button: ``interaction`` is ``{instanceId, componentKey, event,
        value?}`` (the server checks it against the frame it showed), ``text`` what a server
        that does not know interactions answers instead."""
        return await self._turn({"input": text, "interaction": dict(interaction)}, on_snapshot)

    async def decide(
        self,
        tool_call_id: str,
        decision: Decision,
        *,
        reason: str | None = None,
        on_snapshot: Callable[[SnapshotEvent], None] | None = None,
    ) -> TurnResult:
        """Approve or reject the tool call ``tool_call_id`` that waits for a confirmation."""
        confirmation: dict[str, Any] = {"toolCallId": tool_call_id, "decision": decision}
        if reason:
            confirmation["reason"] = reason
        text = "Approve" if decision == "approve" else "Reject"
        return await self._turn({"input": text, "confirmation": confirmation}, on_snapshot)

    async def operation(
        self,
        kind: OperationKind,
        *,
        text: str | None = None,
        message_id: str | None = None,
        on_snapshot: Callable[[SnapshotEvent], None] | None = None,
    ) -> TurnResult:
        """Retry the last question, regenerate an answer, or edit a user message.

        ``edit`` needs ``message_id`` (a user message) and ``text`` (its new text);
        ``regenerate`` may name an assistant message (the last answer by default).
        """
        operation: dict[str, Any] = {"kind": kind}
        if message_id is not None:
            operation["messageId"] = message_id
        return await self._turn(
            {"input": text if text and text.strip() else f"/{kind}", "operation": operation},
            on_snapshot,
        )

    async def page(self) -> ChatPageWords | None:
        """The chat's title and words (``/static/page.json`` of a server that serves a chat
        definition), or ``None`` when the server has none or answers something else."""
        import httpx  # noqa: PLC0415 - the server extra is optional

        try:
            response = await self._http.get(self._base_url + "/static/page.json")
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        return validate_model(ChatPageWords, parse_candidate(as_text(response.content)))

    async def resume(self) -> TurnResult:
        """Load the stored conversation (``GET ?sessionId=``) into the cursor."""
        import httpx  # noqa: PLC0415 - the server extra is optional

        self.requests += 1
        try:
            response = await self._http.get(
                self._url, params={"sessionId": self.session_id}, headers=self._headers
            )
        except httpx.HTTPError:
            return TurnResult(self.snapshot, self._unreachable())
        if response.status_code != 200:
            return TurnResult(self.snapshot, _error_body(response.status_code, response.content))
        accepted = self._cursor.apply(response.content)
        if not accepted and self.snapshot is None:
            message = "The server's stored conversation is not a turn snapshot."
            return TurnResult(None, TurnFailure(INVALID_RESPONSE, message, False, 200))
        return TurnResult(self.snapshot, accepted=int(accepted))

    def _unreachable(self) -> TurnFailure:
        message = f"Could not reach the chat server at {self._base_url}."
        return TurnFailure(UNREACHABLE, message, True)

    def _event(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "protocol": TURN_PROTOCOL,
            "version": TURN_PROTOCOL_VERSION,
            "eventId": _new_id(),
            "sessionId": self.session_id,
            "turnId": _new_id(),
            "sequence": 0,
            "emittedAt": _now(),
            "event": "client.turn.submit",
            "payload": dict(payload),
        }

    async def _turn(
        self,
        payload: Mapping[str, Any],
        on_snapshot: Callable[[SnapshotEvent], None] | None,
    ) -> TurnResult:
        if self._scope is not None:
            return TurnResult(self.snapshot, TurnFailure(BUSY, _BUSY_MESSAGE, True))
        body = json.dumps(self._event(payload)).encode()
        counter = _Counter(self._cursor, on_snapshot)
        failure: TurnFailure | None = None
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                failure = await self._post(body, counter)
            finally:
                self._scope = None
        stopped = scope.cancelled_caught
        return TurnResult(self.snapshot, None if stopped else failure, stopped, counter.accepted)

    async def _post(self, body: bytes, counter: _Counter) -> TurnFailure | None:
        """Post one submission (again while the session finishes its previous turn)."""
        import httpx  # noqa: PLC0415 - the server extra is optional

        headers = {**self._headers, "content-type": "application/json"}
        with anyio.move_on_after(self._busy_wait_s) as patience:
            while True:
                self.requests += 1
                try:
                    async with self._http.stream(
                        "POST", self._url, content=body, headers=headers
                    ) as response:
                        if response.status_code != 200:
                            failure = _error_body(response.status_code, await response.aread())
                            if failure.code == _SESSION_BUSY and failure.retryable:
                                await anyio.sleep(_RETRY_PAUSE_S)
                                continue
                            return failure
                        return await self._read(response, counter)
                except httpx.HTTPError:
                    return self._unreachable()
        assert patience.cancelled_caught
        return TurnFailure(
            _SESSION_BUSY, "The session is still busy with another turn; try again.", True
        )

    async def _read(self, response: httpx.Response, counter: _Counter) -> TurnFailure | None:
        failure: TurnFailure | None = None
        async for line in response.aiter_lines():
            if not line.strip() or counter.offer(line):
                continue
            event = decode_turn_event(line).value
            if isinstance(event, DiagnosticEvent) and event.session_id == self.session_id:
                diagnostic = event.payload
                failure = TurnFailure(diagnostic.code, diagnostic.message, diagnostic.retryable)
        if failure is None and counter.accepted == 0 and self.snapshot is None:
            message = "The server's answer held no turn snapshot."
            return TurnFailure(INVALID_RESPONSE, message, True)
        error = self.snapshot.payload.error if counter.accepted and self.snapshot else None
        if failure is None and error is not None:
            failure = TurnFailure(error.code, error.message, error.retryable)
        return failure


class _Counter:
    """Offers snapshots to the cursor, counts the accepted ones and reports each."""

    __slots__ = ("_cursor", "_on_snapshot", "accepted")

    def __init__(
        self, cursor: TurnSnapshotCursor, on_snapshot: Callable[[SnapshotEvent], None] | None
    ) -> None:
        self._cursor = cursor
        self._on_snapshot = on_snapshot
        self.accepted = 0

    def offer(self, line: str) -> bool:
        """Offer one NDJSON line; ``True`` when the cursor took it as its newest snapshot."""
        if not self._cursor.apply(line):
            return False
        self.accepted += 1
        snapshot = self._cursor.snapshot
        if self._on_snapshot is not None and snapshot is not None:
            self._on_snapshot(snapshot)
        return True
