"""Who may call a served app: one rule for every route.

With an API key, a caller must send ``Authorization: Bearer <key>`` (compared in constant
time); without one, only loopback clients (``127.0.0.0/8``, ``::1``, IPv4-mapped loopback) are
served. The rule reads the connection scope only, never the body, so it runs before anything
of the request is parsed.

A loopback client is decided by the socket peer. A request that carries a forwarding header
(``Forwarded``, ``X-Forwarded-For``, ``X-Real-IP``) came through a proxy, so its real client is
somewhere else: it is a loopback client only when a trusted proxy vouched for the address
(the app's edge marks such a scope with :data:`TRUSTED_FORWARD`).
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import TYPE_CHECKING, Final, Literal

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol._text import js_trim

from ._asgi import Receive, Scope, Send, header
from ._errors import UNAUTHORIZED, send_error

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["TRUSTED_FORWARD", "ApiKeyGate", "GateVerdict", "is_loopback", "request_class"]

#: How a caller was admitted: with the API key, or as a loopback client.
GateVerdict = Literal["api-key", "loopback"]
#: The scope key the edge sets when a trusted proxy's ``X-Forwarded-For`` named the client.
TRUSTED_FORWARD: Final = "agentskit.trusted_forward"
#: Headers only a proxy sends: a request with one is not a loopback client by its peer alone.
_FORWARDING: Final = (b"forwarded", b"x-forwarded-for", b"x-real-ip")


def request_class(app: str) -> type[Request]:
    """Starlette's ``Request``, what host authenticators receive (the ``server`` extra).

    Raises:
        ImportError: naming ``app`` and the extra, when Starlette is not installed.
    """
    try:
        from starlette.requests import Request  # noqa: PLC0415 - the server extra is optional
    except ImportError as exc:  # pragma: no cover - the dev environment has the extra
        raise ImportError(
            f"The {app} needs the 'server' extra: pip install 'agentskit-chat[server]'"
        ) from exc
    return Request


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``, or IPv4-mapped)."""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


class ApiKeyGate:
    """The authentication rule of a served app (see the module documentation).

    Args:
        api_key: The key callers must present; ``None`` serves loopback clients only.

    Raises:
        ConfigurationError: the key is blank or holds white space.
    """

    def __init__(self, api_key: str | None) -> None:
        if api_key is not None and (not api_key.strip() or any(c.isspace() for c in api_key)):
            raise ConfigurationError("The API key must be a non-empty token without spaces.")
        self._expected = None if api_key is None else api_key.encode("utf-8")

    def admit(self, scope: Scope) -> GateVerdict | None:
        """How the caller of ``scope`` is admitted, or ``None`` when it is refused."""
        if self._expected is not None:
            scheme, _, token = (header(scope, b"authorization") or "").partition(" ")
            presented = js_trim(token).encode("utf-8", "replace")
            if scheme.lower() == "bearer" and hmac.compare_digest(presented, self._expected):
                return "api-key"
            return None
        client = scope.get("client")
        host = client[0] if isinstance(client, list | tuple) and client else None
        if not (isinstance(host, str) and is_loopback(host)):
            return None
        if not scope.get(TRUSTED_FORWARD) and any(
            header(scope, name) is not None for name in _FORWARDING
        ):
            return None  # proxied: the client is not this machine's, whatever the peer
        return "loopback"

    async def refuse_app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """:meth:`refuse` as an ASGI app (what an authenticator's ``Refused`` carries)."""
        await self.refuse(scope, send)

    async def refuse(self, scope: Scope, send: Send) -> None:
        """Send the refusal: ``401 ASK_UNAUTHORIZED`` with ``www-authenticate: Bearer``."""
        await send_error(scope, send, 401, UNAUTHORIZED, extra=[(b"www-authenticate", b"Bearer")])
