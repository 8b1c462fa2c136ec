"""The tool runner the controller hands adapters, and its checks of adapter-proposed calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import (
    ChatController,
    ChatTool,
    StreamChunk,
    ToolAuthorization,
    ToolRunner,
)

from ._controller_fakes import DONE, ScriptedAdapter, config, reply, text, watched
from ._tool_fakes import SCHEMA, Authorizer, Executor, gated, make

pytestmark = pytest.mark.anyio

INVALID_ARGUMENTS = "Tool call arguments do not match the tool's schema."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def plain(executor: Executor | None = None) -> ChatTool:
    return ChatTool(
        name="read_file", description="Read a file.", parameters=SCHEMA, execute=executor
    )


def running(name: str = "read_file", args: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(id="r1", name=name, args=args or {"path": "a.txt"}, status="running")


async def runner_of(*tools: ChatTool, **extra: Any) -> tuple[ToolRunner, ScriptedAdapter]:
    controller, adapter = make(*tools, **extra)
    await controller.send("hi")
    runner = adapter.requests[0].context.tool_runner
    assert isinstance(runner, ToolRunner)
    return runner, adapter


# --- the runner ----------------------------------------------------------------------------------


async def test_every_request_carries_a_runner_bound_to_the_conversation() -> None:
    authorizer = Authorizer()
    runner, adapter = await runner_of(plain(Executor()), authorizer=authorizer)
    verdict = await runner.authorize(running())
    assert verdict == ToolAuthorization(True)
    (call_id, phase, context) = authorizer.asked[0]
    assert (call_id, phase) == ("r1", "execute")
    assert context.tool is not None and context.tool.name == "read_file"
    assert [m.content for m in context.messages] == ["hi", "ok"]
    assert adapter.requests[0].context.tools[0].name == "read_file"


@pytest.mark.parametrize(
    ("verdict", "reason"),
    [
        (ToolAuthorization(False, "missing-capability"), "missing-capability"),
        (ToolAuthorization(False), "tool call was not authorized"),
        (RuntimeError("boom"), "tool call authorization failed"),
    ],
    ids=["reason", "no-reason", "raised"],
)
async def test_the_runner_reports_a_denial_with_a_reason(
    verdict: ToolAuthorization | Exception, reason: str
) -> None:
    runner, _ = await runner_of(authorizer=Authorizer(execute=verdict))
    assert await runner.authorize(running("not_a_chat_tool")) == ToolAuthorization(False, reason)


@dataclass
class Case:
    tool: str  # "executor", "bare" (no executor) or "none" (not registered)
    call: ToolCall
    verdict: ToolAuthorization = field(default_factory=lambda: ToolAuthorization(True))
    validate_args: bool = True
    status: str = "complete"
    outcome: str = "read"
    runs: int = 1


def cases() -> list[Any]:
    table = {
        "runs": Case("executor", running()),
        "unknown-tool": Case(
            "none",
            running("nope"),
            status="error",
            outcome="Tool is not registered with an executor.",
            runs=0,
        ),
        "no-executor": Case(
            "bare",
            running(),
            status="error",
            outcome="Tool is not registered with an executor.",
            runs=0,
        ),
        "invalid-arguments": Case(
            "executor", running(args={"path": 3}), status="error", outcome=INVALID_ARGUMENTS, runs=0
        ),
        "not-validated": Case("executor", running(args={"path": 3}), validate_args=False),
        "denied": Case(
            "executor",
            running(),
            verdict=ToolAuthorization(False, "read-only"),
            status="error",
            outcome="Permission denied: read-only",
            runs=0,
        ),
    }
    return [pytest.param(case, id=name) for name, case in table.items()]


@pytest.mark.parametrize("case", cases())
async def test_the_runner_runs_a_chat_tool_like_an_approval(case: Case) -> None:
    executor = Executor("read")
    tools = {"executor": (plain(executor),), "bare": (plain(),), "none": ()}[case.tool]
    runner, _ = await runner_of(
        *tools, authorizer=Authorizer(execute=case.verdict), validate_args=case.validate_args
    )
    outcome = await runner.execute(case.call)
    assert outcome.status == case.status
    assert (outcome.result if case.status == "complete" else outcome.error) == case.outcome
    assert len(executor.calls) == case.runs


# --- calls the adapter proposes ------------------------------------------------------------------


def proposal(call_id: str = "t1", name: str = "send_mail", **args: Any) -> StreamChunk:
    call = ToolCall(
        id=call_id, name=name, args=args or {"to": "a@b.c"}, status="requires_confirmation"
    )
    return StreamChunk("tool_call", tool_call=call)


async def test_a_proposal_the_authorizer_denies_ends_in_error_and_the_model_hears_once() -> None:
    authorizer = Authorizer(propose=ToolAuthorization(False, "missing-capability"))
    adapter = ScriptedAdapter(
        scripts=[[text("Mailing."), proposal(), DONE], [proposal("t2"), DONE], reply("never")]
    )
    controller, _ = make(authorizer=authorizer, adapter=adapter)
    async with watched():
        await controller.send("mail them")
    denial = "Permission denied: missing-capability"
    first = controller.state.messages[1].tool_calls
    assert first is not None and (first[0].status, first[0].error) == ("error", denial)
    # One follow-up run, which sees the denied call; its own refused proposal ends the turn.
    assert len(adapter.requests) == 2
    seen = adapter.requests[1].messages[1].tool_calls
    assert seen is not None and seen[0].error == denial
    second = controller.state.messages[2].tool_calls
    assert second is not None and second[0].error == denial
    assert [(c, phase) for c, phase, _ in authorizer.asked] == [
        ("t1", "propose"),
        ("t2", "propose"),
    ]
    assert controller.state.status == "idle"


async def test_no_follow_up_while_another_proposal_of_the_turn_waits() -> None:
    asked: list[tuple[str, str]] = []

    def decide(call: ToolCall, context: Any) -> ToolAuthorization:
        asked.append((call.id, context.phase))
        return ToolAuthorization(call.id != "t1", "no")

    adapter = ScriptedAdapter(scripts=[[proposal("t1"), proposal("t2"), DONE]])
    controller, _ = make(authorizer=decide, adapter=adapter)
    async with watched():
        await controller.send("mail them")
    calls = controller.state.messages[1].tool_calls
    assert calls is not None
    assert [c.status for c in calls] == ["error", "requires_confirmation"]
    assert len(adapter.requests) == 1
    assert asked == [("t1", "propose"), ("t2", "propose")]


async def test_a_proposal_of_a_registered_tool_is_checked_against_its_schema() -> None:
    authorizer = Authorizer()
    adapter = ScriptedAdapter(scripts=[[proposal(name="delete_file", path=7), DONE]])
    controller, _ = make(gated(), authorizer=authorizer, adapter=adapter)
    async with watched():
        await controller.send("delete")
    calls = controller.state.messages[1].tool_calls
    assert calls is not None and (calls[0].status, calls[0].error) == ("error", INVALID_ARGUMENTS)
    assert authorizer.asked == []
    assert len(adapter.requests) == 2


async def test_an_allowed_proposal_is_recorded_as_it_came() -> None:
    authorizer = Authorizer()
    adapter = ScriptedAdapter(scripts=[[proposal(), DONE]])
    controller, _ = make(authorizer=authorizer, adapter=adapter)
    async with watched():
        await controller.send("mail them")
    calls = controller.state.messages[1].tool_calls
    assert calls is not None and calls[0].status == "requires_confirmation"
    assert [(c, phase, ctx.tool) for c, phase, ctx in authorizer.asked] == [("t1", "propose", None)]
    assert len(adapter.requests) == 1


# --- adapters that check the tools ----------------------------------------------------------------


@dataclass
class CheckingAdapter(ScriptedAdapter):
    checked: list[tuple[str, ...]] = field(default_factory=list)

    def check_tools(self, tools: Sequence[ChatTool]) -> None:
        self.checked.append(tuple(tool.name for tool in tools))
        if any(tool.name == "taken" for tool in tools):
            raise ConfigurationError("A chat tool has the same name as one of the agent's tools.")


def test_the_adapter_checks_the_tools_when_the_controller_is_built_and_updated() -> None:
    adapter = CheckingAdapter()
    controller = ChatController(config(adapter, tools=(plain(),)))
    with pytest.raises(ConfigurationError):
        controller.update_config(controller.config.with_changes(tools=(ChatTool(name="taken"),)))
    with pytest.raises(ConfigurationError):
        ChatController(config(adapter, tools=(ChatTool(name="taken"),)))
    assert adapter.checked == [("read_file",), ("taken",), ("taken",)]
    assert [tool.name for tool in controller.config.tools] == ["read_file"]
