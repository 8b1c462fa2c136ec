"""Ask session stores: revisioned compare-and-set records per (site, subject, session).

Four backends satisfy :class:`~agentskit_chat.ask.AskSessionStore` with the same semantics
(one conformance suite runs against all of them): memory, SQLite (the embedded default),
PostgreSQL (extra ``postgres``) and Redis (extra ``redis``). Their drivers are imported only
when such a store is built. :func:`open_ask_session_store` picks one from a URL.
"""

from __future__ import annotations

from ._keys import check_session_key, parse_storage_key, storage_key
from ._memory import MemoryAskSessionStore
from ._open import AnyAskSessionStore, open_ask_session_store
from ._postgres import PostgresAskSessionStore
from ._redis import RedisAskSessionStore
from ._sqlite import SQLiteAskSessionStore

__all__ = [
    "AnyAskSessionStore",
    "MemoryAskSessionStore",
    "PostgresAskSessionStore",
    "RedisAskSessionStore",
    "SQLiteAskSessionStore",
    "check_session_key",
    "open_ask_session_store",
    "parse_storage_key",
    "storage_key",
]
