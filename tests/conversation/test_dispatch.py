"""Deterministic dispatch through ``session.chat.adapter.create_source``."""

from __future__ import annotations

from typing import Any

import pytest

from agentskit_chat.conversation import (
    ConversationSnapshot,
    ConversationStateDefinition,
    ConversationTrace,
    InMemorySessionStorage,
    Route,
    RouteContext,
    command_route,
    create_chat_session,
)
from agentskit_chat.protocol import SessionSnapshot
from agentskit_chat.runtime import (
    AdapterCapabilities,
    ChatAdapter,
    SessionAwareChatAdapter,
    StreamChunk,
)
from tests._loop import no_blocking

from ._support import (
    ROUTE_ERROR,
    SECRET,
    ModelAdapter,
    SessionAwareModel,
    Traces,
    collect,
    decisions_of,
    definition,
    onboarding,
    reply,
    request,
    respond,
    state_of,
    states,
    user,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def catch_all(route_id: str, text: str, event: str = "go", **extra: Any) -> Route:
    return Route(id=route_id, event=event, match=lambda _t: True, response=respond(text), **extra)


async def test_onboarding_commands_answer_without_the_model() -> None:
    model, traces = ModelAdapter(), Traces()
    session = create_chat_session(onboarding(model, traces))
    adapter = session.chat.adapter
    async with no_blocking():
        first = await collect(adapter.create_source(request(user("/start"))))
        assert first == reply("What is your name?")
        assert session.get_conversation_snapshot() == ConversationSnapshot(
            "collecting", ("finish",), ("cancel",)
        )
        history = (user("/start"), user("/name Ada", "user-2"))
        second = await collect(adapter.create_source(request(*history)))
    assert second == reply("Welcome, Ada.")
    assert session.get_conversation_snapshot() == ConversationSnapshot("complete", (), ("restart",))
    assert model.calls == 0
    assert traces.seen == [
        ConversationTrace("deterministic", "idle", "collecting", "start"),
        ConversationTrace("deterministic", "collecting", "complete", "name"),
    ]


async def test_input_whose_route_event_is_not_allowed_goes_to_the_model_unchanged() -> None:
    model, traces = ModelAdapter(), Traces()
    session = create_chat_session(onboarding(model, traces))
    sent = request(user("/name Ada"))
    assert await collect(session.chat.adapter.create_source(sent)) == reply("model reply")
    assert model.requests == [sent]
    assert model.requests[0] is sent
    assert traces.seen == [ConversationTrace("agentic", "idle", "idle")]
    snapshot = session.get_conversation_snapshot()
    assert snapshot is not None
    assert snapshot.state == "idle"


async def test_the_first_matching_route_wins_and_sessions_are_isolated() -> None:
    model = ModelAdapter()
    declared = definition(
        model,
        states=states(idle={"go": "done"}, done={}),
        routes=(catch_all("first", "one"), catch_all("second", "two")),
    )
    session, other = create_chat_session(declared), create_chat_session(declared)
    assert await collect(session.chat.adapter.create_source(request(user("x")))) == reply("one")
    assert [state_of(s) for s in (session, other)] == ["done", "idle"]


@pytest.mark.parametrize("kind", ["deterministic", "repaired", "fallback"])
async def test_traces_carry_the_declared_route_kind(kind: Any) -> None:
    traces = Traces()
    declared = definition(
        ModelAdapter(),
        states=states(idle={"go": "done"}, done={}),
        routes=(catch_all("r", "ok", trace_kind=kind),),
        traces=traces,
    )
    session = create_chat_session(declared)
    await collect(session.chat.adapter.create_source(request(user("x"))))
    assert traces.seen == [ConversationTrace(kind, "idle", "done", "r")]


def _boom(*_args: Any) -> Any:
    raise RuntimeError(SECRET)


@pytest.mark.parametrize("broken", ["match", "response"])
async def test_a_failing_matcher_or_response_is_a_route_error(broken: str) -> None:
    model, traces = ModelAdapter(), Traces()
    route = Route(
        id="r",
        event="go",
        match=_boom if broken == "match" else (lambda _t: True),
        response=_boom if broken == "response" else respond("ok"),
    )
    declared = definition(
        model, states=states(idle={"go": "done"}, done={}), routes=(route,), traces=traces
    )
    session = create_chat_session(declared)
    source = session.chat.adapter.create_source(request(user("x")))
    source.abort()  # a no-op for the route error source
    assert await collect(source) == ROUTE_ERROR
    assert state_of(session) == "idle"
    assert model.calls == 0
    assert traces.seen == []


@pytest.mark.parametrize("bad", [None, 42, "x" * 65537])
async def test_a_reply_that_is_not_text_or_over_65536_units_is_a_route_error_decision_12(
    bad: Any,
) -> None:
    route = Route(id="r", event="go", match=lambda _t: True, response=lambda _t, _c: bad)
    declared = definition(
        ModelAdapter(), states=states(idle={"go": "done"}, done={}), routes=(route,)
    )
    session = create_chat_session(declared)
    assert await collect(session.chat.adapter.create_source(request(user("x")))) == ROUTE_ERROR
    assert state_of(session) == "idle"
    assert decisions_of(session) == ()


async def test_a_reply_of_exactly_65536_units_is_answered_and_cached_decision_12() -> None:
    text = "é" * 65535 + "x"
    declared = definition(
        ModelAdapter(),
        states=states(idle={"go": "done"}, done={}),
        routes=(catch_all("r", text),),
    )
    session = create_chat_session(declared)
    assert await collect(session.chat.adapter.create_source(request(user("x")))) == reply(text)
    assert len(decisions_of(session)) == 1


async def test_matchers_run_only_for_eligible_routes_in_order() -> None:
    calls: list[str] = []

    def matcher(name: str, result: bool) -> Any:
        def match(_text: str) -> bool:
            calls.append(name)
            return result

        return match

    routes = (
        Route(
            id="restricted",
            event="go",
            states=("done",),
            match=matcher("restricted", True),
            response=respond("a"),
        ),
        Route(
            id="disallowed", event="other", match=matcher("disallowed", True), response=respond("b")
        ),
        Route(id="miss", event="go", match=matcher("miss", False), response=respond("c")),
        Route(
            id="hit",
            event="go",
            states=("idle",),
            match=matcher("hit", True),
            response=respond("d"),
        ),
        Route(id="late", event="go", match=matcher("late", True), response=respond("e")),
    )
    declared = definition(
        ModelAdapter(), states=states(idle={"go": "done"}, done={"other": "idle"}), routes=routes
    )
    session = create_chat_session(declared)
    assert await collect(session.chat.adapter.create_source(request(user("x")))) == reply("d")
    assert calls == ["miss", "hit"]


async def test_retry_and_regenerate_replay_the_cached_decision() -> None:
    model, traces = ModelAdapter(), Traces()
    responses: list[str] = []

    def response(text: str, _context: RouteContext) -> str:
        responses.append(text)
        return f"reply {len(responses)}"

    routes = (Route(id="start", event="start", match=lambda t: t == "/start", response=response),)
    declared = definition(
        model,
        states=states(idle={"start": "collecting"}, collecting={"start": "collecting"}),
        routes=routes,
        traces=traces,
    )
    session = create_chat_session(declared)
    adapter = session.chat.adapter
    first = await collect(adapter.create_source(request(user("/start"))))
    again = await collect(adapter.create_source(request(user("/start"))))
    assert first == again == reply("reply 1")
    assert responses == ["/start"]
    assert model.calls == 0
    assert state_of(session) == "collecting"
    assert traces.kinds == ["deterministic", "deterministic"]


async def test_editing_a_deterministic_turn_re_evaluates_it_from_the_rebuilt_state() -> None:
    model, traces = ModelAdapter(), Traces()
    session = create_chat_session(onboarding(model, traces))
    adapter = session.chat.adapter
    await collect(adapter.create_source(request(user("/start"))))
    assert await collect(adapter.create_source(request(user("changed")))) == reply("model reply")
    assert model.calls == 1
    assert state_of(session) == "idle"
    assert decisions_of(session) == ()
    assert traces.seen[-1] == ConversationTrace("agentic", "idle", "idle")


async def test_truncated_history_prunes_decisions_so_a_reused_id_re_runs_its_route() -> None:
    counts = {"one": 0, "two": 0}

    def counted(name: str) -> Any:
        def response(_text: str, _context: RouteContext) -> str:
            counts[name] += 1
            return f"{name}-{counts[name]}"

        return response

    declared = definition(
        ModelAdapter(),
        states=states(idle={"one": "first"}, first={"two": "second"}, second={}),
        routes=(
            Route(id="one", event="one", match=lambda t: t == "/one", response=counted("one")),
            Route(id="two", event="two", match=lambda t: t == "/two", response=counted("two")),
        ),
    )
    session = create_chat_session(declared)
    adapter = session.chat.adapter
    one, two = user("/one", "user-1"), user("/two", "user-2")
    await collect(adapter.create_source(request(one)))
    assert await collect(adapter.create_source(request(one, two))) == reply("two-1")
    edited = user("edited", "user-1")
    await collect(adapter.create_source(request(edited)))
    three = user("/one", "user-3")
    assert await collect(adapter.create_source(request(edited, three))) == reply("one-2")
    assert await collect(adapter.create_source(request(edited, three, two))) == reply("two-2")


async def test_route_context_names_the_session_and_the_user_message() -> None:
    seen: list[RouteContext] = []

    def response(_text: str, context: RouteContext) -> str:
        seen.append(context)
        return "ok"

    declared = definition(
        ModelAdapter(),
        states=states(idle={"go": "idle"}),
        routes=(Route(id="r", event="go", match=lambda _t: True, response=response),),
    )
    session = create_chat_session(declared, session_id="session-1")
    await collect(session.chat.adapter.create_source(request(user("x", "message-7"))))
    await collect(session.chat.adapter.create_source(request()))
    assert seen == [RouteContext("session-1", "message-7"), RouteContext("session-1", None)]


async def test_a_request_without_user_messages_is_routed_on_empty_input_but_not_cached() -> None:
    inputs: list[str] = []

    def match(text: str) -> bool:
        inputs.append(text)
        return True

    declared = definition(
        ModelAdapter(),
        states=states(idle={"go": "done"}, done={}),
        routes=(Route(id="r", event="go", match=match, response=respond("ok")),),
    )
    session = create_chat_session(declared)
    assert await collect(session.chat.adapter.create_source(request())) == reply("ok")
    assert inputs == [""]
    assert state_of(session) == "done"
    assert decisions_of(session) == ()


async def test_update_chat_never_wraps_twice() -> None:
    model, traces = ModelAdapter(), Traces()
    session = create_chat_session(onboarding(model, traces))
    updated = session.update_chat(session.chat.with_changes(system_prompt="Be brief."))
    again = session.update_chat(updated)
    other = create_chat_session(onboarding(model, traces))
    foreign = other.update_chat(updated)
    for config in (updated, again, foreign):
        await collect(config.adapter.create_source(request(user("hello"))))
    assert model.calls == 3
    assert traces.kinds == ["agentic"] * 3
    assert session.chat.system_prompt is None
    assert updated.system_prompt == "Be brief."


@pytest.mark.parametrize("conversation", [True, False])
async def test_sources_are_opened_in_the_session_scope(conversation: bool) -> None:
    model = SessionAwareModel()
    declared = definition(model, states=states(idle={}) if conversation else None)
    session = create_chat_session(declared, session_id="session-9")
    adapter = session.chat.adapter
    await collect(adapter.create_source(request(user("hello"))))
    assert model.session_ids == ["session-9"]
    assert adapter.capabilities is model.capabilities
    assert adapter.greet() == "hello from the original"  # type: ignore[attr-defined]
    assert isinstance(adapter, ChatAdapter)
    assert not isinstance(adapter, SessionAwareChatAdapter)
    assert session.update_chat(session.chat).adapter.greet() == "hello from the original"  # type: ignore[attr-defined]


async def test_an_adapter_without_capabilities_keeps_none() -> None:
    model = ModelAdapter(capabilities=None)
    session = create_chat_session(definition(model, states=states(idle={})))
    assert session.chat.adapter.capabilities is None
    model.capabilities = AdapterCapabilities()
    assert session.chat.adapter.capabilities is model.capabilities


def _raising_sink(_trace: ConversationTrace) -> None:
    raise RuntimeError(SECRET)


async def _rejecting_sink(_trace: ConversationTrace) -> None:
    raise RuntimeError(SECRET)


@pytest.mark.parametrize("sink", [_raising_sink, _rejecting_sink], ids=["throwing", "rejecting"])
async def test_a_failing_trace_sink_never_changes_dispatch(sink: Any) -> None:
    model = ModelAdapter()
    declared = onboarding(model)
    conversation = declared.conversation
    assert conversation is not None
    object.__setattr__(conversation, "on_trace", sink)
    session = create_chat_session(declared)
    chunks = await collect(session.chat.adapter.create_source(request(user("/start"))))
    assert chunks == reply("What is your name?")
    assert state_of(session) == "collecting"


async def test_deterministic_source_abort_semantics() -> None:
    session = create_chat_session(onboarding(ModelAdapter()))
    adapter = session.chat.adapter
    before = adapter.create_source(request(user("/start")))
    before.abort()
    assert await collect(before) == []
    between = adapter.create_source(request(user("/start")))
    seen = []
    async for chunk in between.stream():
        seen.append(chunk.type)
        between.abort()
    assert seen == ["text"]


async def test_the_model_source_is_passed_through_and_closed() -> None:
    model = ModelAdapter()
    session = create_chat_session(onboarding(model))
    source = session.chat.adapter.create_source(request(user("hello")))
    source.abort()
    assert model.sources[0].aborted
    stream = source.stream()
    first = await stream.__anext__()
    assert first.content == "model reply"
    await stream.aclose()  # type: ignore[attr-defined]
    assert model.sources[0].closed


async def test_every_dispatch_schedules_a_save_which_without_storage_advances_the_cursor() -> None:
    broken = Route(id="broken", event="start", match=lambda t: t == "/fail", response=_boom)
    declared = onboarding(ModelAdapter())
    assert declared.conversation is not None
    object.__setattr__(declared.conversation, "routes", (*declared.conversation.routes, broken))
    session = create_chat_session(declared)
    adapter = session.chat.adapter
    for text in ("/start", "hello", "/fail"):
        await collect(adapter.create_source(request(user(text))))
    assert session.get_cursor() == 3


# --- limits where data enters ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message_id", "text"),
    [("has space", "/go"), ("user-1", "/go" + "x" * 16382)],
    ids=["unsafe-message-id", "input-over-16384-units"],
)
async def test_a_turn_that_cannot_be_recorded_is_not_routed_decision_12(
    message_id: str, text: str
) -> None:
    model, traces = ModelAdapter(), Traces()
    declared = definition(
        model,
        states=states(idle={"go": "done"}, done={}),
        routes=(catch_all("r", "ok"),),
        traces=traces,
    )
    session = create_chat_session(declared)
    assert await collect(session.chat.adapter.create_source(request(user(text, message_id)))) == (
        reply("model reply")
    )
    assert traces.kinds == ["agentic"]
    assert state_of(session) == "idle"
    session.build_snapshot()


