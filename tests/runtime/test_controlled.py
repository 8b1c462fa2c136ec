"""The controlled driver: strict snapshots from the host, and callbacks delegated by name."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from pydantic import ValidationError

from agentskit_chat.components import PresentedComponent, present_chat_message
from agentskit_chat.errors import ConfigurationError, ProtocolError
from agentskit_chat.protocol import TokenUsage
from agentskit_chat.protocol.fixtures import STANDARD_COMPONENT_FRAME_FIXTURES
from agentskit_chat.runtime import (
    ControlledChatActions,
    ControlledChatDriver,
    ControlledChatError,
    ControlledChatSnapshot,
    create_controlled_chat_driver,
    parse_controlled_chat_snapshot,
)
from tests._strategies import json_values

SESSION = "controlled-conformance"
RECORD_INVALID = "Serialized message record is invalid."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def usage(prompt: int = 0, completion: int = 0, total: int = 0) -> dict[str, Any]:
    return {"promptTokens": prompt, "completionTokens": completion, "totalTokens": total}


def snapshot(**changes: Any) -> dict[str, Any]:
    shell: dict[str, Any] = {
        "sessionId": SESSION,
        "messages": [],
        "status": "idle",
        "input": "",
        "error": None,
        "usage": usage(),
    }
    shell.update(changes)
    return shell


def message(id: str, role: str = "user", content: str = "hello", **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": id,
        "role": role,
        "content": content,
        "status": "complete",
        "createdAt": "2026-07-11T03:00:00.000Z",
    }
    record.update(extra)
    return record


def _source_list_frame() -> dict[str, Any]:
    frames = [
        frame
        for frame in STANDARD_COMPONENT_FRAME_FIXTURES
        if frame["componentKey"] == "source-list"
    ]
    assert len(frames) == 1
    return copy.deepcopy(frames[0])


ACCEPTED: dict[str, dict[str, Any]] = {
    "idle": snapshot(),
    "streaming": snapshot(
        status="streaming",
        messages=[
            message("user-1"),
            message("assistant-1", "assistant", "Agents", status="streaming"),
        ],
        usage=usage(3, 1, 4),
    ),
    "error": snapshot(
        status="error",
        messages=[
            message("user-1"),
            message("assistant-1", "assistant", "The host failed.", status="error"),
        ],
        error={"code": "HOST_FAILED", "message": "Synthetic host failure."},
    ),
    "cancellation ready": snapshot(
        status="streaming",
        messages=[
            message("user-1", content="write a long answer"),
            message("assistant-1", "assistant", "Once upon", status="streaming"),
        ],
        input="draft",
    ),
    "tool call awaiting confirmation": snapshot(
        status="complete",
        messages=[
            message("user-1", content="email the team"),
            message(
                "assistant-1",
                "assistant",
                "I can send that email.",
                toolCalls=[
                    {
                        "id": "call-1",
                        "name": "send-email",
                        "args": {"to": "team"},
                        "status": "requires_confirmation",
                    }
                ],
            ),
        ],
        usage=usage(10, 5, 15),
    ),
    "source-list frame": snapshot(
        status="complete",
        messages=[
            message("user-1", content="sources"),
            message("assistant-1", "assistant", json.dumps(_source_list_frame())),
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_conformance_snapshots(name: str) -> None:
    raw = ACCEPTED[name]
    before = copy.deepcopy(raw)
    parsed = parse_controlled_chat_snapshot(raw)
    assert raw == before
    assert parsed.session_id == SESSION
    assert parsed.status == raw["status"]
    assert parsed.input == raw["input"]
    assert [m.to_wire() for m in parsed.messages] == raw["messages"]
    for hydrated in parsed.messages:
        assert hydrated.created_at == datetime(2026, 7, 11, 3, tzinfo=UTC)
    assert parsed.usage.to_wire() == raw["usage"]


def test_error_snapshot_hydrates_the_host_error_with_its_code_as_name() -> None:
    parsed = parse_controlled_chat_snapshot(ACCEPTED["error"])
    assert parsed.error == ControlledChatError("Synthetic host failure.", "HOST_FAILED")
    assert parsed.error is not None
    assert parsed.error.name == "HOST_FAILED"
    assert parsed.messages[-1].status == "error"


def test_error_without_a_code_is_named_error() -> None:
    parsed = parse_controlled_chat_snapshot(snapshot(status="error", error={"message": "Boom."}))
    assert parsed.error is not None
    assert (parsed.error.message, parsed.error.code, parsed.error.name) == ("Boom.", None, "Error")


def test_tool_call_awaiting_confirmation_is_kept() -> None:
    parsed = parse_controlled_chat_snapshot(ACCEPTED["tool call awaiting confirmation"])
    calls = parsed.messages[-1].tool_calls
    assert calls is not None
    assert [(call.id, call.status) for call in calls] == [("call-1", "requires_confirmation")]


def test_whole_message_source_list_frame_presents_as_a_component() -> None:
    parsed = parse_controlled_chat_snapshot(ACCEPTED["source-list frame"])
    parts = present_chat_message(parsed.messages[-1])
    assert len(parts) == 1
    assert isinstance(parts[0], PresentedComponent)
    assert parts[0].frame.component_key == "source-list"


def test_usage_total_is_taken_as_given() -> None:
    parsed = parse_controlled_chat_snapshot(snapshot(usage=usage(1, 2, 99)))
    assert parsed.usage == TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=99)


def test_snapshot_is_immutable() -> None:
    parsed = parse_controlled_chat_snapshot(ACCEPTED["streaming"])
    assert isinstance(parsed.messages, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.status = "idle"  # type: ignore[misc]
    assert parsed.error is None
    error = parse_controlled_chat_snapshot(ACCEPTED["error"]).error
    with pytest.raises(dataclasses.FrozenInstanceError):
        error.message = "changed"  # type: ignore[misc, union-attr]


REJECTED_SHELLS: dict[str, dict[str, Any]] = {
    "extra shell key": {**snapshot(), "extra": True},
    "status waiting": snapshot(status="waiting"),
    "negative prompt tokens": snapshot(usage=usage(-1, 0, 0)),
    "negative completion tokens": snapshot(usage=usage(0, -1, 0)),
    "negative total tokens": snapshot(usage=usage(0, 0, -1)),
    "fractional tokens": snapshot(usage=usage(0, 0, 1.5)),  # type: ignore[arg-type]
    "boolean tokens": snapshot(usage=usage(0, 0, True)),
    "extra usage key": snapshot(usage={**usage(), "cachedTokens": 0}),
    "missing usage key": snapshot(usage={"promptTokens": 0, "completionTokens": 0}),
    "extra error key": snapshot(error={"message": "Boom.", "stack": "x"}),
    "null error code": snapshot(error={"message": "Boom.", "code": None}),
    "unsafe error code": snapshot(error={"message": "Boom.", "code": "not safe"}),
    "unsafe session id": snapshot(sessionId="-leading-dash"),
    "empty session id": snapshot(sessionId=""),
    "session id of 129 characters": snapshot(sessionId="s" * 129),
    "messages not a list": snapshot(messages={"0": message("m1")}),
    "input not a string": snapshot(input=1),
    "null input": snapshot(input=None),
    "missing error": {k: v for k, v in snapshot().items() if k != "error"},
    "not an object": [snapshot()],  # type: ignore[dict-item]
}


@pytest.mark.parametrize("name", sorted(REJECTED_SHELLS))
def test_rejected_shells_raise_a_validation_error(name: str) -> None:
    with pytest.raises(ValidationError):
        parse_controlled_chat_snapshot(REJECTED_SHELLS[name])


REJECTED_MESSAGES: dict[str, list[Any]] = {
    "role owner": [message("m1", "owner")],
    "empty id": [message("")],
    "status waiting": [message("m1", status="waiting")],
    "createdAt without milliseconds": [message("m1", createdAt="2026-07-11T03:00:00Z")],
    "createdAt of year 0000": [message("m1", createdAt="0000-01-01T00:00:00.000Z")],
    "tool call status unknown": [
        message("m1", "assistant", toolCalls=[{"id": "c", "name": "n", "args": {}, "status": "x"}])
    ],
    "message not an object": ["hello"],
}


@pytest.mark.parametrize("name", sorted(REJECTED_MESSAGES))
def test_rejected_messages_raise_the_record_error_with_its_cause(name: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_controlled_chat_snapshot(snapshot(messages=REJECTED_MESSAGES[name]))
    assert caught.value.message == RECORD_INVALID
    assert caught.value.code == "AK_CONFIG_INVALID"
    assert isinstance(caught.value.__cause__, ProtocolError)
    assert caught.value.__cause__.message == RECORD_INVALID


def test_unknown_message_keys_are_dropped_and_the_input_is_kept() -> None:
    raw = snapshot(messages=[message("m1", extra="dropped")])
    before = copy.deepcopy(raw)
    parsed = parse_controlled_chat_snapshot(raw)
    assert raw == before
    assert parsed.messages[0].to_wire() == message("m1")


# --- bounds --------------------------------------------------------------------------------------


def test_input_at_its_limit_and_one_past() -> None:
    assert parse_controlled_chat_snapshot(snapshot(input="x" * 100_000)).input == "x" * 100_000
    with pytest.raises(ValidationError):
        parse_controlled_chat_snapshot(snapshot(input="x" * 100_001))


def test_input_is_counted_in_utf16_units() -> None:
    assert parse_controlled_chat_snapshot(snapshot(input="😀" * 50_000)).input == "😀" * 50_000
    with pytest.raises(ValidationError):
        parse_controlled_chat_snapshot(snapshot(input="😀" * 50_000 + "x"))


@pytest.mark.parametrize(
    ("length", "accepted"), [(0, False), (1, True), (4096, True), (4097, False)]
)
def test_error_message_bounds(length: int, accepted: bool) -> None:
    raw = snapshot(status="error", error={"message": "e" * length})
    if accepted:
        parsed = parse_controlled_chat_snapshot(raw)
        assert parsed.error is not None
        assert len(parsed.error.message) == length
    else:
        with pytest.raises(ValidationError):
            parse_controlled_chat_snapshot(raw)


def test_messages_one_past_the_count_limit_are_refused_by_the_shell() -> None:
    tiny: list[Any] = [{}] * 10_001
    with pytest.raises(ValidationError):
        parse_controlled_chat_snapshot(snapshot(messages=tiny))


def test_messages_at_the_count_limit_reach_the_record_validator() -> None:
    # 10,000 messages pass the shell; the memory record's node limit then refuses them.
    at_limit = [message(f"m{index}") for index in range(10_000)]
    with pytest.raises(ProtocolError) as caught:
        parse_controlled_chat_snapshot(snapshot(messages=at_limit))
    assert caught.value.message == RECORD_INVALID


def test_many_messages_within_the_record_limits_are_accepted() -> None:
    many = [message(f"m{index}") for index in range(1_000)]
    parsed = parse_controlled_chat_snapshot(snapshot(messages=many))
    assert len(parsed.messages) == 1_000
    assert parsed.messages[-1].id == "m999"


@settings(max_examples=300)
@given(json_values)
def test_parse_raises_only_the_documented_errors(value: Any) -> None:
    for candidate in (
        value,
        snapshot(messages=value),
        snapshot(error=value),
        snapshot(usage=value),
    ):
        before = copy.deepcopy(candidate)
        try:
            parse_controlled_chat_snapshot(candidate)
        except ValidationError:
            pass
        except ProtocolError as error:
            assert error.message == RECORD_INVALID
        assert candidate == before


# --- the driver ----------------------------------------------------------------------------------


def state_of(driver: ControlledChatDriver) -> tuple[Any, ...]:
    return (
        driver.session_id,
        driver.messages,
        driver.status,
        driver.input,
        driver.error,
        driver.usage,
        driver.mode,
    )


class RecordingActions:
    """Every callback records its name and arguments; the async ones await nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.session_id = "overwritten"
        self.status = "error"
        self.messages: list[Any] = ["not a message"]
        self.mode = "uncontrolled"

    def _record(self, action: str, /, *args: Any, **kwargs: Any) -> None:
        self.calls.append((action, args, kwargs))

    async def send(self, text: str) -> None:
        self._record("send", text)

    def stop(self) -> None:
        self._record("stop")

    async def retry(self) -> None:
        self._record("retry")

    async def edit(self, message_id: str, content: str, *, regenerate: bool) -> None:
        self._record("edit", message_id, content, regenerate=regenerate)

    async def regenerate(self, assistant_id: str | None) -> None:
        self._record("regenerate", assistant_id)

    def set_input(self, text: str) -> None:
        self._record("set_input", text)

    def clear(self) -> None:
        self._record("clear")

    async def propose_tool_call(self, *, id: str, name: str, args: Mapping[str, Any]) -> None:
        self._record("propose_tool_call", id=id, name=name, args=args)

    async def approve(self, tool_call_id: str) -> None:
        self._record("approve", tool_call_id)

    def deny(self, tool_call_id: str, reason: str | None) -> None:
        self._record("deny", tool_call_id, reason)


