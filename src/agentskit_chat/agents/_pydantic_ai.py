"""Any pydantic-ai agent as a chat adapter (the ``llm`` extra).

Each turn is one agent run through ``Agent.run_stream_events``: the run lives in a background
task and hands its events over a zero-buffer stream, so our source holds no cancel scope
between chunks and can be consumed (and closed) from any task. Closing the source leaves the
``async with`` that owns the run, which cancels it and closes the model's stream; ``abort()``
cancels the run from wherever it is called.

Tools that need a human's approval (``requires_approval=True`` or ``ApprovalRequired``) pause
the run: pydantic-ai ends it with ``DeferredToolRequests`` and the source reports each call with
status ``requires_confirmation``, then ``done``. The chat controller records the decision on
the call (approved: ``running``; denied: an error starting with ``Permission denied: ``) and
asks again; the next run resumes with those decisions as ``DeferredToolResults``, so an
approved tool runs exactly once, inside the agent, and a denial reaches the model as a denied
tool return. See :mod:`._pydantic_ai_history` for how the history is rebuilt.

The chat's own tools reach the agent too, under the same checks as the controller's path (see
:mod:`._toolset`): each run is offered the request's ``ChatTool`` values that have an executor,
their calls run through the request's :class:`~agentskit_chat.runtime.ToolRunner` (argument
schema, authorization in phase ``execute``, executor), and every execution of the agent's own
tools is authorized in phase ``execute`` first. A chat tool that requires confirmation is
deferred like any approval; on approval the controller runs it, and the next run hands its
outcome to the agent as the deferred call's result.

An agent that offers ``answer_commit`` (an analyst built by
:func:`~agentskit_chat.agents.create_agent`) has its final answer rendered by code, so its text
is held until the run ends: a run that commits sends exactly the rendered answer, once, with
the committed metadata (readings included) at ``metadata["answer_commit"]``; any other run
sends the text it held. Tool calls and results still stream as they happen.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Final

import anyio

from agentskit_chat._drivers import require_extra
from agentskit_chat.runtime import AdapterCapabilities, AdapterRequest, StreamChunk

if TYPE_CHECKING:
    from pydantic_ai.agent import AbstractAgent, AgentRunEvents
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.toolsets import AbstractToolset
    from pydantic_ai.usage import UsageLimits

    from agentskit_chat.answer_commit import CommittedAnswer

    from ._pydantic_ai_history import RunInput

__all__ = [
    "RUN_FAILED_MESSAGE",
    "PydanticAIChatAdapter",
    "PydanticAISource",
    "from_pydantic_ai",
]

#: The text of the ``error`` chunk when the run fails (the provider's own text is never shown).
RUN_FAILED_MESSAGE: Final = "The assistant could not complete its answer. Please try again."

_CAPABILITIES: Final = AdapterCapabilities(streaming=True, structured_output=False)
_CLOSE_TIMEOUT_S: Final = 5.0


def _run_output_type(agent: AbstractAgent[Any, Any]) -> Any:
    """The output type to run with, so that deferred tool calls can end a run."""
    from pydantic_ai import DeferredToolRequests  # noqa: PLC0415

    # pydantic-ai refuses a run-time output type when the agent has output validators; such an
    # agent must declare ``output_type=[str, DeferredToolRequests]`` itself to use approvals.
    if agent.output_type is str and not getattr(agent, "_output_validators", None):
        return [str, DeferredToolRequests]
    return None


def _offers_answer_commit(agent: AbstractAgent[Any, Any]) -> bool:
    """Whether the agent's output types include the ``answer_commit`` output tool."""
    from pydantic_ai import ToolOutput  # noqa: PLC0415

    from agentskit_chat.answer_commit import ANSWER_COMMIT_TOOL_NAME  # noqa: PLC0415

    output_type = agent.output_type
    outputs = output_type if isinstance(output_type, Sequence) else (output_type,)
    return any(
        isinstance(output, ToolOutput) and output.name == ANSWER_COMMIT_TOOL_NAME
        for output in outputs
    )


def _committed(part: ToolCallPart) -> CommittedAnswer | None:
    from agentskit_chat.answer_commit import commit_answer  # noqa: PLC0415
    from agentskit_chat.errors import AnswerCommitError  # noqa: PLC0415

    try:
        return commit_answer(part.args_as_dict())
    except (AnswerCommitError, ValueError):
        return None