async def test_an_input_of_exactly_16384_units_is_routed_decision_12() -> None:
    declared = definition(
        ModelAdapter(), states=states(idle={"go": "done"}, done={}), routes=(catch_all("r", "ok"),)
    )
    session = create_chat_session(declared)
    text = "\U0001f600" * 8192
    assert await collect(session.chat.adapter.create_source(request(user(text)))) == reply("ok")
    assert decisions_of(session)[0].input == text


def _ticking(model: ModelAdapter, traces: Traces) -> Any:
    return definition(
        model,
        states={"idle": ConversationStateDefinition(on={"tick": "idle"})},
        routes=(Route(id="tick", event="tick", match=lambda _t: True, response=respond("t")),),
        traces=traces,
    )


async def test_a_full_decision_cache_sends_new_turns_to_the_model_decision_12() -> None:
    model, traces = ModelAdapter(), Traces()
    history = [user("t", f"u-{i}") for i in range(1001)]
    stored = SessionSnapshot.model_validate(
        {
            "protocol": "agentskit.chat.session",
            "version": 1,
            "session_id": "s",
            "definition_id": "support",
            "definition_revision": 1,
            "updated_at": "2026-07-11T00:00:00.000Z",
            "cursor": 1,
            "conversation": {
                "state": "idle",
                "decisions": [
                    {
                        "messageId": f"u-{i}",
                        "input": "t",
                        "routeId": "tick",
                        "kind": "deterministic",
                        "content": "t",
                        "fromState": "idle",
                        "toState": "idle",
                    }
                    for i in range(999)
                ],
            },
            "confirmations": [],
        }
    )
    session = create_chat_session(_ticking(model, traces), snapshot=stored)
    adapter = session.chat.adapter
    async with no_blocking():
        assert await collect(adapter.create_source(request(*history[:1000]))) == reply("t")
        assert await collect(adapter.create_source(request(*history))) == reply("model reply")
    decisions = decisions_of(session)
    assert len(decisions) == 1000
    assert model.calls == 1
    assert traces.kinds == ["deterministic", "agentic"]


