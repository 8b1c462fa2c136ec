"""Analyst agents that finish with ``answer_commit`` (pydantic-ai, the ``llm`` extra).

:func:`create_agent` builds a pydantic-ai ``Agent``. An analyst (an agent named ``analyst``, or
one marked ``analyst=True``) whose output is text gets the ``answer_commit`` output tool: the
model calls it last with the chosen values, our code validates and renders them, and the
rendered text is the run's output. The model never has to echo the answer, so no output-token
cap can truncate it and no prose can reshape it. A failed commit goes back to the model as a
retry (the one-line reason and an example) with every tool still available.

Only analysts see the tool; the name is reserved for every agent built here, so no user, MCP
or plugin tool can take it in any letter case. ``AGENTSKIT_ANSWER_COMMIT=0`` turns it off, and
the analyst falls back to prose instructions. A run asking for structured output (an
``output_type`` other than text, at build time or per run) never sees the tool, and earlier
commit calls in its history reach the model as plain text. See ``docs/answer-commit.md``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from agentskit_chat._drivers import require_extra
from agentskit_chat.errors import ConfigurationError

from ._models import resolve_model

if TYPE_CHECKING:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import Tool
    from pydantic_ai.toolsets import AgentToolset

    from agentskit_chat.answer_commit import CommittedAnswer

__all__ = [
    "ANALYST_AGENT_NAME",
    "ANSWER_COMMIT_ENV",
    "ANSWER_COMMIT_INSTRUCTIONS",
    "ANSWER_COMMIT_METADATA_KEY",
    "ANSWER_PROSE_INSTRUCTIONS",
    "answer_commit_enabled",
    "committed_answer",
    "create_agent",
    "mask_answer_commits",
]

#: Where a committed answer's metadata (shape, ``answer_only``, the ``readings`` ledger) goes
#: in the assistant message's metadata.
ANSWER_COMMIT_METADATA_KEY: Final = "answer_commit"

#: The environment variable that turns ``answer_commit`` off when set to ``0`` (or ``false``,
#: ``no``, ``off``); read when an agent is built.
ANSWER_COMMIT_ENV: Final = "AGENTSKIT_ANSWER_COMMIT"

#: The agent name that marks an analyst, in any letter case.
ANALYST_AGENT_NAME: Final = "analyst"

#: How an analyst closes a text answer when the tool is offered.
ANSWER_COMMIT_INSTRUCTIONS: Final = (
    "Finish every answer by calling answer_commit, last and once the values are computed. "
    "Give one field per item the request asks for, in the order asked (a request for two "
    "things carries two fields), a table as rows (with the format the request names), or "
    "unresolved with a reason. Always give basis: one or two sentences naming the population, "
    "the grain and the source object or column of the requested value. Set answer_only when "
    "the request asks for only the answer. The text it returns is your final answer; do not "
    "restate it."
)

#: How an analyst closes a text answer when ``answer_commit`` is turned off.
ANSWER_PROSE_INSTRUCTIONS: Final = (
    "End with the final answer on its own line as **Answer:** followed by the value, or one "
    "line per requested item, in the order asked, with nothing after it. Before it, state the "
    "basis in one or two sentences: population, grain, and the source object or column. When "
    "the request asks for only the answer, reply with the value alone (or one label: value "
    "line per item), with no basis. For a top-N request, include every row tied with the last "
    "one and say that there is a tie."
)

_OFF: Final = frozenset({"0", "false", "no", "off"})
_LLM_EXTRA_USER: Final = "create_agent"


def answer_commit_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``answer_commit`` is on: unless ``AGENTSKIT_ANSWER_COMMIT`` is ``0`` (or false).

    >>> answer_commit_enabled({"AGENTSKIT_ANSWER_COMMIT": "0"}), answer_commit_enabled({})
    (False, True)
    """
    value = (os.environ if environ is None else environ).get(ANSWER_COMMIT_ENV, "")
    return value.strip().lower() not in _OFF


def _static_names(tools: Sequence[Any], toolsets: Sequence[Any]) -> list[str]:
    from pydantic_ai.tools import Tool  # noqa: PLC0415
    from pydantic_ai.toolsets import FunctionToolset  # noqa: PLC0415

    names = [
        tool.name if isinstance(tool, Tool) else getattr(tool, "__name__", "") for tool in tools
    ]
    for toolset in toolsets:
        if isinstance(toolset, FunctionToolset):
            names.extend(toolset.tools)
    return names