def test_recording_actions_satisfy_the_protocol() -> None:
    actions: ControlledChatActions = RecordingActions()
    assert actions is not None


def test_driver_exposes_the_parsed_state_and_controlled_mode() -> None:
    raw = ACCEPTED["tool call awaiting confirmation"]
    before = copy.deepcopy(raw)
    driver = create_controlled_chat_driver(snapshot=raw, actions=RecordingActions())
    parsed = parse_controlled_chat_snapshot(raw)
    assert raw == before
    assert driver.mode == "controlled"
    assert driver.session_id == SESSION
    assert driver.messages == parsed.messages
    assert isinstance(driver.messages, tuple)
    assert (driver.status, driver.input, driver.error, driver.usage) == (
        parsed.status,
        parsed.input,
        parsed.error,
        parsed.usage,
    )


def test_driver_accepts_a_parsed_snapshot() -> None:
    parsed = parse_controlled_chat_snapshot(ACCEPTED["error"])
    assert isinstance(parsed, ControlledChatSnapshot)
    driver = create_controlled_chat_driver(snapshot=parsed, actions=RecordingActions())
    assert driver.error == parsed.error
    assert driver.messages is parsed.messages


def test_driver_rejects_an_invalid_snapshot() -> None:
    with pytest.raises(ValidationError):
        create_controlled_chat_driver(snapshot=REJECTED_SHELLS["status waiting"], actions={})
    with pytest.raises(ProtocolError):
        create_controlled_chat_driver(
            snapshot=snapshot(messages=REJECTED_MESSAGES["role owner"]), actions=RecordingActions()
        )