class PydanticAIChatAdapter:
    """A :class:`~agentskit_chat.runtime.ChatAdapter` that answers with a pydantic-ai agent.

    Build it with :func:`from_pydantic_ai`. Each :meth:`create_source` call opens one agent
    run for the request; the run starts when the source is first iterated.
    """

    __slots__ = (
        "_agent",
        "_answer_commit",
        "_deps",
        "_model_settings",
        "_output_type",
        "_usage_limits",
    )

    def __init__(
        self,
        agent: AbstractAgent[Any, Any],
        *,
        deps: Any = None,
        model_settings: ModelSettings | None = None,
        usage_limits: UsageLimits | None = None,
    ) -> None:
        self._agent = agent
        self._deps = deps
        self._model_settings = model_settings
        self._usage_limits = usage_limits
        self._output_type = _run_output_type(agent)
        self._answer_commit = _offers_answer_commit(agent)

    @property
    def capabilities(self) -> AdapterCapabilities:
        """Streams text; produces no structured assistant content."""
        return _CAPABILITIES

    @property
    def agent(self) -> AbstractAgent[Any, Any]:
        """The agent this adapter runs."""
        return self._agent

    @property
    def answer_commit(self) -> bool:
        """Whether the agent offers ``answer_commit``; its text is then held until a run ends."""
        return self._answer_commit

    def check_tools(self, tools: Sequence[object]) -> None:
        """Refuse chat tools the agent cannot be offered: one named like one of its tools.

        The chat controller calls this when it is built and when its config changes.

        Raises:
            ConfigurationError: when a chat tool has the name of one of the agent's tools
                (its function tools, or ``answer_commit``).
        """
        from ._toolset import agent_tool_names, check_tool_names  # noqa: PLC0415

        taken = agent_tool_names(self._agent, answer_commit=self._answer_commit)
        check_tool_names(taken, tools)

    def create_source(self, request: AdapterRequest) -> PydanticAISource:
        """A source that runs the agent once for ``request``.

        Raises:
            ConfigurationError: when a chat tool of the request is named like one of the
                agent's tools.
        """
        self.check_tools(request.context.tools)
        return PydanticAISource(self, request)

    def _open(
        self,
        request: AdapterRequest,
        plan: RunInput,
        toolsets: Sequence[AbstractToolset[Any]] | None,
        capabilities: Sequence[AbstractCapability[Any]] | None,
    ) -> AbstractAsyncContextManager[AgentRunEvents[Any]]:
        return self._agent.run_stream_events(
            plan.prompt,
            output_type=self._output_type,
            message_history=plan.history or None,
            deferred_tool_results=plan.deferred,
            instructions=request.context.system_prompt,
            deps=self._deps,
            model_settings=self._model_settings,
            usage_limits=self._usage_limits,
            toolsets=toolsets,
            capabilities=capabilities,
        )


