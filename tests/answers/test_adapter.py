"""The deterministic answer adapter: local streams, escalation, backend observation, choices."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

from agentskit_chat.answers import (
    CHOICE_UNAVAILABLE,
    ESCALATION_METADATA_KEY,
    ChoiceReservation,
    DeterministicAnswerAdapter,
    create_deterministic_answer_adapter,
)
from agentskit_chat.answers._projection import safe_instance_id
from agentskit_chat.answers.fixtures import ScriptedAdapter
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import (
    ASSISTANT_CONTENT_PREFIX,
    AnswerEnvelope,
    ComponentFrame,
    ComponentPart,
    EscalationAnswer,
    ExactAnswer,
    TextPart,
    create_assistant_content_encoder,
    decode_assistant_content,
)
from agentskit_chat.protocol.fixtures import DETERMINISTIC_ANSWER_FIXTURES
from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterContext,
    AdapterRequest,
    ChatMessage,
    ChatSource,
    StreamChunk,
)
from tests.answers._support import (
    ARTIFACT,
    CREATED,
    HASH,
    SITE,
    STALE,
    artifact,
    collect,
    entry,
    now,
    request,
)

pytestmark = pytest.mark.anyio

OFFLINE = "This question needs the backend, which is not available."
BACKEND = {"provider": "ask", "model": "configured-by-host"}


def adapter(
    mode: str = "backend", value: object = ARTIFACT, **options: Any
) -> DeterministicAnswerAdapter:
    settings: dict[str, Any] = {
        "artifact": value,
        "expected_content_hash": HASH,
        "expected_site_id": SITE,
        "fallback_mode": mode,
        "now": now,
    }
    settings.update(options)
    return create_deterministic_answer_adapter(**settings)


def answer_of(chunk: StreamChunk) -> AnswerEnvelope:
    assert chunk.metadata is not None
    envelope: AnswerEnvelope = chunk.metadata["answer"]
    return envelope


def parts_of(content: str | None) -> tuple[TextPart | ComponentPart, ...]:
    decoded = decode_assistant_content(content)
    assert decoded.ok
    assert decoded.complete
    return decoded.parts


def choice_frame(chunks: Sequence[StreamChunk]) -> ComponentFrame:
    part = parts_of(chunks[0].content)[1]
    assert isinstance(part, ComponentPart)
    return part.frame


# --- local answers -------------------------------------------------------------------------------


async def test_exact_answer_streams_locally_and_never_calls_the_backend() -> None:
    spy = ScriptedAdapter.text("backend")
    chunks = await collect(adapter(fallback=spy).create_source(request("install cli")))
    assert spy.requests == []
    assert len(chunks) == 2
    assert chunks[1] == StreamChunk("done")
    assert chunks[1].metadata is None
    text, sources = parts_of(chunks[0].content)
    assert isinstance(text, TextPart)
    assert text.text == "Run `npm install agentskit`."
    assert isinstance(sources, ComponentPart)
    assert sources.frame.to_wire() == {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": "source-list",
        "instanceId": "sources-user-1",
        "props": {
            "label": "Sources",
            "sources": [{"id": "quickstart", "title": "Quickstart", "url": "/docs/quickstart"}],
        },
        "fallback": {"kind": "source-list", "summary": "Sources: Quickstart."},
    }
    envelope = answer_of(chunks[0])
    assert envelope.to_wire() == {
        **DETERMINISTIC_ANSWER_FIXTURES["local"],
        "query": "install cli",
    }
    assert chunks[0].type == "text"
    assert chunks[0].content.startswith(ASSISTANT_CONTENT_PREFIX)  # type: ignore[union-attr]


async def test_answer_without_citations_is_text_only() -> None:
    value = artifact([entry("plain", "plain question")])
    a = adapter(value=value, expected_content_hash=value["contentHash"])
    chunks = await collect(a.create_source(request("plain question")))
    encoder = create_assistant_content_encoder()
    assert chunks[0].content == encoder.encode({"kind": "text", "text": "Answer of plain."})


async def test_duplicate_citation_ids_keep_the_first_source() -> None:
    duplicated = entry("dup", "dup question", cites=2)
    duplicated["answer"]["citations"][1]["id"] = "dup-c0"
    value = artifact([duplicated])
    a = adapter(value=value, expected_content_hash=value["contentHash"])
    chunks = await collect(a.create_source(request("dup question")))
    frame = parts_of(chunks[0].content)[1]
    assert isinstance(frame, ComponentPart)
    assert [s["id"] for s in frame.frame.props["sources"]] == ["dup-c0"]
    assert frame.frame.fallback.summary == "Sources: Title 0."


async def test_choices_stream_a_choice_list_with_unique_aliases() -> None:
    chunks = await collect(adapter("disabled").create_source(request("docs")))
    text, part = parts_of(chunks[0].content)
    assert isinstance(text, TextPart)
    assert text.text == "More than one exact local answer matches. Choose one to continue."
    assert isinstance(part, ComponentPart)
    assert part.frame.to_wire() == {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": "choice-list",
        "instanceId": "deterministic-choices-user-1",
        "props": {
            "prompt": "More than one exact local answer matches. Choose one to continue.",
            "choices": [
                {
                    "id": "docs-agentskit",
                    "label": "AgentsKit documentation",
                    "description": "agentskit docs",
                },
                {
                    "id": "docs-registry",
                    "label": "Registry documentation",
                    "description": "registry docs",
                },
            ],
        },
        "fallback": {
            "kind": "choice-list",
            "summary": "More than one exact local answer matches. Choose one to continue. "
            "AgentsKit documentation, Registry documentation.",
        },
    }
    assert answer_of(chunks[0]).to_wire() == DETERMINISTIC_ANSWER_FIXTURES["ambiguous"]


async def test_choice_submission_flow() -> None:
    a = adapter("disabled")
    frame = choice_frame(await collect(a.create_source_for_session(request("docs"), "s1")))
    submit = a.resolve_choice_submission
    assert submit(frame, "not-offered", session_id="s1") is CHOICE_UNAVAILABLE
    reservation = submit(frame, "docs-agentskit", session_id="s1")
    assert isinstance(reservation, ChoiceReservation)
    assert reservation.value == "agentskit docs"
    assert submit(frame, "docs-agentskit", session_id="s1") is CHOICE_UNAVAILABLE
    reservation.release()
    again = submit(frame, "docs-agentskit", session_id="s1")
    assert isinstance(again, ChoiceReservation)
    again.commit()
    assert submit(frame, "docs-agentskit", session_id="s1") is CHOICE_UNAVAILABLE
    forged = frame.model_copy(update={"instance_id": "deterministic-choices-forged"})
    assert submit(forged, "docs-agentskit", session_id="s1") is CHOICE_UNAVAILABLE


async def test_choices_are_remembered_when_the_stream_is_read() -> None:
    a = adapter("disabled")
    source = a.create_source_for_session(request("docs"), "s1")
    frame = choice_frame(await collect(adapter("disabled").create_source(request("docs"))))
    assert a.resolve_choice_submission(frame, "docs-agentskit", session_id="s1") is (
        CHOICE_UNAVAILABLE
    )
    await collect(source)
    reserved = a.resolve_choice_submission(frame, "docs-agentskit", session_id="s1")
    assert isinstance(reserved, ChoiceReservation)


async def test_two_sessions_with_the_same_message_id_get_their_own_reservations() -> None:
    a = adapter("disabled")
    frames = [
        choice_frame(await collect(a.create_source_for_session(request("docs"), session)))
        for session in ("session-a", "session-b")
    ]
    assert frames[0] == frames[1]
    first = a.resolve_choice_submission(frames[0], "docs-agentskit", session_id="session-a")
    second = a.resolve_choice_submission(frames[1], "docs-agentskit", session_id="session-b")
    assert isinstance(first, ChoiceReservation)
    assert isinstance(second, ChoiceReservation)
    assert a.resolve_choice_submission(frames[0], "docs-registry", session_id="session-c") is (
        CHOICE_UNAVAILABLE
    )


async def test_late_commit_after_release_choice_session() -> None:
    a = adapter("disabled")
    frame = choice_frame(await collect(a.create_source_for_session(request("docs"), "s")))
    old = a.resolve_choice_submission(frame, "docs-agentskit", session_id="s")
    assert isinstance(old, ChoiceReservation)
    a.release_choice_session("s")
    assert a.resolve_choice_submission(frame, "docs-registry", session_id="s") is (
        CHOICE_UNAVAILABLE
    )
    again = choice_frame(await collect(a.create_source_for_session(request("docs"), "s")))
    old.commit()
    assert isinstance(
        a.resolve_choice_submission(again, "docs-agentskit", session_id="s"), ChoiceReservation
    )


async def test_non_deterministic_frames_are_left_to_the_host() -> None:
    frame = choice_frame(await collect(adapter("disabled").create_source(request("docs"))))
    other = frame.model_copy(update={"instance_id": "destination-choice"})
    assert adapter("disabled").resolve_choice_submission(other, "docs", session_id="s") is None


async def test_abort_before_iteration_yields_nothing() -> None:
    source = adapter().create_source(request("install cli"))
    source.abort()
    assert await collect(source) == []


async def test_abort_after_the_text_chunk_skips_done() -> None:
    source = adapter().create_source(request("install cli"))
    seen = []
    async for chunk in source.stream():
        seen.append(chunk.type)
        source.abort()
    assert seen == ["text"]


async def test_latest_user_message_drives_the_decision() -> None:
    messages = (
        ChatMessage(id="u-old", role="user", content="docs", created_at=CREATED),
        ChatMessage(id="u/new", role="user", content="install cli", created_at=CREATED),
        ChatMessage(id="a1", role="assistant", content="", created_at=CREATED, status="streaming"),
    )
    chunks = await collect(adapter().create_source(AdapterRequest(messages=messages)))
    frame = parts_of(chunks[0].content)[1]
    assert isinstance(frame, ComponentPart)
    assert frame.frame.instance_id == "sources-u-new"


async def test_no_user_message_is_an_empty_question() -> None:
    observed: list[AnswerEnvelope] = []
    a = adapter("disabled", on_decision=observed.append)
    chunks = await collect(a.create_source(AdapterRequest(messages=())))
    envelope = answer_of(chunks[0])
    assert isinstance(envelope, EscalationAnswer)
    assert (envelope.reason, envelope.query, envelope.message) == ("offline", "", OFFLINE)
    assert observed == [envelope]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("sources-user-1", "sources-user-1"),
        ("sources-user/1 é", "sources-user-1--"),
        ("sources-😀", "sources---"),
        ("sources-" + "x" * 200, "sources-" + "x" * 120),
        ("-leading", "fallback-id"),
        ("", "fallback-id"),
    ],
)
def test_safe_instance_id(value: str, expected: str) -> None:
    assert safe_instance_id(value, "fallback-id") == expected


# --- escalation ----------------------------------------------------------------------------------


async def test_miss_goes_to_the_backend_with_the_escalation() -> None:
    spy = ScriptedAdapter.text("Backend text.", capabilities=AdapterCapabilities())
    a = adapter(fallback=spy)
    assert a.capabilities is spy.capabilities
    context = AdapterContext(system_prompt="be brief", metadata={"tenant": "docs"})
    original = AdapterRequest(
        messages=(ChatMessage(id="user-1", role="user", content="Why?", created_at=CREATED),),
        context=context,
    )
    source = a.create_source(original)
    assert len(spy.requests) == 1
    sent = spy.requests[0]
    assert sent.messages == original.messages
    assert sent.context.system_prompt == "be brief"
    assert list(sent.context.metadata) == ["tenant", ESCALATION_METADATA_KEY]
    assert sent.context.metadata["tenant"] == "docs"
    assert (
        sent.context.metadata[ESCALATION_METADATA_KEY].to_wire()
        == (DETERMINISTIC_ANSWER_FIXTURES["miss"])
    )
    assert ESCALATION_METADATA_KEY not in original.context.metadata
    source.abort()
    assert spy.aborted == 1


async def test_escalations_keep_the_session() -> None:
    spy = ScriptedAdapter.text("Backend text.")
    a = adapter(fallback=spy)
    a.create_source_for_session(request("Why?"), "registry:session-1")
    a.create_source(request("Why?"))
    assert spy.session_ids == ["registry:session-1", None]


async def test_plain_fallback_gets_plain_create_source() -> None:
    class Plain:
        capabilities = None

        def __init__(self) -> None:
            self.requests: list[AdapterRequest] = []

        def create_source(self, request: AdapterRequest) -> ChatSource:
            self.requests.append(request)
            return ScriptedAdapter([]).create_source(request)

    plain = Plain()
    a = adapter(fallback=plain)
    assert a.capabilities == AdapterCapabilities(streaming=True, structured_output=True)
    a.create_source_for_session(request("Why?"), "s1")
    assert len(plain.requests) == 1


async def test_disabled_mode_never_calls_a_supplied_backend() -> None:
    spy = ScriptedAdapter.text("x", capabilities=AdapterCapabilities(structured_output=False))
    observed: list[AnswerEnvelope] = []
    a = adapter("disabled", fallback=spy, on_decision=observed.append)
    assert a.capabilities == AdapterCapabilities(streaming=True, structured_output=True)
    chunks = await collect(a.create_source(request("Why?")))
    assert spy.requests == []
    assert answer_of(chunks[0]).to_wire() == DETERMINISTIC_ANSWER_FIXTURES["offline"]
    assert parts_of(chunks[0].content) == (TextPart(kind="text", text=OFFLINE),)
    assert chunks[1] == StreamChunk("done")
    assert [e.to_wire() for e in observed] == [DETERMINISTIC_ANSWER_FIXTURES["offline"]]


async def test_backend_mode_without_a_backend_is_offline() -> None:
    chunks = await collect(adapter().create_source(request("Why?")))
    assert answer_of(chunks[0]).to_wire() == DETERMINISTIC_ANSWER_FIXTURES["offline"]


async def test_stale_and_corrupt_are_kept_without_a_backend() -> None:
    stale = adapter("disabled", value=STALE, expected_content_hash=STALE["contentHash"])
    chunks = await collect(stale.create_source(request("install cli")))
    assert answer_of(chunks[0]).to_wire() == DETERMINISTIC_ANSWER_FIXTURES["stale"]
    corrupt = adapter("disabled", value=None)
    assert corrupt.resolver.is_corrupt
    chunks = await collect(corrupt.create_source(request("install cli")))
    assert answer_of(chunks[0]).to_wire() == DETERMINISTIC_ANSWER_FIXTURES["corrupt"]


async def test_stale_goes_to_the_backend_in_backend_mode() -> None:
    spy = ScriptedAdapter.text("Fresh.")
    stale = adapter(value=STALE, expected_content_hash=STALE["contentHash"], fallback=spy)
    await collect(stale.create_source(request("install cli")))
    sent = spy.requests[0].context.metadata[ESCALATION_METADATA_KEY]
    assert sent.to_wire() == DETERMINISTIC_ANSWER_FIXTURES["stale"]


async def test_a_throwing_observer_changes_nothing() -> None:
    calls: list[AnswerEnvelope] = []

    def observer(envelope: AnswerEnvelope) -> None:
        calls.append(envelope)
        raise RuntimeError("observer failure")

    a = adapter("disabled", on_decision=observer)
    chunks = await collect(a.create_source(request("Why?")))
    envelope = answer_of(chunks[0])
    assert isinstance(envelope, EscalationAnswer)
    assert (envelope.reason, envelope.confidence.level) == ("offline", "low")
    assert calls == [envelope]


async def test_an_async_observer_is_never_awaited_and_leaves_no_warning() -> None:
    ran: list[str] = []

    async def observer(envelope: AnswerEnvelope) -> None:
        ran.append("ran")

    a = adapter("disabled", on_decision=observer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await collect(a.create_source(request("install cli")))
    assert ran == []


async def test_local_decisions_are_observed_when_the_source_is_created() -> None:
    observed: list[AnswerEnvelope] = []
    a = adapter(on_decision=observed.append)
    a.create_source(request("install cli"))
    a.create_source(request("docs"))
    assert [e.outcome for e in observed] == ["answer", "choices"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fallback_mode": "sometimes"}, "The fallback mode must be backend or disabled."),
        ({"backend": {"provider": "ask", "modle": "x"}}, "The backend option accepts only"),
        ({"backend": {"provider": "   "}}, "1 to 128 characters"),
        ({"backend": {"model": "m" * 129}}, "1 to 128 characters"),
        ({"backend": {"model": 5}}, "1 to 128 characters"),
    ],
)
def test_invalid_options_raise_a_configuration_error(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        adapter(**options)
    assert message in caught.value.message
    assert caught.value.code == "AK_CONFIG_INVALID"


# --- backend observation -------------------------------------------------------------------------


class Backend:
    """A backend streaming given chunks; can raise, and records closing."""

    capabilities = None

    def __init__(self, chunks: Sequence[StreamChunk], *, fail: Exception | None = None) -> None:
        self.chunks = chunks
        self.fail = fail
        self.closed = False
        self.started = anyio.Event()

    def create_source(self, request: AdapterRequest) -> ChatSource:
        return self

    def abort(self) -> None:
        pass

    async def stream(self) -> AsyncIterator[StreamChunk]:
        try:
            for chunk in self.chunks:
                yield chunk
            self.started.set()
            if self.fail is not None:
                raise self.fail
        finally:
            self.closed = True


def text(value: str) -> StreamChunk:
    return StreamChunk("text", content=value)


def envelope_text(*parts: dict[str, Any], finish: bool = True) -> str:
    encoder = create_assistant_content_encoder()
    content = "".join(encoder.encode(part) for part in parts)
    return content if finish else content[:-1]


SOURCE_LIST: dict[str, Any] = {
    "kind": "component",
    "frame": {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": "source-list",
        "instanceId": "sources-1",
        "props": {
            "label": "Sources",
            "sources": [{"id": "source-1", "title": "Backend source", "url": "/docs/backend"}],
        },
        "fallback": {"kind": "source-list", "summary": "Sources: Backend source."},
    },
}


async def observe(
    chunks: Sequence[StreamChunk], query: str = "Compare runtimes", **options: Any
) -> tuple[list[StreamChunk], list[AnswerEnvelope]]:
    observed: list[AnswerEnvelope] = []
    backend = Backend(chunks)
    a = adapter(fallback=backend, backend=BACKEND, on_decision=observed.append, **options)
    out = await collect(a.create_source(request(query)))
    return out, observed[1:]  # the first observation is the escalation


async def test_backend_answer_with_citations_replaces_a_bogus_envelope() -> None:
    content = envelope_text({"kind": "text", "text": "Backend answer."}, SOURCE_LIST)
    bogus = StreamChunk("done", metadata={"answer": "bogus", "model": "m1"})
    chunks, observed = await observe([text(content), bogus])
    assert chunks[0] == text(content)
    final = answer_of(chunks[-1])
    assert final.to_wire() == {
        "protocol": "agentskit.chat.answer",
        "version": 1,
        "outcome": "answer",
        "query": "Compare runtimes",
        "normalizedQuery": "compare runtimes",
        "answer": {
            "markdown": "Backend answer.",
            "citations": [{"id": "source-1", "title": "Backend source", "href": "/docs/backend"}],
        },
        "provenance": {"source": "backend", "provider": "ask", "model": "configured-by-host"},
        "confidence": {"level": "high", "basis": "backend"},
    }
    assert chunks[-1].metadata is not None
    assert chunks[-1].metadata["model"] == "m1"
    assert observed == [final]


async def test_plain_backend_text_becomes_the_backend_fixture() -> None:
    chunks, _ = await observe(
        [text("The backend can answer "), text("open-ended comparisons.  "), StreamChunk("done")]
    )
    assert answer_of(chunks[-1]).to_wire() == DETERMINISTIC_ANSWER_FIXTURES["backend"]


CORRUPTIONS = [
    (
        [text("x" * 20000), StreamChunk("done")],
        "Backend answer exceeded the unified response limit.",
    ),
    (
        [text(envelope_text({"kind": "text", "text": "cut"}, finish=False)), StreamChunk("done")],
        "Backend answer ended with incomplete ordered content.",
    ),
    (
        [text(ASSISTANT_CONTENT_PREFIX), StreamChunk("done")],
        "Backend answer ended with incomplete ordered content.",
    ),
    (
        [text("\x1eagentskit.chat.content/1\n{bad}\n"), StreamChunk("done")],
        "Backend answer contained invalid ordered content.",
    ),
    ([text("x" * 262145), StreamChunk("done")], "Backend stream exceeded the observation limit."),
    (
        [text("x" * 262144), text(""), text("y"), StreamChunk("done")],
        "Backend stream exceeded the observation limit.",
    ),
    (
        [text("x" * 262144), text(""), StreamChunk("done")],
        "Backend answer exceeded the unified response limit.",
    ),
]


@pytest.mark.parametrize(("chunks", "message"), CORRUPTIONS)
async def test_backend_corruption_keeps_the_visible_stream(
    chunks: list[StreamChunk], message: str
) -> None:
    out, observed = await observe(chunks)
    assert out[:-1] == chunks[:-1]
    final = answer_of(out[-1])
    assert isinstance(final, EscalationAnswer)
    assert (final.reason, final.message, final.confidence.level) == ("corrupt", message, "low")
    assert (final.query, final.normalized_query) == ("Compare runtimes", "compare runtimes")
    assert observed == [final]


async def test_missing_done_gets_a_synthetic_one() -> None:
    chunks, observed = await observe([text("Backend text.")])
    assert [c.type for c in chunks] == ["text", "done"]
    assert chunks[-1].content is None
    assert answer_of(chunks[-1]).answer.markdown == "Backend text."  # type: ignore[union-attr]
    assert len(observed) == 1


async def test_an_error_chunk_means_no_envelope_at_all() -> None:
    error = StreamChunk("error", content="Ask request failed (503).")
    chunks, observed = await observe([text("partial"), error])
    assert chunks == [text("partial"), error]
    assert observed == []
    chunks, _ = await observe([text("partial"), error, StreamChunk("done")])
    assert chunks[-1] == StreamChunk("done")


async def test_empty_backend_text_attaches_nothing() -> None:
    chunks, observed = await observe([text("  \n "), StreamChunk("done")])
    assert chunks[-1] == StreamChunk("done")
    chunks, observed = await observe([])
    assert chunks == []
    assert observed == []


async def test_every_done_is_finalized() -> None:
    chunks, observed = await observe([text("One."), StreamChunk("done"), StreamChunk("done")])
    assert [c.type for c in chunks] == ["text", "done", "done"]
    assert len(observed) == 2


async def test_citations_come_only_from_valid_source_lists() -> None:
    sources = [{"id": f"s{i}", "title": f"T{i}", "url": f"/docs/{i}"} for i in range(10)] + [
        {"id": "no-url", "title": "No link"}
    ]
    many = {
        "kind": "component",
        "frame": {**SOURCE_LIST["frame"], "props": {"label": "Sources", "sources": sources}},
    }
    blank_title = {
        "kind": "component",
        "frame": {
            **SOURCE_LIST["frame"],
            "props": {"label": "S", "sources": [{"id": "blank", "title": "   ", "url": "/b"}]},
        },
    }
    extra_key = {
        "kind": "component",
        "frame": {**SOURCE_LIST["frame"], "props": {**SOURCE_LIST["frame"]["props"], "x": 1}},
    }
    other = {"kind": "component", "frame": {**SOURCE_LIST["frame"], "componentKey": "link-card"}}
    content = envelope_text(
        {"kind": "text", "text": "A"},
        blank_title,
        extra_key,
        other,
        many,
        {"kind": "text", "text": "B"},
    )
    chunks, _ = await observe([text(content), StreamChunk("done")])
    final = answer_of(chunks[-1])
    assert isinstance(final, ExactAnswer)
    assert final.answer.markdown == "AB"
    assert [c.id for c in final.answer.citations] == [f"s{i}" for i in range(8)]


async def test_backend_exceptions_propagate() -> None:
    backend = Backend([text("x")], fail=RuntimeError("backend down"))
    source = adapter(fallback=backend).create_source(request("Why?"))
    with pytest.raises(RuntimeError, match="backend down"):
        await collect(source)
    assert backend.closed


async def test_stopping_early_closes_the_backend() -> None:
    backend = Backend([text("a"), text("b"), StreamChunk("done")])
    source = adapter(fallback=backend).create_source(request("Why?"))
    stream = source.stream()
    assert (await stream.__anext__()).content == "a"
    await stream.aclose()  # type: ignore[attr-defined]
    assert backend.closed


async def test_cancelling_the_consumer_closes_the_backend() -> None:
    class Slow(Backend):
        async def stream(self) -> AsyncIterator[StreamChunk]:
            try:
                yield text("first")
                self.started.set()
                await anyio.sleep_forever()
                yield text("never")
            finally:
                self.closed = True

    backend = Slow([])
    source = adapter(fallback=backend).create_source(request("Why?"))
    seen: list[StreamChunk] = []

    async def consume() -> None:
        async for chunk in source.stream():
            seen.append(chunk)

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await backend.started.wait()
        group.cancel_scope.cancel()
    assert seen == [text("first")]
    assert backend.closed
