"""The chat controller: one conversation's lifecycle over a chat adapter.

One assistant turn runs at a time. Each run consumes its source inside its own anyio cancel
scope; :meth:`ChatController.stop` aborts the source and cancels that scope, and a chunk that
still arrives afterwards is dropped, never applied. Every operation that starts a run first stops
the run in flight and waits until it has closed its source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

import anyio

from agentskit_chat._observers import notify
from agentskit_chat.errors import ConfigurationError, ToolError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.protocol._types import is_safe_id

from ._chunks import AdapterContext, AdapterRequest, StreamChunk
from ._config import ChatConfig
from ._controller_run import Proposal, Run, default_clock, default_id, is_blank
from ._controller_state import (
    ChatState,
    awaiting_siblings,
    complete_streaming,
    end_stream,
    find_call,
    fold_chunk,
    replace_call,
)
from ._controller_tools import (
    DENIED_PREFIX,
    EXECUTION_CANCELLED,
    INVALID_ARGUMENTS,
    USER_DENIED_REASON,
    RequestToolRunner,
    ToolRegistry,
    authorize,
    call_with,
    checked_arguments,
    execute,
)
from ._messages import ChatMessage
from ._tools import ToolAuthorizationContext

__all__ = ["SAVE_FAILED_MESSAGE", "ChatController"]

#: ``state.error`` after the chat memory failed to save (the in-memory state is kept).
SAVE_FAILED_MESSAGE: Final = "The conversation could not be saved."
_UNSAFE_IDENTITY: Final = "Tool call id and name must be safe identifiers."


def _registry(config: ChatConfig) -> ToolRegistry:
    """The configuration's tools, checked, and checked again by an adapter that runs tools."""
    registry = ToolRegistry(config.tools)
    # An adapter that offers the chat's tools to an agent of its own can refuse a tool set it
    # cannot hold (a name its agent already uses): better now than on the first turn.
    check = getattr(config.adapter, "check_tools", None)
    if callable(check):
        check(config.tools)
    return registry


def _proposed(chunk: StreamChunk, messages: tuple[ChatMessage, ...]) -> ToolCall | None:
    """The call a chunk newly puts up for confirmation, or ``None``."""
    call = chunk.tool_call
    if call is None or call.status != "requires_confirmation":
        return None
    known = find_call(messages, call.id)
    return call if known is None or known.status != "requires_confirmation" else None


