"""pydantic-ai run events as our stream chunks.

Text deltas become ``text`` chunks and thinking deltas ``reasoning`` chunks. A function tool the
agent runs is announced as a ``tool_call`` chunk with status ``running`` and settled by a
``tool_result`` chunk (``complete`` with its result as text, or ``error``). A call the run
defers for approval is announced with status ``requires_confirmation``; one deferred for
external execution with status ``pending``. Calls already in the chat history are never
announced again (the controller would copy them onto the new assistant message); their
outcome arrives as a ``tool_result`` chunk, which updates them where they are.

A mapper built with ``hold_text`` (for agents that offer ``answer_commit``) keeps the run's text
instead of streaming it. At the end, a run whose final result came from a successful
``answer_commit`` call sends exactly its output, the rendered answer, as one ``text`` chunk
carrying the committed metadata; any other run sends the held text as one chunk. The chat
controller only ever appends text, so text streamed before the commit could never be taken back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import pydantic_core
from pydantic import ValidationError
from pydantic_ai import (
    AgentRunResultEvent,
    DeferredToolRequests,
    DeferredToolRequestsEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    OutputToolCallEvent,
    OutputToolResultEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
)
from pydantic_ai.messages import ToolCallPart, ToolReturnPart
from pydantic_ai.usage import RunUsage

from agentskit_chat.answer_commit import ANSWER_COMMIT_TOOL_NAME, CommittedAnswer
from agentskit_chat.protocol import TokenUsage, ToolCall
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.runtime import StreamChunk

from ._answer_commit import ANSWER_COMMIT_METADATA_KEY
from ._pydantic_ai_history import DENIED_PREFIX

__all__ = ["EventMapper", "output_text", "token_usage"]

_Status = Literal["pending", "running", "complete", "error", "requires_confirmation"]

_RETRIED: Final = "The tool call's arguments were invalid; the model was asked to try again."
_UNFINISHED: Final = "The tool call did not finish."


def token_usage(usage: RunUsage) -> TokenUsage:
    """Our token counts from a run's usage."""
    return TokenUsage(
        prompt_tokens=max(usage.input_tokens, 0),
        completion_tokens=max(usage.output_tokens, 0),
        total_tokens=max(usage.total_tokens, 0),
    )


def _args(part: ToolCallPart) -> dict[str, Any]:
    try:
        args = part.args_as_dict(raise_if_invalid=True)
    except (ValueError, AssertionError):
        return {}
    return args if isinstance(args, dict) else {}


def _record(
    call_id: str,
    name: str,
    args: Mapping[str, Any],
    status: _Status,
    *,
    result: str | None = None,
    error: str | None = None,
) -> ToolCall:
    fields: dict[str, Any] = {"id": call_id, "name": name, "args": args, "status": status}
    if result is not None:
        fields["result"] = result
    if error is not None:
        fields["error"] = error
    try:
        return ToolCall(**fields)
    except ValidationError:
        # Arguments that are not bounded JSON are dropped rather than failing the turn.
        return ToolCall(**{**fields, "args": {}})


def _result_text(part: ToolReturnPart) -> str:
    content = part.content
    if isinstance(content, str):
        return content
    try:
        return js_stringify(pydantic_core.to_jsonable_python(content))
    except Exception:
        return part.model_response_str(wrap_if_error=False)


def output_text(output: object) -> str:
    """A structured final output as compact JSON text."""
    try:
        return js_stringify(pydantic_core.to_jsonable_python(output))
    except Exception:
        return str(output)


