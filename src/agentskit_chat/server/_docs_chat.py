"""``/api/chat``: the docs assistant as a chat, over the turn protocol.

The chat definition's adapter is the deterministic answer adapter over the assistant's own
knowledge artifact, in front of the assistant's Ask service. The Ask service is called in
process through its typed entry point (:class:`~._docs_ask.InProcessAskAdapter`): the request
the Ask client would post, its events projected to the same ordered content and citations as
they come, so a model's tokens reach the page while the model writes. Choice lists
shown by exact answers are clickable: a click is a submission whose ``payload.selection`` names
the choice, reserved by the adapter and committed only when the turn succeeded.

It is served like any other chat definition (:func:`~agentskit_chat.server.create_app`), through
:func:`docs_chat_target`; sessions, messages and Ask conversations live in one
:class:`~agentskit_chat.storage.ChatStores` backend, so any worker can take any turn.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Final

from agentskit_chat.answers import create_deterministic_answer_adapter
from agentskit_chat.assistant import NO_GROUNDED_SOURCES, Caller, DocsAssistant
from agentskit_chat.conversation import ChatDefinition, ChatPage, define_chat
from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterRequest,
    ChatAdapter,
    ChatConfig,
    ChatSource,
    StreamChunk,
    create_scoped_source,
)
from agentskit_chat.service import AskService

from ._docs_ask import InProcessAskAdapter
from ._target import ChatTarget

__all__ = ["DOCS_CHAT_ID", "DOCS_PAGE", "docs_chat_definition", "docs_chat_target"]

#: The chat definition id of the docs assistant's chat (stored in every session snapshot).
DOCS_CHAT_ID: Final = "docs-assistant"
#: How the docs assistant presents itself on the page and in the terminal.
DOCS_PAGE: Final = ChatPage(
    title="Docs assistant",
    subtitle="Answers from the documentation, with their sources.",
    welcome_title="Ask about the docs",
    welcome=(
        "Exact questions get exact answers; everything else is answered from the pages, "
        "with links to the sections used."
    ),
    suggestions=(
        "How do I install it?",
        "How do I run the server with PostgreSQL?",
        "What is a knowledge artifact?",
    ),
    placeholder="Ask a question about the docs…",
)
#: Who the in-process Ask calls of chat turns are made for (the chat route admitted the caller).
_CHAT_CALLER: Final = Caller("in-process", "chat")


class _Refusal:
    """A source that turns the Ask service's "no grounded sources" refusal into an answer.

    Over HTTP that refusal is a 422 error response, which the Ask client reports as a failed
    turn; in the docs chat it is the honest answer, so the user reads it as one.
    """

    def __init__(self, source: ChatSource, refused: str) -> None:
        self._source = source
        self._refused = refused

    def abort(self) -> None:
        self._source.abort()

    async def stream(self) -> AsyncIterator[StreamChunk]:
        async for chunk in self._source.stream():
            if chunk.type == "error" and chunk.content == self._refused:
                yield StreamChunk("text", content=NO_GROUNDED_SOURCES)
                yield StreamChunk("done")
                return
            yield chunk


class _RefusalAware:
    """The Ask client adapter whose refusals are answers (see :class:`_Refusal`)."""

    def __init__(self, inner: ChatAdapter, refused: str) -> None:
        self._inner = inner
        self._refused = refused

    @property
    def capabilities(self) -> AdapterCapabilities | None:
        return self._inner.capabilities

    def create_source(self, request: AdapterRequest) -> ChatSource:
        return _Refusal(self._inner.create_source(request), self._refused)

    def create_source_for_session(self, request: AdapterRequest, session_id: str) -> ChatSource:
        return _Refusal(create_scoped_source(self._inner, request, session_id), self._refused)


def docs_chat_definition(assistant: DocsAssistant, service: AskService) -> ChatDefinition:
    """The chat definition of an open assistant: exact answers first, then its Ask service."""
    from agentskit_chat.ask._client import ask_failure_message  # noqa: PLC0415
    from agentskit_chat.protocol import ASK_ERROR_CASES  # noqa: PLC0415

    refused = ask_failure_message(ASK_ERROR_CASES["no_grounded_sources"].status)
    fallback = _RefusalAware(InProcessAskAdapter(service, _CHAT_CALLER), refused)
    build = assistant.artifact_build
    adapter = create_deterministic_answer_adapter(
        artifact=build.artifact,
        expected_content_hash=build.site_config.artifact.content_hash,
        expected_site_id=assistant.site_id,
        fallback_mode="backend",
        fallback=fallback,
        expand_answer=assistant.expand_answer,  # a heading's answer shows its section
    )
    return define_chat(
        id=DOCS_CHAT_ID,
        chat=ChatConfig(adapter=adapter),
        choice_submission=adapter.resolve_choice_submission,
        page=DOCS_PAGE,
    )


def docs_chat_target(assistant: DocsAssistant) -> ChatTarget:
    """The docs assistant as a chat target: opening it opens the assistant (unless the host
    already did) and yields its chat definition; closing it closes what it opened."""

    @contextlib.asynccontextmanager
    async def open_docs_chat() -> AsyncIterator[ChatDefinition]:
        opened_here = not assistant.is_open
        if opened_here:
            await assistant.open()
        try:
            yield docs_chat_definition(assistant, assistant.service)
        finally:
            if opened_here:
                await assistant.aclose()

    return open_docs_chat
