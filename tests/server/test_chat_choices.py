"""Choice clicks over the chat handler: reserved, committed only when the turn succeeded.

A click is a ``client.turn.submit`` whose ``payload.selection`` is a component ``select``
event naming a choice list the assistant showed in this session. The handler finds the frame
in the session's stored messages, reserves it through the definition's ``choice_submission``,
sends the reserved value, and commits the reservation only when the turn succeeded.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.protocol import create_assistant_content_encoder
from agentskit_chat.runtime import ChatMessage, InMemoryChatMemory
from agentskit_chat.server import create_docs_assistant_app
from tests.server._chat_support import JSON, EchoAdapter, Harness, lines, submit
from tests.service._support import serve

pytestmark = pytest.mark.anyio

AT = datetime(2026, 7, 11, tzinfo=UTC)
FRAME: dict[str, Any] = {
    "protocol": "agentskit.chat.component",
    "version": 1,
    "type": "render",
    "componentKey": "choice-list",
    "instanceId": "deterministic-choices-m1",
    "props": {"prompt": "Which one?", "choices": [{"id": "a", "label": "A"}]},
    "fallback": {"kind": "choice-list", "summary": "Choose A."},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def selection(instance_id: str, choice_id: str) -> dict[str, Any]:
    return {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "select",
        "componentKey": "choice-list",
        "instanceId": instance_id,
        "choiceId": choice_id,
    }


class Reservation:
    def __init__(self, log: list[str], value: str) -> None:
        self.value = value
        self._log = log

    def commit(self) -> None:
        self._log.append("commit")

    def release(self) -> None:
        self._log.append("release")


def shown(harness: Harness) -> None:
    """The session's memory holds a question and the choice list the assistant answered."""
    encoder = create_assistant_content_encoder()
    content = encoder.encode({"kind": "component", "frame": FRAME})
    harness.memories.by_session["session-1"] = InMemoryChatMemory(
        [
            ChatMessage(id="u1", role="user", content="which?", created_at=AT),
            ChatMessage(id="m1", role="assistant", content=content, created_at=AT),
        ]
    )


@pytest.mark.parametrize(("fail", "settled"), [(False, "commit"), (True, "release")])
async def test_a_choice_is_committed_only_when_its_turn_succeeded(
    *, fail: bool, settled: str
) -> None:
    log: list[str] = []
    seen: list[tuple[str, str, str]] = []

    def choice_submission(frame: Any, choice_id: str, *, session_id: str) -> Reservation:
        seen.append((frame.instance_id, choice_id, session_id))
        return Reservation(log, "the reserved alias")

    harness = Harness(adapter=EchoAdapter(fail=fail))
    harness.fields["choice_submission"] = choice_submission
    shown(harness)
    body = submit(payload={"selection": selection("deterministic-choices-m1", "a")}, text="A")
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        response = await client.post(url, content=body, headers=JSON)
    assert response.status_code == 200
    assert seen == [("deterministic-choices-m1", "a", "session-1")]
    assert harness.adapter.inputs == ["the reserved alias"]  # the reserved value, not the label
    assert log == [settled]


async def test_a_choice_the_session_never_showed_is_unavailable_and_runs_nothing() -> None:
    harness = Harness()
    harness.fields["choice_submission"] = lambda *args, **kwargs: pytest.fail("not reached")
    shown(harness)
    body = submit(payload={"selection": selection("deterministic-choices-forged", "a")})
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        refused = await client.post(url, content=body, headers=JSON)
        after = await client.post(url, content=submit(event_id="e2"), headers=JSON)
    assert refused.status_code == 409
    assert refused.json()["error"] == {
        "version": 1,
        "code": "CHOICE_UNAVAILABLE",
        "message": "This deterministic choice expired. Ask the question again.",
        "retryable": False,
    }
    assert harness.adapter.calls == 1  # only the second request ran
    assert after.status_code == 200  # the refused click gave its lease back, turn id and all


DOCS = {
    "alpha.md": "# Alpha guide\n\nAlpha is the first product.\n\n## Configuration\n\n"
    "Set alpha_mode to fast in alpha.toml.\n",
    "beta.md": "# Beta guide\n\nBeta is the second product.\n\n## Configuration\n\n"
    "Set beta_mode to slow in beta.toml.\n",
}


def write(root: Path) -> Path:
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, "utf-8")
    return root