async def test_route_identity_context_rule_gives_replays_the_same_instance_ids() -> None:
    def frame(_text: str, context: RouteContext) -> str:
        return f'{{"instanceId":"choices-{context.message_id or context.session_id}"}}'

    declared = definition(
        ModelAdapter(),
        states=states(idle={"ask": "idle"}),
        routes=(Route(id="ask", event="ask", match=lambda _t: True, response=frame),),
    )
    session = create_chat_session(declared, session_id="s-1")
    adapter = session.chat.adapter
    first = await collect(adapter.create_source(request(user("pick", "m-1"))))
    replay = await collect(adapter.create_source(request(user("pick", "m-1"))))
    later = await collect(adapter.create_source(request(user("pick", "m-1"), user("pick", "m-2"))))
    assert first == replay == reply('{"instanceId":"choices-m-1"}')
    assert later == reply('{"instanceId":"choices-m-2"}')


async def test_a_decision_that_no_longer_replays_in_the_history_is_dropped_decision_13() -> None:
    model, traces = ModelAdapter(), Traces()
    session = create_chat_session(onboarding(model, traces))
    adapter = session.chat.adapter
    start, name = user("/start", "user-1"), user("/name Ada", "user-2")
    await collect(adapter.create_source(request(start)))
    await collect(adapter.create_source(request(start, name)))
    # The host drops the first turn: the second one was made from "collecting" and cannot be
    # replayed from "idle" any more.
    assert await collect(adapter.create_source(request(name, user("hi", "user-3")))) == reply(
        "model reply"
    )
    assert traces.seen[-2:] == [
        ConversationTrace("repaired", "idle", "idle", "name"),
        ConversationTrace("agentic", "idle", "idle"),
    ]
    assert decisions_of(session) == ()
    await collect(adapter.create_source(request(name, user("hi", "user-3"))))
    assert traces.kinds.count("repaired") == 1


