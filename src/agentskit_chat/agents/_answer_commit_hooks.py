"""The pydantic-ai side of ``answer_commit``: the output tool, history masking and the guard.

Imported only when an agent is built (it needs the ``llm`` extra). The commit is an output
tool: its function validates and renders the payload, so the run's output *is* the rendered
text, whatever the model's output budget; an invalid payload raises ``ModelRetry`` with the
one-line reason and an example, and the model keeps all its tools to repair it. The guard
capability reserves the tool's name against every function tool (MCP and plugin toolsets
included, as they are listed at run time), adds the commit or prose instructions, and masks
earlier commit calls from runs that do not offer the tool (structured-output runs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from pydantic_ai import ModelRetry, StructuredDict, ToolOutput
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)

from agentskit_chat.answer_commit import (
    ANSWER_COMMIT_DESCRIPTION,
    ANSWER_COMMIT_TOOL_NAME,
    CommittedAnswer,
    answer_commit_json_schema,
    commit_answer,
    is_reserved_tool_name,
)
from agentskit_chat.errors import AnswerCommitError, ConfigurationError

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext, ToolDefinition

    _Payload = dict[str, Any]
else:
    _Payload = StructuredDict(answer_commit_json_schema(), name=ANSWER_COMMIT_TOOL_NAME)

__all__ = [
    "RESERVED_NAME_MESSAGE",
    "AnswerCommitGuard",
    "answer_commit_output",
    "check_tool_names",
    "committed_answer",
    "mask_answer_commits",
]

#: The error of a tool that tries to take the reserved name (the name itself is not repeated).
RESERVED_NAME_MESSAGE: Final = (
    "A tool may not be named answer_commit, in any letter case: the name is reserved for the "
    "analyst's final answer."
)


def _commit(payload: _Payload) -> str:
    # Synchronous on purpose: pydantic-ai runs it in a worker thread, so rendering a large
    # table never holds the event loop.
    try:
        return commit_answer(payload).text
    except AnswerCommitError as error:
        raise ModelRetry(str(error)) from None


def answer_commit_output(max_retries: int) -> ToolOutput[str]:
    """The ``answer_commit`` output tool, allowing ``max_retries`` failed commits per run."""
    return ToolOutput(
        _commit,
        name=ANSWER_COMMIT_TOOL_NAME,
        description=ANSWER_COMMIT_DESCRIPTION,
        max_retries=max_retries,
    )


def _rendered(part: ToolCallPart) -> CommittedAnswer | None:
    try:
        return commit_answer(part.args_as_dict())
    except AnswerCommitError:
        return None


def committed_answer(messages: Sequence[ModelMessage]) -> CommittedAnswer | None:
    """The answer a run committed, re-rendered from its arguments, or ``None``.

    The winner is the first valid ``answer_commit`` call of the last response that made any
    (pydantic-ai ends the run on the first valid output call). Pass one run's
    ``new_messages()``: an earlier run's commit is not this run's answer.
    """
    for message in reversed(messages):
        if not isinstance(message, ModelResponse):
            continue
        calls = [
            p
            for p in message.parts
            if isinstance(p, ToolCallPart) and p.tool_name == ANSWER_COMMIT_TOOL_NAME
        ]
        if calls:
            for call in calls:
                answer = _rendered(call)
                if answer is not None:
                    return answer
            return None
    return None


def _masked_response(message: ModelResponse) -> ModelResponse:
    parts: list[Any] = []
    for part in message.parts:
        if isinstance(part, ToolCallPart) and part.tool_name == ANSWER_COMMIT_TOOL_NAME:
            answer = _rendered(part)
            if answer is not None:
                parts.append(TextPart(content=answer.text))
        else:
            parts.append(part)
    return dataclasses.replace(message, parts=parts)


def _is_commit_return(part: object) -> bool:
    return (
        isinstance(part, ToolReturnPart | RetryPromptPart)
        and part.tool_name == ANSWER_COMMIT_TOOL_NAME
    )


def mask_answer_commits(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages`` with every ``answer_commit`` call turned into plain text.

    A valid call becomes a text part holding its rendered answer (what the user saw); an
    invalid one, and every commit tool return or retry prompt, is dropped. Messages left empty
    are dropped, and responses that end up next to each other are merged, so the history stays
    well formed without advertising a tool the run does not offer.
    """
    masked: list[ModelMessage] = []
    for original in messages:
        message = original
        if isinstance(original, ModelResponse):
            message = _masked_response(original)
        elif isinstance(original, ModelRequest):
            kept = [p for p in original.parts if not _is_commit_return(p)]
            if len(kept) != len(original.parts):
                message = dataclasses.replace(original, parts=kept)
        if not message.parts:
            continue
        previous = masked[-1] if masked else None
        if isinstance(message, ModelResponse) and isinstance(previous, ModelResponse):
            masked[-1] = dataclasses.replace(previous, parts=[*previous.parts, *message.parts])
        else:
            masked.append(message)
    return masked


def _mentions_commit(messages: Sequence[ModelMessage]) -> bool:
    return any(
        isinstance(part, ToolCallPart | ToolReturnPart | RetryPromptPart)
        and part.tool_name == ANSWER_COMMIT_TOOL_NAME
        for message in messages
        for part in message.parts
    )


def check_tool_names(names: Sequence[str]) -> None:
    """Raise :class:`ConfigurationError` when one of ``names`` spells ``answer_commit``."""
    if any(is_reserved_tool_name(name) for name in names):
        raise ConfigurationError(RESERVED_NAME_MESSAGE)


@dataclasses.dataclass
class AnswerCommitGuard(AbstractCapability[Any]):
    """Reserves ``answer_commit``, picks the closing instructions, masks commits where needed.

    Attributes:
        commit_instructions: Added to a request that offers the ``answer_commit`` tool.
        prose_instructions: Added to a text request without it, or ``None`` (not an analyst).
    """

    commit_instructions: str
    prose_instructions: str | None = None

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        """Refuse any function tool (user, MCP, plugin) that spells the reserved name."""
        check_tool_names([tool.name for tool in tool_defs])
        return tool_defs

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Add the closing instructions; mask commit history from a run without the tool."""
        parameters = request_context.model_request_parameters
        offered = any(t.name == ANSWER_COMMIT_TOOL_NAME for t in parameters.output_tools)
        if offered:
            closing: str | None = self.commit_instructions
        elif parameters.allow_text_output and not parameters.output_tools:
            closing = self.prose_instructions
        else:
            closing = None
        if not offered and _mentions_commit(request_context.messages):
            # Request-only: the stored history keeps the calls for later text runs.
            request_context.messages = mask_answer_commits(request_context.messages)
        if closing is not None:
            parts = [*(parameters.instruction_parts or ()), InstructionPart(closing, dynamic=True)]
            request_context.model_request_parameters = dataclasses.replace(
                parameters, instruction_parts=parts
            )
        return request_context
