"""Creating, resuming and resolving chat sessions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from agentskit_chat.actions import ConfirmationChangeObserver
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import Decoded, SessionSnapshot, decode_session_snapshot
from agentskit_chat.protocol._json import MAX_SAFE_INTEGER
from agentskit_chat.protocol._text import base36
from agentskit_chat.protocol._types import is_safe_id
from agentskit_chat.runtime import ChatMemory

from ._compile import compile_conversation
from ._definition import ChatDefinition
from ._session import ChatSession, PersistErrorObserver, Restored, SessionClock, epoch_ms
from ._storage import SessionStorage

__all__ = ["create_chat_session", "resolve_chat_session", "resume_chat_session"]

_INCOMPATIBLE_SNAPSHOT: Final = "Session snapshot is incompatible with this chat definition."
_INCOMPATIBLE_METADATA: Final = (
    "Session conversation metadata is incompatible with this chat definition."
)
_INVALID_INTERACTION_HANDLER: Final = "Chat interaction handler must be callable."


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _revision(definition: ChatDefinition) -> int:
    revision = definition.revision
    if type(revision) is not int or not 1 <= revision <= MAX_SAFE_INTEGER:
        raise ConfigurationError("Chat definition revision is invalid.")
    definition.manifest  # noqa: B018 -- checks ``components`` when the session is created
    return revision


def create_chat_session(
    definition: ChatDefinition,
    *,
    session_id: str | None = None,
    snapshot: SessionSnapshot | None = None,
    storage: SessionStorage | None = None,
    now: SessionClock | None = None,
    on_persist_error: PersistErrorObserver | None = None,
    on_confirmation_change: ConfirmationChangeObserver | None = None,
) -> ChatSession:
    """A session of ``definition``, new or restored from a decoded ``snapshot``.

    Args:
        definition: The chat definition.
        session_id: The session's id; by default the snapshot's, or
            ``<definition id>:<current epoch milliseconds in base 36>``.
        snapshot: A decoded session snapshot to restore (see ``resume_chat_session``).
        storage: Where :meth:`ChatSession.persist` saves; without it, saves only advance the
            cursor.
        now: The clock (aware ``datetime``) for default ids, ``updatedAt`` and turn leases.
        on_persist_error: Told about every failed save that dispatch scheduled.
        on_confirmation_change: Told every confirmation record (with its ``session_id``)
            after each saved change of the session's confirmations; isolated, so an observer
            that raises changes nothing.

    Raises:
        ConfigurationError: "Chat definition revision is invalid.", "Chat definition identity
            is invalid." (the id is not a safe identifier), "Chat session identity is
            invalid.", "Session snapshot is incompatible with this chat definition." (the
            snapshot names another session, definition or revision), "Session conversation
            metadata is incompatible with this chat definition." (the snapshot has a
            conversation and the definition none), "Chat interaction handler must be
            callable.", or a conversation compilation error.
    """
    clock = now or _utc_now
    revision = _revision(definition)
    if not is_safe_id(definition.id):
        raise ConfigurationError("Chat definition identity is invalid.")
    if session_id is None:
        session_id = (
            snapshot.session_id
            if snapshot is not None
            else f"{definition.id}:{base36(epoch_ms(clock()))}"
        )
    if not is_safe_id(session_id):
        raise ConfigurationError("Chat session identity is invalid.")
    restored = Restored()
    if snapshot is not None:
        if (
            snapshot.session_id != session_id
            or snapshot.definition_id != definition.id
            or snapshot.definition_revision != revision
        ):
            raise ConfigurationError(_INCOMPATIBLE_SNAPSHOT)
        restored = Restored(
            cursor=snapshot.cursor,
            exists=True,
            active_turn=snapshot.active_turn,
            terminal_turns=snapshot.terminal_turns or (),
            confirmations=snapshot.confirmations,
            conversation=snapshot.conversation,
        )
    compiled = compile_conversation(definition)
    if compiled is None and snapshot is not None and snapshot.conversation is not None:
        raise ConfigurationError(_INCOMPATIBLE_METADATA)
    on_interaction = definition.on_interaction
    if on_interaction is not None and not callable(on_interaction):
        raise ConfigurationError(_INVALID_INTERACTION_HANDLER)
    return ChatSession(
        session_id=session_id,
        definition_id=definition.id,
        definition_revision=revision,
        chat=definition.chat,
        compiled=compiled,
        restored=restored,
        storage=storage,
        now=clock,
        on_persist_error=on_persist_error,
        on_confirmation_change=on_confirmation_change,
        on_interaction=on_interaction,
    )


_FOREIGN_MEMORY: Final = "The chat memory belongs to another conversation."


def check_memory_for(memory: ChatMemory, session_id: str) -> None:
    """Refuse a memory that says it holds another conversation than ``session_id``.

    Raises:
        ConfigurationError: ``memory.conversation_id`` exists and is not ``session_id``.
    """
    conversation = getattr(memory, "conversation_id", session_id)
    if conversation != session_id:
        raise ConfigurationError(_FOREIGN_MEMORY)


async def resume_chat_session(
    definition: ChatDefinition,
    *,
    session_id: str,
    storage: SessionStorage,
    now: SessionClock | None = None,
    on_persist_error: PersistErrorObserver | None = None,
    memory: ChatMemory | None = None,
    on_confirmation_change: ConfirmationChangeObserver | None = None,
) -> ChatSession:
    """The session ``session_id`` as stored, or a new one when storage has none.

    A new session's first save only creates the record (it fails if another client created it
    meanwhile). A stored version 0 record is upgraded.

    With ``memory``, the session's messages come along: ``session.chat`` uses that memory and
    starts from the messages it holds (the definition's ``initial_messages`` when it holds
    none), so a controller built from ``session.chat`` continues the conversation and saves
    each turn to it. A memory whose ``conversation_id`` is another session's is refused.

    ``on_persist_error`` and ``on_confirmation_change`` are as for :func:`create_chat_session`,
    so a resumed session keeps its confirmation audit observer.

    Raises:
        ConfigurationError: the stored record is not a valid snapshot ("Session snapshot is not
            valid JSON.", "Session snapshot uses an unsupported version.", "Session snapshot
            payload is invalid."), it belongs to another session, definition or revision
            ("Session snapshot is incompatible with this chat definition."), or any error of
            :func:`create_chat_session`, or ``memory`` holds another conversation ("The chat
            memory belongs to another conversation.").
        Exception: whatever the storage's or the memory's ``load`` raised.
    """
    session = await _resume(
        definition,
        session_id,
        storage,
        now=now,
        on_persist_error=on_persist_error,
        on_confirmation_change=on_confirmation_change,
    )
    if memory is not None:
        check_memory_for(memory, session_id)
        loaded = tuple(await memory.load())
        messages = loaded or tuple(definition.chat.initial_messages)
        session.chat = session.chat.with_changes(memory=memory, initial_messages=messages)
    return session


async def _resume(
    definition: ChatDefinition,
    session_id: str,
    storage: SessionStorage,
    *,
    now: SessionClock | None,
    on_persist_error: PersistErrorObserver | None,
    on_confirmation_change: ConfirmationChangeObserver | None,
) -> ChatSession:
    stored = await storage.load(session_id)
    if stored is None:
        return create_chat_session(
            definition,
            session_id=session_id,
            storage=storage,
            now=now,
            on_persist_error=on_persist_error,
            on_confirmation_change=on_confirmation_change,
        )
    result = decode_session_snapshot(stored)
    if not isinstance(result, Decoded):
        raise ConfigurationError(result.diagnostic.message)
    snapshot = result.value
    if (
        snapshot.session_id != session_id
        or snapshot.definition_id != definition.id
        or snapshot.definition_revision != definition.revision
    ):
        raise ConfigurationError(_INCOMPATIBLE_SNAPSHOT)
    return create_chat_session(
        definition,
        session_id=session_id,
        snapshot=snapshot,
        storage=storage,
        now=now,
        on_persist_error=on_persist_error,
        on_confirmation_change=on_confirmation_change,
    )


def resolve_chat_session(
    definition: ChatDefinition, session: ChatSession | None = None
) -> ChatSession:
    """``session`` when it was made from ``definition`` (same id and revision), or a new one.

    Raises:
        ConfigurationError: ``session`` belongs to another definition or revision ("Prepared
            session is incompatible with this chat definition."), or any error of
            :func:`create_chat_session`.
    """
    if session is None:
        return create_chat_session(definition)
    if session.definition_id != definition.id or session.definition_revision != definition.revision:
        raise ConfigurationError("Prepared session is incompatible with this chat definition.")
    return session
