"""Our chat history as the input of one pydantic-ai run.

A chat message does not keep pydantic-ai's step structure (one assistant message may hold the
text and tool calls of several model responses), so the history is rebuilt by a fixed rule:

- a user message is a request with its text as the user prompt; a system message is a request
  with a system prompt part; ``tool`` messages are not sent (results travel on the calls);
- an assistant message without tool calls is a response with its text;
- an assistant message with tool calls is a response holding the calls, then a request holding
  one return per call. Its text goes *after* the returns (a turn's text normally answers with
  the results), unless the next message is also an assistant message or the message is the one
  being resumed: then the turn was paused for approval, so the text came with the calls.

Every call gets a return, because pydantic-ai refuses a new prompt after unanswered calls:
``complete`` returns its result, ``error`` a failure (a denial when the error starts with
``Permission denied: ``), and calls that never ran say so.

The run resumes a paused turn when the history ends (empty assistant messages, such as the
turn's streaming placeholder, left aside) with an assistant message whose calls were decided:
``running`` without a result means approved, a ``Permission denied: `` error without a result
means denied. A call of a chat tool that requires confirmation was run by the chat controller
when it was approved: its outcome (``complete``, or an ``error`` that is not a denial) is handed
to the run as the deferred call's result. While some call of that message still waits for a
decision (``requires_confirmation`` or ``pending``), there is nothing to run yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from pydantic_ai import DeferredToolResults, ToolApproved, ToolDenied, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from agentskit_chat.protocol import MessageTextPart, ToolCall
from agentskit_chat.runtime import ChatMessage

__all__ = ["DENIED_PREFIX", "RunInput", "build_run_input"]

#: How a denied call's error text starts (the chat controller writes it on ``deny``).
DENIED_PREFIX: Final = "Permission denied: "

_NOT_FINISHED: Final = "The tool call did not finish."
_NOT_APPROVED: Final = "The user did not approve this tool call."
_NOT_RUN: Final = "The tool call did not run."
_FAILED: Final = "The tool call failed."

#: What the run does: answer a new prompt, resume a paused turn, or nothing.
RunMode = Literal["prompt", "resume", "idle"]


@dataclass(frozen=True, slots=True)
class RunInput:
    """The arguments of one run, rebuilt from the chat history.

    Attributes:
        mode: ``prompt`` (answer ``prompt``), ``resume`` (continue with ``deferred``) or
            ``idle`` (nothing to run: the last message is not a user message and no decided
            call waits, or some call still waits for a decision).
        prompt: The newest user message's text, in ``prompt`` mode.
        history: The earlier messages as pydantic-ai messages.
        deferred: The approvals and denials of the resumed calls, in ``resume`` mode.
        known_calls: Every tool call of the history, by id.
    """

    mode: RunMode
    prompt: str | None = None
    history: list[ModelMessage] = field(default_factory=list)
    deferred: DeferredToolResults | None = None
    known_calls: dict[str, ToolCall] = field(default_factory=dict)


def _is_empty(message: ChatMessage) -> bool:
    """An assistant message with nothing in it (the turn's placeholder, or a turn that ended
    without a word while calls waited for decisions)."""
    return message.role == "assistant" and not message.content and not message.tool_calls


def _user_text(message: ChatMessage) -> str:
    if message.content or not message.parts:
        return message.content
    return "\n".join(part.text for part in message.parts if isinstance(part, MessageTextPart))


def _is_denied(call: ToolCall) -> bool:
    return call.status == "error" and (call.error or "").startswith(DENIED_PREFIX)


def _is_decided(call: ToolCall) -> bool:
    """Approved or denied by the user, and not yet run or reported."""
    return call.result is None and (call.status == "running" or _is_denied(call))


def _is_settled(call: ToolCall, settled_by_chat: frozenset[str]) -> bool:
    """Run by the chat controller on approval (its outcome is recorded, not yet shown)."""
    if call.name not in settled_by_chat:
        return False
    return call.status == "complete" or (call.status == "error" and not _is_denied(call))


def _tool_return(call: ToolCall) -> ToolReturnPart:
    """The return the model is shown for a call of an earlier turn."""
    name, call_id = call.name, call.id
    if call.status == "complete":
        return ToolReturnPart(name, call.result or "", call_id)
    if _is_denied(call):
        return ToolReturnPart(name, call.error or "", call_id, outcome="denied")
    if call.status == "error":
        return ToolReturnPart(name, call.error or _FAILED, call_id, outcome="failed")
    if call.status == "requires_confirmation":
        return ToolReturnPart(name, _NOT_APPROVED, call_id, outcome="denied")
    text = _NOT_FINISHED if call.status == "running" else _NOT_RUN
    return ToolReturnPart(name, text, call_id, outcome="interrupted")


def _call_part(call: ToolCall) -> ToolCallPart:
    return ToolCallPart(call.name, dict(call.args), call.id)


def _assistant(
    message: ChatMessage, *, text_first: bool, pending: frozenset[str] = frozenset()
) -> list[ModelMessage]:
    calls = message.tool_calls or ()
    text: list[ModelResponsePart] = [TextPart(message.content)] if message.content else []
    if not calls:
        return [ModelResponse(parts=text, timestamp=message.created_at)] if text else []
    call_parts: list[ModelResponsePart] = [_call_part(call) for call in calls]
    returns: list[ModelRequestPart] = [
        _tool_return(call) for call in calls if call.id not in pending
    ]
    out: list[ModelMessage] = []
    if text_first:
        out.append(ModelResponse(parts=[*text, *call_parts], timestamp=message.created_at))
    else:
        out.append(ModelResponse(parts=call_parts, timestamp=message.created_at))
    if returns:
        out.append(ModelRequest(parts=returns, timestamp=message.created_at))
    if text and not text_first:
        out.append(ModelResponse(parts=text, timestamp=message.created_at))
    return out


def _convert(messages: Sequence[ChatMessage]) -> list[ModelMessage]:
    history: list[ModelMessage] = []
    for index, message in enumerate(messages):
        if message.role == "user":
            prompt = UserPromptPart(_user_text(message))
            history.append(ModelRequest(parts=[prompt], timestamp=message.created_at))
        elif message.role == "system":
            system = SystemPromptPart(message.content)
            history.append(ModelRequest(parts=[system], timestamp=message.created_at))
        elif message.role == "assistant" and not _is_empty(message):
            continued = index + 1 < len(messages) and messages[index + 1].role == "assistant"
            history.extend(_assistant(message, text_first=continued))
    return history


def build_run_input(
    messages: Sequence[ChatMessage], *, settled_by_chat: frozenset[str] = frozenset()
) -> RunInput:
    """What one run of the agent should do for a request's ``messages``.

    Args:
        messages: The whole history, oldest first, possibly ending with the empty streaming
            assistant placeholder of the turn. Empty assistant messages carry nothing for the
            model and are skipped.
        settled_by_chat: The chat tools the controller runs itself once a call is approved
            (those that require confirmation).

    Returns:
        The run's mode, prompt, pydantic-ai history and deferred results.
    """
    messages = list(messages)
    while messages and _is_empty(messages[-1]):
        messages.pop()
    known = {call.id: call for message in messages for call in message.tool_calls or ()}
    if not messages:
        return RunInput("idle", known_calls=known)
    last = messages[-1]
    if last.role == "user":
        return RunInput(
            "prompt", prompt=_user_text(last), history=_convert(messages[:-1]), known_calls=known
        )
    calls = last.tool_calls or ()
    decided = [call for call in calls if _is_decided(call)]
    settled = [call for call in calls if _is_settled(call, settled_by_chat)]
    waiting = any(call.status in ("requires_confirmation", "pending") for call in calls)
    if last.role != "assistant" or not (decided or settled) or waiting:
        return RunInput("idle", known_calls=known)
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {
        call.id: ToolDenied(call.error or DENIED_PREFIX) if _is_denied(call) else ToolApproved()
        for call in decided
    }
    outcomes: dict[str, object] = {
        call.id: call.result or ""
        if call.status == "complete"
        else ToolFailed(call.error or _FAILED)
        for call in settled
    }
    history = _convert(messages[:-1])
    resumed = frozenset(call.id for call in (*decided, *settled))
    history.extend(_assistant(last, text_first=True, pending=resumed))
    return RunInput(
        "resume",
        history=history,
        deferred=DeferredToolResults(approvals=approvals, calls=outcomes),
        known_calls=known,
    )
