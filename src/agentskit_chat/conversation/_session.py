"""A chat session: the scoped chat config, the conversation, persistence and turn leases.

Build one with :func:`~agentskit_chat.conversation.create_chat_session` or
:func:`~agentskit_chat.conversation.resume_chat_session`.

Saves are serialized per session (one lock: a failed save does not block later ones). A save
builds the snapshot when it runs, so it always stores the latest state. Saves scheduled by
dispatch never raise: a failure goes to the ``on_persist_error`` observer and is kept, and the
next explicit :meth:`ChatSession.persist` raises it, so a lost save is never silent — call
``persist()`` again to store the current state. A later successful save clears it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

import anyio

from agentskit_chat._observers import notify
from agentskit_chat.actions import (
    DEFAULT_CONFIRMATION_TTL_MS,
    ActionConfirmation,
    ClaimLost,
    ConfirmationChangeObserver,
    ConfirmationChat,
    ConfirmationRecord,
    ConfirmationStatus,
    create_action_confirmation,
)
from agentskit_chat.errors import ConfigurationError, SessionConflictError
from agentskit_chat.protocol import (
    SESSION_PROTOCOL,
    SESSION_VERSION,
    ActiveTurn,
    Confirmation,
    ConversationState,
    SessionSnapshot,
    TerminalTurn,
)
from agentskit_chat.protocol._json import MAX_SAFE_INTEGER
from agentskit_chat.protocol._types import is_safe_id
from agentskit_chat.runtime import AdapterRequest, ChatAdapter, ChatConfig, ChatSource
from agentskit_chat.runtime._messages import format_message_timestamp

from ._adapters import ConversationAdapter, ScopedAdapter, unwrap_adapter
from ._compile import CompiledConversation
from ._confirmations import DEFAULT_SETTLE_TIMEOUT_S, PROCESSING, load_confirmation, wait_settled
from ._definition import InteractionHandler
from ._dispatch import Dispatcher
from ._interactions import InteractionAdapter
from ._storage import SessionStorage

__all__ = [
    "MAX_TERMINAL_TURNS",
    "ChatSession",
    "ConversationSnapshot",
    "PersistErrorObserver",
    "Restored",
    "SessionClock",
    "TurnOutcome",
    "epoch_ms",
]

#: How many finished turns a session remembers (a finished turn can never be claimed again).
MAX_TERMINAL_TURNS: Final = 64
#: How a released turn ended.
TurnOutcome = Literal["completed", "indeterminate"]
#: Returns the current time as an aware ``datetime``.
SessionClock = Callable[[], datetime]
#: Told about every failed scheduled save; called synchronously, its errors ignored.
PersistErrorObserver = Callable[[Exception], object]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_OUTCOMES: Final = frozenset({"completed", "indeterminate"})


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the Unix epoch (a naive ``datetime`` counts as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class ConversationSnapshot:
    """Where a session's conversation stands.

    Attributes:
        state: The current state.
        events: The events that state accepts, in definition order.
        actions: The state's informational actions.
    """

    state: str
    events: tuple[str, ...]
    actions: tuple[str, ...]


@dataclass(slots=True)
class Restored:
    cursor: int = 0
    exists: bool = False
    active_turn: ActiveTurn | None = None
    terminal_turns: tuple[TerminalTurn, ...] = ()
    confirmations: tuple[Confirmation, ...] = ()
    conversation: ConversationState | None = None


class ChatSession:
    """One chat session of a definition: hand ``session.chat`` to a
    :class:`~agentskit_chat.runtime.ChatController`.

    Attributes:
        session_id: The session's id (a safe identifier).
        definition_id: The definition's id.
        definition_revision: The definition's revision.
        chat: The definition's chat config with the session's adapter: scoped to this session,
            and running the deterministic conversation when the definition has one.
    """

    def __init__(
        self,
        *,
        session_id: str,
        definition_id: str,
        definition_revision: int,
        chat: ChatConfig,
        compiled: CompiledConversation | None,
        restored: Restored,
        storage: SessionStorage | None,
        now: SessionClock,
        on_persist_error: PersistErrorObserver | None,
        on_confirmation_change: ConfirmationChangeObserver | None = None,
        on_interaction: InteractionHandler | None = None,
    ) -> None:
        self.session_id = session_id
        self._on_interaction = on_interaction
        self.definition_id = definition_id
        self.definition_revision = definition_revision
        self._storage = storage
        self._now = now
        self._on_persist_error = on_persist_error
        self._on_confirmation_change = on_confirmation_change
        self._cursor = restored.cursor
        self._exists = restored.exists
        self._active_turn = restored.active_turn
        self._terminal_turns = list(restored.terminal_turns)
        self._confirmations = restored.confirmations
        self._lock = anyio.Lock()
        self._dirty = False
        self._failure: Exception | None = None
        self._dispatcher = (
            None
            if compiled is None
            else Dispatcher(
                compiled, session_id=session_id, schedule=self._schedule, flush=self._flush
            )
        )
        if self._dispatcher is not None and restored.conversation is not None:
            self._dispatcher.restore(restored.conversation)
        self.chat = self.update_chat(chat)

    # --- the chat config ---------------------------------------------------------------------

    def update_chat(self, config: ChatConfig) -> ChatConfig:
        """A copy of ``config`` whose adapter belongs to this session.

        The adapter is unwrapped first when it came from a session (this one or another), so a
        config is never wrapped twice. ``session.chat`` itself is not changed.
        """
        original = unwrap_adapter(config.adapter)
        scoped = ScopedAdapter(original, self.session_id)
        adapter: ChatAdapter = scoped
        if self._dispatcher is not None:
            adapter = ConversationAdapter(original, scoped, self._dispatch)
        if self._on_interaction is not None:
            # In front of the routes: an interaction's message is answered by the hook first.
            adapter = InteractionAdapter(original, adapter, self._on_interaction, self.session_id)
        return config.with_changes(adapter=adapter)

    def _dispatch(
        self, request: AdapterRequest, fallback: Callable[[AdapterRequest], ChatSource]
    ) -> ChatSource:
        assert self._dispatcher is not None
        return self._dispatcher.dispatch(request, fallback)

    def get_conversation_snapshot(self) -> ConversationSnapshot | None:
        """The current state, its events and actions; ``None`` without a conversation."""
        if self._dispatcher is None:
            return None
        compiled = self._dispatcher.compiled
        state = self._dispatcher.state
        return ConversationSnapshot(
            state=state,
            events=compiled.statechart.allowed_events(state),
            actions=compiled.actions(state),
        )

    # --- persistence -------------------------------------------------------------------------

    def get_cursor(self) -> int:
        """The cursor of the last save (the snapshot's CAS version)."""
        return self._cursor

    @property
    def active_turn(self) -> ActiveTurn | None:
        """The current turn lease, if any (it may have expired)."""
        return self._active_turn

    @property
    def terminal_turns(self) -> tuple[TerminalTurn, ...]:
        """The last finished turns, oldest first (at most 64)."""
        return tuple(self._terminal_turns)

    def build_snapshot(self, *, ahead: int = 0) -> SessionSnapshot:
        """The snapshot the next save would store (its cursor is the current one plus 1, plus
        ``ahead``).

        Raises:
            ConfigurationError: the snapshot is not valid (cannot happen for data that entered
                through the session, whose limits are checked on the way in).
        """
        fields: dict[str, object] = {
            "protocol": SESSION_PROTOCOL,
            "version": SESSION_VERSION,
            "session_id": self.session_id,
            "definition_id": self.definition_id,
            "definition_revision": self.definition_revision,
            "updated_at": format_message_timestamp(self._now()),
            "cursor": self._cursor + 1 + ahead,
        }
        if self._active_turn is not None:
            fields["active_turn"] = self._active_turn
        if self._terminal_turns:
            fields["terminal_turns"] = tuple(self._terminal_turns)
        if self._dispatcher is not None:
            fields["conversation"] = self._dispatcher.conversation_state()
        fields["confirmations"] = self._confirmations
        try:
            return SessionSnapshot.model_validate(fields)
        except Exception:
            raise ConfigurationError("Session snapshot cannot be built.") from None

    def _schedule(self) -> None:
        if self._storage is None:
            self._cursor += 1
        else:
            self._dirty = True

    async def _save(self, storage: SessionStorage, ahead: int = 0) -> None:
        snapshot = self.build_snapshot(ahead=ahead)
        expected = self._cursor if self._exists else None
        if not await storage.save(snapshot, expected):
            raise SessionConflictError()
        self._cursor = snapshot.cursor
        self._exists = True
        self._failure = None

    def _report(self, error: Exception) -> None:
        notify(self._on_persist_error, error)

    async def _flush(self) -> None:
        storage = self._storage
        if storage is None or not self._dirty:
            return
        # Shielded: a save cancelled halfway may have been stored without this session
        # learning its cursor, and every later save would then conflict.
        with anyio.CancelScope(shield=True):
            async with self._lock:
                if not self._dirty:
                    return
                self._dirty = False
                try:
                    await self._save(storage)
                except Exception as error:
                    self._dirty = True
                    self._failure = error
                    self._report(error)

    async def persist(self, *, ahead: int = 0) -> None:
        """Save the session now.

        Without storage, this only advances the cursor. With storage, the snapshot is built
        when the save runs and stored by compare-and-set on the cursor.

        Args:
            ahead: How many cursor values the save skips: the cursor goes from ``c`` to
                ``c + 1 + ahead``, so the numbers from ``c + 1`` to ``c + ahead`` are below the
                stored cursor and no later save stores them (a chat stream numbers its lines
                with them without saving each one).

        Raises:
            SessionConflictError: the stored snapshot changed in another client.
            ConfigurationError: ``ahead`` is not a non-negative integer.
            Exception: a failure left by a save that dispatch scheduled (raised once, without
                saving; call ``persist()`` again), or whatever the storage raised.
        """
        if type(ahead) is not int or ahead < 0:
            raise ConfigurationError("Session save is invalid.")
        await self._persist(self._storage, raise_pending=True, ahead=ahead)

    async def _persist(
        self, storage: SessionStorage | None, *, raise_pending: bool, ahead: int = 0
    ) -> None:
        if storage is None:
            self._cursor += 1 + ahead
            return
        async with self._lock:
            failure = self._failure
            if failure is not None and raise_pending:
                self._failure = None
                raise failure
            self._dirty = False
            try:
                # Shielded for the same reason as scheduled saves: a save cancelled after the
                # store committed would leave this session behind the stored cursor.
                with anyio.CancelScope(shield=True):
                    await self._save(storage, ahead)
            except BaseException:
                self._dirty = True
                raise

    # --- confirmations -------------------------------------------------------------------------

    @property
    def confirmations(self) -> tuple[ConfirmationRecord, ...]:
        """The session's confirmation records, in creation order."""
        return self._records()

    def _records(self) -> tuple[ConfirmationRecord, ...]:
        return tuple(ConfirmationRecord.from_wire(c, self.session_id) for c in self._confirmations)

    def create_confirmation(
        self,
        *,
        chat: ConfirmationChat,
        ttl_ms: int = DEFAULT_CONFIRMATION_TTL_MS,
        now: Callable[[], int] | None = None,
        create_id: Callable[[], str] | None = None,
        settle_timeout_s: float = DEFAULT_SETTLE_TIMEOUT_S,
    ) -> ActionConfirmation:
        """A confirmation for this session's tokens, kept in the session's snapshot.

        It starts from the session's records; each proposal is saved with the session, and
        ``on_confirmation_change`` is told every record after each saved change.

        With storage, each status is claimed by a compare-and-set save *before* the upstream
        is called, so of several clients (workers) deciding one token exactly one calls the
        upstream, once. A client whose claim loses does not fail: it reads the stored record
        and, while that is still processing, polls it (a short backoff, at most
        ``settle_timeout_s`` seconds) so that it normally returns the winner's terminal record;
        after that bound it returns the processing record. A decision that finds a processing
        record it did not claim waits the same way. A save that conflicts for any other reason
        raises :class:`~agentskit_chat.errors.SessionConflictError`. An upstream failure leaves
        the record in its processing status for every client, never retried; settle it with
        :func:`~agentskit_chat.conversation.reconcile_confirmation`.

        Without storage, statuses change in memory (saves only advance the cursor), and a
        failed upstream call puts the record back to ``pending``.

        Args:
            chat: The upstream chat, such as a controller built from ``session.chat``.
            ttl_ms: How long a proposal can be approved.
            now: The clock in epoch milliseconds; by default the session's clock.
            create_id: Makes each proposal's id (see
                :func:`~agentskit_chat.actions.create_action_confirmation`).
            settle_timeout_s: How long a decision that lost a race waits for the winner.

        Raises:
            ConfigurationError: "Action confirmation options are invalid."

        Example:
            >>> controller = ChatController(session.chat)  # doctest: +SKIP
            >>> confirmation = session.create_confirmation(chat=controller)  # doctest: +SKIP
        """
        clock = now or (lambda: epoch_ms(self._now()))
        storage = self._storage
        return create_action_confirmation(
            session_id=self.session_id,
            chat=chat,
            ttl_ms=ttl_ms,
            now=clock,
            create_id=create_id,
            initial_records=self._confirmations,
            on_change=self._confirmations_changed,
            claim_status=None if storage is None else self._claimer(storage, settle_timeout_s),
            settle=None if storage is None else self._settler(storage, settle_timeout_s),
        )

    def _put(self, confirmation: Confirmation) -> Confirmation | None:
        """Replace the entry with ``confirmation``'s token; the entry it replaced."""
        items = list(self._confirmations)
        for index, item in enumerate(items):
            if item.token == confirmation.token:
                items[index] = confirmation
                self._confirmations = tuple(items)
                return item
        return None

    def _entry(self, token: str) -> Confirmation | None:
        return next((c for c in self._confirmations if c.token == token), None)

    async def _confirmations_changed(self, records: tuple[ConfirmationRecord, ...]) -> None:
        previous = self._confirmations
        updated = tuple(record.to_wire() for record in records)
        self._confirmations = updated
        try:
            # Saved even when an earlier scheduled save failed (the observer heard of it):
            # this save stores the latest state, that failure's included.
            await self._persist(self._storage, raise_pending=False)
        except BaseException:
            if self._confirmations is updated:
                self._confirmations = previous
            raise
        notify(self._on_confirmation_change, records)

    def _claimer(
        self, storage: SessionStorage, settle_timeout_s: float
    ) -> Callable[[ConfirmationRecord, ConfirmationStatus], Awaitable[bool | ClaimLost]]:
        async def claim(record: ConfirmationRecord, status: ConfirmationStatus) -> bool | ClaimLost:
            entry = self._entry(record.token)
            if entry is None or entry.tool_call_id != record.tool_call_id:
                return False
            if entry.status != record.status:
                # Another confirmation of this session changed it in this process.
                return ClaimLost(await self._settled(storage, entry, settle_timeout_s))
            claimed = entry.model_copy(update={"status": status})
            self._put(claimed)
            try:
                await self._persist(storage, raise_pending=False)
            except SessionConflictError:
                self._restore_entry(claimed, entry)
                stored = await load_confirmation(storage, self.session_id, record.token)
                if (
                    stored is None
                    or stored.tool_call_id != record.tool_call_id
                    or stored.status == record.status
                ):
                    raise  # the snapshot changed in another way: this record was not taken
                # Another client claimed it first: report its record, not a failure.
                return ClaimLost(await self._settled(storage, stored, settle_timeout_s))
            except BaseException:
                self._restore_entry(claimed, entry)
                raise
            notify(self._on_confirmation_change, self._records())
            return True

        return claim

    def _restore_entry(self, claimed: Confirmation, entry: Confirmation) -> None:
        if self._entry(claimed.token) is claimed:
            self._put(entry)

    async def _settled(
        self, storage: SessionStorage, current: Confirmation, settle_timeout_s: float
    ) -> ConfirmationRecord:
        if current.status in PROCESSING:
            current = await wait_settled(storage, self.session_id, current, settle_timeout_s)
        # Known locally from now on, though this session stays behind the stored cursor (its
        # next save conflicts, so nothing it holds overwrites the other client's work).
        self._put(current)
        return ConfirmationRecord.from_wire(current, self.session_id)

    def _settler(
        self, storage: SessionStorage, settle_timeout_s: float
    ) -> Callable[[ConfirmationRecord], Awaitable[ConfirmationRecord]]:
        async def settle(record: ConfirmationRecord) -> ConfirmationRecord:
            entry = self._entry(record.token)
            if entry is None or entry.tool_call_id != record.tool_call_id:
                return record
            return await self._settled(storage, entry, settle_timeout_s)

        return settle

    # --- turn leases -------------------------------------------------------------------------

    async def claim_turn(self, turn_id: str, lease_ms: int) -> bool:
        """Claim the session for one turn for ``lease_ms`` milliseconds, and save.

        Returns ``False`` when ``turn_id`` already finished (a finished turn is never replayed)
        or another unexpired lease holds the session. An expired lease is taken over, and the
        turn that held it is remembered as ``indeterminate`` (it never released its lease, so
        what it did is unknown); claiming that same turn again only records this and returns
        ``False``.

        Raises:
            ConfigurationError: ``turn_id`` is not a safe identifier or ``lease_ms`` is not a
                positive safe integer ("Turn claim is invalid.").
            SessionConflictError: the stored snapshot changed in another client. Whenever the
                save fails, the session is left as it was before the claim.
        """
        if not is_safe_id(turn_id) or type(lease_ms) is not int or lease_ms < 1:
            raise ConfigurationError("Turn claim is invalid.")
        now = epoch_ms(self._now())
        if now + lease_ms > MAX_SAFE_INTEGER:
            raise ConfigurationError("Turn claim is invalid.")
        if any(turn.turn_id == turn_id for turn in self._terminal_turns):
            return False
        active = self._active_turn
        if active is not None and active.expires_at > now:
            return False
        previous = self._terminal_turns
        if active is not None:
            # The turn that let its lease expire never released it (its worker died, say):
            # what it did is unknown, so it is remembered as indeterminate, never run again.
            turns = [turn for turn in previous if turn.turn_id != active.turn_id]
            turns.append(TerminalTurn(turn_id=active.turn_id, outcome="indeterminate"))
            self._terminal_turns = turns[-MAX_TERMINAL_TURNS:]
        claimed = active is None or active.turn_id != turn_id
        self._active_turn = (
            ActiveTurn(turn_id=turn_id, expires_at=now + lease_ms) if claimed else None
        )
        try:
            # A lease is saved even when an earlier scheduled save failed (that failure went
            # to the observer); if this save fails, the session holds no unsaved lease.
            await self._persist(self._storage, raise_pending=False)
        except BaseException:
            self._active_turn = active
            self._terminal_turns = previous
            raise
        return claimed

    async def release_turn(self, turn_id: str, outcome: TurnOutcome) -> None:
        """End the active turn ``turn_id`` with ``outcome``, remember it, and save.

        Nothing happens unless ``turn_id`` holds the lease. The session remembers the last 64
        finished turns. The release is saved even when an earlier scheduled save failed; when
        the save itself fails, the lease is kept, so calling again retries it.

        Raises:
            ConfigurationError: ``outcome`` is not ``completed`` or ``indeterminate``.
            SessionConflictError: the stored snapshot changed in another client.
        """
        if outcome not in _OUTCOMES:
            raise ConfigurationError("Turn outcome is invalid.")
        active = self._active_turn
        if active is None or active.turn_id != turn_id:
            return
        previous = self._terminal_turns
        self._active_turn = None
        turns = [turn for turn in previous if turn.turn_id != turn_id]
        turns.append(TerminalTurn(turn_id=turn_id, outcome=outcome))
        self._terminal_turns = turns[-MAX_TERMINAL_TURNS:]
        try:
            # Saved whatever an earlier scheduled save left behind, so our own failure never
            # leaves the session busy; on failure the lease is kept, so calling again retries.
            await self._persist(self._storage, raise_pending=False)
        except BaseException:
            self._active_turn = active
            self._terminal_turns = previous
            raise

    async def abandon_turn(self, turn_id: str) -> None:
        """Give up the lease of ``turn_id`` for a turn that never started, and save.

        For a host whose turn failed after the claim but before anything of it ran (its
        messages could not be loaded, say): the lease is cleared and the turn is *not*
        remembered as finished, so the same turn id may be submitted again. Nothing happens
        unless ``turn_id`` holds the lease; when the save fails, the lease is kept.

        Raises:
            SessionConflictError: the stored snapshot changed in another client.
        """
        active = self._active_turn
        if active is None or active.turn_id != turn_id:
            return
        self._active_turn = None
        try:
            await self._persist(self._storage, raise_pending=False)
        except BaseException:
            self._active_turn = active
            raise
