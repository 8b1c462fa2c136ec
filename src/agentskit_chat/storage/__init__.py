"""Ask session stores: revisioned compare-and-set records per (site, subject, session).

Four backends satisfy :class:`~agentskit_chat.service.AskSessionStore` with the same semantics
(one conformance suite runs against all of them): memory, SQLite (the embedded default),
PostgreSQL (extra ``postgres``) and Redis (extra ``redis``). Their drivers are imported only
when such a store is built. :func:`open_ask_session_store` picks one from a URL.

:class:`SQLiteChatMemory`, :class:`PostgresChatMemory` and :class:`RedisChatMemory` keep a chat
conversation's messages (the :class:`~agentskit_chat.runtime.ChatMemory` port), writing only
what changed since the memory last loaded or saved.
:class:`SQLiteSessionStorage`, :class:`PostgresSessionStorage` and :class:`RedisSessionStorage`
keep chat session snapshots (the :class:`~agentskit_chat.conversation.SessionStorage` port,
compare-and-set on the cursor) in a SQLite file, a PostgreSQL table or Redis hashes.
:func:`open_chat_stores` builds all three kinds on one backend from a URL, sharing its
connections, for a chat server whose workers share everything.
"""

from __future__ import annotations

from ._chat_stores import ChatStores, open_chat_stores
from ._keys import check_session_key, parse_storage_key, storage_key
from ._memory import MemoryAskSessionStore
from ._open import AnyAskSessionStore, open_ask_session_store
from ._postgres import PostgresAskSessionStore
from ._postgres_memory import PostgresChatMemory
from ._postgres_session import PostgresSessionStorage
from ._redis import RedisAskSessionStore
from ._redis_memory import RedisChatMemory
from ._redis_session import RedisSessionStorage
from ._sqlite import SQLiteAskSessionStore
from ._sqlite_memory import SQLiteChatMemory
from ._sqlite_session import SQLiteSessionStorage

__all__ = [
    "AnyAskSessionStore",
    "ChatStores",
    "MemoryAskSessionStore",
    "PostgresAskSessionStore",
    "PostgresChatMemory",
    "PostgresSessionStorage",
    "RedisAskSessionStore",
    "RedisChatMemory",
    "RedisSessionStorage",
    "SQLiteAskSessionStore",
    "SQLiteChatMemory",
    "SQLiteSessionStorage",
    "check_session_key",
    "open_ask_session_store",
    "open_chat_stores",
    "parse_storage_key",
    "storage_key",
]