class ChatController:
    """Runs a conversation: sends, streams, stops, retries, edits, regenerates and tool calls.

    State is an immutable :class:`ChatState`, replaced on every change; listeners registered
    with :meth:`subscribe` are told about each new state. The awaitable operations return when
    the turn they start has ended (complete, in error, or stopped); a turn that ends in error
    does not raise, it sets ``state.status`` to ``error`` and ``state.error``.

    Args:
        config: The chat configuration.

    Every tool call meets the same checks, whoever made it: calls the adapter reports as
    awaiting confirmation are authorized in phase ``propose`` when they are recorded (a denial
    ends the call in ``error`` and the model is told in one follow-up run), and each request
    carries a :class:`~agentskit_chat.runtime.ToolRunner` through which an adapter that runs
    tools itself authorizes every execution in phase ``execute`` and runs the chat's tools.

    Raises:
        ConfigurationError: when the tools are invalid (names not safe identifiers or not
            unique, a ``parameters`` that is not a JSON Schema), or the adapter refuses them
            (an adapter with a ``check_tools(tools)`` method is asked; the pydantic-ai adapter
            refuses a tool named like one of its agent's).

    Example:
        >>> controller = ChatController(ChatConfig(adapter=my_adapter))  # doctest: +SKIP
        >>> await controller.send("How do I install the CLI?")  # doctest: +SKIP
        >>> controller.state.messages[-1].content  # doctest: +SKIP
    """

    def __init__(self, config: ChatConfig) -> None:
        self._registry = _registry(config)
        self._config = config
        self._state = ChatState(messages=tuple(config.initial_messages))
        self._listeners: list[Callable[[ChatState], None]] = []
        self._run: Run | None = None
        self._proposals: dict[str, Proposal] = {}
        self._save_lock: anyio.Lock | None = None
        self._save_seq = 0

    # --- state -----------------------------------------------------------------------------------

    @property
    def config(self) -> ChatConfig:
        """The configuration the next run uses."""
        return self._config

    @property
    def state(self) -> ChatState:
        """The current state (an immutable snapshot)."""
        return self._state

    def update_config(self, config: ChatConfig) -> None:
        """Use ``config`` from the next run on (a run in flight keeps its adapter).

        Raises:
            ConfigurationError: when its tools are invalid; the current config is kept.
        """
        registry = _registry(config)
        self._registry = registry
        self._config = config

    def subscribe(self, listener: Callable[[ChatState], None]) -> Callable[[], None]:
        """Call ``listener`` with every new state; returns a function that unsubscribes.

        A listener that raises does not disturb the controller or the other listeners.
        """
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def set_input(self, text: str) -> None:
        """Set ``state.input`` (the text being typed)."""
        self._set(self._with(input=text))

    def _with(self, **changes: Any) -> ChatState:
        return replace(self._state, **changes)

    def _set(self, state: ChatState) -> None:
        self._state = state
        for listener in tuple(self._listeners):
            notify(listener, state)  # observers never steer the chat

    def _new_id(self) -> str:
        return (self._config.id_factory or default_id)()

    def _now(self) -> datetime:
        return (self._config.clock or default_clock)()

    def _placeholder(self) -> ChatMessage:
        return ChatMessage(
            id=self._new_id(),
            role="assistant",
            content="",
            created_at=self._now(),
            status="streaming",
        )

    # --- memory ----------------------------------------------------------------------------------

    async def load(self) -> None:
        """Replace the messages with those of ``config.memory``.

        When there is no memory, or it holds no messages, the conversation starts from
        ``config.initial_messages``. A run in flight is stopped first.

        Raises:
            StorageError: when the memory cannot load or holds invalid records.
        """
        memory = self._config.memory
        loaded = tuple(await memory.load()) if memory is not None else ()
        await self._halt()
        messages = loaded or tuple(self._config.initial_messages)
        self._set(self._with(messages=messages, status="idle", error=None))

    async def _persist(self) -> None:
        # Never mid-stream: a run in flight saves the latest state itself when it ends.
        memory = self._config.memory
        if memory is None or self._run is not None:
            return
        self._save_seq += 1
        sequence = self._save_seq
        if self._save_lock is None:
            self._save_lock = anyio.Lock()
        async with self._save_lock:
            if sequence != self._save_seq or self._run is not None:
                return  # a later save of a newer state is queued behind this one
            try:
                await memory.save(self._state.messages)
            except Exception:
                self._set(self._with(error=SAVE_FAILED_MESSAGE))
                return
            if self._state.error == SAVE_FAILED_MESSAGE:
                self._set(self._with(error=None))

    # --- runs ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the turn in flight: abort its source and cancel its consumer.

        Streaming messages are marked ``complete`` and the status becomes ``idle``; no chunk
        that arrives later is applied. Does nothing when no turn is streaming.
        """
        if self._run is not None:
            self._run.stop()
        state = self._state
        messages = complete_streaming(state.messages)
        status = "idle" if state.status == "streaming" else state.status
        if messages is not state.messages or status != state.status:
            self._set(replace(state, messages=messages, status=status))

    async def aclose(self) -> None:
        """Stop the turn in flight and wait until its source is closed."""
        await self._halt()

    async def _halt(self) -> None:
        while (run := self._run) is not None:
            self.stop()
            await run.done.wait()

    async def _turn(
        self, messages: tuple[ChatMessage, ...], *, follow_up: bool = False, **changes: Any
    ) -> None:
        # Callers halt first and call this without awaiting in between: one run at a time.
        run = Run(messages[-1].id)
        self._run = run
        self._set(self._with(messages=messages, status="streaming", error=None, **changes))
        config = self._config
        runner = RequestToolRunner(
            self._registry,
            config.authorize_tool_call,
            validate_args=config.validate_args,
            messages=lambda: self._state.messages,
        )
        request = AdapterRequest(
            messages=messages,
            context=AdapterContext(
                system_prompt=config.system_prompt, tools=config.tools, tool_runner=runner
            ),
        )
        refused = False

        async def apply(chunk: StreamChunk) -> bool:
            nonlocal refused
            proposed = _proposed(chunk, self._state.messages)
            if proposed is not None:
                checked = await runner.check_proposal(proposed)
                if run.stopped:
                    return True
                if checked is not proposed:
                    refused = True
                    chunk = replace(chunk, tool_call=checked)
            state, ended = fold_chunk(self._state, run.placeholder_id, chunk)
            self._set(state)
            return ended

        def finish(failed: bool) -> None:
            self._set(end_stream(self._state, run.placeholder_id, failed=failed))

        try:
            await run.consume(
                config.adapter, request, apply=apply, finish=finish, interrupted=self.stop
            )
        finally:
            if self._run is run:
                self._run = None
        await self._persist()
        if refused and not follow_up and not run.stopped:
            await self._follow_up(run.placeholder_id)

    async def _follow_up(self, message_id: str) -> None:
        """Run once more after refused proposals, so the model hears of them and answers.

        Only when the refused turn is still the last message, ended well and waits for no
        decision. Once: a model that proposes a refused call again ends its turn with it.
        """
        messages = self._state.messages
        if self._run is not None or self._state.status != "idle" or not messages:
            return
        last = messages[-1]
        calls = last.tool_calls or ()
        if last.id != message_id or any(
            call.status in ("requires_confirmation", "pending") for call in calls
        ):
            return
        await self._turn((*messages, self._placeholder()), follow_up=True)

    async def send(self, text: str, *, metadata: Mapping[str, Any] | None = None) -> None:
        """Send a user message and stream the assistant's answer.

        Blank text is ignored. A turn in flight is stopped first. The new user message (with
        ``metadata``, when given: plain JSON such as a component interaction it stands for) and
        an empty ``streaming`` assistant message are appended, ``state.input`` is cleared, and
        the adapter receives the whole history (both new messages included).
        """
        if is_blank(text):
            return
        await self._halt()
        user = ChatMessage(
            id=self._new_id(),
            role="user",
            content=text,
            created_at=self._now(),
            metadata=None if metadata is None else dict(metadata),
        )
        await self._turn((*self._state.messages, user, self._placeholder()), input="")

    async def retry(self) -> None:
        """Answer the last user message again, when the last two messages are (user, assistant).

        The last assistant message is replaced by a new one; the user message keeps its id and
        content. Otherwise nothing happens.
        """
        await self._halt()
        messages = self._state.messages
        if len(messages) < 2 or messages[-2].role != "user" or messages[-1].role != "assistant":
            return
        await self._turn((*messages[:-1], self._placeholder()))

    async def regenerate(self, assistant_id: str | None = None) -> None:
        """Answer again in place of an assistant message.

        The target is ``assistant_id``, or the last message when it is an assistant message.
        The nearest user message before it drives the run (same id); the target and every
        message after it are dropped. Nothing happens without a target or a user message
        before it.
        """
        await self._halt()
        messages = self._state.messages
        target = None
        for index in range(len(messages) - 1, -1, -1):
            if assistant_id is None or messages[index].id == assistant_id:
                target = index if messages[index].role == "assistant" else None
                break
        if target is None or not any(m.role == "user" for m in messages[:target]):
            return
        await self._turn((*messages[:target], self._placeholder()))

    async def edit(self, message_id: str, content: str, *, regenerate: bool = True) -> None:
        """Change a message's content, keeping its id.

        A user message: everything after it is dropped and, unless ``regenerate`` is false, it
        is answered again. Any other message is changed in place, without a run. A turn in
        flight is stopped first; an unknown id changes nothing.
        """
        await self._halt()
        messages = self._state.messages
        index = next((i for i, m in enumerate(messages) if m.id == message_id), None)
        if index is None:
            return
        edited = replace(messages[index], content=content)
        if edited.role != "user":
            self._set(self._with(messages=(*messages[:index], edited, *messages[index + 1 :])))
        elif regenerate:
            await self._turn((*messages[:index], edited, self._placeholder()))
            return
        else:
            self._set(self._with(messages=(*messages[:index], edited), status="idle", error=None))
        await self._persist()

    async def _resume(self, tool_call_id: str) -> None:
        await self._persist()
        if awaiting_siblings(self._state.messages, tool_call_id):
            # The model asked for several confirmations in one step: it continues once every
            # one of them is decided (an agent loop cannot resume with some left open).
            return
        await self._halt()
        await self._turn((*self._state.messages, self._placeholder()))

    # --- tools -----------------------------------------------------------------------------------

    async def propose_tool_call(self, *, id: str, name: str, args: Mapping[str, Any]) -> ToolCall:
        """Propose a call of a confirmation-gated tool; a human then approves or denies it.

        Idempotent per ``id``: an existing call with that id is returned as it is, and
        concurrent proposals of one id share one operation. The arguments are copied, validated
        against the tool's schema (when ``config.validate_args``) and authorized in phase
        ``propose``; then an assistant message carrying the call (status
        ``requires_confirmation``) is appended.

        Raises:
            ToolError: ``AK_TOOL_INVALID_INPUT`` (id or name not a safe identifier, arguments
                not a bounded JSON object or not matching the schema), ``AK_TOOL_NOT_FOUND``
                (no such tool), ``AK_TOOL_FORBIDDEN`` (denied; the message is the reason).
            ConfigurationError: when the tool does not require confirmation or has no executor.
        """
        if not is_safe_id(id) or not is_safe_id(name):
            raise ToolError("AK_TOOL_INVALID_INPUT", _UNSAFE_IDENTITY)
        while True:
            existing = find_call(self._state.messages, id)
            if existing is not None:
                return existing
            shared = self._proposals.get(id)
            if shared is None:
                break
            await shared.done.wait()
            if shared.error is not None:
                raise shared.error
            if shared.call is not None:
                return shared.call
            # The first proposer was cancelled: try again.
        shared = Proposal()
        self._proposals[id] = shared
        try:
            shared.call = await self._propose(id, name, args)
            return shared.call
        except Exception as exc:
            shared.error = exc
            raise
        finally:
            del self._proposals[id]
            shared.done.set()

    async def _propose(self, call_id: str, name: str, args: Mapping[str, Any]) -> ToolCall:
        plain = checked_arguments(args)
        tool = self._registry.get(name)
        if tool is None:
            raise ToolError("AK_TOOL_NOT_FOUND", "Tool is not registered.")
        if not tool.requires_confirmation or tool.execute is None:
            raise ConfigurationError(
                "A proposed tool must require confirmation and have an executor."
            )
        if self._config.validate_args and not self._registry.arguments_valid(tool, plain):
            raise ToolError("AK_TOOL_INVALID_INPUT", INVALID_ARGUMENTS)
        call = ToolCall.model_validate(
            {"id": call_id, "name": name, "args": plain, "status": "requires_confirmation"}
        )
        context = ToolAuthorizationContext(
            phase="propose", messages=self._state.messages, tool=tool
        )
        verdict = await authorize(self._config.authorize_tool_call, call, context)
        if not verdict.allowed:
            raise ToolError("AK_TOOL_FORBIDDEN", verdict.reason or "")
        existing = find_call(self._state.messages, call_id)
        if existing is not None:
            return existing
        message = ChatMessage(
            id=self._new_id(),
            role="assistant",
            content="",
            created_at=self._now(),
            tool_calls=(call,),
        )
        self._set(self._with(messages=(*self._state.messages, message)))
        await self._persist()
        return call

    def _awaiting(self, tool_call_id: str) -> ToolCall | None:
        call = find_call(self._state.messages, tool_call_id)
        if call is None:
            raise ToolError("AK_TOOL_NOT_FOUND", "Tool call is not known.")
        return call if call.status == "requires_confirmation" else None

    def _record(self, call: ToolCall) -> None:
        self._set(self._with(messages=replace_call(self._state.messages, call)))

    async def approve(self, tool_call_id: str) -> None:
        """Approve a call awaiting confirmation, run it, and resume the conversation.

        The call is marked ``running``; its arguments are validated again and it is authorized
        in phase ``execute``. A registered tool with an executor runs here, and its outcome is
        recorded (``complete`` with the result, or ``error``). A call the adapter owns stays
        ``running`` for the adapter to execute. A denial ends the call in ``error``
        (``Permission denied: <reason>``) and the executor never runs. Then the adapter is run
        again with the whole history. A call that is not awaiting confirmation is left alone.

        Raises:
            ToolError: ``AK_TOOL_NOT_FOUND`` when no message carries this call.
        """
        call = self._awaiting(tool_call_id)
        if call is None:
            return
        call = call_with(call, "running")
        self._record(call)
        tool = self._registry.get(call.name)
        outcome: ToolCall | None = None
        checked = tool if self._config.validate_args else None
        if checked is not None and not self._registry.arguments_valid(checked, call.args):
            outcome = call_with(call, "error", error=INVALID_ARGUMENTS)
        if outcome is None:
            context = ToolAuthorizationContext(
                phase="execute", messages=self._state.messages, tool=tool
            )
            try:
                verdict = await authorize(self._config.authorize_tool_call, call, context)
            except anyio.get_cancelled_exc_class():
                # Not decided: the call waits for a human again (``running`` would read as
                # "approved" to an adapter that runs its own tools).
                self._record(call_with(call, "requires_confirmation"))
                raise
            if not verdict.allowed:
                outcome = call_with(call, "error", error=f"{DENIED_PREFIX}{verdict.reason}")
            elif tool is not None and tool.execute is not None:
                try:
                    outcome = await execute(tool, call)
                except anyio.get_cancelled_exc_class():
                    self._record(call_with(call, "error", error=EXECUTION_CANCELLED))
                    raise
        if outcome is not None:
            self._record(outcome)
        await self._resume(call.id)

    async def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        """Deny a call awaiting confirmation, and resume the conversation.

        The call ends in ``error`` with ``Permission denied: <reason>`` (``user denied access``
        without a reason); the adapter is then run again with the whole history. A call that
        is not awaiting confirmation is left alone.

        Raises:
            ToolError: ``AK_TOOL_NOT_FOUND`` when no message carries this call.
        """
        call = self._awaiting(tool_call_id)
        if call is None:
            return
        text = reason if isinstance(reason, str) and reason else USER_DENIED_REASON
        self._record(call_with(call, "error", error=f"{DENIED_PREFIX}{text}"))
        await self._resume(call.id)
