"""The controlled driver: chat state owned by the host, pushed in as serializable snapshots.

Some hosts keep the conversation elsewhere (a server, a store, another framework) and only need
a renderer-facing object. They hand over a snapshot, which is validated strictly and hydrated,
and ten callbacks, which the driver calls on the user's behalf. The driver runs no controller,
consumes no stream, persists nothing and never changes its state: after a callback the host
builds a new driver from its new snapshot.

>>> snapshot = parse_controlled_chat_snapshot({
...     "sessionId": "support-1", "messages": [], "status": "idle", "input": "",
...     "error": None,
...     "usage": {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0},
... })
>>> snapshot.status, snapshot.messages
('idle', ())
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict, PlainValidator, model_validator
from pydantic.alias_generators import to_camel

from agentskit_chat.errors import ConfigurationError, ProtocolError
from agentskit_chat.protocol import TokenUsage, validate_message_records
from agentskit_chat.protocol._types import NonNegInt, OptSafeId, SafeId, one_of, text

from ._messages import ChatMessage

__all__ = [
    "ControlledChatActions",
    "ControlledChatDriver",
    "ControlledChatError",
    "ControlledChatSnapshot",
    "ControlledChatStatus",
    "create_controlled_chat_driver",
    "parse_controlled_chat_snapshot",
]

#: Where the host's conversation is: ``complete`` after a finished turn.
ControlledChatStatus = Literal["idle", "streaming", "complete", "error"]

_MAX_MESSAGES: Final = 10_000
_MAX_INPUT: Final = 100_000
_MAX_ERROR_MESSAGE: Final = 4096
_RECORD_CODE: Final = "AK_CONFIG_INVALID"
_RECORD_INVALID: Final = "Serialized message record is invalid."
_ACTIONS_INVALID: Final = (
    "Controlled chat actions must provide the callables send, stop, retry, edit, regenerate, "
    "set_input, clear, propose_tool_call, approve and deny."
)
_ACTION_NAMES: Final = (
    "send",
    "stop",
    "retry",
    "edit",
    "regenerate",
    "set_input",
    "clear",
    "propose_tool_call",
    "approve",
    "deny",
)


def _message_array(value: Any) -> list[Any]:
    if type(value) is not list or len(value) > _MAX_MESSAGES:
        raise ValueError("expected an array of at most 10000 messages")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        validate_by_name=False,
        validate_by_alias=True,
        hide_input_in_errors=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _plain_object(cls, data: Any) -> Any:
        # Only JSON objects are read: pydantic would otherwise read other mappings' items or an
        # object's attributes.
        if type(data) is dict:
            return data
        if type(data) is MappingProxyType:
            return dict(data)
        raise ValueError("expected an object")


class _ErrorShell(_Strict):
    message: Annotated[str, PlainValidator(text(1, _MAX_ERROR_MESSAGE))]
    code: OptSafeId = None


class _UsageShell(_Strict):
    prompt_tokens: NonNegInt
    completion_tokens: NonNegInt
    total_tokens: NonNegInt


class _SnapshotShell(_Strict):
    session_id: SafeId
    messages: Annotated[list[Any], PlainValidator(_message_array)]
    status: Annotated[
        ControlledChatStatus, PlainValidator(one_of("idle", "streaming", "complete", "error"))
    ]
    input: Annotated[str, PlainValidator(text(0, _MAX_INPUT))]
    error: _ErrorShell | None
    usage: _UsageShell


@dataclass(frozen=True, slots=True)
class ControlledChatError:
    """The host's error, as the driver shows it (a value, not an exception).

    Attributes:
        message: What went wrong, 1 to 4,096 characters.
        code: The host's safe identifier for the failure, or ``None``.
        name: ``code`` when the host gave one, ``"Error"`` otherwise.

    Example:
        >>> ControlledChatError("Synthetic host failure.", "HOST_FAILED").name
        'HOST_FAILED'
    """

    message: str
    code: str | None = None
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", "Error" if self.code is None else self.code)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledChatSnapshot:
    """A validated, hydrated and immutable snapshot of a host-owned chat.

    Attributes:
        session_id: The host's session, a safe identifier.
        messages: The conversation, oldest first, with ``created_at`` as datetimes.
        status: ``idle``, ``streaming``, ``complete`` or ``error``.
        input: The text being typed, at most 100,000 characters.
        error: The host's error, or ``None``.
        usage: Token counts exactly as the host reported them (the total is not recomputed).
    """

    session_id: str
    messages: tuple[ChatMessage, ...]
    status: ControlledChatStatus
    input: str
    error: ControlledChatError | None
    usage: TokenUsage


def _memory_record(messages: list[Any]) -> tuple[ChatMessage, ...]:
    # The memory-record validator over ``{version: 1, messages}``: limits, schema, hydration.
    records = validate_message_records(messages)
    if records is None:
        raise ProtocolError(_RECORD_CODE, _RECORD_INVALID)
    return tuple(ChatMessage.from_record(record) for record in records)


def parse_controlled_chat_snapshot(input: object) -> ControlledChatSnapshot:
    """Validate a host's snapshot and hydrate it; ``input`` is never changed.

    ``input`` is a JSON object with exactly the keys ``sessionId`` (a safe identifier),
    ``messages`` (at most 10,000 message records), ``status`` (``idle``, ``streaming``,
    ``complete`` or ``error``), ``input`` (a string of at most 100,000 UTF-16 units), ``error``
    (``null`` or exactly ``{message, code?}``: 1 to 4,096 units and a safe identifier) and
    ``usage`` (exactly ``{promptTokens, completionTokens, totalTokens}``, integers ≥ 0).

    Raises:
        pydantic.ValidationError: the snapshot's shape is not valid (an unknown or missing key,
            a bad status, a bound broken). Its errors carry locations, never input values.
        ProtocolError: ``AK_CONFIG_INVALID`` "Serialized message record is invalid." when the
            shape is valid but the messages are not a valid memory record; the record
            validator's own error is its ``__cause__``.

    Example:
        >>> parse_controlled_chat_snapshot({
        ...     "sessionId": "s1", "messages": [], "status": "error", "input": "",
        ...     "error": {"message": "Synthetic host failure.", "code": "HOST_FAILED"},
        ...     "usage": {"promptTokens": 1, "completionTokens": 2, "totalTokens": 9},
        ... }).usage.total_tokens
        9
    """
    shell = _SnapshotShell.model_validate(input, by_alias=True, by_name=False)
    try:
        messages = _memory_record(shell.messages)
    except ProtocolError as cause:
        raise ProtocolError(_RECORD_CODE, _RECORD_INVALID) from cause
    error = (
        None if shell.error is None else ControlledChatError(shell.error.message, shell.error.code)
    )
    usage = TokenUsage(
        prompt_tokens=shell.usage.prompt_tokens,
        completion_tokens=shell.usage.completion_tokens,
        total_tokens=shell.usage.total_tokens,
    )
    return ControlledChatSnapshot(
        session_id=shell.session_id,
        messages=messages,
        status=shell.status,
        input=shell.input,
        error=error,
        usage=usage,
    )


class ControlledChatActions(Protocol):
    """The host's ten callbacks; each may be a plain function or a coroutine function.

    Each is called once per driver call, with the driver call's arguments. None of them is
    expected to return anything: the host applies the change to its own state and builds a new
    driver from its new snapshot.
    """

    def send(self, text: str) -> Awaitable[None] | None:
        """Send ``text`` as a user message."""
        ...

    def stop(self) -> Awaitable[None] | None:
        """Stop the turn in flight."""
        ...

    def retry(self) -> Awaitable[None] | None:
        """Answer the last user message again."""
        ...

    def edit(self, message_id: str, content: str, *, regenerate: bool) -> Awaitable[None] | None:
        """Change a message's content, answering again when ``regenerate`` is true."""
        ...

    def regenerate(self, assistant_id: str | None) -> Awaitable[None] | None:
        """Answer again in place of an assistant message (the last one when ``None``)."""
        ...

    def set_input(self, text: str) -> Awaitable[None] | None:
        """Set the text being typed."""
        ...

    def clear(self) -> Awaitable[None] | None:
        """Clear the conversation."""
        ...

    def propose_tool_call(
        self, *, id: str, name: str, args: Mapping[str, Any]
    ) -> Awaitable[None] | None:
        """Propose a call of a confirmation-gated tool."""
        ...

    def approve(self, tool_call_id: str) -> Awaitable[None] | None:
        """Approve a tool call awaiting confirmation."""
        ...

    def deny(self, tool_call_id: str, reason: str | None) -> Awaitable[None] | None:
        """Deny a tool call awaiting confirmation."""
        ...