def test_command_routes_are_plain_routes() -> None:
    route = command_route(command="/x", id="x", event="go", response=respond("x"), states=["a"])
    assert route.states == ("a",)


class _Failing:
    """A model source that yields text, then fails (or just ends, without ``done``)."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def abort(self) -> None:
        pass

    async def stream(self) -> Any:
        yield StreamChunk("text", content="partial")
        if self.fail:
            raise RuntimeError(SECRET)


class _FailingModel(ModelAdapter):
    fail: bool = True

    def create_source(self, request: Any) -> Any:
        self.requests.append(request)
        return _Failing(self.fail)


@pytest.mark.parametrize("fail", [True, False], ids=["stream-fails", "stream-ends-without-done"])
async def test_the_model_turn_saves_even_when_its_stream_fails_or_ends_early(fail: bool) -> None:
    model = _FailingModel()
    model.fail = fail
    storage = InMemorySessionStorage()
    session = create_chat_session(onboarding(model), session_id="s", storage=storage)
    source = session.chat.adapter.create_source(request(user("hello")))
    seen: list[str] = []
    try:
        async for chunk in source.stream():
            seen.append(chunk.type)
    except RuntimeError:
        seen.append("raised")
    assert seen == (["text", "raised"] if fail else ["text"])
    assert await storage.load("s") is not None
    assert session.get_cursor() == 1