CALLS: list[tuple[str, Callable[[ControlledChatDriver], Any], tuple[Any, ...], dict[str, Any]]] = [
    ("send", lambda d: d.send("hello"), ("hello",), {}),
    ("stop", lambda d: d.stop(), (), {}),
    ("retry", lambda d: d.retry(), (), {}),
    ("edit", lambda d: d.edit("user-1", "changed"), ("user-1", "changed"), {"regenerate": True}),
    (
        "edit",
        lambda d: d.edit("user-1", "changed", regenerate=False),
        ("user-1", "changed"),
        {"regenerate": False},
    ),
    ("regenerate", lambda d: d.regenerate(), (None,), {}),
    ("regenerate", lambda d: d.regenerate("assistant-1"), ("assistant-1",), {}),
    ("set_input", lambda d: d.set_input("dra"), ("dra",), {}),
    ("clear", lambda d: d.clear(), (), {}),
    (
        "propose_tool_call",
        lambda d: d.propose_tool_call(id="call-2", name="lookup", args={"q": "x"}),
        (),
        {"id": "call-2", "name": "lookup", "args": {"q": "x"}},
    ),
    ("approve", lambda d: d.approve("call-1"), ("call-1",), {}),
    ("deny", lambda d: d.deny("call-1"), ("call-1", None), {}),
    ("deny", lambda d: d.deny("call-1", "not now"), ("call-1", "not now"), {}),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "call", "args", "kwargs"), CALLS, ids=[c[0] for c in CALLS])
