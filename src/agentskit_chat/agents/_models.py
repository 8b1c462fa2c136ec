"""Model resolution: a pydantic-ai model from a model object or a model string.

Every pydantic-ai user in this package (the writer and analyst generators, :func:`create_agent`)
resolves models here, so a model string means the same thing everywhere.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from agentskit_chat._drivers import require_extra
from agentskit_chat.errors import ConfigurationError

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = ["OPENAI_COMPATIBLE_PREFIX", "resolve_model"]

#: The prefix of a model string naming an OpenAI-compatible server:
#: ``openai-compatible:<base_url>#<model>``.
OPENAI_COMPATIBLE_PREFIX: Final = "openai-compatible:"


def _openai_compatible(spec: str, api_key: str | None) -> Model:
    base_url, separator, name = spec[len(OPENAI_COMPATIBLE_PREFIX) :].rpartition("#")
    if not separator or not name.strip() or not base_url.startswith(("http://", "https://")):
        raise ConfigurationError(
            "An OpenAI-compatible model must read 'openai-compatible:<base_url>#<model>'."
        )
    try:
        from pydantic_ai.models.openai import OpenAIChatModel  # noqa: PLC0415
        from pydantic_ai.providers.openai import OpenAIProvider  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(
            "PydanticAIGenerator needs the 'llm' extra: pip install 'agentskit-chat[llm]'"
        ) from exc
    # Local servers (vLLM, Ollama, llama.cpp) ignore the key but the client requires one.
    key = api_key or os.environ.get("OPENAI_API_KEY") or "unused"
    return OpenAIChatModel(name.strip(), provider=OpenAIProvider(base_url=base_url, api_key=key))


def resolve_model(model: str | Model, *, api_key: str | None = None) -> Model:
    """A pydantic-ai model from a model object or a model string.

    Args:
        model: A ``pydantic_ai.models.Model``, a pydantic-ai model string such as
            ``openai:gpt-4.1-mini`` or ``anthropic:claude-sonnet-4-5`` (credentials from the
            provider's environment variables), or ``openai-compatible:<base_url>#<model>``.
        api_key: The key for an OpenAI-compatible server; defaults to ``OPENAI_API_KEY``.

    Raises:
        ConfigurationError: the string names no known model, lacks its provider's
            credentials, or is a malformed ``openai-compatible:`` string.
        TypeError: ``model`` is neither a string nor a model.
    """
    require_extra("PydanticAIGenerator", "llm", "pydantic_ai")
    from pydantic_ai.exceptions import UserError  # noqa: PLC0415
    from pydantic_ai.models import Model, infer_model  # noqa: PLC0415

    if isinstance(model, Model):
        return model
    if not isinstance(model, str):
        raise TypeError("expected a model string or a pydantic_ai.models.Model")
    if model.startswith(OPENAI_COMPATIBLE_PREFIX):
        return _openai_compatible(model, api_key)
    try:
        return infer_model(model)
    except UserError as exc:
        # pydantic-ai's message (chained) says which variable is missing; it holds no secret.
        raise ConfigurationError(
            "The model could not be configured: check its name and its provider's credentials."
        ) from exc
