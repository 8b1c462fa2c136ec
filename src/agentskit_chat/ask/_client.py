"""The Ask client adapter: a chat adapter that answers through an Ask service over HTTP.

``docs/ask-client.md``. A source posts the projected conversation (plus the
deterministic plane's escalation, when there is one) to the service, reads the response as Ask
NDJSON or plain text, and streams it as ordered assistant content: one ``text`` chunk per
record, whose concatenation is a valid, bounded ``agentskit.chat.content/1`` envelope. It
uses httpx (the ``server`` extra), imported when an adapter is created.
"""

from __future__ import annotations

import functools
import logging
import math
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.lowlevel

from agentskit_chat.errors import AgentsKitChatError, ConfigurationError, ProtocolError
from agentskit_chat.protocol import ASSISTANT_CONTENT_MAX_BYTES, ASSISTANT_CONTENT_MAX_RECORDS
from agentskit_chat.runtime import (
    UNSCOPED_SESSION_ID,
    AdapterCapabilities,
    AdapterRequest,
    StreamChunk,
)

from ._client_projection import (
    AskContentEncoder,
    ProjectedComponent,
    ProjectedDone,
    ProjectedError,
    ProjectedText,
    ProjectTool,
    project_ask_event,
)
from ._client_request import encode_ask_request_body, resolve_ask_endpoint
from ._client_response import AskResponseReader, ResponseItem

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ASK_CONNECT_TIMEOUT_MESSAGE",
    "ASK_CONNECT_TIMEOUT_S",
    "ASK_REQUEST_FAILED_MESSAGE",
    "AskAdapter",
    "AskSource",
    "create_ask_adapter",
]

#: How long a source waits for the response headers (seconds); the body has no deadline.
ASK_CONNECT_TIMEOUT_S: Final = 30.0
#: The error text when the response headers did not arrive within the connection deadline.
ASK_CONNECT_TIMEOUT_MESSAGE: Final = "The Ask service did not respond in time."
#: The error text of a transport failure (the network error itself is never shown).
ASK_REQUEST_FAILED_MESSAGE: Final = "Ask request failed."

_CAPABILITIES: Final = AdapterCapabilities(streaming=True, structured_output=True)
_CLOSE_GRACE_S: Final = 5.0
_logger = logging.getLogger(__name__)


def _httpx() -> Any:
    try:
        import httpx  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(
            "The Ask client needs the 'server' extra: pip install 'agentskit-chat[server]'"
        ) from exc
    return httpx


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    context: ssl.SSLContext = _httpx().create_ssl_context()
    return context


# --- the source -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Settings:
    url: str
    headers: dict[str, str]
    client: httpx.AsyncClient | None
    connect_timeout_s: float
    project_tool: ProjectTool | None
    max_content_bytes: int
    max_records: int
    ssl_context: ssl.SSLContext | None


def ask_failure_message(status: int) -> str:
    """The ``error`` chunk text of an Ask response with HTTP status ``status`` (not 2xx)."""
    return f"Ask request failed ({status})."


def _error(message: str) -> StreamChunk:
    return StreamChunk("error", content=message)


def _failed(exc: BaseException) -> str:
    # Transport errors may name hosts or echo data: only their type is logged, never shown.
    _logger.warning("Ask request failed: %s", type(exc).__name__)
    return ASK_REQUEST_FAILED_MESSAGE


