"""Sessions driven through a real ChatController."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat.answers import create_deterministic_answer_adapter
from agentskit_chat.conversation import (
    ChatDefinition,
    create_chat_session,
    get_lifecycle_targets,
    resume_chat_session,
)
from agentskit_chat.protocol import decode_assistant_content
from agentskit_chat.runtime import ChatController, InMemoryChatMemory
from agentskit_chat.storage import SQLiteSessionStorage
from tests._loop import no_blocking
from tests.answers._support import artifact, entry
from tests.answers._support import now as answers_now

from ._support import (
    Clock,
    ModelAdapter,
    SessionAwareModel,
    Traces,
    command,
    definition,
    name_route,
    state_of,
    states,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def contents(controller: ChatController) -> list[tuple[str, str]]:
    return [(message.role, message.content) for message in controller.state.messages]


def started(model: ModelAdapter) -> ChatDefinition:
    return definition(
        model,
        states=states(idle={"start": "complete"}, complete={}),
        routes=(command("start", "Started"),),
    )


async def test_send_retry_and_regenerate_replay_the_route_through_a_controller() -> None:
    model = ModelAdapter()
    session = create_chat_session(started(model))
    controller = ChatController(session.chat)
    async with no_blocking():
        await controller.send("/start")
        user_id = controller.state.messages[0].id
        await controller.retry()
        await controller.regenerate()
    assert contents(controller) == [("user", "/start"), ("assistant", "Started")]
    assert controller.state.messages[0].id == user_id
    assert controller.state.status == "idle"
    assert state_of(session) == "complete"
    assert model.calls == 0


async def test_editing_the_command_through_a_controller_asks_the_model_and_resets_the_state() -> (
    None
):
    model = ModelAdapter()
    session = create_chat_session(started(model))
    controller = ChatController(session.chat)
    await controller.send("/start")
    targets = get_lifecycle_targets(controller.state.messages)
    assert targets.user_id is not None
    await controller.edit(targets.user_id, "changed")
    assert contents(controller) == [("user", "changed"), ("assistant", "model reply")]
    assert model.calls == 1
    assert state_of(session) == "idle"


def onboarding(model: ModelAdapter, memory: InMemoryChatMemory, traces: Traces) -> ChatDefinition:
    """welcome → collecting → review, with a way back from review."""
    return definition(
        model,
        initial="welcome",
        states=states(
            welcome=({"start": "collecting"}, ("begin",)),
            collecting=({"name": "collecting", "review": "review"}, ("cancel",)),
            review=({"change": "collecting"}, ("confirm",)),
        ),
        routes=(
            command("start", "Welcome! Send /name and your name."),
            name_route(event="name", state="collecting", greeting="Thanks"),
            command("review", "Please review."),
            command("change", "What changes?"),
        ),
        traces=traces,
        revision=3,
        id="onboarding",
        memory=memory,
    )


async def test_an_onboarding_conversation_survives_retries_an_edit_and_a_resume(
    tmp_path: Path,
) -> None:
    model, memory, traces = ModelAdapter(), InMemoryChatMemory(), Traces()
    declared = onboarding(model, memory, traces)
    path = tmp_path / "sessions.db"
    async with no_blocking():
        async with SQLiteSessionStorage(path) as storage:
            session = await resume_chat_session(
                declared, session_id="visitor-1", storage=storage, now=Clock()
            )
            controller = ChatController(session.chat)
            await controller.load()
            await controller.send("/start")
            await controller.send("hello there")
            await controller.send("/name Ada")
            await controller.retry()
            await controller.send("/review")
            await controller.regenerate()
            assert state_of(session) == "review"
            name_turn = controller.state.messages[4]
            assert name_turn.content == "/name Ada"
            await controller.edit(name_turn.id, "/name Grace")
            assert state_of(session) == "collecting"
            await controller.send("/review")
            await controller.aclose()
        assert contents(controller) == [
            ("user", "/start"),
            ("assistant", "Welcome! Send /name and your name."),
            ("user", "hello there"),
            ("assistant", "model reply"),
            ("user", "/name Grace"),
            ("assistant", "Thanks, Grace."),
            ("user", "/review"),
            ("assistant", "Please review."),
        ]
        assert state_of(session) == "review"
        assert model.calls == 1
        assert traces.kinds == [
            "deterministic",  # /start
            "agentic",  # hello there
            "deterministic",  # /name Ada
            "deterministic",  # retry: replayed
            "deterministic",  # /review
            "deterministic",  # regenerate: replayed
            "deterministic",  # edit: /name Grace
            "deterministic",  # /review
        ]

        # A new process: a new storage on the same file, a new session and controller.
        async with SQLiteSessionStorage(path) as storage:
            resumed = await resume_chat_session(
                declared, session_id="visitor-1", storage=storage, now=Clock()
            )
            snapshot = resumed.get_conversation_snapshot()
            assert snapshot is not None
            assert (snapshot.state, snapshot.events, snapshot.actions) == (
                "review",
                ("change",),
                ("confirm",),
            )
            controller = ChatController(resumed.chat)
            await controller.load()
            await controller.retry()
            assert controller.state.messages[-1].content == "Please review."
            await controller.send("/change")
            assert controller.state.messages[-1].content == "What changes?"
            assert state_of(resumed) == "collecting"
            stored = await storage.load("visitor-1")
            await controller.aclose()
    assert stored is not None
    assert '"state":"collecting"' in stored
    assert '"definitionRevision":3' in stored
    assert model.calls == 1


async def test_the_deterministic_answer_adapter_works_unchanged_behind_routes() -> None:
    fallback = SessionAwareModel()
    decisions: list[str] = []
    answers = create_deterministic_answer_adapter(
        artifact=(value := artifact([entry("install", "install cli")])),
        expected_content_hash=value["contentHash"],
        expected_site_id=value["siteId"],
        fallback_mode="backend",
        fallback=fallback,
        now=answers_now,
        on_decision=lambda envelope: decisions.append(envelope.outcome),
    )
    declared = definition(
        answers,
        states=states(idle={"start": "started"}, started={}),
        routes=(command("start", "Hi!"),),
    )
    session = create_chat_session(declared, session_id="visitor-2")
    controller = ChatController(session.chat)
    async with no_blocking():
        await controller.send("/start")
        await controller.send("install cli")
        await controller.send("something else")
    replies = [m for m in controller.state.messages if m.role == "assistant"]
    assert replies[0].content == "Hi!"
    decoded = decode_assistant_content(replies[1].content)
    assert decoded.ok
    assert "Answer of install." in str(decoded.parts[0])
    assert replies[1].metadata is not None
    assert replies[2].content == "model reply"
    assert decisions == ["answer", "escalation", "answer"]  # local, escalated, backend
    assert fallback.session_ids == ["visitor-2"]
    assert session.chat.adapter.capabilities is answers.capabilities
    assert session.chat.adapter.resolve_choice_submission is not None  # type: ignore[attr-defined]
