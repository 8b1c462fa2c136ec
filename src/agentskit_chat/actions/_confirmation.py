"""Typed action confirmation: a proposed action runs only after its token is approved.

Each record moves ``pending -> approving -> approved``, ``pending -> rejecting -> rejected`` or
``pending -> expiring -> expired``; a proposal the upstream did not put up for confirmation is
recorded ``rejected`` at once.

Operations on one token race by claim. Concurrent calls of the same kind (two approvals, two
rejections) share one operation and both return its final record; a call of the other kind
while one is in flight waits only for that operation's claim and returns the record as it then
stands (the winner's processing record), never the winner's result as its own.

Without a claim hook, statuses live in memory: a failed upstream call puts the record back to
``pending`` so a later call can try again. With one (a session with storage), each status is
claimed durably before the upstream is called; a failed upstream call then leaves the record in
its processing status, never called again, until a host settles it with :meth:`reconcile`.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, TypeVar

import anyio

from agentskit_chat.errors import (
    ConfirmationLimitError,
    ConfirmationResolvedElsewhereError,
    SessionConflictError,
    ToolError,
)
from agentskit_chat.protocol import Confirmation, ConfirmationStatus
from agentskit_chat.protocol._json import MAX_SAFE_INTEGER
from agentskit_chat.protocol._types import thaw

from ._records import (
    CONFIRMATION_HINT,
    PROCESSING_STATUSES,
    TERMINAL_STATUSES,
    ClaimLost,
    ClaimStatus,
    ConfirmationChangeObserver,
    ConfirmationChat,
    ConfirmationRecord,
    SettleRecord,
    TerminalConfirmationStatus,
    confirmation_error,
)

__all__ = ["MAX_CONFIRMATIONS", "ActionConfirmation"]

#: How many records one confirmation (and one session snapshot) holds at most; the oldest
#: decided ones are dropped to make room for a proposal.
MAX_CONFIRMATIONS: Final = 1000
#: Why an expired call is denied upstream.
EXPIRED_REASON: Final = "confirmation expired"

_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,119}")
_INVALID_OPTIONS: Final = "Action confirmation options are invalid."
_INVALID_ID: Final = "Action confirmation id is invalid."
_USED_ID: Final = "Action confirmation id is already in use."
_INVALID_TOKEN: Final = "Action confirmation token is invalid for this session."
_EXPIRY: Final = "Action confirmation expiry is invalid."
_NOT_STUCK: Final = "Action confirmation is not awaiting reconciliation."
_NOT_TERMINAL: Final = "Action confirmation reconciliation status is invalid."

T = TypeVar("T")
#: ``expire`` settles a pending record past its expiry to make room (see ``propose``): the call
#: is denied, never approved, whatever the clock reads by then.
_Kind = Literal["approve", "reject", "expire"]


async def _maybe_await(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass(eq=False)
class _Flight:
    kind: _Kind
    claimed: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    result: ConfirmationRecord | None = None
    error: Exception | None = None


class ActionConfirmation:
    """Proposes actions as confirmation-gated tool calls and approves or rejects them by token.

    Build it with :func:`create_action_confirmation`, or with
    :meth:`~agentskit_chat.conversation.ChatSession.create_confirmation` for one bound to a
    session's snapshot.
    """

    def __init__(
        self,
        *,
        session_id: str,
        chat: ConfirmationChat,
        ttl_ms: int,
        now: Callable[[], int],
        create_id: Callable[[], str],
        records: Iterable[ConfirmationRecord],
        on_change: ConfirmationChangeObserver | None,
        claim_status: ClaimStatus | None,
        settle: SettleRecord | None,
    ) -> None:
        self._session_id = session_id
        self._chat = chat
        self._ttl_ms = ttl_ms
        self._now = now
        self._create_id = create_id
        self._on_change = on_change
        self._claim_status = claim_status
        self._settle = settle
        # Insertion ordered: the snapshot lists records in creation order.
        self._records: dict[str, ConfirmationRecord] = {}
        self._by_call: dict[str, str] = {}
        self._flights: dict[str, _Flight] = {}
        for record in records:
            self._store(record)

    @property
    def session_id(self) -> str:
        """The session whose tokens this confirmation accepts."""
        return self._session_id

    # --- reading -----------------------------------------------------------------------------

    def get_by_tool_call(self, tool_call_id: str) -> ConfirmationRecord | None:
        """The record bound to upstream tool call ``tool_call_id``, if any."""
        token = self._by_call.get(tool_call_id)
        return None if token is None else self._records[token]

    def get_snapshot(self) -> tuple[ConfirmationRecord, ...]:
        """Every record, in creation order."""
        return tuple(self._records.values())

    # --- proposing ---------------------------------------------------------------------------

    async def propose(self, *, name: str, input: Any) -> ConfirmationRecord:
        """Propose action ``name`` with ``input`` as a tool call that waits for confirmation.

        The upstream call gets id ``app-<id>`` and the record token ``confirm-<id>``, where
        ``<id>`` comes from ``create_id``. The record is ``pending`` (``rejected`` when the
        upstream did not put the call up for confirmation) and expires ``ttl_ms`` from now.
        When the confirmation holds :data:`MAX_CONFIRMATIONS` records, the oldest decided
        ones (``approved``, ``rejected``, ``expired``) are dropped to make room, saved with
        the new one; undecided records are always kept. When too few are decided, pending
        records past their expiry are settled first, oldest first, as many as needed: each
        call is denied upstream as expired (as approving it now would) and its record ends
        ``expired``, so calls nobody decided in time never hold the limit.

        Raises:
            ConfigurationError: "Action confirmation id is invalid." (``create_id`` gave
                something other than 1..120 characters ``[A-Za-z0-9._:-]``, first
                alphanumeric), "Action confirmation id is already in use.", "Action
                confirmation expiry is invalid." (the expiry is not a safe integer), or what
                the upstream raised (a tool that is not confirmation-gated).
            ConfirmationLimitError: 1,000 records and none of them decided or past their
                expiry (nothing was proposed upstream).
            ToolError: the upstream refused the call (unknown tool, invalid input, forbidden).
            Exception: whatever ``on_change`` raised (the record is then dropped again), or
                what the upstream raised when denying an expired call to make room.
        """
        suffix = self._create_id()
        if type(suffix) is not str or _ID.fullmatch(suffix) is None:
            raise confirmation_error(_INVALID_ID)
        token = f"confirm-{suffix}"
        if token in self._records:
            raise confirmation_error(_USED_ID)
        try:
            self._droppable()
        except ConfirmationLimitError:
            if not await self._expire_overdue():
                raise
            self._droppable()
        expires_at = self._expiry()
        call = await self._chat.propose_tool_call(id=f"app-{suffix}", name=name, args=input)
        if token in self._records or call.id in self._by_call:
            raise confirmation_error(_USED_ID)
        try:
            # Through the wire model, so every record can be stored in a session snapshot.
            wire = Confirmation(
                token=token,
                action=call.name,
                input=thaw(call.args),
                tool_call_id=call.id,
                expires_at=expires_at,
                status="pending" if call.status == "requires_confirmation" else "rejected",
            )
        except ValueError:
            raise confirmation_error(_INVALID_OPTIONS) from None
        record = ConfirmationRecord.from_wire(wire, self._session_id)
        dropped = self._droppable()  # another proposal may have taken the room meanwhile
        self._store(record)
        try:
            await self._changed(dropped)
        except BaseException:
            self._forget(record)
            raise
        for old in dropped:
            self._forget(old)
        return record

    def _droppable(self) -> list[ConfirmationRecord]:
        """The oldest decided records (none being decided now) to drop so that one more fits.

        Raises:
            ConfirmationLimitError: too few records are decided.
        """
        excess = len(self._records) - MAX_CONFIRMATIONS + 1
        if excess <= 0:
            return []
        decided = self._decided()
        if len(decided) < excess:
            raise ConfirmationLimitError(hint=CONFIRMATION_HINT)
        return decided[:excess]

    def _decided(self) -> list[ConfirmationRecord]:
        """The decided records, oldest first (none being decided now)."""
        return [
            record
            for record in self._records.values()
            if record.status in TERMINAL_STATUSES and record.token not in self._flights
        ]

    async def _expire_overdue(self) -> bool:
        """Settle the oldest pending records past their expiry as ``expired`` (their calls
        denied upstream), as many as one more proposal needs; whether any was."""
        needed = len(self._records) - MAX_CONFIRMATIONS + 1 - len(self._decided())
        now = self._now()
        if type(now) is not int:
            return False  # proposing refuses the clock itself
        overdue = [
            record.token
            for record in self._records.values()
            if record.status == "pending"
            and record.expires_at <= now
            and record.token not in self._flights
        ][:needed]
        for token in overdue:
            # Another client deciding the record first, or the upstream refusing the denial,
            # is that record's story, not this proposal's: whether there is room is decided
            # by what the records then are.
            with contextlib.suppress(
                ConfirmationResolvedElsewhereError, SessionConflictError, ToolError
            ):
                await self._decide("expire", token, self._session_id, None)
        return bool(overdue)

    def _expiry(self) -> int:
        now = self._now()
        if type(now) is not int or now < 0 or now + self._ttl_ms > MAX_SAFE_INTEGER:
            raise confirmation_error(_EXPIRY)
        return now + self._ttl_ms

    # --- deciding ----------------------------------------------------------------------------

    async def approve(self, token: str, session_id: str) -> ConfirmationRecord:
        """Approve ``token`` for ``session_id``: the upstream runs the call, once.

        A record that is not ``pending`` is returned as it is and nothing runs again. Past its
        expiry the call is denied upstream instead and the record ends ``expired``.

        Raises:
            ConfigurationError: "Action confirmation token is invalid for this session."
                (unknown token, or another session's; nothing is called).
            ConfirmationResolvedElsewhereError: the claim hook refused (another client
                decided first; nothing ran).
            SessionConflictError: the session's snapshot changed in another client in a way
                that does not settle this record.
            Exception: whatever the upstream raised (see the class for what happens to the
                record).
        """
        return await self._decide("approve", token, session_id, None)

    async def reject(
        self, token: str, session_id: str, reason: str | None = None
    ) -> ConfirmationRecord:
        """Reject ``token`` for ``session_id``: the upstream denies the call with ``reason``.

        A record that is not ``pending`` is returned as it is.

        Raises:
            ConfigurationError: as :meth:`approve`.
            SessionConflictError: as :meth:`approve`.
            Exception: whatever the upstream raised.
        """
        return await self._decide("reject", token, session_id, reason)

    def _check(self, token: str, session_id: str) -> ConfirmationRecord:
        record = self._records.get(token) if type(token) is str else None
        if record is None or session_id != self._session_id:
            raise confirmation_error(_INVALID_TOKEN)
        return record

    async def _decide(
        self, kind: _Kind, token: str, session_id: str, reason: str | None
    ) -> ConfirmationRecord:
        self._check(token, session_id)
        while (flight := self._flights.get(token)) is not None:
            if flight.kind != kind:
                # The other kind claimed first: it wins, and this call reports the record as
                # that claim left it, not the winner's outcome.
                await flight.claimed.wait()
                return self._records[token]
            await flight.done.wait()
            if flight.error is not None:
                raise flight.error
            if flight.result is not None:
                return flight.result
            # The operation was cancelled before it finished: look again.
        flight = _Flight(kind)
        self._flights[token] = flight
        try:
            flight.result = await self._run(flight, token, reason)
            return flight.result
        except Exception as error:
            flight.error = error
            raise
        finally:
            del self._flights[token]
            flight.claimed.set()
            flight.done.set()

    async def _run(self, flight: _Flight, token: str, reason: str | None) -> ConfirmationRecord:
        record = self._records[token]
        if record.status != "pending":
            flight.claimed.set()
            if record.status in PROCESSING_STATUSES and self._settle is not None:
                # Another client is working on it (or its upstream call failed): wait a
                # little for its outcome rather than report the intermediate status.
                record = self._adopt(await self._settle(record))
            return record
        call_id = record.tool_call_id
        if flight.kind == "reject":
            return await self._transition(
                flight, record, "rejecting", "rejected", lambda: self._chat.deny(call_id, reason)
            )
        if flight.kind == "expire" or self._now() >= record.expires_at:
            return await self._transition(
                flight,
                record,
                "expiring",
                "expired",
                lambda: self._chat.deny(call_id, EXPIRED_REASON),
            )
        return await self._transition(
            flight, record, "approving", "approved", lambda: self._chat.approve(call_id)
        )

    async def _transition(
        self,
        flight: _Flight,
        record: ConfirmationRecord,
        processing: ConfirmationStatus,
        terminal: ConfirmationStatus,
        upstream: Callable[[], Awaitable[None]],
    ) -> ConfirmationRecord:
        try:
            claimed, won = await self._claim(record, processing)
        finally:
            flight.claimed.set()
        if not won:
            return claimed  # another client claimed first: its record, adopted
        try:
            await upstream()
        except BaseException:
            if self._claim_status is None:
                await self._revert(record)
            # With durable claims the processing status stays: the upstream may have acted,
            # so the call is never delegated twice.
            raise
        final, _ = await self._claim(claimed, terminal)
        return final

    async def _revert(self, record: ConfirmationRecord) -> None:
        self._records[record.token] = record
        # The upstream failure is what the caller must see, not a failure to report the undo.
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await self._changed()

    async def _claim(
        self, record: ConfirmationRecord, status: ConfirmationStatus
    ) -> tuple[ConfirmationRecord, bool]:
        """The record after claiming ``status``, and whether this call made the change."""
        claim_status = self._claim_status
        updated = replace(record, status=status)
        if claim_status is not None:
            outcome = await _maybe_await(claim_status(record, status))
            if isinstance(outcome, ClaimLost):
                return self._adopt(outcome.current), False
            if outcome is not True:
                raise ConfirmationResolvedElsewhereError(hint=CONFIRMATION_HINT)
            self._records[record.token] = updated
            return updated, True
        self._records[record.token] = updated
        try:
            await self._changed()
        except BaseException:
            self._records[record.token] = record
            raise
        return updated, True

    def _adopt(self, current: ConfirmationRecord) -> ConfirmationRecord:
        known = self._records[current.token]
        if known.tool_call_id != current.tool_call_id:
            return known  # not a version of this record: keep ours
        adopted = replace(current, session_id=self._session_id)
        self._records[current.token] = adopted
        return adopted

    # --- reconciling -------------------------------------------------------------------------

    async def reconcile(
        self, token: str, session_id: str, status: TerminalConfirmationStatus
    ) -> ConfirmationRecord:
        """Settle a record stuck in a processing status as ``status``, without the upstream.

        For a host that found out what happened to a call whose upstream approve or deny
        failed (or whose worker died): the record moves from ``approving``, ``rejecting`` or
        ``expiring`` to ``approved``, ``rejected`` or ``expired`` through the same claim as
        any change (with a session, a compare-and-set save), and the upstream is never called.
        When another client settled it first, its record is returned.

        Raises:
            ConfigurationError: "Action confirmation token is invalid for this session.",
                "Action confirmation reconciliation status is invalid." (``status`` is not
                terminal), "Action confirmation is not awaiting reconciliation." (the record
                is pending or terminal, or this confirmation is deciding it right now).
            SessionConflictError: the session's snapshot changed in another client.
        """
        record = self._check(token, session_id)
        if status not in TERMINAL_STATUSES:
            raise confirmation_error(_NOT_TERMINAL)
        if record.status not in PROCESSING_STATUSES or token in self._flights:
            raise confirmation_error(_NOT_STUCK)
        settled, _ = await self._claim(record, status)
        return settled

    # --- storage -----------------------------------------------------------------------------

    def _store(self, record: ConfirmationRecord) -> None:
        self._records[record.token] = record
        self._by_call[record.tool_call_id] = record.token

    def _forget(self, record: ConfirmationRecord) -> None:
        self._records.pop(record.token, None)
        self._by_call.pop(record.tool_call_id, None)

    async def _changed(self, dropped: Iterable[ConfirmationRecord] = ()) -> None:
        if self._on_change is not None:
            gone = {record.token for record in dropped}
            records = tuple(r for r in self._records.values() if r.token not in gone)
            await _maybe_await(self._on_change(records))