class EventMapper:
    """Turns the events of one run into chunks; remembers which calls it announced.

    Args:
        known_calls: The tool calls already in the chat history, by id.
        hold_text: Keep the run's text until it ends (see the module's docstring).

    Attributes:
        streamed_text: Whether the model wrote any text in this run (held or sent).
        commit: The ``answer_commit`` call that ended the run, once its result is in.
    """

    def __init__(self, known_calls: Mapping[str, ToolCall], *, hold_text: bool = False) -> None:
        self._history = dict(known_calls)
        self._announced: dict[str, ToolCall] = {}
        self._settled: set[str] = set()
        self._hold = hold_text
        self._held: list[str] = []
        self._commit_calls: dict[str, ToolCallPart] = {}
        self.streamed_text = False
        self.commit: ToolCallPart | None = None

    def _call(self, part: ToolCallPart) -> tuple[str, str, Mapping[str, Any]]:
        known = self._history.get(part.tool_call_id) or self._announced.get(part.tool_call_id)
        if known is not None:
            return known.id, known.name, known.args
        return part.tool_call_id, part.tool_name, _args(part)

    def _announce(self, call: ToolCall) -> StreamChunk | None:
        if call.id in self._history:
            return None
        previous = self._announced.get(call.id)
        if previous is not None and previous.status == call.status:
            return None
        self._announced[call.id] = call
        return StreamChunk("tool_call", tool_call=call)

    def _text(self, text: str | None, kind: str) -> list[StreamChunk]:
        if not text:
            return []
        if kind == "text":
            self.streamed_text = True
            if self._hold:
                self._held.append(text)
                return []
            return [StreamChunk("text", content=text)]
        return [StreamChunk("reasoning", content=text)]

    def feed(self, event: object) -> list[StreamChunk]:
        """The chunks one event stands for (often none)."""
        if isinstance(event, PartStartEvent):
            if isinstance(event.part, TextPart):
                return self._text(event.part.content, "text")
            if isinstance(event.part, ThinkingPart):
                return self._text(event.part.content, "reasoning")
            return []
        if isinstance(event, PartDeltaEvent):
            if isinstance(event.delta, TextPartDelta):
                return self._text(event.delta.content_delta, "text")
            if isinstance(event.delta, ThinkingPartDelta):
                return self._text(event.delta.content_delta, "reasoning")
            return []
        if isinstance(event, FunctionToolCallEvent):
            return self._started(event)
        if isinstance(event, FunctionToolResultEvent):
            return self._finished(event.part)
        if isinstance(event, DeferredToolRequestsEvent):
            return self._deferred(event.requests)
        if isinstance(event, OutputToolCallEvent | OutputToolResultEvent):
            self._output_tool(event)
        return []

    def _output_tool(self, event: OutputToolCallEvent | OutputToolResultEvent) -> None:
        if event.part.tool_name != ANSWER_COMMIT_TOOL_NAME:
            return
        if isinstance(event, OutputToolCallEvent):
            self._commit_calls[event.part.tool_call_id] = event.part
        elif event.part.outcome == "success":
            # pydantic-ai ends the run on the first output call that succeeds.
            self.commit = self._commit_calls.get(event.part.tool_call_id)

    def flush(self) -> list[StreamChunk]:
        """The held text as one ``text`` chunk (none when nothing is held); empties the hold."""
        text = "".join(self._held)
        self._held.clear()
        return [StreamChunk("text", content=text)] if text else []

    def _started(self, event: FunctionToolCallEvent) -> list[StreamChunk]:
        if event.args_valid is None:
            # Not executed in this step (a resumed decision, or skipped); its result follows.
            return []
        call_id, name, args = self._call(event.part)
        chunk = self._announce(_record(call_id, name, args, "running"))
        return [] if chunk is None else [chunk]

    def _finished(self, part: ToolReturnPart) -> list[StreamChunk]:
        call_id = part.tool_call_id
        known = self._history.get(call_id) or self._announced.get(call_id)
        name = known.name if known is not None else part.tool_name
        args: Mapping[str, Any] = known.args if known is not None else {}
        if part.outcome == "success":
            call = _record(call_id, name, args, "complete", result=_result_text(part))
        elif part.outcome == "retried":
            call = _record(call_id, name, args, "error", error=_RETRIED)
        elif part.outcome == "denied" and known is not None and known.error:
            call = _record(call_id, name, args, "error", error=known.error)
        else:
            text = part.model_response_str(wrap_if_error=False)
            if part.outcome == "denied" and not text.startswith(DENIED_PREFIX):
                text = DENIED_PREFIX + text
            call = _record(call_id, name, args, "error", error=text or _UNFINISHED)
        self._settled.add(call_id)
        if call_id in self._history or call_id in self._announced:
            if call_id in self._announced:
                self._announced[call_id] = call
            return [StreamChunk("tool_result", tool_call=call)]
        self._announced[call_id] = call
        return [StreamChunk("tool_call", tool_call=call)]

    def _deferred(self, requests: DeferredToolRequests) -> list[StreamChunk]:
        chunks: list[StreamChunk] = []
        groups: tuple[tuple[list[ToolCallPart], _Status], ...] = (
            (requests.approvals, "requires_confirmation"),
            (requests.calls, "pending"),
        )
        for parts, status in groups:
            for part in parts:
                call_id, name, args = self._call(part)
                known = self._history.get(call_id)
                if known is not None and known.status == status:
                    continue
                record = _record(call_id, name, args, status)
                if known is not None:
                    chunks.append(StreamChunk("tool_result", tool_call=record))
                    continue
                chunk = self._announce(record)
                if chunk is not None:
                    chunks.append(chunk)
        return chunks

    def result(
        self, event: AgentRunResultEvent[Any], committed: CommittedAnswer | None = None
    ) -> list[StreamChunk]:
        """The chunks of the run's end: the text, deferred calls, usage, ``done``.

        Args:
            event: The run's result.
            committed: The answer :attr:`commit` renders to, for the message's metadata.

        Returns:
            The committed answer alone when the run ended with ``answer_commit`` (the held
            text is dropped); otherwise the held text, then deferred calls or an output that
            was not streamed; then usage and ``done``.
        """
        output = event.result.output
        chunks: list[StreamChunk] = []
        if self.commit is not None and isinstance(output, str):
            self._held.clear()
            metadata = None
            if committed is not None and committed.text == output:
                metadata = {ANSWER_COMMIT_METADATA_KEY: committed.metadata()}
            chunks.append(StreamChunk("text", content=output, metadata=metadata))
            output = None
        chunks.extend(self.flush())
        if isinstance(output, DeferredToolRequests):
            chunks.extend(self._deferred(output))
        elif isinstance(output, str):
            if output and not self.streamed_text:
                chunks.append(StreamChunk("text", content=output))
        elif output is not None:
            chunks.append(StreamChunk("text", content=output_text(output)))
        chunks.append(StreamChunk("usage", usage=token_usage(event.result.usage)))
        chunks.append(StreamChunk("done"))
        return chunks

    def unfinished(self) -> list[StreamChunk]:
        """``tool_result`` errors for the calls this run started and never settled."""
        chunks: list[StreamChunk] = []
        for call_id, call in self._announced.items():
            if call.status == "running" and call_id not in self._settled:
                record = _record(call.id, call.name, call.args, "error", error=_UNFINISHED)
                chunks.append(StreamChunk("tool_result", tool_call=record))
        return chunks
