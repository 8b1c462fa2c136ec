"""The chat controller's tool proposals: registry checks, validation, authorization."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentskit_chat.errors import ConfigurationError, ToolError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import (
    ChatTool,
    InMemoryChatMemory,
    ToolAuthorization,
    ToolAuthorizationContext,
)

from ._controller_fakes import (
    MARKER,
    wait_until,
    watched,
)
from ._tool_fakes import Authorizer, Executor, expect_tool_error, gated, make


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tools",
    [
        (ChatTool(name="a"), ChatTool(name="a")),
        (ChatTool(name="bad name"),),
        (ChatTool(name="-x"),),
        (ChatTool(name="a", parameters={"type": "no-such-type"}),),
        (ChatTool(name="a", parameters={"minLength": -1}),),
    ],
    ids=["duplicate", "space", "leading-dash", "bad-type", "bad-keyword"],
)
def test_invalid_tools_are_a_configuration_error(tools: tuple[ChatTool, ...]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        make(*tools)
    assert caught.value.code == "AK_CONFIG_INVALID"


# --- proposal ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_proposal_appends_an_assistant_message_awaiting_confirmation() -> None:
    memory = InMemoryChatMemory()
    authorizer = Authorizer()
    controller, adapter = make(gated(), authorizer=authorizer, memory=memory)
    args = {"path": "a.txt"}
    async with watched():
        call = await controller.propose_tool_call(id="call-1", name="delete_file", args=args)
    args["path"] = "changed"
    assert call.to_wire() == {
        "id": "call-1",
        "name": "delete_file",
        "args": {"path": "a.txt"},
        "status": "requires_confirmation",
    }
    (carrier,) = controller.state.messages
    assert (carrier.role, carrier.content, carrier.status) == ("assistant", "", "complete")
    assert carrier.tool_calls == (call,)
    assert [(c, phase) for c, phase, _ in authorizer.asked] == [("call-1", "propose")]
    assert authorizer.asked[0][2].tool is controller.config.tools[0]
    assert adapter.sources == []
    assert await memory.load() == controller.state.messages


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("id", "name", "args", "code"),
    [
        ("bad id", "delete_file", {"path": "a"}, "AK_TOOL_INVALID_INPUT"),
        ("c1", "bad name!", {"path": "a"}, "AK_TOOL_INVALID_INPUT"),
        ("", "delete_file", {"path": "a"}, "AK_TOOL_INVALID_INPUT"),
        ("c1", "unknown_tool", {"path": "a"}, "AK_TOOL_NOT_FOUND"),
        ("c1", "delete_file", {"path": 3}, "AK_TOOL_INVALID_INPUT"),
        ("c1", "delete_file", {}, "AK_TOOL_INVALID_INPUT"),
        ("c1", "delete_file", {"path": "a" * 21}, "AK_TOOL_INVALID_INPUT"),
        ("c1", "delete_file", {"path": "a", "extra": MARKER}, "AK_TOOL_INVALID_INPUT"),
        ("c1", "delete_file", {"path": float("inf")}, "AK_TOOL_INVALID_INPUT"),
        ("c1", "delete_file", ["not", "an", "object"], "AK_TOOL_INVALID_INPUT"),
    ],
    ids=[
        "unsafe-id",
        "unsafe-name",
        "empty-id",
        "unknown",
        "wrong-type",
        "missing",
        "too-long",
        "extra",
        "not-json",
        "not-object",
    ],
)
async def test_refused_proposals(id: str, name: str, args: Any, code: str) -> None:
    executor = Executor()
    controller, _ = make(gated(executor))
    async with watched():
        error = await expect_tool_error(
            code, controller.propose_tool_call(id=id, name=name, args=args)
        )
    assert MARKER not in str(error)
    assert controller.state.messages == ()
    assert executor.calls == []


@pytest.mark.anyio
async def test_validation_can_be_turned_off() -> None:
    controller, _ = make(gated(), validate_args=False)
    async with watched():
        call = await controller.propose_tool_call(id="c1", name="delete_file", args={"x": 1})
    assert call.status == "requires_confirmation"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "tool",
    [
        gated(requires_confirmation=False),
        gated(execute=None),
    ],
    ids=["not-gated", "no-executor"],
)
async def test_a_tool_that_is_not_confirmation_gated_cannot_be_proposed(tool: ChatTool) -> None:
    async with watched():
        controller, _ = make(tool)
        with pytest.raises(ConfigurationError) as caught:
            await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a"})
        assert caught.value.code == "AK_CONFIG_INVALID"
        assert controller.state.messages == ()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("verdict", "message"),
    [
        (ToolAuthorization(False, "missing-capability"), "missing-capability"),
        (ToolAuthorization(False), "tool call was not authorized"),
        (ToolAuthorization(False, ""), "tool call was not authorized"),
        (RuntimeError(MARKER), "tool call authorization failed"),
    ],
    ids=["reason", "no-reason", "empty-reason", "raises"],
)
async def test_denied_proposals_are_forbidden_with_the_reason(
    verdict: ToolAuthorization | Exception, message: str
) -> None:
    controller, _ = make(gated(), authorizer=Authorizer(propose=verdict))
    async with watched():
        error = await expect_tool_error(
            "AK_TOOL_FORBIDDEN",
            controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a"}),
        )
    assert error.message == message == str(error)
    assert controller.state.messages == ()


@pytest.mark.anyio
@pytest.mark.parametrize("answer", [None, {"allowed": True}, True], ids=["none", "dict", "bool"])
async def test_an_authorizer_answering_something_else_denies(answer: object) -> None:
    async with watched():

        def authorizer(call: ToolCall, context: ToolAuthorizationContext) -> Any:
            return answer

        controller, _ = make(gated(), authorizer=authorizer)
        error = await expect_tool_error(
            "AK_TOOL_FORBIDDEN",
            controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a"}),
        )
        assert error.message == "tool call authorization failed"


@pytest.mark.anyio
async def test_a_synchronous_authorizer_works() -> None:
    async with watched():

        def authorizer(call: ToolCall, context: ToolAuthorizationContext) -> ToolAuthorization:
            return ToolAuthorization(call.args["path"] != "secret", "protected path")

        controller, _ = make(gated(), authorizer=authorizer)
        await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "ok"})
        error = await expect_tool_error(
            "AK_TOOL_FORBIDDEN",
            controller.propose_tool_call(id="c2", name="delete_file", args={"path": "secret"}),
        )
        assert error.message == "protected path"


@pytest.mark.anyio
async def test_proposals_are_idempotent_and_concurrent_ones_share_one_operation() -> None:
    gate = anyio.Event()
    asked: list[str] = []

    async def slow(call: ToolCall, context: ToolAuthorizationContext) -> ToolAuthorization:
        asked.append(call.id)
        await gate.wait()
        return ToolAuthorization(True)

    controller, _ = make(gated(), authorizer=slow)
    results: list[ToolCall] = []

    async def propose(path: str) -> None:
        call = await controller.propose_tool_call(id="c1", name="delete_file", args={"path": path})
        results.append(call)

    async with watched(), anyio.create_task_group() as group:
        for path in ("first", "second", "third"):
            group.start_soon(propose, path)
        await wait_until(lambda: asked == ["c1"])
        gate.set()
    again = await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "x"})
    assert asked == ["c1"]
    assert len(controller.state.messages) == 1
    assert all(r == results[0] for r in results) and again == results[0]
    assert results[0].args == {"path": "first"}


@pytest.mark.anyio
async def test_concurrent_proposals_share_a_failure() -> None:
    gate = anyio.Event()

    async def deny_later(call: ToolCall, context: ToolAuthorizationContext) -> ToolAuthorization:
        await gate.wait()
        return ToolAuthorization(False, "no")

    controller, _ = make(gated(), authorizer=deny_later)
    codes: list[str] = []

    async def propose() -> None:
        try:
            await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a"})
        except ToolError as error:
            codes.append(error.code)

    async with watched(), anyio.create_task_group() as group:
        group.start_soon(propose)
        group.start_soon(propose)
        await anyio.sleep(0.01)
        gate.set()
    assert codes == ["AK_TOOL_FORBIDDEN", "AK_TOOL_FORBIDDEN"]
