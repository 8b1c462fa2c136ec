"""The request an Ask client sends: the endpoint URL with its hints, and the exact body.

``docs/ask-client.md``, with history trimmed to the service's bounds.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any, Final

import ada_url

from agentskit_chat.answers import ESCALATION_METADATA_KEY
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import (
    ASK_REQUEST_PROTOCOL,
    ASK_REQUEST_VERSION,
    EscalationAnswer,
    validate_answer_envelope,
)
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.protocol._text import js_trim
from agentskit_chat.protocol._types import WireModel
from agentskit_chat.runtime import UNSCOPED_SESSION_ID, AdapterRequest

from ._client_projection import project_ask_messages, trim_ask_history

__all__ = ["encode_ask_request_body", "resolve_ask_endpoint"]

_LOCAL_BASE: Final = "http://localhost"
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_FORM_SAFE: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789*-._")


# --- the endpoint ------------------------------------------------------------------------------


def _usv(value: str) -> str:
    return value if value.isascii() else _SURROGATE.sub("\ufffd", value)


def _form_encode(value: str) -> str:
    # application/x-www-form-urlencoded as URLSearchParams writes it: space is "+", and only
    # ASCII alphanumerics and "*-._" stay as they are.
    out: list[str] = []
    for byte in _usv(value).encode("utf-8"):
        if byte in _FORM_SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def _form_decode(value: str) -> str:
    return urllib.parse.unquote_to_bytes(value.replace("+", " ")).decode("utf-8", "replace")


def _query_pairs(search: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for piece in search.removeprefix("?").split("&"):
        if piece:
            name, _, value = piece.partition("=")
            pairs.append((_form_decode(name), _form_decode(value)))
    return pairs


def _set_pair(pairs: list[tuple[str, str]], name: str, value: str) -> list[tuple[str, str]]:
    # URLSearchParams.set: the first pair of that name takes the value, later ones go.
    if not any(key == name for key, _ in pairs):
        return [*pairs, (name, value)]
    out: list[tuple[str, str]] = []
    replaced = False
    for key, item in pairs:
        if key != name:
            out.append((key, item))
        elif not replaced:
            out.append((key, value))
            replaced = True
    return out


def resolve_ask_endpoint(
    endpoint: str, *, corpus: str | None = None, persona: str | None = None
) -> str:
    """The URL a source posts to: ``endpoint`` with the ``corpus`` and ``persona`` hints.

    Each hint is set as a query parameter when it is not blank after trimming (the untrimmed
    value is sent), ``corpus`` first; the query is then re-serialized form-urlencoded (space
    as ``+``). A root-relative endpoint stays relative (path, query and fragment); an absolute
    one is returned normalized.

    Raises:
        ConfigurationError: when ``endpoint`` is neither an absolute ``http``/``https`` URL
            nor a root-relative path.

    Example:
        >>> resolve_ask_endpoint("/api/ask", corpus="registry", persona="guide")
        '/api/ask?corpus=registry&persona=guide'
    """
    if not isinstance(endpoint, str):
        raise ConfigurationError("The Ask endpoint must be a string.")
    relative = endpoint.startswith("/") and not endpoint.startswith("//")
    try:
        url = ada_url.URL(_usv(endpoint), _LOCAL_BASE) if relative else ada_url.URL(_usv(endpoint))
    except (ValueError, UnicodeError):
        url = None
    if url is None or url.protocol not in ("http:", "https:"):
        raise ConfigurationError(
            "The Ask endpoint must be an absolute http(s) URL or a root-relative path."
        )
    hints = [
        (name, value)
        for name, value in (("corpus", corpus), ("persona", persona))
        if value is not None and js_trim(value)
    ]
    if hints:
        pairs = _query_pairs(url.search)
        for name, value in hints:
            pairs = _set_pair(pairs, name, value)
        url.search = "&".join(f"{_form_encode(key)}={_form_encode(item)}" for key, item in pairs)
    return url.pathname + url.search + url.hash if relative else url.href


# --- the request -------------------------------------------------------------------------------


def _escalation(request: AdapterRequest) -> dict[str, Any] | None:
    value = request.context.metadata.get(ESCALATION_METADATA_KEY)
    if value is None:
        return None
    try:
        wire = value.to_wire() if isinstance(value, WireModel) else value
    except Exception:
        return None
    envelope = validate_answer_envelope(wire)
    return envelope.to_wire() if isinstance(envelope, EscalationAnswer) else None


def encode_ask_request_body(
    request: AdapterRequest, session_id: str = UNSCOPED_SESSION_ID
) -> bytes:
    """The exact body a source posts for ``request`` (``agentskit.chat.ask`` v1, UTF-8).

    Keys in order: ``protocol``, ``version``, ``sessionId`` (left out for the ``unscoped``
    session), ``messages`` (:func:`project_ask_messages`, then :func:`trim_ask_history`), and
    ``deterministic`` when ``request.context.metadata["agentskit.chat.escalation"]`` holds a
    valid answer envelope whose outcome is ``escalation`` (anything else there is ignored).
    """
    body: dict[str, Any] = {"protocol": ASK_REQUEST_PROTOCOL, "version": ASK_REQUEST_VERSION}
    if session_id != UNSCOPED_SESSION_ID:
        body["sessionId"] = session_id
    projected = [
        message
        for message in project_ask_messages(request.messages)
        if message["role"] == "user" or message["content"]
    ]
    history = trim_ask_history(projected)
    body["messages"] = [message.to_wire() for message in history]
    escalation = _escalation(request)
    if escalation is not None:
        body["deterministic"] = escalation
    return js_stringify(body).encode("utf-8")
