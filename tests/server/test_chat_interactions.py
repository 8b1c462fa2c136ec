"""Component interactions over the chat handler (``payload.interaction``).

A submitted form, a clicked button, a confirmation's or an approval's decision names a frame
this session's assistant showed. The handler checks it against that stored frame and the
component's declared events and props, turns it into the turn's user message (a readable text
with the typed event in its metadata) and lets the definition's ``on_interaction`` hook answer
it. Every refusal happens before anything runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from pydantic import BaseModel, ConfigDict

from agentskit_chat.components import (
    STANDARD_COMPONENT_CATALOG,
    ComponentDefinition,
    ComponentEventSpec,
    define_component_manifest,
)
from agentskit_chat.conversation import (
    INTERACTION_FAILED_MESSAGE,
    INTERACTION_METADATA_KEY,
    RouteContext,
    define_chat,
)
from agentskit_chat.protocol import ComponentInteractEvent
from agentskit_chat.runtime import (
    ChatConfig,
)
from agentskit_chat.server import create_chat_app
from agentskit_chat.storage import open_chat_stores
from tests._strategies import deep
from tests.server._chat_support import JSON, Harness, lines, seeded, submit
from tests.server._interaction_support import (
    DELETE_CONFIRM,
    NEXT_STEP,
    PUBLISH_APPROVAL,
    SIGNUP_FORM,
    FrameModel,
    RecordingHook,
    interaction,
    reply,
)
from tests.service._support import serve

pytestmark = pytest.mark.anyio

#: Carried by refused values: no refusal may repeat it.
SECRET: Final = "s3cret-value-9q"
FRAMES: Final = (SIGNUP_FORM, NEXT_STEP, DELETE_CONFIRM, PUBLISH_APPROVAL)
REQUIRED_NAME: Final = 'The field "Name" is required.'
INVALID_FIELD: Final = 'The field "{}" has a value it does not accept.'
FORM_KEYS: Final = "The submitted values do not match the form's fields."
NOT_FITTING: Final = "This answer does not fit the component."
NO_SUCH_EVENT: Final = "This component does not offer that action."
UNAVAILABLE: Final = "This component is not waiting for an answer."
MALFORMED: Final = "Request body must be a valid turn submission."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def shown(hook: Any = None) -> Harness:
    """A chat whose assistant showed the four interactive frames, answered by ``hook``."""
    harness = Harness()
    if hook is not None:
        harness.fields["on_interaction"] = hook
    seeded(harness, *FRAMES)
    return harness


async def post(url: str, body: bytes) -> httpx.Response:
    async with httpx.AsyncClient(timeout=20) as client:
        return await client.post(url, content=body, headers=JSON)


def final(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    events = lines(response.content)
    assert events, "the turn streamed nothing"
    assert events[-1]["event"] == "server.turn.snapshot", events[-1]
    payload: dict[str, Any] = events[-1]["payload"]
    return payload


REFUSALS: Final[list[tuple[str, dict[str, Any], int, str, str]]] = [
    (
        "a required field left out",
        interaction(SIGNUP_FORM, "submit", {"role": "eng", "age": 3}),
        400,
        "INTERACTION_INVALID",
        REQUIRED_NAME,
    ),
    (
        "a required field left empty",
        interaction(SIGNUP_FORM, "submit", {"name": "", "role": "eng"}),
        400,
        "INTERACTION_INVALID",
        REQUIRED_NAME,
    ),
    (
        "an option the select does not have",
        interaction(SIGNUP_FORM, "submit", {"name": SECRET, "role": SECRET}),
        400,
        "INTERACTION_INVALID",
        INVALID_FIELD.format("Role"),
    ),
    (
        "a number field given words",
        interaction(SIGNUP_FORM, "submit", {"name": "Ada", "role": "eng", "age": SECRET}),
        400,
        "INTERACTION_INVALID",
        INVALID_FIELD.format("Age"),
    ),
    (
        "a checkbox given text",
        interaction(SIGNUP_FORM, "submit", {"name": "Ada", "role": "eng", "news": SECRET}),
        400,
        "INTERACTION_INVALID",
        INVALID_FIELD.format("Newsletter"),
    ),
    (
        "a field the form does not have",
        interaction(SIGNUP_FORM, "submit", {"name": "Ada", "role": "eng", SECRET: 1}),
        400,
        "INTERACTION_INVALID",
        FORM_KEYS,
    ),
    (
        "form values that are not an object",
        interaction(SIGNUP_FORM, "submit", [SECRET]),
        400,
        "INTERACTION_INVALID",
        FORM_KEYS,
    ),
    (
        "a button the group does not have",
        interaction(NEXT_STEP, "select", SECRET),
        400,
        "INTERACTION_INVALID",
        NOT_FITTING,
    ),
    (
        "a disabled button",
        interaction(NEXT_STEP, "select", "later"),
        400,
        "INTERACTION_INVALID",
        NOT_FITTING,
    ),
    (
        "an event the component does not declare",
        interaction(SIGNUP_FORM, "select", "name"),
        400,
        "INTERACTION_INVALID",
        NO_SUCH_EVENT,
    ),
    (
        "a confirmation with a value",
        interaction(DELETE_CONFIRM, "confirm", SECRET),
        400,
        "INTERACTION_INVALID",
        NOT_FITTING,
    ),
    (
        "an instance the session never showed",
        interaction(SIGNUP_FORM, "submit", {"name": "Ada"}, instanceId="forged-form"),
        409,
        "INTERACTION_UNAVAILABLE",
        UNAVAILABLE,
    ),
    (
        "a shown instance under another component key",
        interaction(SIGNUP_FORM, "select", "save", componentKey="button-group"),
        409,
        "INTERACTION_UNAVAILABLE",
        UNAVAILABLE,
    ),
    (
        "an interaction that is text",
        {"interaction": SECRET},
        400,
        "REQUEST_INVALID_EVENT",
        MALFORMED,
    ),
    (
        "an interaction without an event",
        {"interaction": {"instanceId": "next-step", "componentKey": "button-group"}},
        400,
        "REQUEST_INVALID_EVENT",
        MALFORMED,
    ),
    (
        "an instance id that is not a safe id",
        interaction(NEXT_STEP, "select", "save", instanceId=f"bad {SECRET}"),
        400,
        "REQUEST_INVALID_EVENT",
        MALFORMED,
    ),
    (
        "an event name that is not one",
        interaction(NEXT_STEP, "Select Now"),
        400,
        "REQUEST_INVALID_EVENT",
        MALFORMED,
    ),
    (
        "a value nested too deep",
        interaction(NEXT_STEP, "select", deep(21, SECRET)),
        400,
        "REQUEST_INVALID_EVENT",
        MALFORMED,
    ),
    (
        "an interaction with an operation",
        {**interaction(NEXT_STEP, "select", "save"), "operation": {"kind": "retry"}},
        400,
        "REQUEST_INVALID_EVENT",
        MALFORMED,
    ),
    (
        "an interaction with a selection",
        {
            **interaction(NEXT_STEP, "select", "save"),
            "selection": {
                "protocol": "agentskit.chat.component",
                "version": 1,
                "type": "select",
                "componentKey": "button-group",
                "instanceId": "next-step",
                "choiceId": "save",
            },
        },
        400,
        "REQUEST_INVALID_EVENT",
        MALFORMED,
    ),
]


@pytest.mark.parametrize(
    ("payload", "status", "code", "message"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
async def test_a_refused_interaction_is_typed_and_runs_nothing(
    payload: dict[str, Any], status: int, code: str, message: str
) -> None:
    hook = RecordingHook()
    harness = shown(hook)
    async with serve(harness.app()) as url:
        refused = await post(url, submit(text=SECRET, payload=payload))
        # The refusal gave its lease back: the same turn id runs as a plain question.
        after = await post(url, submit(text="hello"))
    assert refused.status_code == status
    assert refused.json() == {
        "error": {"version": 1, "code": code, "message": message, "retryable": False}
    }
    assert SECRET not in refused.text
    assert hook.seen == []
    assert harness.adapter.inputs == ["hello"]  # only the second request reached the model
    assert final(after)["status"] == "complete"


ACCEPTED: Final[list[tuple[str, dict[str, Any], str]]] = [
    (
        "a complete form",
        interaction(SIGNUP_FORM, "submit", {"name": "Ada", "role": "eng", "age": 42, "news": True}),
        "Submitted: Name = Ada, Role = Engineering, Age = 42, Newsletter = yes",
    ),
    (
        "a form with an optional field empty and a number as text",
        interaction(SIGNUP_FORM, "submit", {"name": "Bo", "role": "sales", "age": " 1e3 "}),
        "Submitted: Name = Bo, Role = Sales, Age =  1e3 ",
    ),
    ("a button", interaction(NEXT_STEP, "select", "send"), "Send now"),
    ("a cancelled confirmation", interaction(DELETE_CONFIRM, "cancel"), "Keep it"),
    ("an approved request", interaction(PUBLISH_APPROVAL, "approve"), "Publish"),
]


@pytest.mark.parametrize(
    ("payload", "text"), [case[1:] for case in ACCEPTED], ids=[case[0] for case in ACCEPTED]
)
async def test_an_accepted_interaction_is_the_user_message_and_the_hook_answers(
    payload: dict[str, Any], text: str
) -> None:
    hook = RecordingHook()
    harness = shown(hook)
    async with serve(harness.app()) as url:
        answered = final(await post(url, submit(text="ignored input", payload=payload)))
    sent = payload["interaction"]
    assert answered["status"] == "complete"
    user, assistant = answered["messages"][-2:]
    assert (user["role"], user["content"]) == ("user", text)
    marker = user["metadata"][INTERACTION_METADATA_KEY]
    assert marker["text"] == text
    wire = {"protocol": "agentskit.chat.component", "version": 1, "type": "interact", **sent}
    assert marker["event"] == wire
    value = sent.get("value")
    assert hook.seen == [
        (sent["componentKey"], sent["instanceId"], sent["event"], value, user["id"])
    ]
    assert assistant["content"] == reply(ComponentInteractEvent.model_validate(wire))
    assert harness.adapter.calls == 0  # the hook answered, not the model
    stored = harness.memories.messages("session-1")
    assert [m.content for m in stored[-2:]] == [text, assistant["content"]]


async def test_each_frame_answers_once() -> None:
    hook = RecordingHook()
    harness = shown(hook)
    click = interaction(NEXT_STEP, "select", "save")
    async with serve(harness.app()) as url:
        first = await post(url, submit(turn_id="t1", payload=click))
        second = await post(url, submit(turn_id="t2", payload=click))
        other = await post(
            url, submit(turn_id="t3", payload=interaction(DELETE_CONFIRM, "confirm"))
        )
    assert final(first)["messages"][-1]["content"] == "Hook: next-step select"
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "INTERACTION_UNAVAILABLE"
    assert final(other)["messages"][-2]["content"] == "Delete it"  # another frame is unused
    assert [seen[1] for seen in hook.seen] == ["next-step", "delete-draft"]


async def test_a_frame_of_another_session_is_unavailable() -> None:
    hook = RecordingHook()
    harness = shown(hook)
    async with serve(harness.app()) as url:
        foreign = await post(
            url, submit(session_id="session-2", payload=interaction(NEXT_STEP, "select", "save"))
        )
    assert foreign.status_code == 409
    assert foreign.json()["error"]["code"] == "INTERACTION_UNAVAILABLE"
    assert hook.seen == []
    assert harness.memories.messages("session-2") == ()


async def test_without_a_hook_the_chat_answers_the_text_and_the_frame_is_still_single_use() -> None:
    harness = shown()
    form = interaction(SIGNUP_FORM, "submit", {"name": "Ada", "role": "eng"})
    async with serve(harness.app()) as url:
        answered = final(await post(url, submit(turn_id="t1", payload=form)))
        again = await post(url, submit(turn_id="t2", payload=form))
    assert harness.adapter.inputs == ["Submitted: Name = Ada, Role = Engineering"]
    assert answered["messages"][-1]["content"] == "Echo: Submitted: Name = Ada, Role = Engineering"
    assert again.status_code == 409


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_hook_that_answers_none_hands_the_message_to_the_chat(
    *, asynchronous: bool
) -> None:
    seen: list[str] = []

    def sync_hook(event: ComponentInteractEvent, context: RouteContext) -> None:
        seen.append(event.event)

    async def async_hook(event: ComponentInteractEvent, context: RouteContext) -> str | None:
        seen.append(event.event)
        return None

    harness = shown(async_hook if asynchronous else sync_hook)
    async with serve(harness.app()) as url:
        answered = final(await post(url, submit(payload=interaction(DELETE_CONFIRM, "confirm"))))
    assert seen == ["confirm"]
    assert harness.adapter.inputs == ["Delete it"]
    assert answered["messages"][-1]["content"] == "Echo: Delete it"


async def test_an_async_hook_answers() -> None:
    async def hook(event: ComponentInteractEvent, context: RouteContext) -> str:
        return f"Looked up {event.instance_id} for {context.session_id}."

    harness = shown(hook)
    async with serve(harness.app()) as url:
        answered = final(await post(url, submit(payload=interaction(NEXT_STEP, "select", "save"))))
    assert answered["messages"][-1]["content"] == "Looked up next-step for session-1."
    assert harness.adapter.calls == 0


async def test_a_failing_hook_fails_the_turn_and_retry_asks_it_again() -> None:
    hook = RecordingHook(fail=True)
    harness = shown(hook)
    click = interaction(NEXT_STEP, "select", "send")
    async with serve(harness.app()) as url:
        failed = final(await post(url, submit(turn_id="t1", payload=click)))
        again = await post(url, submit(turn_id="t2", payload=click))
        hook.fail = False
        retried = final(
            await post(url, submit(turn_id="t3", payload={"operation": {"kind": "retry"}}))
        )
    assert failed["status"] == "error"
    assert failed["messages"][-1]["status"] == "error"
    assert again.status_code == 409  # the message that used the frame is stored
    user_id = failed["messages"][-2]["id"]
    assert [seen[-1] for seen in hook.seen] == [user_id, user_id]  # the same message, twice
    assert retried["messages"][-1]["content"] == "Hook: next-step select"
    assert harness.adapter.calls == 0
    assert INTERACTION_FAILED_MESSAGE == "The interaction handler failed."


async def test_an_edited_interaction_message_is_plain_text() -> None:
    hook = RecordingHook()
    harness = shown(hook)
    async with serve(harness.app()) as url:
        answered = final(
            await post(url, submit(turn_id="t1", payload=interaction(NEXT_STEP, "select", "save")))
        )
        user_id = answered["messages"][-2]["id"]
        edit = {"operation": {"kind": "edit", "messageId": user_id}}
        edited = final(await post(url, submit(turn_id="t2", text="Actually, wait", payload=edit)))
    assert len(hook.seen) == 1
    assert harness.adapter.inputs == ["Actually, wait"]
    assert edited["messages"][-1]["content"] == "Echo: Actually, wait"


async def test_a_form_shown_by_one_worker_is_submitted_once_through_any_worker(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    model = FrameModel({"sign up": SIGNUP_FORM})
    hook = RecordingHook()
    definition = define_chat(id="signup", chat=ChatConfig(adapter=model), on_interaction=hook)

    def worker(stores: Any) -> Any:
        return create_chat_app(
            resolve_definition=lambda context, session_id: definition,
            session_storage=lambda context: stores.sessions,
            chat_memory=lambda context, session_id: stores.memory(session_id),
        )

    form = interaction(SIGNUP_FORM, "submit", {"name": "Ada", "role": "eng"})
    # Two workers: each its own connections to one SQLite file.
    async with (
        open_chat_stores(store) as one_stores,
        open_chat_stores(store) as two_stores,
        serve(worker(one_stores)) as one,
        serve(worker(two_stores)) as two,
    ):
        asked = final(await post(one, submit(turn_id="t1", text="sign up")))
        submitted = await post(two, submit(turn_id="t2", payload=form))
        again = await post(one, submit(turn_id="t3", payload=form))
    frame_content = asked["messages"][-1]["content"]
    assert json.loads(frame_content.splitlines()[-1])["frame"]["instanceId"] == "signup-form"
    answer = final(submitted)["messages"]
    assert answer[-2]["content"] == "Submitted: Name = Ada, Role = Engineering"
    assert answer[-1]["content"] == "Welcome, Ada (eng)!"
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "INTERACTION_UNAVAILABLE"
    assert model.inputs == ["sign up"]
    assert len(hook.seen) == 1


class GaugeProps(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    label: str
    level: int


GAUGE = ComponentDefinition(
    key="gauge",
    props_schema=GaugeProps,
    events=(ComponentEventSpec("reset"), ComponentEventSpec("pick", "id")),
    fallback=lambda props: f"{props.label}: {props.level} of 10.",
)
GAUGE_FRAME: Final = {
    "protocol": "agentskit.chat.component",
    "version": 1,
    "type": "render",
    "componentKey": "gauge",
    "instanceId": "gauge-1",
    "props": {"label": "Load", "level": 5},
    "fallback": {"kind": "gauge", "summary": "Load: 5 of 10."},
}


@pytest.mark.parametrize(
    ("payload", "status", "text"),
    [
        (interaction(GAUGE_FRAME, "reset"), 200, "reset: Load: 5 of 10."),
        (interaction(GAUGE_FRAME, "pick", "level-3"), 200, "pick: Load: 5 of 10."),
        (interaction(GAUGE_FRAME, "pick", "not an id"), 400, None),
        (interaction(GAUGE_FRAME, "explode"), 400, None),
    ],
)
async def test_a_custom_component_interacts_through_its_declared_events(
    payload: dict[str, Any], status: int, text: str | None
) -> None:
    hook = RecordingHook()
    harness = Harness()
    harness.fields.update(
        on_interaction=hook,
        components=define_component_manifest([*STANDARD_COMPONENT_CATALOG, GAUGE]),
    )
    seeded(harness, GAUGE_FRAME)
    async with serve(harness.app()) as url:
        response = await post(url, submit(payload=payload))
    assert response.status_code == status, response.text
    if text is None:
        assert response.json()["error"]["code"] == "INTERACTION_INVALID"
        assert hook.seen == []
    else:
        assert final(response)["messages"][-2]["content"] == text
        assert [seen[2] for seen in hook.seen] == [payload["interaction"]["event"]]
