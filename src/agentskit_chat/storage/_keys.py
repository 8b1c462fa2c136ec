"""How a :class:`~agentskit_chat.service.SessionKey` becomes one storage key.

The reference joins ``siteId:subjectId:sessionId`` with colons, which is ambiguous because a
subject or session id may itself contain ``:`` (``a:b`` + ``c`` and ``a`` + ``b:c`` collide).
Here each part is percent-escaped (``%`` → ``%25``, ``:`` → ``%3A``) before the join, so the
mapping is injective and :func:`parse_storage_key` inverts it, while keys made of ids without
``:`` or ``%`` read exactly as the reference's (``docs:user-1:session-1``).
"""

from __future__ import annotations

from agentskit_chat.service import SessionKey

__all__ = ["check_session_key", "parse_storage_key", "storage_key"]

_SEPARATOR = ":"


def check_session_key(key: SessionKey) -> None:
    """Reject a key that no backend can store faithfully.

    Every part must be a non-empty ``str`` that encodes as UTF-8 (no lone surrogates) and holds
    no NUL character (PostgreSQL text cannot).

    Raises:
        TypeError: ``key`` is not a ``SessionKey`` or a part is not a ``str``.
        ValueError: a part is empty, holds NUL or a lone surrogate. The message never contains
            the id itself.
    """
    if not isinstance(key, SessionKey):
        raise TypeError("expected a SessionKey")
    for name, part in (
        ("site_id", key.site_id),
        ("subject_id", key.subject_id),
        ("session_id", key.session_id),
    ):
        if not isinstance(part, str):
            raise TypeError(f"SessionKey.{name} must be a str")
        if not part or "\x00" in part:
            raise ValueError(f"SessionKey.{name} must be non-empty and free of NUL characters")
        try:
            part.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"SessionKey.{name} must be valid Unicode text") from None


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


def _unescape(part: str) -> str:
    return part.replace("%3A", ":").replace("%25", "%")


def storage_key(key: SessionKey) -> str:
    """The single text key of ``key``: escaped parts joined by ``:``.

    Example:
        >>> storage_key(SessionKey("docs", "user:1", "s-1"))
        'docs:user%3A1:s-1'
    """
    return _SEPARATOR.join(_escape(p) for p in (key.site_id, key.subject_id, key.session_id))


def parse_storage_key(text: str) -> SessionKey:
    """Invert :func:`storage_key`.

    Raises:
        ValueError: ``text`` was not produced by :func:`storage_key`.
    """
    parts = text.split(_SEPARATOR)
    if len(parts) != 3:
        raise ValueError("not a session storage key")
    site_id, subject_id, session_id = (_unescape(p) for p in parts)
    return SessionKey(site_id=site_id, subject_id=subject_id, session_id=session_id)
