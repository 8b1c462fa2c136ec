"""The chat controller's tool approvals and denials, for its own tools and the adapter's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from agentskit_chat.errors import ToolError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import (
    ChatTool,
    InMemoryChatMemory,
    StreamChunk,
    ToolAuthorization,
)

from ._controller_fakes import (
    DONE,
    MARKER,
    ScriptedAdapter,
    message,
    reply,
    text,
    watched,
)
from ._tool_fakes import SCHEMA, Authorizer, Executor, expect_tool_error, gated, make


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- approval of registered tools ----------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("result", "recorded"),
    [("deleted", "deleted"), ({"ok": True, "n": 1.5}, '{"ok":true,"n":1.5}'), (None, "null")],
    ids=["text", "json", "null"],
)
async def test_approve_runs_the_executor_once_and_resumes(result: Any, recorded: str) -> None:
    executor = Executor(result)
    authorizer = Authorizer()
    memory = InMemoryChatMemory()
    controller, adapter = make(
        gated(executor),
        authorizer=authorizer,
        adapter=ScriptedAdapter(scripts=[reply("Done.")]),
        memory=memory,
    )
    async with watched():
        await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a.txt"})
        async with anyio.create_task_group() as group:
            group.start_soon(controller.approve, "c1")
            group.start_soon(controller.approve, "c1")
        await controller.approve("c1")
    assert executor.calls == [{"path": "a.txt"}]
    assert [phase for _, phase, _ in authorizer.asked] == ["propose", "execute"]
    carrier, answer = controller.state.messages
    assert carrier.tool_calls is not None
    assert carrier.tool_calls[0].to_wire() == {
        "id": "c1",
        "name": "delete_file",
        "args": {"path": "a.txt"},
        "status": "complete",
        "result": recorded,
    }
    assert (answer.role, answer.content, answer.status) == ("assistant", "Done.", "complete")
    (request,) = adapter.requests
    assert request.messages[0].tool_calls == carrier.tool_calls
    assert (request.messages[1].id, request.messages[1].status) == (answer.id, "streaming")
    assert await memory.load() == controller.state.messages


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("verdict", "error"),
    [
        (ToolAuthorization(False, "missing-capability"), "Permission denied: missing-capability"),
        (RuntimeError(MARKER), "Permission denied: tool call authorization failed"),
    ],
    ids=["denied", "raises"],
)
async def test_execute_phase_denial_never_runs_the_executor(
    verdict: ToolAuthorization | Exception, error: str
) -> None:
    executor = Executor()
    controller, adapter = make(
        gated(executor), authorizer=Authorizer(execute=verdict), adapter=ScriptedAdapter()
    )
    async with watched():
        await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a"})
        await controller.approve("c1")
    assert executor.calls == []
    carrier = controller.state.messages[0]
    assert carrier.tool_calls is not None
    assert (carrier.tool_calls[0].status, carrier.tool_calls[0].error) == ("error", error)
    assert len(adapter.sources) == 1  # the conversation resumes to report the refusal


@pytest.mark.anyio
async def test_approve_validates_again_against_the_current_schema() -> None:
    async with watched():
        executor = Executor()
        controller, _ = make(gated(executor))
        await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "abc"})
        stricter = gated(executor, parameters={**SCHEMA, "properties": {"path": {"maxLength": 1}}})
        controller.update_config(controller.config.with_changes(tools=(stricter,)))
        await controller.approve("c1")
        assert executor.calls == []
        call = controller.state.messages[0].tool_calls
        assert (
            call is not None
            and call[0].error == "Tool call arguments do not match the tool's schema."
        )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error", "text"),
    [
        (RuntimeError(MARKER), "Tool execution failed."),
        (ToolError("AK_TOOL_FORBIDDEN", "Quota exceeded."), "Quota exceeded."),
    ],
    ids=["exception", "tool-error"],
)
async def test_executor_failures_are_recorded_safely(error: Exception, text: str) -> None:
    controller, _ = make(gated(Executor(error=error)))
    async with watched():
        await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a"})
        await controller.approve("c1")
    call = controller.state.messages[0].tool_calls
    assert call is not None and (call[0].status, call[0].error) == ("error", text)
    assert MARKER not in repr(controller.state)


@pytest.mark.anyio
async def test_a_result_that_is_not_json_is_an_error() -> None:
    async with watched():
        controller, _ = make(gated(Executor(result=object())))
        await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a"})
        await controller.approve("c1")
        call = controller.state.messages[0].tool_calls
        assert call is not None and (call[0].status, call[0].error) == (
            "error",
            "Tool result is not JSON.",
        )


@pytest.mark.anyio
async def test_cancelling_an_approval_during_execution_records_the_cancellation() -> None:
    started = anyio.Event()

    async def hang(args: Mapping[str, Any]) -> str:
        started.set()
        await anyio.sleep_forever()
        return "never"

    controller, adapter = make(gated(hang))  # type: ignore[arg-type]
    await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a"})
    async with watched(), anyio.create_task_group() as group:
        group.start_soon(controller.approve, "c1")
        await started.wait()
        group.cancel_scope.cancel()
    call = controller.state.messages[0].tool_calls
    assert call is not None and call[0].error == "Tool execution was cancelled."
    assert adapter.sources == []


# --- denial --------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reason", "error"),
    [
        (None, "Permission denied: user denied access"),
        ("", "Permission denied: user denied access"),
        ("confirmation expired", "Permission denied: confirmation expired"),
    ],
)
async def test_deny_records_the_reason_and_resumes(reason: str | None, error: str) -> None:
    executor = Executor()
    controller, adapter = make(gated(executor), adapter=ScriptedAdapter(scripts=[reply("OK.")]))
    async with watched():
        await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a"})
        await controller.deny("c1", reason)
        await controller.deny("c1", "twice")
        await controller.approve("c1")
    assert executor.calls == []
    call = controller.state.messages[0].tool_calls
    assert call is not None and (call[0].status, call[0].error) == ("error", error)
    assert len(adapter.sources) == 1
    assert controller.state.messages[-1].content == "OK."


@pytest.mark.anyio
@pytest.mark.parametrize("operation", ["approve", "deny"])
async def test_unknown_calls_are_not_found(operation: str) -> None:
    async with watched():
        controller, _ = make(gated())
        await expect_tool_error("AK_TOOL_NOT_FOUND", getattr(controller, operation)("nope"))


# --- calls the adapter owns ----------------------------------------------------------------------


def pending_call(id: str = "t1") -> ToolCall:
    return ToolCall(id=id, name="send_mail", args={"to": "a@b.c"}, status="requires_confirmation")


def asks_approval() -> list[Any]:
    return [text("I need approval."), StreamChunk("tool_call", tool_call=pending_call()), DONE]


@pytest.mark.anyio
async def test_approving_an_adapter_owned_call_resumes_with_it_running() -> None:
    result = ToolCall(id="t1", name="send_mail", args={}, status="complete", result="sent")
    adapter = ScriptedAdapter(
        scripts=[asks_approval(), [StreamChunk("tool_result", tool_call=result), *reply("Sent.")]]
    )
    authorizer = Authorizer()
    controller, _ = make(authorizer=authorizer, adapter=adapter)
    async with watched():
        await controller.send("mail them")
        assert controller.state.status == "idle"
        await controller.approve("t1")
    resumed = adapter.requests[1].messages
    assert [m.role for m in resumed] == ["user", "assistant", "assistant"]
    assert resumed[1].tool_calls is not None
    assert resumed[1].tool_calls[0].status == "running"
    # Authorized when the adapter proposed it, and again when it was approved.
    assert [(c, phase, ctx.tool) for c, phase, ctx in authorizer.asked] == [
        ("t1", "propose", None),
        ("t1", "execute", None),
    ]
    final = controller.state.messages[1].tool_calls
    assert final is not None
    assert final[0].to_wire() == {
        "id": "t1",
        "name": "send_mail",
        "args": {"to": "a@b.c"},
        "status": "complete",
        "result": "sent",
    }
    assert controller.state.messages[-1].content == "Sent."


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("deny", "error"),
    [
        ("deny", "Permission denied: not now"),
        ("approve-denied", "Permission denied: missing-capability"),
    ],
)
async def test_denying_an_adapter_owned_call_resumes_with_the_denial(deny: str, error: str) -> None:
    adapter = ScriptedAdapter(scripts=[asks_approval(), reply("Understood.")])
    authorizer = Authorizer(execute=ToolAuthorization(False, "missing-capability"))
    controller, _ = make(authorizer=authorizer, adapter=adapter)
    async with watched():
        await controller.send("mail them")
        if deny == "deny":
            await controller.deny("t1", "not now")
        else:
            await controller.approve("t1")
    resumed = adapter.requests[1].messages[1].tool_calls
    assert resumed is not None and (resumed[0].status, resumed[0].error) == ("error", error)
    assert controller.state.messages[-1].content == "Understood."


@pytest.mark.anyio
async def test_an_adapter_owned_call_of_a_registered_schema_is_validated() -> None:
    async with watched():
        adapter = ScriptedAdapter(scripts=[asks_approval(), reply("Hm.")])
        schema_only = ChatTool(name="send_mail", parameters={"type": "object", "required": ["cc"]})
        controller, _ = make(schema_only, adapter=adapter)
        await controller.send("mail them")
        await controller.approve("t1")
        resumed = adapter.requests[1].messages[1].tool_calls
        assert resumed is not None
        assert resumed[0].error == "Tool call arguments do not match the tool's schema."


@pytest.mark.anyio
async def test_history_and_proposals_survive_a_memory_round_trip() -> None:
    async with watched():
        memory = InMemoryChatMemory([message("u1", "user", "hello")])
        controller, _ = make(gated(), memory=memory)
        await controller.load()
        await controller.propose_tool_call(id="c1", name="delete_file", args={"path": "a"})
        fresh, _ = make(gated(), memory=memory)
        await fresh.load()
        assert fresh.state.messages == controller.state.messages
        again = await fresh.propose_tool_call(id="c1", name="delete_file", args={"path": "other"})
        assert again.args == {"path": "a"}


@pytest.mark.anyio
async def test_an_approval_cancelled_while_authorizing_leaves_the_call_undecided() -> None:
    deciding = anyio.Event()

    async def slow_authorizer(call: ToolCall, context: Any) -> ToolAuthorization:
        if context.phase == "propose":
            return ToolAuthorization(True)
        deciding.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    adapter = ScriptedAdapter(scripts=[asks_approval(), reply("Not sent.")])
    controller, _ = make(authorizer=slow_authorizer, adapter=adapter)
    async with watched():
        await controller.send("mail them")
        with anyio.move_on_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(controller.approve, "t1")
                await deciding.wait()
                group.cancel_scope.cancel()
        calls = controller.state.messages[1].tool_calls
        assert calls is not None
        assert calls[0].status == "requires_confirmation"
        assert len(adapter.requests) == 1  # never resumed as if approved
        await controller.deny("t1", "changed my mind")
    resumed = adapter.requests[1].messages[1].tool_calls
    assert resumed is not None
    assert (resumed[0].status, resumed[0].error) == ("error", "Permission denied: changed my mind")
