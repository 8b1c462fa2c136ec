"""What every store does the same way: argument checks, encoding and decoding records, errors."""

from __future__ import annotations

from typing import NoReturn

from agentskit_chat.errors import StorageError
from agentskit_chat.protocol import AskSessionRecord, Decoded, decode_ask_session_record
from agentskit_chat.service import SessionKey

from ._keys import check_session_key

__all__ = [
    "check_save",
    "closed_error",
    "decode_record",
    "failed_error",
    "invalid_error",
    "unavailable_error",
]


def check_save(key: SessionKey, record: AskSessionRecord, expected_revision: int) -> str:
    """Validate the arguments of ``save`` and return the record's compact JSON.

    Raises:
        TypeError: ``record`` is not an ``AskSessionRecord`` or ``expected_revision`` is not an
            ``int``.
        ValueError: ``expected_revision`` is negative, or ``record.revision`` is not
            ``expected_revision + 1`` (a programming error: the caller skipped a revision).
    """
    check_session_key(key)
    if not isinstance(record, AskSessionRecord):
        raise TypeError("expected an AskSessionRecord")
    if type(expected_revision) is not int:
        raise TypeError("expected_revision must be an int")
    if expected_revision < 0:
        raise ValueError("expected_revision must be >= 0")
    if record.revision != expected_revision + 1:
        raise ValueError("record.revision must be expected_revision + 1")
    return record.to_json()


def decode_record(
    backend: str, text: str | bytes, *, revision: int | str | bytes | None = None
) -> AskSessionRecord:
    """Decode a stored record; ``revision`` is the backend's own copy of it, when it keeps one.

    Raises:
        StorageError: the stored value is not a valid record, or disagrees with ``revision``
            (not retryable; the message names the backend only).
    """
    result = decode_ask_session_record(text)
    if not isinstance(result, Decoded):
        raise invalid_error(backend)
    record = result.value
    if revision is not None:
        try:
            matches = int(revision) == record.revision
        except ValueError:
            matches = False
        if not matches:
            raise invalid_error(backend)
    return record


#: What the errors call an Ask session store; the chat stores pass their own name.
ASK_STORE = "Ask session store"


def invalid_error(backend: str, store: str = ASK_STORE) -> StorageError:
    """The error for a stored value that is not a valid record."""
    return StorageError(f"The {backend} {store} holds an invalid record.", retryable=False)


def unavailable_error(backend: str, store: str = ASK_STORE) -> StorageError:
    """The error for a transient failure (unreachable server, lock timeout)."""
    return StorageError(f"The {backend} {store} is unavailable.", retryable=True)


def failed_error(backend: str, store: str = ASK_STORE) -> StorageError:
    """The error for a failure that a retry will not fix (permissions, schema)."""
    return StorageError(f"The {backend} {store} failed.", retryable=False)


def closed_error(backend: str, store: str = ASK_STORE) -> NoReturn:
    """Raise the error for a store used after ``aclose``."""
    raise StorageError(f"The {backend} {store} is closed.", retryable=False)