class AskSource:
    """One answer from the Ask service, streamed once; see :func:`create_ask_adapter`.

    ``stream()`` yields one ``text`` chunk per ordered-content record, then ``done``; or an
    ``error`` chunk that ends the turn. ``abort()`` (called on the event loop's thread) stops
    it: a source aborted before or while connecting yields nothing, and an aborted read ends
    the stream silently. The response is closed whenever the stream ends, is closed by its
    consumer, or is cancelled.
    """

    __slots__ = ("_aborted", "_body", "_scope", "_settings", "_started")

    def __init__(self, settings: _Settings, body: bytes) -> None:
        self._settings = settings
        self._body = body
        self._aborted = False
        self._started = False
        self._scope: anyio.CancelScope | None = None

    @property
    def body(self) -> bytes:
        """The request body this source posts."""
        return self._body

    def abort(self) -> None:
        """Stop the stream; an in-flight connection or read is cancelled. Never raises."""
        self._aborted = True
        if self._scope is not None:
            self._scope.cancel()

    async def stream(self) -> AsyncIterator[StreamChunk]:
        """The chunks of the answer (see the class docstring).

        Raises:
            AgentsKitChatError: when the source is streamed a second time.
        """
        if self._started:
            raise AgentsKitChatError("An Ask source can be streamed only once.")
        self._started = True
        if self._aborted:
            return
        settings = self._settings
        owned = settings.client is None
        client: httpx.AsyncClient = (
            _httpx().AsyncClient(timeout=None, verify=settings.ssl_context)
            if settings.client is None
            else settings.client
        )
        response: httpx.Response | None = None
        final: StreamChunk | None = None
        try:
            try:
                response = await self._connect(client)
            except Exception as exc:
                final = _error(_failed(exc))
            if response is None:
                if final is None and not self._aborted:
                    final = _error(ASK_CONNECT_TIMEOUT_MESSAGE)
            elif not 200 <= response.status_code < 300:
                final = _error(ask_failure_message(response.status_code))
            else:
                reader = AskResponseReader(response.headers.get("content-type"))
                encoder = AskContentEncoder(
                    max_bytes=settings.max_content_bytes, max_records=settings.max_records
                )
                body = response.aiter_bytes()
                while final is None:
                    try:
                        data = await self._read(body)
                    except Exception as exc:
                        final = _error(_failed(exc))
                        break
                    if self._aborted:
                        return
                    if data is None:
                        reader.end()
                    else:
                        reader.feed(data)
                    while final is None and not reader.needs_data:
                        for item in reader.take():
                            chunks, final = self._project(item, encoder)
                            for chunk in chunks:
                                yield chunk
                                if self._aborted:
                                    return
                            if final is not None:
                                break
                        # Yield to the loop between batches of at most 4,096 lines.
                        await anyio.lowlevel.checkpoint()
                    if data is None and final is None:
                        final = StreamChunk("done")
            await _close(response, client if owned else None)
            response = None
            owned = False
            if final is not None and not self._aborted:
                yield final
        finally:
            await _close(response, client if owned else None)

    async def _connect(self, client: httpx.AsyncClient) -> httpx.Response | None:
        """The response once its headers arrived; ``None`` when aborted or past the deadline."""
        settings = self._settings
        request = client.build_request(
            "POST",
            settings.url,
            content=self._body,
            headers=settings.headers,
            # The connection deadline below is the only time limit: a slow body is fine.
            timeout=_httpx().Timeout(None),
        )
        deadline = anyio.current_time() + settings.connect_timeout_s
        with anyio.CancelScope(deadline=deadline) as scope:
            self._scope = scope
            if self._aborted:
                scope.cancel()
            try:
                return await client.send(request, stream=True)
            finally:
                self._scope = None
        return None

    async def _read(self, body: AsyncIterator[bytes]) -> bytes | None:
        """The next piece of the body; ``None`` at its end or when aborted."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._aborted:
                scope.cancel()
            try:
                return await body.__anext__()
            except StopAsyncIteration:
                return None
            finally:
                self._scope = None
        return None

    def _project(
        self, item: ResponseItem, encoder: AskContentEncoder
    ) -> tuple[list[StreamChunk], StreamChunk | None]:
        """The chunks for one item, and the chunk that ends the stream, if it does."""
        chunks: list[StreamChunk] = []
        try:
            if isinstance(item, str):
                chunks.extend(StreamChunk("text", content=r) for r in encoder.encode_text(item))
                return chunks, None
            projected = project_ask_event(item, self._settings.project_tool)
            if isinstance(projected, ProjectedText):
                records = encoder.encode_text(projected.text)
                chunks.extend(StreamChunk("text", content=record) for record in records)
            elif isinstance(projected, ProjectedComponent):
                record = encoder.encode_component(projected.frame)
                chunks.append(StreamChunk("text", content=record))
            elif isinstance(projected, ProjectedError):
                return chunks, _error(projected.message)
            elif isinstance(projected, ProjectedDone):
                return chunks, StreamChunk("done")
        except ProtocolError as exc:
            return chunks, _error(exc.message)
        except Exception as exc:
            return chunks, _error(_failed(exc))
        return chunks, None


async def _close(response: httpx.Response | None, client: httpx.AsyncClient | None) -> None:
    # Shielded: closing must finish even when the stream is being cancelled.
    if response is None and client is None:
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_GRACE_S):
        if response is not None:
            await response.aclose()
        if client is not None:
            await client.aclose()


# --- the adapter -------------------------------------------------------------------------------


class AskAdapter:
    """A chat adapter backed by an Ask service; build it with :func:`create_ask_adapter`.

    Session-aware: ``create_source(request)`` is
    ``create_source_for_session(request, "unscoped")``, which sends no ``sessionId``.
    """

    __slots__ = ("_settings",)

    def __init__(self, settings: _Settings) -> None:
        self._settings = settings

    @property
    def capabilities(self) -> AdapterCapabilities:
        """Streaming, with structured output (ordered assistant content)."""
        return _CAPABILITIES

    @property
    def endpoint_url(self) -> str:
        """The URL sources post to, hints included."""
        return self._settings.url

    def create_source(self, request: AdapterRequest) -> AskSource:
        """``create_source_for_session(request, "unscoped")``."""
        return self.create_source_for_session(request, UNSCOPED_SESSION_ID)

    def create_source_for_session(self, request: AdapterRequest, session_id: str) -> AskSource:
        """A source answering ``request`` within ``session_id`` (sent as ``sessionId``).

        The body is built now (see :func:`encode_ask_request_body`); nothing is sent until
        the source is streamed.
        """
        return AskSource(self._settings, encode_ask_request_body(request, session_id))


def _positive(value: object, name: str, *, most: float) -> None:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not 0 < value <= most
    ):
        raise ConfigurationError(f"The {name} option is out of range.")


def create_ask_adapter(
    *,
    endpoint: str,
    corpus: str | None = None,
    persona: str | None = None,
    headers: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
    connect_timeout_s: float = ASK_CONNECT_TIMEOUT_S,
    project_tool: ProjectTool | None = None,
    max_content_bytes: int = ASSISTANT_CONTENT_MAX_BYTES,
    max_records: int = ASSISTANT_CONTENT_MAX_RECORDS,
) -> AskAdapter:
    """An adapter that answers each turn through the Ask service at ``endpoint``.

    Args:
        endpoint: An absolute ``http``/``https`` URL, or a root-relative path (then
            ``http_client`` must have a ``base_url``).
        corpus: A hint sent as the ``corpus`` query parameter (the service only accepts the
            site's own corpus); ignored when blank.
        persona: A hint sent as the ``persona`` query parameter, under the same rule.
        headers: Extra request headers, for example ``authorization``; ``content-type`` is
            always ``application/json``.
        http_client: The httpx client to use (its timeouts are not used: only the connection
            deadline applies). By default each answer uses its own short-lived client.
        connect_timeout_s: How long to wait for the response headers. Once they arrive the
            deadline is cleared: a slow body is never cut off.
        project_tool: A hook turning Ask ``tool`` events other than ``answer`` and ``cite``
            into component render frames; invalid results and errors are ignored.
        max_content_bytes: The UTF-8 size limit of one answer's ordered content (at most
            262,144).
        max_records: The record limit of one answer's ordered content (at most 512).

    Raises:
        ConfigurationError: when an option is invalid.
        ImportError: when httpx (the ``server`` extra) is not installed.

    Example:
        >>> adapter = create_ask_adapter(endpoint="https://ask.example/v1/ask", corpus="docs")
        >>> adapter.endpoint_url
        'https://ask.example/v1/ask?corpus=docs'
    """
    httpx = _httpx()
    for name, hint in (("corpus", corpus), ("persona", persona)):
        if hint is not None and not isinstance(hint, str):
            raise ConfigurationError(f"The {name} option must be a string.")
    url = resolve_ask_endpoint(endpoint, corpus=corpus, persona=persona)
    if http_client is not None and not isinstance(http_client, httpx.AsyncClient):
        raise ConfigurationError("The http_client option must be an httpx.AsyncClient.")
    if url.startswith("/") and (http_client is None or not str(http_client.base_url)):
        raise ConfigurationError(
            "A root-relative Ask endpoint needs an http_client with a base_url."
        )
    _positive(connect_timeout_s, "connect_timeout_s", most=math.inf)
    for name, limit, most in (
        ("max_content_bytes", max_content_bytes, ASSISTANT_CONTENT_MAX_BYTES),
        ("max_records", max_records, ASSISTANT_CONTENT_MAX_RECORDS),
    ):
        if not isinstance(limit, int):
            raise ConfigurationError(f"The {name} option must be an integer.")
        _positive(limit, name, most=most)
    if project_tool is not None and not callable(project_tool):
        raise ConfigurationError("The project_tool option must be callable.")
    merged = dict(_header_items(headers))
    merged["content-type"] = "application/json"
    return AskAdapter(
        _Settings(
            url=url,
            headers=merged,
            client=http_client,
            connect_timeout_s=float(connect_timeout_s),
            project_tool=project_tool,
            max_content_bytes=max_content_bytes,
            max_records=max_records,
            # Loading the CA bundle takes tens of milliseconds: never on the event loop.
            ssl_context=_ssl_context() if http_client is None else None,
        )
    )


def _header_items(headers: Mapping[str, str] | None) -> list[tuple[str, str]]:
    if headers is None:
        return []
    if not isinstance(headers, Mapping):
        raise ConfigurationError("The headers option must be a mapping of strings.")
    items: list[tuple[str, str]] = []
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise ConfigurationError("The headers option must be a mapping of strings.")
        if name.lower() != "content-type":
            items.append((name.lower(), value))
    return items
