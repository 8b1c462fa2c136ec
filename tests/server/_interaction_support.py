"""Interactive frames and a recording ``on_interaction`` hook, shared by the chat handler, web
page and terminal tests of component interactions."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agentskit_chat.conversation import RouteContext
from agentskit_chat.protocol import ComponentInteractEvent, create_assistant_content_encoder
from agentskit_chat.protocol._types import thaw
from agentskit_chat.runtime import AdapterCapabilities, AdapterRequest, ChatSource, StreamChunk


def _frame(key: str, instance_id: str, props: Mapping[str, Any], summary: str) -> dict[str, Any]:
    return {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": key,
        "instanceId": instance_id,
        "props": dict(props),
        "fallback": {"kind": key, "summary": summary},
    }


#: A sign-up form: a required text, a required select, a number and a checkbox.
SIGNUP_FORM: Final = _frame(
    "form",
    "signup-form",
    {
        "title": "Sign up",
        "fields": [
            {"id": "name", "label": "Name", "type": "text", "required": True},
            {
                "id": "role",
                "label": "Role",
                "type": "select",
                "required": True,
                "options": [
                    {"id": "eng", "label": "Engineering"},
                    {"id": "sales", "label": "Sales"},
                ],
            },
            {"id": "age", "label": "Age", "type": "number"},
            {"id": "news", "label": "Newsletter", "type": "checkbox"},
        ],
        "submitLabel": "Join",
    },
    "Sign up: name, role, age, newsletter.",
)
#: Three buttons, the last one disabled.
NEXT_STEP: Final = _frame(
    "button-group",
    "next-step",
    {
        "label": "What next?",
        "buttons": [
            {"id": "save", "label": "Save draft"},
            {"id": "send", "label": "Send now", "variant": "primary"},
            {"id": "later", "label": "Later", "disabled": True},
        ],
    },
    "Save draft or send now.",
)
#: A confirmation of a plain question (no tool call waits on it).
DELETE_CONFIRM: Final = _frame(
    "confirmation",
    "delete-draft",
    {
        "title": "Delete the draft?",
        "message": "The draft is removed for good.",
        "confirmLabel": "Delete it",
        "cancelLabel": "Keep it",
    },
    "Delete the draft or keep it.",
)
#: An approval request (no tool call waits on it).
PUBLISH_APPROVAL: Final = _frame(
    "approval-request",
    "publish-post",
    {
        "title": "Publish the post?",
        "description": "Everyone can read it once it is published.",
        "approveLabel": "Publish",
        "denyLabel": "Not yet",
    },
    "Publish the post or not yet.",
)


def interaction(
    frame: Mapping[str, Any], event: str, *value: Any, **overrides: Any
) -> dict[str, Any]:
    """``payload.interaction`` for ``frame`` (a value only when one is given)."""
    body: dict[str, Any] = {
        "instanceId": frame["instanceId"],
        "componentKey": frame["componentKey"],
        "event": event,
    }
    if value:
        (body["value"],) = value
    body.update(overrides)
    return {"interaction": body}


@dataclass
class RecordingHook:
    """An ``on_interaction`` hook that records what it was told and answers ``reply(event)``.

    ``answer`` overrides the reply (``None`` hands the message to the chat); ``fail`` raises.
    """

    seen: list[tuple[str, str, str, Any, str | None]] = field(default_factory=list)
    answer: str | None = "default"
    fail: bool = False

    def __call__(self, event: ComponentInteractEvent, context: RouteContext) -> str | None:
        value = thaw(event.value) if event.has_value else None
        self.seen.append(
            (event.component_key, event.instance_id, event.event, value, context.message_id)
        )
        if self.fail:
            raise RuntimeError("the hook failed")
        if self.answer != "default":
            return self.answer
        return reply(event)


def reply(event: ComponentInteractEvent) -> str:
    """What :class:`RecordingHook` answers by default."""
    if event.component_key == "form":
        values = thaw(event.value)
        return f"Welcome, {values['name']} ({values['role']})!"
    return f"Hook: {event.instance_id} {event.event}"


class FrameModel:
    """A scripted model: a question in ``frames`` is answered with that frame, anything else
    with ``Echo: <question>``. Records every question (the model ran once per entry)."""

    capabilities: AdapterCapabilities | None = None

    def __init__(self, frames: Mapping[str, Mapping[str, Any]]) -> None:
        self.frames = dict(frames)
        self.inputs: list[str] = []

    def create_source(self, request: AdapterRequest) -> ChatSource:
        last = next(m.content for m in reversed(request.messages) if m.role == "user")
        self.inputs.append(last)
        frame = self.frames.get(last)
        if frame is None:
            return _Reply(f"Echo: {last}")
        encoder = create_assistant_content_encoder()
        return _Reply(encoder.encode({"kind": "component", "frame": frame}))


class _Reply:
    def __init__(self, text: str) -> None:
        self._text = text

    def abort(self) -> None:
        return None

    async def stream(self) -> AsyncIterator[StreamChunk]:
        yield StreamChunk("text", content=self._text)
        yield StreamChunk("done")
