"""Choosing an Ask session store from a URL, for configuration files and the command line."""

from __future__ import annotations

from typing import TypeAlias
from urllib.parse import unquote

from agentskit_chat.errors import ConfigurationError

from ._memory import MemoryAskSessionStore
from ._postgres import PostgresAskSessionStore
from ._redis import DEFAULT_PREFIX, RedisAskSessionStore
from ._sqlite import DEFAULT_TABLE, SQLiteAskSessionStore

__all__ = ["AnyAskSessionStore", "open_ask_session_store"]

#: Every store this package ships; each satisfies :class:`~agentskit_chat.service.AskSessionStore`.
AnyAskSessionStore: TypeAlias = (
    MemoryAskSessionStore | SQLiteAskSessionStore | PostgresAskSessionStore | RedisAskSessionStore
)


def _scheme(url: str) -> str:
    head, colon, _ = url.partition(":")
    return head.lower() if colon else ""


def _sqlite_path(url: str) -> str:
    # SQLAlchemy's convention: sqlite:///relative.db, sqlite:////absolute.db, sqlite:// = memory.
    rest = url[len("sqlite:") :]
    if rest in ("", "//"):
        return ":memory:"
    if not rest.startswith("///") or rest == "///":
        raise ConfigurationError("A SQLite session store URL must look like sqlite:///path.db.")
    path = unquote(rest[3:])
    if "?" in path or "#" in path:
        raise ConfigurationError("A SQLite session store URL takes no query or fragment.")
    return path


def open_ask_session_store(
    url: str,
    *,
    table: str | None = None,
    prefix: str | None = None,
    ttl_seconds: float | None = None,
) -> AnyAskSessionStore:
    """Build the Ask session store a URL names. Nothing is connected until first use.

    ======================================  ==================================================
    URL                                     Store
    ======================================  ==================================================
    ``memory:``                             :class:`MemoryAskSessionStore`
    ``sqlite:///sessions.db``               SQLite file, relative to the working directory
    ``sqlite:////var/lib/app/sessions.db``  SQLite file, absolute path
    ``sqlite://`` or ``sqlite:///:memory:`` private in-memory SQLite database
    ``postgresql://`` / ``postgres://``     :class:`PostgresAskSessionStore` (extra ``postgres``)
    ``redis://`` / ``rediss://``            :class:`RedisAskSessionStore` (extra ``redis``)
    ======================================  ==================================================

    Args:
        url: The store's URL. It may hold a password; it never appears in an error.
        table: The table name, for SQLite and PostgreSQL.
        prefix: The key prefix, for Redis.
        ttl_seconds: Expire sessions this long after their last save, for Redis.

    Raises:
        ConfigurationError: the scheme is unknown, the URL is malformed, or an option does not
            apply to the chosen backend.
        ImportError: the backend's extra is not installed.

    Example:
        >>> store = open_ask_session_store("sqlite:///sessions.db")
    """
    if not isinstance(url, str):
        raise ConfigurationError("The session store URL must be a string.")
    scheme = _scheme(url)
    if scheme in ("memory", "sqlite") and (prefix is not None or ttl_seconds is not None):
        raise ConfigurationError("prefix and ttl_seconds apply only to a Redis session store.")
    if scheme == "memory":
        if table is not None:
            raise ConfigurationError("table applies only to SQLite and PostgreSQL stores.")
        if url.lower() not in ("memory:", "memory://"):
            raise ConfigurationError("A memory session store URL is just memory:.")
        return MemoryAskSessionStore()
    if scheme == "sqlite":
        return SQLiteAskSessionStore(_sqlite_path(url), table=table or DEFAULT_TABLE)
    if scheme in ("postgresql", "postgres"):
        if prefix is not None or ttl_seconds is not None:
            raise ConfigurationError("prefix and ttl_seconds apply only to a Redis session store.")
        return PostgresAskSessionStore(url, table=table or DEFAULT_TABLE)
    if scheme in ("redis", "rediss"):
        if table is not None:
            raise ConfigurationError("table applies only to SQLite and PostgreSQL stores.")
        return RedisAskSessionStore(
            url, prefix=DEFAULT_PREFIX if prefix is None else prefix, ttl_seconds=ttl_seconds
        )
    raise ConfigurationError(
        "The session store URL scheme is not one of memory, sqlite, postgresql, redis."
    )