async def test_each_callback_is_delegated_exactly_once_with_its_arguments(
    name: str,
    call: Callable[[ControlledChatDriver], Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    actions = RecordingActions()
    driver = create_controlled_chat_driver(snapshot=ACCEPTED["streaming"], actions=actions)
    state = state_of(driver)
    await call(driver)
    assert actions.calls == [(name, args, kwargs)]
    assert state_of(driver) == state


def test_every_one_of_the_ten_callbacks_is_covered() -> None:
    assert {name for name, *_ in CALLS} == {
        "send",
        "stop",
        "retry",
        "edit",
        "regenerate",
        "set_input",
        "clear",
        "propose_tool_call",
        "approve",
        "deny",
    }


@pytest.mark.anyio
async def test_a_mapping_of_callables_works_and_async_results_are_awaited() -> None:
    seen: list[str] = []

    async def send(text: str) -> None:
        seen.append(text)

    actions: dict[str, Any] = {name: (lambda *a, **k: None) for name in _NAMES}
    actions["send"] = send
    actions["extra"] = "ignored"
    driver = create_controlled_chat_driver(snapshot=snapshot(), actions=actions)
    await driver.send("hi")
    assert seen == ["hi"]


_NAMES = (
    "send",
    "stop",
    "retry",
    "edit",
    "regenerate",
    "set_input",
    "clear",
    "propose_tool_call",
    "approve",
    "deny",
)


@pytest.mark.anyio
async def test_a_failing_callback_propagates_and_the_state_stays() -> None:
    def stop() -> None:
        raise RuntimeError("host failed")

    actions: dict[str, Any] = {name: (lambda *a, **k: None) for name in _NAMES}
    actions["stop"] = stop
    driver = create_controlled_chat_driver(snapshot=ACCEPTED["streaming"], actions=actions)
    with pytest.raises(RuntimeError):
        await driver.stop()
    assert driver.status == "streaming"


def test_extra_action_attributes_never_overwrite_the_state() -> None:
    actions = RecordingActions()
    driver = create_controlled_chat_driver(snapshot=ACCEPTED["idle"], actions=actions)
    assert (driver.session_id, driver.status, driver.messages, driver.mode) == (
        SESSION,
        "idle",
        (),
        "controlled",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        driver.status = "error"  # type: ignore[misc]


@pytest.mark.anyio
async def test_callbacks_are_taken_once_at_creation() -> None:
    actions = RecordingActions()
    driver = create_controlled_chat_driver(snapshot=snapshot(), actions=actions)
    actions.send = lambda text: None  # type: ignore[method-assign, assignment, return-value]
    await driver.send("later")
    assert actions.calls == [("send", ("later",), {})]


@pytest.mark.parametrize("missing", _NAMES)
def test_actions_missing_a_callback_are_refused(missing: str) -> None:
    actions: dict[str, Any] = {name: (lambda *a, **k: None) for name in _NAMES}
    del actions[missing]
    with pytest.raises(ConfigurationError):
        create_controlled_chat_driver(snapshot=snapshot(), actions=actions)
    actions[missing] = "not callable"
    with pytest.raises(ConfigurationError):
        create_controlled_chat_driver(snapshot=snapshot(), actions=actions)


def test_an_actions_object_missing_a_method_is_refused() -> None:
    class NoDeny(RecordingActions):
        deny = None  # type: ignore[assignment]

    with pytest.raises(ConfigurationError):
        create_controlled_chat_driver(snapshot=snapshot(), actions=NoDeny())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        create_controlled_chat_driver(snapshot=snapshot(), actions=object())  # type: ignore[arg-type]
