"""Shared pieces of the conversation tests: a counting model adapter, messages, definitions."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from agentskit_chat.conversation import (
    ChatDefinition,
    ChatSession,
    ConversationDefinition,
    ConversationStateDefinition,
    ConversationTrace,
    Route,
    RouteContext,
    command_route,
)
from agentskit_chat.protocol import Decision
from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterContext,
    AdapterRequest,
    ChatConfig,
    ChatMemory,
    ChatMessage,
    ChatSource,
    StreamChunk,
)

NOW: Final = datetime(2026, 7, 11, tzinfo=UTC)
NOW_MS: Final = 1783728000000
CREATED: Final = datetime(2026, 7, 10, tzinfo=UTC)
#: Put in every input and reply, so a test can check that traces and errors never carry them.
SECRET: Final = "zq9SECRETq9z"


class Clock:
    """A settable clock."""

    def __init__(self, moment: datetime = NOW) -> None:
        self.moment = moment

    def __call__(self) -> datetime:
        return self.moment

    def advance(self, ms: int) -> None:
        self.moment += timedelta(milliseconds=ms)


class ModelSource:
    """The model's source: ``text`` with the reply, then ``done``; records abort and close."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.aborted = False
        self.closed = False

    def abort(self) -> None:
        self.aborted = True

    async def stream(self) -> AsyncIterator[StreamChunk]:
        try:
            yield StreamChunk("text", content=self.reply)
            yield StreamChunk("done")
        finally:
            self.closed = True


@dataclass
class ModelAdapter:
    """A stand-in for a model: counts calls and keeps every request it was given."""

    reply: str = "model reply"
    requests: list[AdapterRequest] = field(default_factory=list)
    sources: list[ModelSource] = field(default_factory=list)
    capabilities: AdapterCapabilities | None = field(
        default_factory=lambda: AdapterCapabilities(streaming=True, structured_output=False)
    )

    @property
    def calls(self) -> int:
        return len(self.requests)

    def create_source(self, request: AdapterRequest) -> ChatSource:
        self.requests.append(request)
        source = ModelSource(self.reply)
        self.sources.append(source)
        return source


@dataclass
class SessionAwareModel(ModelAdapter):
    """A model adapter with the session-aware entry point; records the session ids."""

    session_ids: list[str] = field(default_factory=list)

    def create_source_for_session(self, request: AdapterRequest, session_id: str) -> ChatSource:
        self.session_ids.append(session_id)
        return self.create_source(request)

    def greet(self) -> str:
        return "hello from the original"


def user(content: str, message_id: str = "user-1") -> ChatMessage:
    return ChatMessage(id=message_id, role="user", content=content, created_at=CREATED)


def assistant(content: str, message_id: str = "assistant-1") -> ChatMessage:
    return ChatMessage(id=message_id, role="assistant", content=content, created_at=CREATED)


def placeholder(message_id: str = "placeholder") -> ChatMessage:
    return ChatMessage(
        id=message_id, role="assistant", content="", created_at=CREATED, status="streaming"
    )


def request(*messages: ChatMessage, system_prompt: str | None = None) -> AdapterRequest:
    """A controller-like request: the history, then an empty streaming placeholder."""
    return AdapterRequest(
        messages=(*messages, placeholder()),
        context=AdapterContext(system_prompt=system_prompt),
    )


async def collect(source: ChatSource) -> list[tuple[str, str | None]]:
    """``(type, content)`` of every chunk, closing the stream after the first ``done``."""
    chunks: list[tuple[str, str | None]] = []
    stream = source.stream()
    try:
        async for chunk in stream:
            chunks.append((chunk.type, chunk.content))
            if chunk.type in ("done", "error"):
                break
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    return chunks


def reply(text: str) -> list[tuple[str, str | None]]:
    return [("text", text), ("done", None)]


ROUTE_ERROR: Final = [("error", "Deterministic route failed.")]


def respond(text: str) -> Callable[[str, RouteContext], str]:
    def response(_input: str, _context: RouteContext) -> str:
        return text

    return response


def command(name: str, reply: str) -> Route:
    """``/<name>`` answered with ``reply``; the route's id and event are both ``name``."""
    return command_route(command=f"/{name}", id=name, event=name, response=respond(reply))


def name_route(*, event: str, state: str, greeting: str) -> Route:
    """``/name <name>`` in ``state``, answered "<greeting>, <name>."."""
    return Route(
        id="name",
        event=event,
        states=(state,),
        match=lambda text: text.startswith("/name "),
        response=lambda text, _context: f"{greeting}, {text.removeprefix('/name ')}.",
    )


@dataclass
class Traces:
    """An ``on_trace`` observer that keeps what it is told."""

    seen: list[ConversationTrace] = field(default_factory=list)

    def __call__(self, trace: ConversationTrace) -> None:
        self.seen.append(trace)

    @property
    def kinds(self) -> list[str]:
        return [trace.kind for trace in self.seen]


def states(**on: dict[str, str] | tuple[dict[str, str], tuple[str, ...]]) -> dict[str, Any]:
    """``states(idle={"start": "collecting"}, done=({}, ("restart",)))``."""
    built: dict[str, ConversationStateDefinition] = {}
    for name, value in on.items():
        if isinstance(value, tuple):
            built[name] = ConversationStateDefinition(on=value[0], actions=value[1])
        else:
            built[name] = ConversationStateDefinition(on=value)
    return built


def definition(
    model: Any,
    *,
    initial: str = "idle",
    states: dict[str, Any] | None = None,
    routes: Sequence[Route] = (),
    traces: Traces | None = None,
    on_trace: Any = None,
    revision: int = 1,
    id: str = "support",
    memory: ChatMemory | None = None,
) -> ChatDefinition:
    conversation = None
    if states is not None:
        conversation = ConversationDefinition(
            initial=initial,
            states=states,
            routes=tuple(routes),
            on_trace=on_trace if on_trace is not None else traces,
        )
    return ChatDefinition(
        id=id,
        chat=ChatConfig(adapter=model, memory=memory),
        revision=revision,
        conversation=conversation,
    )


def onboarding(model: Any, traces: Traces | None = None, revision: int = 1) -> ChatDefinition:
    """The onboarding flow: idle --start--> collecting --finish--> complete --restart--> idle."""
    return definition(
        model,
        states={
            "idle": ConversationStateDefinition(on={"start": "collecting"}, actions=("begin",)),
            "collecting": ConversationStateDefinition(
                on={"finish": "complete"}, actions=("cancel",)
            ),
            "complete": ConversationStateDefinition(on={}, actions=("restart",)),
        },
        routes=(
            command("start", "What is your name?"),
            name_route(event="finish", state="collecting", greeting="Welcome"),
        ),
        traces=traces,
        revision=revision,
    )


def state_of(session: ChatSession) -> str:
    """The session's conversation state."""
    snapshot = session.get_conversation_snapshot()
    assert snapshot is not None
    return snapshot.state


def decisions_of(session: ChatSession) -> tuple[Decision, ...]:
    """The decisions the session's next save would store."""
    conversation = session.build_snapshot().conversation
    assert conversation is not None
    return conversation.decisions
