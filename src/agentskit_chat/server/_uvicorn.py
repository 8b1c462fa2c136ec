"""How ``serve`` runs uvicorn: no proxy headers, and a deadline for each request's headers.

uvicorn's own defaults would trust ``X-Forwarded-For`` from ``127.0.0.1`` (rewriting the
client address before the app sees it) and would wait forever for a request's headers, as
long as each byte arrives within the keep-alive timeout: one client trickling bytes holds a
connection for as long as it likes. So ``serve`` turns uvicorn's proxy headers off (trusted
proxies are the app's own ``forwarded_allow_ips``) and uses :class:`HeaderTimeoutProtocol`:
the request line and headers must arrive within ``header_timeout`` seconds of the connection
opening (or of the previous response on a kept-alive connection), or the connection is
closed. A request's body has its own deadline in the app, and a streamed answer none.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Final

from uvicorn.protocols.http.h11_impl import H11Protocol

from agentskit_chat.errors import ConfigurationError

__all__ = [
    "DEFAULT_HEADER_TIMEOUT_S",
    "UVICORN_OPTIONS",
    "HeaderTimeoutProtocol",
    "check_header_timeout",
    "set_header_timeout",
]

#: How long a client may take to send a request's line and headers, by default.
DEFAULT_HEADER_TIMEOUT_S: Final = 10.0
#: The ``uvicorn.Config`` attribute that carries the deadline into every worker process.
_ATTRIBUTE: Final = "agentskit_header_timeout"
#: The ``uvicorn.Config`` keyword arguments of ``serve``: our protocol, no proxy headers.
UVICORN_OPTIONS: Final[dict[str, Any]] = {
    "http": "agentskit_chat.server._uvicorn:HeaderTimeoutProtocol",
    "proxy_headers": False,
}


def check_header_timeout(value: object) -> float:
    """``value`` as a header deadline in seconds.

    Raises:
        ConfigurationError: not a positive, finite number.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError("The header timeout must be a positive number of seconds.")
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError("The header timeout must be a positive number of seconds.")
    return float(value)


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's line and headers."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._header_timeout = float(getattr(config, _ATTRIBUTE, DEFAULT_HEADER_TIMEOUT_S))
        self._header_deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self._header_timeout, self._headers_late)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        waiting = self.cycle is None or self.cycle.response_complete
        if waiting and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the deadline of the first request's headers."""
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the deadline."""
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        """Stop the deadline once a request's headers are in (a new cycle started)."""
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:
            self._disarm()

    def on_response_complete(self) -> None:
        """Start the deadline of the next request on a kept-alive connection."""
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()


def set_header_timeout(config: Any, seconds: float) -> None:
    """Give a ``uvicorn.Config`` (and so every worker process started from it) the deadline.

    Raises:
        ConfigurationError: not a positive, finite number.
    """
    setattr(config, _ATTRIBUTE, check_header_timeout(seconds))