def create_agent(
    model: str | Model,
    *,
    name: str,
    instructions: str | None = None,
    tools: Sequence[Tool[Any] | Any] = (),
    toolsets: Sequence[AgentToolset[Any]] = (),
    output_type: Any = str,
    analyst: bool | None = None,
    model_settings: ModelSettings | None = None,
    retries: int = 3,
    environ: Mapping[str, str] | None = None,
) -> Agent[Any, Any]:
    """Build a pydantic-ai agent; analysts with text output finish with ``answer_commit``.

    The agent's text output type also admits ``DeferredToolRequests``, so tools that need a
    human's approval work through :func:`~agentskit_chat.agents.from_pydantic_ai`.

    Args:
        model: A ``pydantic_ai.models.Model`` or a model string (see
            :class:`~agentskit_chat.agents.PydanticAIGenerator` for the forms accepted).
        name: The agent's name; ``analyst`` (any letter case) marks an analyst.
        instructions: Who the agent is and how it works; the closing instructions (commit or
            prose) are added after them for analysts.
        tools: Function tools (functions or ``pydantic_ai.Tool``).
        toolsets: Toolsets, MCP servers included; their names are checked on every run.
        output_type: ``str`` (the default) for text answers; anything else asks for structured
            output, and then the agent never offers ``answer_commit``.
        analyst: Marks the agent as an analyst (or not) whatever its name; ``None`` decides by
            the name.
        model_settings: pydantic-ai model settings (temperature, max tokens, ...).
        retries: How many failed tool calls, and failed commits, a run tolerates.
        environ: Where ``AGENTSKIT_ANSWER_COMMIT`` is read (default: ``os.environ``).

    Returns:
        The agent, with a capability that reserves the ``answer_commit`` name on every run.

    Raises:
        ImportError: the ``llm`` extra is not installed.
        ConfigurationError: a tool is named ``answer_commit`` in any letter case (also raised
            by a run, for tools an MCP server or toolset lists then), ``retries`` is negative,
            or the model cannot be configured.

    Example:
        >>> agent = create_agent("openai:gpt-4.1-mini", name="analyst")  # doctest: +SKIP
    """
    require_extra(_LLM_EXTRA_USER, "llm", "pydantic_ai")
    from pydantic_ai import Agent, DeferredToolRequests  # noqa: PLC0415

    from ._answer_commit_hooks import (  # noqa: PLC0415
        AnswerCommitGuard,
        answer_commit_output,
        check_tool_names,
    )

    if type(retries) is not int or retries < 0:
        raise ConfigurationError("The agent's retries must be a whole number.")
    check_tool_names(_static_names(tools, toolsets))
    is_analyst = name.strip().casefold() == ANALYST_AGENT_NAME if analyst is None else analyst
    text_output = output_type is str
    commit = is_analyst and text_output and answer_commit_enabled(environ)
    if commit:
        outputs: Any = [answer_commit_output(retries), str, DeferredToolRequests]
    elif text_output:
        outputs = [str, DeferredToolRequests]
    else:
        outputs = output_type
    guard = AnswerCommitGuard(
        commit_instructions=ANSWER_COMMIT_INSTRUCTIONS,
        prose_instructions=ANSWER_PROSE_INSTRUCTIONS if is_analyst else None,
    )
    agent: Agent[Any, Any] = Agent(
        resolve_model(model),
        name=name,
        instructions=instructions,
        tools=list(tools),
        toolsets=list(toolsets),
        output_type=outputs,
        model_settings=model_settings,
        retries=retries,
        capabilities=[guard],
    )
    return agent


def committed_answer(messages: Sequence[ModelMessage]) -> CommittedAnswer | None:
    """The answer a run committed through ``answer_commit``, or ``None`` (it answered in prose).

    Its ``text`` is the run's output; its ``metadata()`` (shape, ``answer_only`` and the
    advisory ``readings`` ledger) is what a host keeps beside the message. Pass the run's
    ``new_messages()``.
    """
    from ._answer_commit_hooks import committed_answer as find  # noqa: PLC0415

    return find(messages)


def mask_answer_commits(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages`` with ``answer_commit`` calls turned into text, for a run without the tool.

    Agents built by :func:`create_agent` do this by themselves for structured-output runs;
    this is for histories handed to other agents.
    """
    from ._answer_commit_hooks import mask_answer_commits as mask  # noqa: PLC0415

    return mask(messages)
