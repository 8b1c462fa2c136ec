"""The eight conformance cases of the deterministic answer plane, as data you can run.

Each :class:`DeterministicAnswerCase` holds an artifact, the trusted options, a clock, a query,
the fallback set-up, and the envelope expected from the resolver and from the adapter. Run a
case against a resolver or an adapter (yours, or one the case builds) with :func:`run_fixture`::

    import anyio
    from agentskit_chat.answers.fixtures import DETERMINISTIC_ANSWER_CASES, run_fixture

    async def main() -> None:
        for case in DETERMINISTIC_ANSWER_CASES:
            assert (await run_fixture(case, case.create_resolver())).passed
            assert (await run_fixture(case, case.create_adapter())).passed

    anyio.run(main)

The data is plain JSON-compatible Python; copy it (``copy.deepcopy``) before changing it.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from agentskit_chat.protocol.fixtures import (
    DETERMINISTIC_ANSWER_FIXTURES,
    DETERMINISTIC_CONTENT_HASH_FIXTURE,
    LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE,
    STALE_LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE,
)
from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterRequest,
    ChatAdapter,
    ChatMessage,
    ChatSource,
    StreamChunk,
    create_scoped_source,
)

from ._adapter import DeterministicAnswerAdapter, FallbackMode, create_deterministic_answer_adapter
from ._backend import closing_iterator
from ._resolver import DeterministicAnswerResolver, create_deterministic_answer_resolver

__all__ = [
    "DETERMINISTIC_ANSWER_CASES",
    "DeterministicAnswerCase",
    "FixtureResult",
    "ScriptedAdapter",
    "run_fixture",
]


def _instant(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp)


#: The session id and user message id :func:`run_fixture` uses for adapters.
FIXTURE_SESSION_ID: Final = "fixture-session"
FIXTURE_MESSAGE_ID: Final = "fixture-user-1"


class _ScriptedSource:
    __slots__ = ("_adapter", "_chunks")

    def __init__(self, adapter: ScriptedAdapter, chunks: tuple[StreamChunk, ...]) -> None:
        self._adapter = adapter
        self._chunks = chunks

    def abort(self) -> None:
        self._adapter.aborted += 1

    async def stream(self) -> AsyncIterator[StreamChunk]:
        for chunk in self._chunks:
            yield chunk


class ScriptedAdapter:
    """A session-aware adapter that streams the same chunks for every request, and records.

    Use it as a stand-in backend in tests: it remembers every request and session id it
    received and how many times a source was aborted.

    Attributes:
        requests: The requests received, in order.
        session_ids: The session id of each request (``None`` for plain ``create_source``).
        aborted: How many times ``abort()`` was called on its sources.
    """

    def __init__(
        self, chunks: Sequence[StreamChunk], *, capabilities: AdapterCapabilities | None = None
    ) -> None:
        self._chunks = tuple(chunks)
        self._capabilities = capabilities
        self.requests: list[AdapterRequest] = []
        self.session_ids: list[str | None] = []
        self.aborted = 0

    @classmethod
    def text(cls, text: str, *, capabilities: AdapterCapabilities | None = None) -> ScriptedAdapter:
        """An adapter that streams ``text`` as one text chunk, then ``done``."""
        chunks = [StreamChunk("text", content=text), StreamChunk("done")]
        return cls(chunks, capabilities=capabilities)

    @property
    def capabilities(self) -> AdapterCapabilities | None:
        """The capabilities given at construction."""
        return self._capabilities

    def create_source(self, request: AdapterRequest) -> ChatSource:
        """Record ``request`` and stream the scripted chunks."""
        self.requests.append(request)
        self.session_ids.append(None)
        return _ScriptedSource(self, self._chunks)

    def create_source_for_session(self, request: AdapterRequest, session_id: str) -> ChatSource:
        """Record ``request`` and ``session_id`` and stream the scripted chunks."""
        self.requests.append(request)
        self.session_ids.append(session_id)
        return _ScriptedSource(self, self._chunks)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeterministicAnswerCase:
    """One conformance case: inputs, set-up, and the envelopes expected (wire form).

    Attributes:
        name: The case's name, e.g. ``"exact match"``.
        description: What it shows.
        artifact: The candidate artifact (JSON-compatible data).
        expected_content_hash: The trusted content hash.
        expected_site_id: The trusted site id.
        now: The instant the case runs at (``YYYY-MM-DDTHH:MM:SS.sssZ``).
        query: The user's question.
        fallback_mode: ``backend`` or ``disabled``.
        backend: Provider and model for backend provenance, or ``None``.
        backend_text: What the case's fallback streams, or ``None`` for no fallback at all.
        expected: The envelope :meth:`DeterministicAnswerResolver.resolve` returns.
        expected_adapter: The envelope the adapter attaches to its stream.
    """

    name: str
    description: str
    artifact: Any
    expected_content_hash: str
    expected_site_id: str
    now: str
    query: str
    fallback_mode: FallbackMode
    backend: Mapping[str, str] | None = None
    backend_text: str | None = None
    expected: Mapping[str, Any] = field(default_factory=dict)
    expected_adapter: Mapping[str, Any] = field(default_factory=dict)

    def clock(self) -> Callable[[], datetime]:
        """A clock frozen at :attr:`now`."""
        instant = _instant(self.now)
        return lambda: instant

    def create_resolver(self) -> DeterministicAnswerResolver:
        """A resolver over the case's artifact, options and clock."""
        return create_deterministic_answer_resolver(
            copy.deepcopy(self.artifact),
            expected_content_hash=self.expected_content_hash,
            expected_site_id=self.expected_site_id,
            now=self.clock(),
        )

    def create_fallback(self) -> ScriptedAdapter | None:
        """The case's stand-in backend, streaming :attr:`backend_text` (``None`` if none)."""
        return None if self.backend_text is None else ScriptedAdapter.text(self.backend_text)

    def create_adapter(self, *, fallback: ChatAdapter | None = None) -> DeterministicAnswerAdapter:
        """An adapter set up as the case says; pass ``fallback`` to use your own backend
        instead of :meth:`create_fallback`'s."""
        return create_deterministic_answer_adapter(
            artifact=copy.deepcopy(self.artifact),
            expected_content_hash=self.expected_content_hash,
            expected_site_id=self.expected_site_id,
            fallback_mode=self.fallback_mode,
            fallback=self.create_fallback() if fallback is None else fallback,
            backend=self.backend,
            now=self.clock(),
        )


