"""The deterministic answer adapter: exact local answers first, a backend only when needed.

``docs/answers.md``. Every turn is first resolved against the verified
artifact. Answers and choices are streamed locally as ordered assistant content; escalations
go to the fallback adapter (with the escalation envelope in the request metadata), or become
a safe local message when there is no backend.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from agentskit_chat._observers import notify
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import (
    AnswerEnvelope,
    BackendProvenance,
    ChoicesAnswer,
    ComponentFrame,
    EscalationAnswer,
    ExactAnswer,
)
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.runtime import (
    UNSCOPED_SESSION_ID,
    AdapterCapabilities,
    AdapterRequest,
    ChatAdapter,
    ChatMessage,
    ChatSource,
    create_scoped_source,
)
from agentskit_chat.runtime._sources import TextReplySource

from ._backend import ObservedBackendSource
from ._choices import (
    ChoiceReservation,
    ChoiceReservationStore,
    ChoiceUnavailable,
    props_text,
)
from ._envelopes import OFFLINE, escalation
from ._projection import project_decision
from ._resolver import Clock, DeterministicAnswerResolver, create_deterministic_answer_resolver

__all__ = [
    "ESCALATION_METADATA_KEY",
    "DecisionObserver",
    "DeterministicAnswerAdapter",
    "FallbackMode",
    "create_deterministic_answer_adapter",
]

#: Where the escalation envelope travels to the fallback: ``request.context.metadata[KEY]``.
ESCALATION_METADATA_KEY: Final = "agentskit.chat.escalation"
#: ``backend``: escalations may go to the fallback; ``disabled``: never.
FallbackMode = Literal["backend", "disabled"]
#: Told about every decision; called synchronously, never awaited, its errors ignored.
DecisionObserver = Callable[[AnswerEnvelope], object]

_DEFAULT_CAPABILITIES: Final = AdapterCapabilities(streaming=True, structured_output=True)
_NO_MESSAGE_ID: Final = "deterministic"
_BACKEND_KEYS: Final = frozenset({"provider", "model"})


def _latest_user_input(messages: tuple[ChatMessage, ...]) -> tuple[str, str]:
    for message in reversed(messages):
        if message.role == "user":
            return message.content, message.id
    return "", _NO_MESSAGE_ID


class DeterministicAnswerAdapter:
    """A chat adapter that answers exact questions locally and escalates everything else.

    Build it with :func:`create_deterministic_answer_adapter`. It is session-aware: a chat
    session calls :meth:`create_source_for_session` with its own id, which scopes choice
    reservations and is passed on to a session-aware fallback.
    """

    __slots__ = (
        "_backend",
        "_choices",
        "_expand",
        "_fallback",
        "_fallback_mode",
        "_notify",
        "_resolver",
    )

    def __init__(
        self,
        *,
        resolver: DeterministicAnswerResolver,
        fallback_mode: FallbackMode,
        fallback: ChatAdapter | None,
        backend: BackendProvenance,
        on_decision: DecisionObserver | None,
        expand_answer: Callable[[ExactAnswer], ExactAnswer] | None = None,
    ) -> None:
        self._resolver = resolver
        self._expand = expand_answer
        self._fallback_mode = fallback_mode
        self._fallback = fallback
        self._backend = backend
        self._notify = functools.partial(notify, on_decision)
        self._choices = ChoiceReservationStore()

    @property
    def capabilities(self) -> AdapterCapabilities:
        """The fallback's own capabilities object in ``backend`` mode when it has one;
        otherwise streaming with structured output."""
        if self._fallback_mode == "backend" and self._fallback is not None:
            own = self._fallback.capabilities
            if own is not None:
                return own
        return _DEFAULT_CAPABILITIES

    @property
    def resolver(self) -> DeterministicAnswerResolver:
        """The resolver built (and its artifact verified) when the adapter was created."""
        return self._resolver

    def create_source(self, request: AdapterRequest) -> ChatSource:
        """``create_source_for_session(request, "unscoped")``."""
        return self.create_source_for_session(request, UNSCOPED_SESSION_ID)

    def create_source_for_session(self, request: AdapterRequest, session_id: str) -> ChatSource:
        """Decide the turn for the latest user message, and return the source that streams it.

        The decision is made now, synchronously, and reported to the observer immediately.
        Answers and choices stream locally. An escalation goes to the fallback in ``backend``
        mode: through its session-aware entry point with ``session_id`` when it has one
        (plain ``create_source`` for the unscoped session), with the escalation envelope at
        ``request.context.metadata["agentskit.chat.escalation"]``. Without a usable backend, a
        ``miss`` becomes an ``offline`` escalation; ``stale`` and ``corrupt`` stay as they are.
        """
        content, message_id = _latest_user_input(request.messages)
        decision = self._resolver.resolve(content)
        if isinstance(decision, ExactAnswer) and self._expand is not None:
            decision = self._expand(decision)
        if not isinstance(decision, EscalationAnswer):
            self._notify(decision)
            return self._local(decision, message_id, session_id)
        if self._fallback_mode == "disabled" or self._fallback is None:
            if decision.reason == "miss":
                decision = escalation("offline", OFFLINE, decision.query, decision.normalized_query)
            self._notify(decision)
            return self._local(decision, message_id, session_id)
        self._notify(decision)
        escalated = request.with_metadata(ESCALATION_METADATA_KEY, decision)
        if session_id == UNSCOPED_SESSION_ID:
            source = self._fallback.create_source(escalated)
        else:
            source = create_scoped_source(self._fallback, escalated, session_id)
        return ObservedBackendSource(
            source, escalated=decision, provenance=self._backend, notify=self._notify
        )

    def _local(self, decision: AnswerEnvelope, message_id: str, session_id: str) -> TextReplySource:
        """One local decision: its text, projected at iteration time, then ``done``."""

        def remember(frame: ComponentFrame, values: dict[str, str]) -> bool:
            return self._choices.remember(session_id, frame, values)

        return TextReplySource(
            lambda: project_decision(decision, message_id=message_id, remember=remember),
            metadata={"answer": decision},
        )

    def resolve_choice_submission(
        self,
        frame: ComponentFrame | Mapping[str, Any],
        choice_id: str,
        *,
        session_id: str,
        question: str | None = None,
        message_id: str | None = None,
    ) -> ChoiceReservation | ChoiceUnavailable | None:
        """Reserve a click on a deterministic ChoiceList this adapter showed in ``session_id``.

        Args:
            frame: The clicked frame.
            choice_id: The clicked choice.
            session_id: The session the frame was shown in.
            question: The user message the frame answered, with ``message_id`` its id, as the
                host's trusted storage holds them. When this adapter does not remember the
                frame (another worker showed it, or this one restarted), it answers that
                question again; if that gives the very same frame (same instance id, same
                props), the frame is remembered and can be reserved. Single use across
                workers is then the host's part: it must not offer a choice it knows was used.

        Returns:
            A :class:`ChoiceReservation` whose ``value`` is the alias to send: call
            ``commit()`` once the send succeeded, ``release()`` if it failed. Or
            :data:`CHOICE_UNAVAILABLE` for a deterministic frame that cannot be used (not shown
            in this session, props changed, already claimed or used, choice not offered): ask
            the question again. Or ``None`` for a frame that is not a deterministic one.
        """
        result = self._choices.resolve(frame, choice_id, session_id=session_id)
        if (
            isinstance(result, ChoiceUnavailable)
            and question is not None
            and message_id is not None
            and self._restore(
                frame, session_id=session_id, question=question, message_id=message_id
            )
        ):
            result = self._choices.resolve(frame, choice_id, session_id=session_id)
        return result

    def _restore(
        self,
        frame: ComponentFrame | Mapping[str, Any],
        *,
        session_id: str,
        question: str,
        message_id: str,
    ) -> bool:
        """Remember ``frame`` again from the question it answered; ``True`` when it matches."""
        wanted = (
            frame if isinstance(frame, ComponentFrame) else validate_model(ComponentFrame, frame)
        )
        if wanted is None:
            return False
        decision = self._resolver.resolve(question)
        if not isinstance(decision, ChoicesAnswer):
            return False
        wanted_props = props_text(wanted.props)
        restored = False

        def remember(shown: ComponentFrame, values: dict[str, str]) -> bool:
            nonlocal restored
            if shown.instance_id == wanted.instance_id and props_text(shown.props) == wanted_props:
                restored = self._choices.remember(session_id, shown, values)
            return restored

        project_decision(decision, message_id=message_id, remember=remember)
        return restored

    def release_choice_session(self, session_id: str) -> None:
        """Forget every choice remembered for ``session_id`` (e.g. when the session ends)."""
        self._choices.release_session(session_id)


def _backend_provenance(backend: Mapping[str, str] | None) -> BackendProvenance:
    wire: dict[str, Any] = {"source": "backend"}
    if backend is not None:
        if not isinstance(backend, Mapping) or not set(backend).issubset(_BACKEND_KEYS):
            raise ConfigurationError("The backend option accepts only provider and model.")
        wire.update(backend)
    provenance = validate_model(BackendProvenance, wire)
    if provenance is None:
        raise ConfigurationError(
            "The backend provider and model must be 1 to 128 characters after trimming."
        )
    return provenance


def create_deterministic_answer_adapter(
    *,
    artifact: object,
    expected_content_hash: str,
    expected_site_id: str,
    fallback_mode: FallbackMode,
    fallback: ChatAdapter | None = None,
    backend: Mapping[str, str] | None = None,
    now: Clock | None = None,
    on_decision: DecisionObserver | None = None,
    expand_answer: Callable[[ExactAnswer], ExactAnswer] | None = None,
) -> DeterministicAnswerAdapter:
    """An adapter that answers from ``artifact`` and falls back to ``fallback``.

    The artifact is verified here (see :func:`create_deterministic_answer_resolver`); a bad
    artifact does not prevent start-up, it only makes every question escalate as ``corrupt``.

    Args:
        artifact: The candidate knowledge artifact (object, JSON text, model or ``None``).
        expected_content_hash: The trusted content hash from the site configuration.
        expected_site_id: The trusted site id from the site configuration.
        fallback_mode: ``backend`` or ``disabled``, from the site configuration. ``disabled``
            never calls the fallback, even when one is given.
        fallback: The backend adapter for escalations.
        backend: ``{"provider": ..., "model": ...}`` (each optional) copied into the
            provenance of backend answers.
        now: The clock (aware ``datetime`` or epoch milliseconds); defaults to the wall clock.
        on_decision: Observer told about every decision: local decisions when the source is
            created, escalations before the fallback is called, backend answers at the end.
        expand_answer: What a local exact answer becomes before it is shown (and observed):
            the docs assistant shows the section a heading's answer points at. By default
            exact answers are shown as the artifact holds them.

    Raises:
        ConfigurationError: when ``fallback_mode`` or ``backend`` is invalid.
    """
    if fallback_mode not in ("backend", "disabled"):
        raise ConfigurationError("The fallback mode must be backend or disabled.")
    provenance = _backend_provenance(backend)
    resolver = create_deterministic_answer_resolver(
        artifact,
        expected_content_hash=expected_content_hash,
        expected_site_id=expected_site_id,
        now=now,
    )
    return DeterministicAnswerAdapter(
        resolver=resolver,
        fallback_mode=fallback_mode,
        fallback=fallback,
        backend=provenance,
        on_decision=on_decision,
        expand_answer=expand_answer,
    )
