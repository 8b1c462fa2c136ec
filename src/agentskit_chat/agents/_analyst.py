"""A generator that answers through an analyst agent finishing with ``answer_commit``.

The analyst (built by :func:`~agentskit_chat.agents.create_agent`) sees the same numbered
sources as :class:`~agentskit_chat.agents.PydanticAIGenerator` and finishes by calling
``answer_commit``: our code validates its payload and renders the answer, so the text comes
from code, not from the model's prose. A failed commit goes back to the model for repair.

Each generation runs the agent to completion before anything is yielded, then yields the
rendered text once (out-of-range citations removed) and the run's usage. That is on purpose: an
agent run lives inside a task group for its whole duration, and a generator suspended inside a
task group cannot be resumed under another cancel scope, which is how the Ask service pulls
each frame under its deadline. The whole run happens inside one pull, so a deadline or a
cancellation still reaches it and ends it.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from agentskit_chat._drivers import require_extra
from agentskit_chat.protocol import ASK_REQUEST_MAX_MESSAGE_CHARS, AskUsage
from agentskit_chat.protocol._text import js_trim, truncate_utf16, utf16_len
from agentskit_chat.service import GenerationRequest, TextDelta, UsageReport

from ._answer_commit import ANALYST_AGENT_NAME, create_agent
from ._models import resolve_model
from ._writer import (
    CitationFilter,
    _history,
    check_generator_options,
    render_sources_prompt,
)

if TYPE_CHECKING:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import RunContext

__all__ = ["ANALYST_GROUNDING_RULES", "AnalystGenerator"]

#: Added to every analyst run: how to use and cite the sources. ``{count}`` is the number of
#: sources of the request. The closing instructions (``answer_commit``, or prose when the tool
#: is turned off) follow them.
ANALYST_GROUNDING_RULES: Final = (
    "Answer the user's question using only the sources given with it, numbered [1] to "
    "[{count}]. Cite each source you use as [k], where k is the source's number: in the "
    "basis, and after each value that comes from a source, for example cache_size [2]. Cite "
    "no other number, and never invent a source, a link or a fact. If the sources do not "
    "answer the question, the answer is unresolved: say that the documentation you were given "
    "does not cover it. Answer in the language of the question."
)

_MAX_MODEL_NAME: Final = 256
_NOT_TEXT: Final = "The analyst's run ended without a text answer."


def _too_long(size: int, limit: int) -> str:
    return (
        f"The rendered answer is {size} characters long; this assistant can send at most "
        f"{limit}. Aggregate, narrow the rows or shorten the values, then commit again."
    )


def _usage(messages: Sequence[ModelMessage], fallback_model: str) -> AskUsage:
    """The usage of a whole run: its responses' tokens and prices added up."""
    from pydantic_ai.messages import ModelResponse  # noqa: PLC0415

    responses = [message for message in messages if isinstance(message, ModelResponse)]
    fields: dict[str, object] = {}
    if not any(response.usage.unmeasured_requests for response in responses):
        input_tokens = sum(response.usage.input_tokens for response in responses)
        output_tokens = sum(response.usage.output_tokens for response in responses)
        fields["input_tokens"] = input_tokens
        fields["output_tokens"] = output_tokens
        fields["total_tokens"] = input_tokens + output_tokens
    last = responses[-1].model_name if responses else None
    name = js_trim(truncate_utf16(last or fallback_model, _MAX_MODEL_NAME))
    if name and not (0xD800 <= ord(name[-1]) <= 0xDBFF):
        fields["model"] = name
        try:
            # From the price table bundled with pydantic-ai (no network); unknown models have none.
            price = sum(float(response.cost().total_price) for response in responses)
        except Exception:
            price = math.nan
        if responses and math.isfinite(price) and price >= 0:
            fields["cost_usd"] = price
    return AskUsage.model_validate(fields)


