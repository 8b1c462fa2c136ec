"""What a chat application declares: the chat definition, its conversation, states and routes.

Nothing here is validated when it is built: :func:`define_chat` returns its argument, and every
check runs when a session is created from the definition (see ``_compile``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, overload

from agentskit_chat.components import STANDARD_COMPONENT_MANIFEST, ComponentManifest
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import ComponentInteractEvent
from agentskit_chat.runtime import ChatConfig, ChatMessage

from ._page import ChatPage

__all__ = [
    "ChatDefinition",
    "ChoiceSubmission",
    "ConversationDefinition",
    "ConversationStateDefinition",
    "ConversationTrace",
    "InteractionHandler",
    "Route",
    "RouteContext",
    "RouteGuard",
    "RouteMatcher",
    "RouteResponder",
    "RouteTraceKind",
    "TraceKind",
    "TraceObserver",
    "command_route",
    "define_chat",
]

#: How a dispatch ended: a route answered (``deterministic``, or the route's declared
#: ``repaired``/``fallback``), or the turn went to the model (``agentic``). ``repaired`` is also
#: reported when a stored decision no longer replays and is dropped.
TraceKind = Literal["deterministic", "repaired", "fallback", "agentic"]
#: The kinds a route may declare for its traces.
RouteTraceKind = Literal["deterministic", "repaired", "fallback"]

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RouteContext:
    """Who a route is answering, so component-producing routes can derive stable instance ids.

    Derive ids from ``message_id`` (falling back to ``session_id``): a replay then reproduces
    the same frame, and separate turns get distinct instances.

    Attributes:
        session_id: The chat session.
        message_id: The id of the user message being answered, or ``None`` when the request has
            no user message.
        messages: The conversation as the chat sends it to be answered (the user message
            being answered included, and the empty answer being written after it), so a route
            can decide from what was said and shown before — on any worker, since the
            conversation is stored with the session's messages. Two contexts are equal when
            they name the same session and message.
    """

    session_id: str
    message_id: str | None = None
    messages: tuple[ChatMessage, ...] = field(default=(), compare=False, repr=False)


#: Decides whether a route answers an input (the user message's content, unchanged).
RouteMatcher = Callable[[str], bool]
#: Decides, after its matcher accepted the input, whether a route may answer in this
#: conversation (for example "only once the form was submitted"); called with the
#: :class:`RouteContext` the route's response would get.
RouteGuard = Callable[[RouteContext], bool]
#: Produces a route's reply: raw text streamed verbatim (a component frame is a JSON string),
#: or an awaitable of it (``async def``), awaited when the turn streams.
RouteResponder = Callable[[str, RouteContext], str | Awaitable[str]]
#: Answers a component interaction the user made (a form submitted, a button clicked): called
#: with the typed event and a :class:`RouteContext` naming the user message that carries it.
#: It returns the reply (raw text streamed verbatim, a component frame included), an awaitable
#: of it, or ``None`` (also from an awaitable) to let the chat answer the message as any text.
InteractionHandler = Callable[
    [ComponentInteractEvent, RouteContext], str | Awaitable[str | None] | None
]


@dataclass(frozen=True, slots=True)
class ConversationTrace:
    """One dispatch decision, as told to the conversation's ``on_trace`` observer.

    A trace never carries the input or the reply.

    Attributes:
        kind: See :data:`TraceKind`.
        from_state: The state before.
        to_state: The state after (equal to ``from_state`` for ``agentic`` traces).
        route_id: The route that answered; ``None`` for ``agentic`` traces.
    """

    kind: TraceKind
    from_state: str
    to_state: str
    route_id: str | None = None


#: Told about every trace; called synchronously and never awaited, its errors ignored.
TraceObserver = Callable[[ConversationTrace], object]


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """A deterministic route: when ``match`` accepts the input in a state that allows ``event``,
    the route's ``response`` is the reply and the conversation takes the ``event`` transition.

    Attributes:
        id: Unique among the conversation's routes; a safe identifier (it is stored in session
            snapshots).
        event: The statechart event the route fires.
        match: Whether the route answers an input.
        response: The reply (at most 65,536 UTF-16 units); called with the input and a
            :class:`RouteContext`. It may be an ``async`` function (to look something up):
            it is awaited when the turn streams, stopping the turn cancels it, and the
            conversation moves only once it has answered; a replay reuses the recorded reply.
        states: The states the route is restricted to, or ``None`` for any state whose ``on``
            has ``event``.
        trace_kind: The kind of the route's traces.
        guard: Whether the route may answer in this conversation, asked after ``match``
            accepted the input (see :data:`RouteGuard`); ``None`` always allows. A route whose
            guard refuses is skipped like one that does not match (the next route, or the
            adapter, answers). A replayed decision does not ask it again; a guard that raises
            fails the turn like a failing matcher.

    Example:
        >>> route = Route(
        ...     id="greet", event="start",
        ...     match=lambda text: text.lower() == "hello",
        ...     response=lambda text, context: "Hello! What is your name?",
        ... )
    """

    id: str
    event: str
    match: RouteMatcher
    response: RouteResponder
    states: tuple[str, ...] | None = None
    trace_kind: RouteTraceKind = "deterministic"
    guard: RouteGuard | None = None

    def __post_init__(self) -> None:
        if self.states is not None:
            object.__setattr__(self, "states", tuple(self.states))


def command_route(
    *,
    command: str,
    id: str,
    event: str,
    response: RouteResponder,
    states: Sequence[str] | None = None,
    trace_kind: RouteTraceKind = "deterministic",
    guard: RouteGuard | None = None,
) -> Route:
    """A route that matches exactly ``command`` (case-sensitive, nothing trimmed), and, with
    ``guard``, only when the guard allows it in this conversation.

    Raises:
        ConfigurationError: ``command`` is empty ("Conversation command cannot be empty.").

    Example:
        >>> route = command_route(
        ...     command="/start", id="start", event="start",
        ...     response=lambda text, context: "What is your name?",
        ... )
        >>> route.match("/start"), route.match("/start ")
        (True, False)
    """
    if not isinstance(command, str) or command == "":
        raise ConfigurationError("Conversation command cannot be empty.")

    def match(text: str) -> bool:
        return text == command

    return Route(
        id=id,
        event=event,
        match=match,
        response=response,
        states=None if states is None else tuple(states),
        trace_kind=trace_kind,
        guard=guard,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationStateDefinition:
    """One state of a conversation.

    Attributes:
        on: Its transitions, event → target state, in the order its events are offered.
        actions: Informational names surfaced by the conversation snapshot (for example which
            buttons a host shows).
    """

    on: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    actions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.on, MappingProxyType):
            object.__setattr__(self, "on", MappingProxyType(dict(self.on)))
        object.__setattr__(self, "actions", tuple(self.actions))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationDefinition:
    """A deterministic conversation: a statechart whose transitions are fired by routes.

    Attributes:
        initial: The state every session starts in.
        states: The states by name (1 to 128 characters each).
        routes: The routes, in precedence order: the first eligible match wins.
        on_trace: Observer told about every dispatch (see :class:`ConversationTrace`).

    Example:
        >>> conversation = ConversationDefinition(
        ...     initial="idle",
        ...     states={
        ...         "idle": ConversationStateDefinition(on={"start": "collecting"}),
        ...         "collecting": ConversationStateDefinition(actions=("cancel",)),
        ...     },
        ...     routes=(
        ...         command_route(
        ...             command="/start", id="start", event="start",
        ...             response=lambda text, context: "What is your name?",
        ...         ),
        ...     ),
        ... )
    """

    initial: str
    states: Mapping[str, ConversationStateDefinition]
    routes: tuple[Route, ...] = ()
    on_trace: TraceObserver | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.states, MappingProxyType):
            object.__setattr__(self, "states", MappingProxyType(dict(self.states)))
        object.__setattr__(self, "routes", tuple(self.routes))


#: Reserves a click on a deterministic choice list: ``(frame, choice_id, session_id=...)`` →
#: a reservation, an "unavailable" marker, or ``None`` for a frame it does not own. Wire it to
#: the deterministic answer adapter's ``resolve_choice_submission``. The chat server also
#: passes ``question=`` and ``message_id=`` (the stored question the list answered) when the
#: callable accepts them, so a list shown by another worker can be re-derived.
ChoiceSubmission = Callable[..., Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatDefinition:
    """Everything a chat application is: its chat configuration and, optionally, a
    deterministic conversation. Every interface (web, terminal, server) renders the same one.

    Attributes:
        id: The definition's identity, used in default session ids and snapshots (a safe
            identifier).
        chat: The chat configuration (adapter, memory, tools, ...), kept as given.
        revision: A positive integer, 1 by default; bump it when a change to the conversation
            makes stored session metadata meaningless (resuming an older revision fails).
        conversation: The deterministic conversation, if any.
        choice_submission: Reserves deterministic choice clicks (see :data:`ChoiceSubmission`).
        components: The closed set of components its messages may render (see
            :func:`~agentskit_chat.components.define_component_manifest`); ``None`` means the
            twelve standard components. A frame for any other component is shown as its text
            fallback and can trigger nothing.
        page: How the chat presents itself in every interface (title, subtitle, welcome,
            suggestions, placeholder, logo, theme); ``None`` for a plain page titled "Chat".
        on_interaction: Answers the component interactions a host accepted (see
            :data:`InteractionHandler`): a submitted form, a clicked button, a confirmation's
            decision. Without it, or when it returns ``None``, the interaction's user message
            is answered like any text (routes, then the adapter). Retry and regenerate call it
            again with the same event and message id; an edited message is plain text.
    """

    id: str
    chat: ChatConfig
    revision: int = 1
    conversation: ConversationDefinition | None = None
    choice_submission: ChoiceSubmission | None = None
    components: ComponentManifest | None = None
    page: ChatPage | None = None
    on_interaction: InteractionHandler | None = None

    @property
    def manifest(self) -> ComponentManifest:
        """The components this chat renders: ``components``, or the standard manifest.

        Raises:
            ConfigurationError: ``components`` is not a manifest ("Chat components must be a
                component manifest.").
        """
        components = self.components
        if components is None:
            return STANDARD_COMPONENT_MANIFEST
        if not isinstance(components, ComponentManifest):
            raise ConfigurationError("Chat components must be a component manifest.")
        return components


@overload
def define_chat(definition: ChatDefinition, /) -> ChatDefinition: ...


@overload
def define_chat(
    *,
    id: str,
    chat: ChatConfig,
    revision: int = 1,
    conversation: ConversationDefinition | None = None,
    choice_submission: ChoiceSubmission | None = None,
    components: ComponentManifest | None = None,
    page: ChatPage | None = None,
    on_interaction: InteractionHandler | None = None,
) -> ChatDefinition: ...


def define_chat(definition: ChatDefinition | None = None, /, **fields: Any) -> ChatDefinition:
    """Declare a chat: a :class:`ChatDefinition` from its fields, or ``definition`` unchanged.

    Nothing is validated here; a session checks the definition when it is created (so an
    invalid definition is reported by :func:`create_chat_session`).

    Raises:
        TypeError: both a definition and fields are given, or neither.

    Example:
        >>> definition = define_chat(id="support", chat=config)  # doctest: +SKIP
        >>> define_chat(definition) is definition  # doctest: +SKIP
        True
    """
    if definition is not None:
        if fields:
            raise TypeError("pass a ChatDefinition or its fields, not both")
        return definition
    if not fields:
        raise TypeError("define_chat() needs a ChatDefinition or its fields")
    return ChatDefinition(**fields)