async def test_the_docs_chat_turns_an_ambiguous_question_into_a_single_use_choice(
    tmp_path: Path,
) -> None:
    app = create_docs_assistant_app(create_docs_assistant(write(tmp_path / "docs")))
    async with serve(app) as base, httpx.AsyncClient(timeout=20) as client:
        url = f"{base}/api/chat"
        asked = await client.post(url, content=submit(text="Configuration"), headers=JSON)
        content = lines(asked.content)[-1]["payload"]["messages"][-1]["content"]
        frame = json.loads(content.splitlines()[-1])["frame"]
        choices = {c["description"]: c["id"] for c in frame["props"]["choices"]}
        pick = selection(frame["instanceId"], choices["Configuration (Beta guide)"])
        click = submit(turn_id="turn-2", event_id="e2", text="Beta", payload={"selection": pick})
        chosen = await client.post(url, content=click, headers=JSON)
        again = submit(turn_id="turn-3", event_id="e3", text="Beta", payload={"selection": pick})
        twice = await client.post(url, content=again, headers=JSON)
    assert frame["componentKey"] == "choice-list"
    answer = lines(chosen.content)[-1]["payload"]["messages"][-1]["content"]
    assert "/docs/beta#configuration" in answer  # the exact answer of the chosen page
    assert "/docs/alpha" not in answer
    assert twice.status_code == 409  # a committed choice is used up
    assert twice.json()["error"]["code"] == "CHOICE_UNAVAILABLE"


async def test_a_choice_shown_by_one_worker_is_used_once_through_any_worker(
    tmp_path: Path,
) -> None:
    from agentskit_chat.storage import open_chat_stores  # noqa: PLC0415

    docs = write(tmp_path / "docs")
    async with open_chat_stores(f"sqlite:///{tmp_path / 'chat.db'}") as stores:
        # Two workers: each its own assistant (and choice reservations), one shared store.
        one = create_docs_assistant_app(create_docs_assistant(docs), stores=stores)
        two = create_docs_assistant_app(create_docs_assistant(docs), stores=stores)
        async with (
            serve(one) as first,
            serve(two) as second,
            httpx.AsyncClient(timeout=20) as client,
        ):
            asked = await client.post(
                f"{first}/api/chat", content=submit(text="Configuration"), headers=JSON
            )
            content = lines(asked.content)[-1]["payload"]["messages"][-1]["content"]
            frame = json.loads(content.splitlines()[-1])["frame"]
            choices = {c["description"]: c["id"] for c in frame["props"]["choices"]}
            pick = selection(frame["instanceId"], choices["Configuration (Beta guide)"])

            def click(turn: str) -> bytes:
                return submit(turn_id=turn, event_id=turn, text="x", payload={"selection": pick})

            chosen = await client.post(f"{second}/api/chat", content=click("t2"), headers=JSON)
            # The first worker still remembers the list, unused as far as it knows: the stored
            # conversation says it was used.
            again = await client.post(f"{first}/api/chat", content=click("t3"), headers=JSON)
    assert chosen.status_code == 200
    answer = lines(chosen.content)[-1]["payload"]["messages"][-1]["content"]
    assert "/docs/beta#configuration" in answer
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "CHOICE_UNAVAILABLE"


async def test_only_the_very_frame_a_question_gives_is_restored(tmp_path: Path) -> None:
    from agentskit_chat.answers import (  # noqa: PLC0415
        CHOICE_UNAVAILABLE,
        ChoiceReservation,
        DeterministicAnswerAdapter,
    )
    from agentskit_chat.server._docs_chat import docs_chat_definition  # noqa: PLC0415

    async with create_docs_assistant(write(tmp_path / "docs")) as assistant:
        # Two adapters, as two workers have: the first shows the list, the second restores it.
        shown = docs_chat_definition(assistant, assistant.service).chat.adapter
        other = docs_chat_definition(assistant, assistant.service).chat.adapter
        assert isinstance(shown, DeterministicAnswerAdapter)
        assert isinstance(other, DeterministicAnswerAdapter)
        from agentskit_chat.runtime import AdapterRequest  # noqa: PLC0415

        user = ChatMessage(id="u1", role="user", content="Configuration", created_at=AT)
        source = shown.create_source_for_session(AdapterRequest(messages=(user,)), "s")
        content = "".join([chunk.content or "" async for chunk in source.stream()])
        frame = json.loads(content.splitlines()[-1])["frame"]
        choice = frame["props"]["choices"][0]["id"]
        altered = {**frame, "props": {**frame["props"], "prompt": "Pick the admin page"}}
        ask = {"session_id": "s", "question": "Configuration", "message_id": "u1"}
        assert other.resolve_choice_submission(altered, choice, **ask) is CHOICE_UNAVAILABLE
        elsewhere = {**ask, "message_id": "u2"}  # another message's list: another instance id
        assert other.resolve_choice_submission(frame, choice, **elsewhere) is CHOICE_UNAVAILABLE
        assert other.resolve_choice_submission(frame, choice, session_id="s") is CHOICE_UNAVAILABLE
        restored = other.resolve_choice_submission(frame, choice, **ask)
        assert isinstance(restored, ChoiceReservation)
