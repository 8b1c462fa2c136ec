"""A generator backed by a real model, through pydantic-ai (the ``llm`` extra).

The model sees the retrieved sources numbered ``[1]`` to ``[n]`` with their excerpts and is told
to cite them with ``[k]`` only. Its text is streamed as it arrives, through a filter that removes
every ``[k]`` outside ``1..n``, so an answer can only point at the sources the service will list
in its ``cite`` event, whatever the model writes. A marker split across deltas (``"[1"`` then
``"2]"``) is held back until it is complete, and so is the whitespace in front of it, so a
removed marker takes its leading space with it.

One generation is one streamed model request (``pydantic_ai.direct.model_request_stream``), not
an agent run: an agent run lives inside a pydantic-graph task group for its whole duration, and
a generator suspended inside a task group cannot be resumed under another cancel scope, which
is exactly how the Ask service pulls each frame under its deadline. A single request holds no
scope between deltas. It is still an ``async with`` inside this generator, so anyio
cancellation, a deadline or an early ``aclose()`` exits it and closes the provider's stream.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Final

from agentskit_chat._drivers import require_extra
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import AskMessage, AskUsage, GroundedSource
from agentskit_chat.protocol._text import js_trim, truncate_utf16, utf16_len
from agentskit_chat.service import GenerationRequest, TextDelta, UsageReport

from ._models import resolve_model

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings

__all__ = ["GROUNDING_RULES", "PydanticAIGenerator"]

#: Appended to every instruction: how to use and cite the sources. ``{count}`` is the number of
#: sources of the request.
GROUNDING_RULES: Final = (
    "Answer the user's question using only the sources given with it, numbered [1] to "
    "[{count}]. After each sentence that uses a source, cite it as [k], where k is the "
    "source's number, for example [1] or [2][3]. Cite no other number, and never invent a "
    "source, a link or a fact. If the sources do not answer the question, say that the "
    "documentation you were given does not cover it. Answer concisely, in the language of "
    "the question, in Markdown."
)

_CITATION: Final = re.compile(r"(\s*)\[(\d+)\]")
# What may still grow into a citation: trailing whitespace, then an opened ``[`` and digits.
_PENDING: Final = re.compile(r"\s*(?:\[\d*)?\Z")
_MAX_MODEL_NAME: Final = 256


class CitationFilter:
    """Removes citation markers ``[k]`` with ``k`` outside ``1..count`` from streamed text.

    :meth:`feed` returns what is safe to emit now; :meth:`flush` returns the rest at the end.
    Whatever is fed comes out, in order, except the removed markers and the whitespace right
    before each of them.

    >>> f = CitationFilter(2)
    >>> f.feed("Use it [1") + f.feed("2] now [2].") + f.flush()
    'Use it now [2].'
    """

    def __init__(self, count: int) -> None:
        self._count = count
        self._held = ""

    def feed(self, text: str) -> str:
        """Take the next piece of text; return the part that can no longer change."""
        buffer = self._clean(self._held + text)
        match = _PENDING.search(buffer)
        cut = len(buffer) if match is None else match.start()
        self._held = buffer[cut:]
        return buffer[:cut]

    def flush(self) -> str:
        """Everything still held back (an unfinished ``[12`` is plain text)."""
        rest, self._held = self._held, ""
        return rest

    def _clean(self, text: str) -> str:
        # Until nothing changes: removing ``[9]`` from ``[1[9]2]`` must not leave ``[12]``.
        while "[" in text:
            cleaned = _CITATION.sub(self._keep, text)
            if cleaned == text:
                break
            text = cleaned
        return text

    def _keep(self, match: re.Match[str]) -> str:
        return match.group(0) if 1 <= int(match.group(2)) <= self._count else ""


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


def render_sources_prompt(query: str, sources: Sequence[GroundedSource]) -> str:
    """The user message of a generation: the numbered sources, then the question."""
    blocks = [
        f'<source number="{number}" title="{_escape(source.title)}">\n'
        f"{source.excerpt.replace('</source', '&lt;/source')}\n</source>"
        for number, source in enumerate(sources, start=1)
    ]
    listed = "\n\n".join(blocks) if blocks else "(no sources)"
    return f"Sources:\n\n{listed}\n\nQuestion: {query}"


def _history(messages: Sequence[AskMessage], keep: int) -> list[ModelMessage]:
    from pydantic_ai.messages import (  # noqa: PLC0415
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )

    earlier = list(messages[:-1] if messages and messages[-1].role == "user" else messages)
    earlier = earlier[-keep:] if keep else []
    while earlier and earlier[0].role != "user":
        earlier.pop(0)
    history: list[ModelMessage] = []
    for message in earlier:
        if message.role == "user":
            history.append(ModelRequest(parts=[UserPromptPart(content=message.content)]))
        else:
            history.append(ModelResponse(parts=[TextPart(content=message.content)]))
    return history


def check_generator_options(
    max_output_chars: int, max_history_messages: int, instructions: str | None
) -> None:
    """Refuse a non-positive output limit, a negative history limit or blank instructions.

    Raises:
        ConfigurationError: naming the option.
    """
    if type(max_output_chars) is not int or max_output_chars < 1:
        raise ConfigurationError("The generator's output limit must be a positive integer.")
    if type(max_history_messages) is not int or max_history_messages < 0:
        raise ConfigurationError("The generator's history limit must be a whole number.")
    if instructions is not None and not instructions.strip():
        raise ConfigurationError("The generator's instructions must not be blank.")


def _usage(response: ModelResponse, fallback_model: str) -> AskUsage:
    usage = response.usage
    fields: dict[str, object] = {}
    if not usage.unmeasured_requests:
        fields["input_tokens"] = usage.input_tokens
        fields["output_tokens"] = usage.output_tokens
        fields["total_tokens"] = usage.total_tokens
    name = js_trim(truncate_utf16(response.model_name or fallback_model, _MAX_MODEL_NAME))
    if name and not (0xD800 <= ord(name[-1]) <= 0xDBFF):
        fields["model"] = name
        try:
            # From the price table bundled with pydantic-ai (no network); unknown models have none.
            price = float(response.cost().total_price)
        except Exception:
            price = math.nan
        if math.isfinite(price) and price >= 0:
            fields["cost_usd"] = price
    return AskUsage.model_validate(fields)


class PydanticAIGenerator:
    """The :class:`~agentskit_chat.service.Generator` port, answering with a model.

    Each generation is one streamed model request: the conversation so far as history, then
    the numbered sources and the question as the user message, with the instructions. Text deltas
    are yielded as the model streams them (out-of-range citations removed), then one usage
    report (tokens, cost when pydantic-ai can price the model, model name).

    Args:
        model: A ``pydantic_ai.models.Model`` (for example a ``FunctionModel`` in tests), a
            pydantic-ai model string such as ``openai:gpt-4.1-mini``, or
            ``openai-compatible:<base_url>#<model>`` for any server speaking the OpenAI chat
            completions API (``openai-compatible:http://127.0.0.1:8000/v1#llama-3.1-8b``).
        instructions: Who the assistant is, its tone and audience. Defaults to a sentence
            naming the site's assistant. :data:`GROUNDING_RULES` always follow it.
        max_output_chars: The answer stops (and the model stream is closed) after this many
            UTF-16 code units; the Ask service refuses answers longer than 16,384.
        max_history_messages: How many earlier messages of the conversation the model sees.
        api_key: The key of an ``openai-compatible:`` server (default ``OPENAI_API_KEY``).
        model_settings: pydantic-ai model settings (temperature, max tokens, ...).

    Raises:
        ImportError: the ``llm`` extra is not installed.
        ConfigurationError: the model cannot be configured, or a bound is not positive.

    Example:
        >>> generator = PydanticAIGenerator("openai:gpt-4.1-mini")  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str | Model,
        *,
        instructions: str | None = None,
        max_output_chars: int = 16384,
        max_history_messages: int = 16,
        api_key: str | None = None,
        model_settings: ModelSettings | None = None,
    ) -> None:
        require_extra("PydanticAIGenerator", "llm", "pydantic_ai")
        check_generator_options(max_output_chars, max_history_messages, instructions)
        self._model = resolve_model(model, api_key=api_key)
        self._instructions = instructions
        self._max_output_chars = max_output_chars
        self._max_history = max_history_messages
        self._model_settings = model_settings

    @property
    def model_name(self) -> str:
        """The name of the model, as pydantic-ai reports it."""
        return self._model.model_name

    def instructions_for(self, request: GenerationRequest) -> str:
        """The instructions of one generation: who the assistant is, then the grounding rules."""
        persona = self._instructions
        if persona is None:
            persona = (
                f"You are {request.site.assistant.name}, an assistant that answers questions "
                "about its documentation."
            )
        return f"{persona}\n\n{GROUNDING_RULES.format(count=len(request.sources))}"

    async def generate(self, request: GenerationRequest) -> AsyncIterator[TextDelta | UsageReport]:
        """Stream the model's grounded answer, then its usage.

        Raises:
            Whatever the model or its provider raises (an HTTP error, a refusal, a timeout);
            the Ask service reports it with its own fixed diagnostic, never with this text.
        """
        from pydantic_ai.direct import model_request_stream  # noqa: PLC0415
        from pydantic_ai.messages import (  # noqa: PLC0415
            ModelRequest,
            PartDeltaEvent,
            PartStartEvent,
            TextPart,
            TextPartDelta,
            UserPromptPart,
        )

        messages = _history(request.messages, self._max_history)
        messages.append(
            ModelRequest(
                parts=[UserPromptPart(render_sources_prompt(request.query, request.sources))],
                instructions=self.instructions_for(request),
            )
        )
        citations = CitationFilter(len(request.sources))
        budget = self._max_output_chars
        finished = False
        async with model_request_stream(
            self._model, messages, model_settings=self._model_settings
        ) as stream:
            async for event in stream:
                if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                    delta = event.part.content
                elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                    delta = event.delta.content_delta
                else:
                    continue
                text = citations.feed(delta)
                if text:
                    text, budget, finished = _fit(text, budget)
                    if text:
                        yield TextDelta(text)
                    if finished:
                        # Leaving the ``async with`` closes the model's stream.
                        break
            if not finished:
                text, budget, finished = _fit(citations.flush(), budget)
                if text:
                    yield TextDelta(text)
            usage = _usage(stream.get(), self._model.model_name)
        yield UsageReport(usage)


def _fit(text: str, budget: int) -> tuple[str, int, bool]:
    """``text`` cut to ``budget`` UTF-16 units: (the part to emit, the budget left, cut?)."""
    size = utf16_len(text)
    if size <= budget:
        return text, budget - size, False
    cut = truncate_utf16(text, budget)
    if cut and 0xD800 <= ord(cut[-1]) <= 0xDBFF:
        # Never split a surrogate pair.
        cut = cut[:-1]
    return cut, 0, True
