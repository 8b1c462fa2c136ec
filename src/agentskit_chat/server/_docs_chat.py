"""``/api/chat``: the docs assistant as a chat, over the turn protocol.

The chat definition's adapter is the deterministic answer adapter over the assistant's own
knowledge artifact, in front of the assistant's Ask service. The Ask service is reached through
the Ask client adapter, exactly as over HTTP (same request, same NDJSON, same citations), but in
process: httpx's ASGI transport calls the service's ASGI app without a socket. Choice lists
shown by exact answers are clickable: a click is a submission whose ``payload.selection`` names
the choice, reserved by the adapter and committed only when the turn succeeded.

Sessions, messages and Ask conversations live in one :class:`~agentskit_chat.storage.ChatStores`
backend, so any worker can take any turn.
"""

from __future__ import annotations

from typing import Any, Final

from agentskit_chat.answers import create_deterministic_answer_adapter
from agentskit_chat.assistant import Caller, DocsAssistant
from agentskit_chat.conversation import ChatDefinition, define_chat
from agentskit_chat.runtime import ChatConfig, ChatMemory
from agentskit_chat.service import AskService, Authenticated, AuthResult, Refused
from agentskit_chat.storage import ChatStores

from ._asgi import Receive, Scope, Send
from ._ask_app import AskServiceApp
from ._auth import ApiKeyGate
from ._chat_app import ChatApp, create_chat_app
from ._errors import send_case

__all__ = ["DOCS_CHAT_ID", "DocsChatRoute"]

#: The chat definition id of the docs assistant's chat (stored in every session snapshot).
DOCS_CHAT_ID: Final = "docs-assistant"
#: Who the in-process Ask calls of chat turns are made for (rate limits count them together).
_CHAT_CALLER: Final = Caller("http", "chat")
_BASE_URL: Final = "http://docs-assistant.invalid"


def docs_chat_definition(assistant: DocsAssistant, service: AskService) -> ChatDefinition:
    """The chat definition of an open assistant: exact answers first, then its Ask service."""
    import httpx  # noqa: PLC0415 - the server extra is optional

    from agentskit_chat.ask import create_ask_adapter  # noqa: PLC0415

    def authenticate(request: object) -> AuthResult:
        return Authenticated(_CHAT_CALLER)

    ask_app = AskServiceApp(service, authenticate)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=ask_app), base_url=_BASE_URL)
    fallback = create_ask_adapter(endpoint="/api/ask", http_client=client)
    build = assistant.artifact_build
    adapter = create_deterministic_answer_adapter(
        artifact=build.artifact,
        expected_content_hash=build.site_config.artifact.content_hash,
        expected_site_id=assistant.site_id,
        fallback_mode="backend",
        fallback=fallback,
    )
    return define_chat(
        id=DOCS_CHAT_ID,
        chat=ChatConfig(adapter=adapter),
        choice_submission=adapter.resolve_choice_submission,
    )


class DocsChatRoute:
    """The chat handler of whichever Ask service the assistant has open."""

    def __init__(
        self, assistant: DocsAssistant, gate: ApiKeyGate, stores: ChatStores, timeout: float
    ) -> None:
        self._assistant = assistant
        self._gate = gate
        self._stores = stores
        self._timeout = timeout
        self._service: AskService | None = None
        self._app: ChatApp | None = None

    def _authenticate(self, request: object) -> AuthResult:
        verdict = self._gate.admit(getattr(request, "scope", {}))
        if verdict is None:
            return Refused(self._gate.refuse_app)
        return Authenticated(Caller("http", verdict))

    def _memory(self, context: Any, session_id: str) -> ChatMemory:
        return self._stores.memory(session_id)

    def _build(self, service: AskService) -> ChatApp:
        definition = docs_chat_definition(self._assistant, service)
        sessions = self._stores.sessions
        return create_chat_app(
            authenticate=self._authenticate,
            resolve_definition=lambda context, session_id: definition,
            session_storage=lambda context: sessions,
            chat_memory=self._memory,
            timeout=self._timeout,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._assistant.is_open:
            await send_case(scope, send, "internal")
            return
        service = self._assistant.service
        if self._app is None or self._service is not service:
            self._app, self._service = self._build(service), service
        await self._app(scope, receive, send)