class PydanticAISource:
    """One agent run, as a :class:`~agentskit_chat.runtime.ChatSource`.

    ``stream()`` may be iterated once; a second iteration, or one after :meth:`abort`, yields
    nothing. Closing the iterator early (``aclose``) cancels the run.
    """

    __slots__ = ("_aborted", "_adapter", "_events", "_request", "_started")

    def __init__(self, adapter: PydanticAIChatAdapter, request: AdapterRequest) -> None:
        self._adapter = adapter
        self._request = request
        self._aborted = False
        self._started = False
        self._events: AgentRunEvents[Any] | None = None

    def abort(self) -> None:
        """Cancel the run; no chunk is yielded after this. Never raises."""
        self._aborted = True
        if self._events is not None:
            with contextlib.suppress(Exception):
                self._events.cancel()

    async def stream(self) -> AsyncIterator[StreamChunk]:
        """The chunks of the run: text, reasoning, tool calls, usage, then ``done``.

        For an agent that offers ``answer_commit`` the text comes at the end, in one chunk:
        the rendered answer when the run committed one, else the text the run wrote.
        A failed run (the model, its provider, a tool raising, a usage limit) ends with one
        ``error`` chunk whose text is :data:`RUN_FAILED_MESSAGE`; calls it left running are
        first reported as errors.
        """
        from pydantic_ai import AgentRunResultEvent  # noqa: PLC0415

        from ._pydantic_ai_events import EventMapper  # noqa: PLC0415
        from ._pydantic_ai_history import build_run_input  # noqa: PLC0415
        from ._toolset import ToolGate, chat_tools, chat_toolset  # noqa: PLC0415

        if self._aborted or self._started:
            return
        self._started = True
        context = self._request.context
        tools = chat_tools(context)
        # Confirmation-gated chat tools are run by the controller when approved.
        settled = frozenset(tool.name for tool in tools if tool.requires_confirmation)
        plan = build_run_input(self._request.messages, settled_by_chat=settled)
        if plan.mode == "idle":
            yield StreamChunk("done")
            return
        mapper = EventMapper(plan.known_calls, hold_text=self._adapter.answer_commit)
        runner = context.tool_runner
        toolsets = None
        capabilities = None
        if runner is not None:
            # Without the controller's runner nothing could check a chat tool: none is offered.
            toolsets = [chat_toolset(tools, runner)] if tools else None
            capabilities = [ToolGate(runner, frozenset(tool.name for tool in tools))]
        run = self._adapter._open(self._request, plan, toolsets, capabilities)
        events = await run.__aenter__()
        self._events = events
        failed = False
        try:
            async for event in events:
                if self._aborted:
                    break
                if isinstance(event, AgentRunResultEvent):
                    committed = None
                    if mapper.commit is not None:
                        # Rendering a large table again takes a while: not on the loop.
                        committed = await anyio.to_thread.run_sync(_committed, mapper.commit)
                    chunks = mapper.result(event, committed)
                else:
                    chunks = mapper.feed(event)
                for chunk in chunks:
                    if self._aborted:
                        break
                    yield chunk
        except Exception:
            # A provider error, a raising tool, a usage limit, a timeout (``RunCancelled``).
            failed = not self._aborted
        finally:
            # Shielded, so a cancelled consumer still cancels the run and closes the model's
            # stream before it goes on; bounded, in case a tool ignores cancellation.
            with anyio.move_on_after(_CLOSE_TIMEOUT_S, shield=True):
                await run.__aexit__(None, None, None)
        if failed:
            for chunk in [*mapper.flush(), *mapper.unfinished()]:
                yield chunk
            yield StreamChunk("error", content=RUN_FAILED_MESSAGE)


def from_pydantic_ai(
    agent: AbstractAgent[Any, Any],
    *,
    deps: Any = None,
    model_settings: ModelSettings | None = None,
    usage_limits: UsageLimits | None = None,
) -> PydanticAIChatAdapter:
    """Turn a pydantic-ai agent into a chat adapter.

    The chat's history is the run's message history, its newest user message the prompt and
    the chat's system prompt the run's extra instructions. Text is streamed as it arrives; tool
    calls become tool-call records on the assistant message; usage is reported once per turn.

    The chat's tools (``ChatConfig.tools`` with an executor) are offered to every run and run
    through the controller's checks; the chat's authorizer also decides, in phase ``execute``,
    before each of the agent's own tools runs. A chat tool must not be named like one of the
    agent's tools.

    Tools that need approval work when the agent's output type lets a run end with
    ``DeferredToolRequests``: for an agent whose output type is ``str`` (the default) the adapter
    adds it at run time; any other agent must declare ``output_type=[..., DeferredToolRequests]``
    itself. A structured final output is shown as compact JSON text.

    An agent that offers ``answer_commit`` (an analyst from
    :func:`~agentskit_chat.agents.create_agent`) has its text held until the run ends: a run
    that commits sends exactly the rendered answer, once, with the commit's metadata at
    ``metadata["answer_commit"]``; any other run sends the text it held.

    Args:
        agent: Any ``pydantic_ai`` agent (``Agent`` or a wrapper).
        deps: The dependencies passed to every run.
        model_settings: Model settings for every run (temperature, max tokens, ...).
        usage_limits: Limits for every run; a run that exceeds them ends in error.

    Raises:
        ImportError: the ``llm`` extra is not installed.
        TypeError: ``agent`` is not a pydantic-ai agent.

    Example:
        >>> from pydantic_ai import Agent
        >>> adapter = from_pydantic_ai(Agent("openai:gpt-4.1-mini"))  # doctest: +SKIP
        >>> controller = ChatController(ChatConfig(adapter=adapter))  # doctest: +SKIP
    """
    require_extra("from_pydantic_ai", "llm", "pydantic_ai")
    from pydantic_ai.agent import AbstractAgent  # noqa: PLC0415

    # Loaded now, while nothing is streaming: the first turn then imports nothing.
    from . import _pydantic_ai_events, _pydantic_ai_history, _toolset  # noqa: F401, PLC0415

    if not isinstance(agent, AbstractAgent):
        raise TypeError("expected a pydantic_ai agent")
    return PydanticAIChatAdapter(
        agent, deps=deps, model_settings=model_settings, usage_limits=usage_limits
    )