_Callback = Callable[..., object]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledChatDriver:
    """A read-only chat over a host's snapshot, whose actions are the host's callbacks.

    Build it with :func:`create_controlled_chat_driver`. Every action is a coroutine: it calls
    the host's callback once with its arguments and awaits the callback's result when that is
    awaitable. The driver's state never changes.

    Attributes:
        session_id: The snapshot's session.
        messages: The snapshot's messages, oldest first.
        status: The snapshot's status.
        input: The snapshot's input text.
        error: The snapshot's error, or ``None``.
        usage: The snapshot's token counts.
        mode: Always ``"controlled"``.
    """

    session_id: str
    messages: tuple[ChatMessage, ...]
    status: ControlledChatStatus
    input: str
    error: ControlledChatError | None
    usage: TokenUsage
    mode: Literal["controlled"] = "controlled"
    _callbacks: Mapping[str, _Callback] = field(repr=False, compare=False)

    async def _call(self, action: str, /, *args: object, **kwargs: object) -> None:
        result = self._callbacks[action](*args, **kwargs)
        if inspect.isawaitable(result):
            await result

    async def send(self, text: str) -> None:
        """Ask the host to send ``text``."""
        await self._call("send", text)

    async def stop(self) -> None:
        """Ask the host to stop the turn in flight."""
        await self._call("stop")

    async def retry(self) -> None:
        """Ask the host to answer the last user message again."""
        await self._call("retry")

    async def edit(self, message_id: str, content: str, *, regenerate: bool = True) -> None:
        """Ask the host to change a message's content (and answer again unless told not to)."""
        await self._call("edit", message_id, content, regenerate=regenerate)

    async def regenerate(self, assistant_id: str | None = None) -> None:
        """Ask the host to answer again in place of an assistant message."""
        await self._call("regenerate", assistant_id)

    async def set_input(self, text: str) -> None:
        """Ask the host to set the text being typed."""
        await self._call("set_input", text)

    async def clear(self) -> None:
        """Ask the host to clear the conversation."""
        await self._call("clear")

    async def propose_tool_call(self, *, id: str, name: str, args: Mapping[str, Any]) -> None:
        """Ask the host to propose a call of a confirmation-gated tool."""
        await self._call("propose_tool_call", id=id, name=name, args=args)

    async def approve(self, tool_call_id: str) -> None:
        """Ask the host to approve a tool call awaiting confirmation."""
        await self._call("approve", tool_call_id)

    async def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        """Ask the host to deny a tool call awaiting confirmation."""
        await self._call("deny", tool_call_id, reason)


