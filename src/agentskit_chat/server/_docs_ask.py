"""The docs chat's Ask fallback: the assistant's Ask service, called in process.

A chat turn the knowledge artifact does not answer goes to the assistant's own Ask service
through its typed entry point, :meth:`~agentskit_chat.service.AskService.answer`: no HTTP hop,
no NDJSON written and read back. Each event is projected to ordered assistant content the
moment the service yields it (exactly as the Ask client adapter projects the events it reads
off the wire: same records, same citations, same limits), so a model's tokens reach the page
and the terminal as the model writes them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Final

import anyio

from agentskit_chat.ask._client import ask_failure_message
from agentskit_chat.ask._client_projection import (
    AskContentEncoder,
    ProjectedComponent,
    ProjectedDone,
    ProjectedError,
    ProjectedText,
    project_ask_event,
)
from agentskit_chat.ask._client_request import encode_ask_request_body
from agentskit_chat.assistant import Caller
from agentskit_chat.errors import AgentsKitChatError, ProtocolError
from agentskit_chat.protocol import (
    ASSISTANT_CONTENT_MAX_BYTES,
    ASSISTANT_CONTENT_MAX_RECORDS,
    AskRequest,
    decode_ask_request,
)
from agentskit_chat.runtime import (
    UNSCOPED_SESSION_ID,
    AdapterCapabilities,
    AdapterRequest,
    StreamChunk,
)
from agentskit_chat.service import AskResponse, AskService

__all__ = ["InProcessAskAdapter"]

_CAPABILITIES: Final = AdapterCapabilities(streaming=True, structured_output=True)
#: The error text when the service fails in a way it did not report itself.
_FAILED: Final = "Ask request failed."


def _error(message: str) -> StreamChunk:
    return StreamChunk("error", content=message)


class _InProcessSource:
    """One answer of the Ask service, streamed once, event by event."""

    __slots__ = ("_aborted", "_caller", "_request", "_scope", "_service", "_started")

    def __init__(self, service: AskService, caller: Caller, request: AskRequest | None) -> None:
        self._service = service
        self._caller = caller
        self._request = request
        self._aborted = False
        self._started = False
        self._scope: anyio.CancelScope | None = None

    def abort(self) -> None:
        """Stop the stream; the service's generator is closed. Never raises."""
        self._aborted = True
        if self._scope is not None:
            self._scope.cancel()

    async def stream(self) -> AsyncIterator[StreamChunk]:
        """``text`` chunks of ordered content as the service yields events, then ``done``; or
        an ``error`` chunk with the text the Ask client would show for the same response."""
        if self._started:
            raise AgentsKitChatError("An Ask source can be streamed only once.")
        self._started = True
        if self._aborted:
            return
        if self._request is None:  # what the service answers over HTTP: 400
            yield _error(ask_failure_message(400))
            return
        response: AskResponse | None = None
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._aborted:
                scope.cancel()
            response = await self._service.answer(self._caller, self._request)
        self._scope = None
        if response is None or self._aborted:
            if response is not None:
                await response.aclose()
            return
        if response.status != 200:
            await response.aclose()
            yield _error(ask_failure_message(response.status))
            return
        async with response:
            async for chunk in self._events(response):
                yield chunk
                if self._aborted:
                    return

    async def _events(self, response: AskResponse) -> AsyncIterator[StreamChunk]:
        encoder = AskContentEncoder(
            max_bytes=ASSISTANT_CONTENT_MAX_BYTES, max_records=ASSISTANT_CONTENT_MAX_RECORDS
        )
        events = response.events()
        while True:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._aborted:
                    scope.cancel()
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    event = None
            self._scope = None
            if self._aborted:
                return
            if event is None:
                yield StreamChunk("done")
                return
            try:
                projected = project_ask_event(event, None)
                if isinstance(projected, ProjectedText):
                    for record in encoder.encode_text(projected.text):
                        yield StreamChunk("text", content=record)
                elif isinstance(projected, ProjectedComponent):
                    yield StreamChunk("text", content=encoder.encode_component(projected.frame))
                elif isinstance(projected, ProjectedError):
                    yield _error(projected.message)
                    return
                elif isinstance(projected, ProjectedDone):
                    yield StreamChunk("done")
                    return
            except ProtocolError as exc:
                yield _error(exc.message)
                return


class InProcessAskAdapter:
    """A chat adapter answering through an :class:`~agentskit_chat.service.AskService` in
    process, on behalf of ``caller``: the request the Ask client would post (the projected
    conversation, the escalation, the session), decoded and passed to
    :meth:`~agentskit_chat.service.AskService.answer`; its events projected as they come.

    Session-aware: ``create_source(request)`` is
    ``create_source_for_session(request, "unscoped")``, which sends no session.
    """

    __slots__ = ("_caller", "_service")

    def __init__(self, service: AskService, caller: Caller) -> None:
        self._service = service
        self._caller = caller

    @property
    def capabilities(self) -> AdapterCapabilities:
        """Streaming, with structured output (ordered assistant content)."""
        return _CAPABILITIES

    def create_source(self, request: AdapterRequest) -> _InProcessSource:
        """``create_source_for_session(request, "unscoped")``."""
        return self.create_source_for_session(request, UNSCOPED_SESSION_ID)

    def create_source_for_session(
        self, request: AdapterRequest, session_id: str
    ) -> _InProcessSource:
        """A source answering ``request`` within ``session_id``; the request is built now."""
        body = json.loads(encode_ask_request_body(request, session_id))
        decoded = decode_ask_request(body)
        return _InProcessSource(self._service, self._caller, decoded.value if decoded.ok else None)