class AnalystGenerator:
    """The :class:`~agentskit_chat.service.Generator` port, answering through an analyst agent.

    The agent (named ``analyst``, built once) gets the conversation so far as history, the
    numbered sources and the question as the prompt, and :data:`ANALYST_GROUNDING_RULES`. It
    finishes with ``answer_commit``; the rendered answer (basis, then ``**Answer:** ...``, a
    table or ``**Unresolved:** ...``) is yielded as one text delta, with citations outside
    ``1..n`` removed, then one usage report for the whole run (tokens of every request, cost
    when pydantic-ai can price the model, model name). An answer longer than
    ``max_output_chars`` goes back to the model, which must aggregate or narrow it.

    Args:
        model: A ``pydantic_ai.models.Model`` (for example a ``FunctionModel`` in tests), a
            pydantic-ai model string such as ``openai:gpt-4.1-mini``, or
            ``openai-compatible:<base_url>#<model>``.
        instructions: Who the assistant is, its tone and audience. Defaults to a sentence
            naming the site's assistant. The grounding rules always follow it.
        max_output_chars: The longest answer, in UTF-16 code units, the model may commit (the
            Ask service refuses answers longer than 16,384).
        max_history_messages: How many earlier messages of the conversation the model sees.
        api_key: The key of an ``openai-compatible:`` server (default ``OPENAI_API_KEY``).
        model_settings: pydantic-ai model settings (temperature, max tokens, ...).
        retries: How many failed commits (invalid or too long) one run tolerates.

    Raises:
        ImportError: the ``llm`` extra is not installed.
        ConfigurationError: the model cannot be configured, or a bound is out of range.

    Example:
        >>> generator = AnalystGenerator("openai:gpt-4.1-mini")  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str | Model,
        *,
        instructions: str | None = None,
        max_output_chars: int = ASK_REQUEST_MAX_MESSAGE_CHARS,
        max_history_messages: int = 16,
        api_key: str | None = None,
        model_settings: ModelSettings | None = None,
        retries: int = 3,
    ) -> None:
        require_extra("AnalystGenerator", "llm", "pydantic_ai")
        check_generator_options(max_output_chars, max_history_messages, instructions)

        self._model = resolve_model(model, api_key=api_key)
        self._instructions = instructions
        self._max_output_chars = max_output_chars
        self._max_history = max_history_messages
        self._agent: Agent[Any, Any] = create_agent(
            self._model,
            name=ANALYST_AGENT_NAME,
            model_settings=model_settings,
            retries=retries,
        )
        self._agent.output_validator(self._check_length)

    @property
    def model_name(self) -> str:
        """The name of the model, as pydantic-ai reports it."""
        return self._model.model_name

    @property
    def agent(self) -> Agent[Any, Any]:
        """The analyst agent behind the generator (pydantic-ai ``Agent``)."""
        return self._agent

    def instructions_for(self, request: GenerationRequest) -> str:
        """The run's instructions: who the assistant is, then the grounding rules."""
        persona = self._instructions
        if persona is None:
            persona = (
                f"You are {request.site.assistant.name}, an analyst that answers questions "
                "about its documentation."
            )
        return f"{persona}\n\n{ANALYST_GROUNDING_RULES.format(count=len(request.sources))}"

    def _check_length(self, ctx: RunContext[Any], output: Any) -> Any:
        from pydantic_ai import ModelRetry  # noqa: PLC0415

        if isinstance(output, str):
            size = utf16_len(output)
            if size > self._max_output_chars:
                raise ModelRetry(_too_long(size, self._max_output_chars))
        return output

    async def generate(self, request: GenerationRequest) -> AsyncIterator[TextDelta | UsageReport]:
        """Run the analyst to completion, then yield its rendered answer and the run's usage.

        Raises:
            Whatever the model or its provider raises (an HTTP error, a refusal, a timeout, too
            many failed commits); the Ask service reports it with its own fixed diagnostic,
            never with this text.
        """
        result = await self._agent.run(
            render_sources_prompt(request.query, request.sources),
            message_history=_history(request.messages, self._max_history),
            instructions=self.instructions_for(request),
        )
        output = result.output
        if not isinstance(output, str):
            # Only tools that wait for approval defer a run, and this agent has none.
            raise RuntimeError(_NOT_TEXT)
        citations = CitationFilter(len(request.sources))
        text = citations.feed(output) + citations.flush()
        usage = _usage(result.new_messages(), self._model.model_name)
        if text:
            yield TextDelta(text)
        yield UsageReport(usage)