@dataclass(frozen=True, slots=True)
class FixtureResult:
    """The outcome of running one case.

    Attributes:
        case: The case that ran.
        passed: Whether the actual envelope equals the expected one.
        actual: The envelope produced (wire form), or ``None`` when the adapter attached none.
        expected: The envelope the case expects (wire form).
    """

    case: DeterministicAnswerCase
    passed: bool
    actual: dict[str, Any] | None
    expected: Mapping[str, Any]


async def _adapter_envelope(case: DeterministicAnswerCase, adapter: Any) -> dict[str, Any] | None:
    message = ChatMessage(
        id=FIXTURE_MESSAGE_ID,
        role="user",
        content=case.query,
        created_at=_instant(case.now),
    )
    request = AdapterRequest(messages=(message,))
    source = create_scoped_source(adapter, request, FIXTURE_SESSION_ID)
    envelope: Any = None
    async with closing_iterator(source.stream()) as chunks:
        async for chunk in chunks:
            if chunk.metadata is not None and "answer" in chunk.metadata:
                envelope = chunk.metadata["answer"]
            if chunk.type in ("done", "error"):
                # A chat controller stops reading at the first ``done`` or ``error``.
                break
    return None if envelope is None else dict(envelope.to_wire())


async def run_fixture(case: DeterministicAnswerCase, subject: Any) -> FixtureResult:
    """Run ``case`` against a resolver (anything with ``resolve``) or a chat adapter.

    A resolver is asked ``resolve(case.query)``. An adapter gets a one-message request (user
    message ``fixture-user-1``) in session ``fixture-session``; the stream is read as a chat
    controller reads it, and the last ``metadata["answer"]`` seen is the result. Build the
    subject with the case's clock and options (:meth:`DeterministicAnswerCase.create_resolver`
    and :meth:`~DeterministicAnswerCase.create_adapter` do).
    """
    if callable(getattr(subject, "resolve", None)):
        expected = case.expected
        actual: dict[str, Any] | None = subject.resolve(case.query).to_wire()
    else:
        expected = case.expected_adapter
        actual = await _adapter_envelope(case, subject)
    return FixtureResult(case, actual == expected, actual, expected)