def _take_callbacks(actions: object) -> Mapping[str, _Callback]:
    taken: dict[str, _Callback] = {}
    for name in _ACTION_NAMES:
        if isinstance(actions, Mapping):
            callback = actions.get(name)
        else:
            callback = getattr(actions, name, None)
        if not callable(callback):
            raise ConfigurationError(_ACTIONS_INVALID)
        taken[name] = callback
    return MappingProxyType(taken)


def create_controlled_chat_driver(
    *,
    snapshot: ControlledChatSnapshot | object,
    actions: ControlledChatActions | Mapping[str, _Callback],
) -> ControlledChatDriver:
    """A driver over the host's ``snapshot`` that delegates every action to ``actions``.

    ``snapshot`` is a :class:`ControlledChatSnapshot` or raw snapshot data, parsed with
    :func:`parse_controlled_chat_snapshot`. ``actions`` is an object with the ten callbacks of
    :class:`ControlledChatActions` as attributes, or a mapping from those names to callables.
    The callbacks are taken once, by name; anything else on ``actions`` is ignored.

    Raises:
        pydantic.ValidationError: raw ``snapshot`` data has an invalid shape.
        ProtocolError: raw ``snapshot`` data holds invalid message records.
        ConfigurationError: ``actions`` lacks one of the ten callables.

    Example:
        >>> import asyncio
        >>> sent = []
        >>> actions = {name: (lambda *a, **k: None) for name in (
        ...     "stop", "retry", "edit", "regenerate", "set_input", "clear",
        ...     "propose_tool_call", "approve", "deny")}
        >>> actions["send"] = sent.append
        >>> driver = create_controlled_chat_driver(snapshot={
        ...     "sessionId": "s1", "messages": [], "status": "idle", "input": "hi",
        ...     "error": None,
        ...     "usage": {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0},
        ... }, actions=actions)
        >>> asyncio.run(driver.send("hi")); sent, driver.mode
        (['hi'], 'controlled')
    """
    parsed = (
        snapshot
        if isinstance(snapshot, ControlledChatSnapshot)
        else parse_controlled_chat_snapshot(snapshot)
    )
    callbacks = _take_callbacks(actions)
    return ControlledChatDriver(
        session_id=parsed.session_id,
        messages=parsed.messages,
        status=parsed.status,
        input=parsed.input,
        error=parsed.error,
        usage=parsed.usage,
        _callbacks=callbacks,
    )