def _answer(name: str) -> dict[str, Any]:
    return copy.deepcopy(DETERMINISTIC_ANSWER_FIXTURES[name])


def _miss(query: str, normalized: str) -> dict[str, Any]:
    return {
        **_answer("miss"),
        "query": query,
        "normalizedQuery": normalized,
    }


def _tampered() -> dict[str, Any]:
    value = copy.deepcopy(LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE)
    value["entries"][0]["answer"]["markdown"] = "Tampered content."
    return value


_NOW: Final = "2026-07-13T12:00:00.000Z"
_SITE: Final = "agentskit-docs"
_UNUSED_BACKEND: Final = "The backend must not answer this question."

_case = functools.partial(
    DeterministicAnswerCase,
    artifact=LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE,
    expected_content_hash=DETERMINISTIC_CONTENT_HASH_FIXTURE,
    expected_site_id=_SITE,
    now=_NOW,
)

#: The eight cases, in the spec's order.
DETERMINISTIC_ANSWER_CASES: Final[tuple[DeterministicAnswerCase, ...]] = (
    _case(
        name="exact match",
        description="An exact alias answers locally; the backend is never called.",
        query="Install CLI",
        fallback_mode="backend",
        backend_text=_UNUSED_BACKEND,
        expected=_answer("local"),
        expected_adapter=_answer("local"),
    ),
    _case(
        name="ambiguity",
        description="An alias of several entries offers choices, never a silent pick.",
        query="docs",
        fallback_mode="backend",
        backend_text=_UNUSED_BACKEND,
        expected=_answer("ambiguous"),
        expected_adapter=_answer("ambiguous"),
    ),
    _case(
        name="miss",
        description="No exact alias escalates; with no backend at all the user is told so.",
        query="Why?",
        fallback_mode="backend",
        expected=_answer("miss"),
        expected_adapter=_answer("offline"),
    ),
    _case(
        name="stale",
        description="An expired artifact never answers, even on an exact match.",
        artifact=STALE_LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE,
        expected_content_hash=STALE_LOCAL_KNOWLEDGE_ARTIFACT_FIXTURE["contentHash"],
        query="install cli",
        fallback_mode="disabled",
        expected=_answer("stale"),
        expected_adapter=_answer("stale"),
    ),
    _case(
        name="corrupt",
        description="A tampered artifact fails its hash and never answers locally.",
        artifact=_tampered(),
        query="install cli",
        fallback_mode="disabled",
        expected=_answer("corrupt"),
        expected_adapter=_answer("corrupt"),
    ),
    _case(
        name="hash mismatch",
        description="An artifact other than the one the site configuration names is corrupt.",
        expected_content_hash="sha256:" + "b" * 64,
        query="install cli",
        fallback_mode="disabled",
        expected=_answer("corrupt"),
        expected_adapter=_answer("corrupt"),
    ),
    _case(
        name="backend provenance",
        description="A backend answer is marked high/backend with the host's provider and model.",
        query="Compare runtimes",
        fallback_mode="backend",
        backend={"provider": "ask", "model": "configured-by-host"},
        backend_text="The backend can answer open-ended comparisons.",
        expected=_miss("Compare runtimes", "compare runtimes"),
        expected_adapter=_answer("backend"),
    ),
    _case(
        name="offline",
        description="Fallback disabled: a miss is answered offline, even if a backend exists.",
        query="Why?",
        fallback_mode="disabled",
        backend_text=_UNUSED_BACKEND,
        expected=_answer("miss"),
        expected_adapter=_answer("offline"),
    ),
)
