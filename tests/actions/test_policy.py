"""The capability policy: decisions from the trusted context only, traced without secrets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from agentskit_chat.actions import (
    PolicyContext,
    PolicyTrace,
    create_capability_policy,
)
from agentskit_chat.conversation import define_chat, with_action_policy
from agentskit_chat.errors import ConfigurationError, ToolError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import (
    ChatConfig,
    ChatController,
    ChatTool,
    ToolAuthorization,
    ToolAuthorizationContext,
)
from tests.server._chat_support import EchoAdapter

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


REQUIREMENTS = {"send-email": ["email.send"], "delete-user": ["users.delete", "users.delete"]}


def call(name: str, call_id: str = "call-1", args: Mapping[str, Any] | None = None) -> ToolCall:
    return ToolCall.model_validate(
        {"id": call_id, "name": name, "args": dict(args or {}), "status": "requires_confirmation"}
    )


def phase(name: str = "propose") -> ToolAuthorizationContext:
    return ToolAuthorizationContext(phase=name, messages=())  # type: ignore[arg-type]


class Host:
    """The trusted seam: what the host says about the caller, changeable between decisions."""

    def __init__(self, context: PolicyContext | None) -> None:
        self.context: Any = context
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        if isinstance(self.context, Exception):
            raise self.context
        return self.context


class Executor:
    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    async def __call__(self, args: Mapping[str, Any]) -> str:
        self.runs.append(dict(args))
        return "done"


def controller_with(policy_authorizer: Any, executor: Executor, name: str) -> ChatController:
    tool = ChatTool(name=name, execute=executor, requires_confirmation=True)
    return ChatController(
        ChatConfig(adapter=EchoAdapter(), tools=(tool,), authorize_tool_call=policy_authorizer)
    )


# --- the decision table, through a real controller -----------------------------------------------

A = PolicyContext("session-a", ("email.send",))
ROWS = [
    # (context at propose, context at execute, action, propose reason, execute reason)
    (A, A, "send-email", "allowed", "allowed"),
    (None, None, "send-email", "missing-context", None),
    (PolicyContext("session-b", ("email.send",)), None, "send-email", "session-mismatch", None),
    (A, None, "unknown-action", "action-unregistered", None),
    (A, None, "delete-user", "missing-capability", None),
    (A, PolicyContext("session-a", ()), "send-email", "allowed", "missing-capability"),
    (A, None, "send-email", "allowed", "missing-context"),
]


@pytest.mark.parametrize(("proposing", "executing", "action", "first", "second"), ROWS)
async def test_decision_table(
    proposing: PolicyContext | None,
    executing: PolicyContext | None,
    action: str,
    first: str,
    second: str | None,
) -> None:
    host = Host(proposing)
    policy = create_capability_policy(
        session_id="session-a", get_context=host, requirements=REQUIREMENTS, now=lambda: 7
    )
    executor = Executor()
    controller = controller_with(policy.authorize_tool_call, executor, action)
    if first != "allowed":
        with pytest.raises(ToolError) as refused:
            await controller.propose_tool_call(id="call-1", name=action, args={})
        assert refused.value.code == "AK_TOOL_FORBIDDEN"
        assert refused.value.message == first
        assert [t.reason for t in policy.traces] == [first]
        assert executor.runs == []
        return
    await controller.propose_tool_call(id="call-1", name=action, args={})
    host.context = executing
    await controller.approve("call-1")
    assert [(t.phase, t.reason) for t in policy.traces] == [("propose", first), ("execute", second)]
    (outcome,) = [c for m in controller.state.messages for c in (m.tool_calls or ())]
    if second == "allowed":
        assert executor.runs == [{}]
        assert outcome.status == "complete"
    else:
        assert executor.runs == []  # revoked between proposal and execution: never runs
        assert outcome.status == "error"
        assert outcome.error == f"Permission denied: {second}"


def test_vectors_of_the_reference() -> None:
    host = Host(A)
    policy = create_capability_policy(
        session_id="session-a", get_context=host, requirements=REQUIREMENTS, now=lambda: 42
    )
    assert policy.authorize_tool_call(call("send-email"), phase()) == ToolAuthorization(True)
    assert policy.traces[-1].timestamp == 42
    claims = {"capabilities": ["users.delete"], "sessionId": "session-a"}
    denied = policy.authorize_tool_call(call("delete-user", args=claims), phase())
    assert denied == ToolAuthorization(False, "missing-capability")  # arguments grant nothing
    assert policy.traces[-1].required_capabilities == ("users.delete",)  # de-duplicated
    host.context = PolicyContext("session-b", ("email.send",))
    assert policy.authorize_tool_call(call("send-email"), phase()).reason == "session-mismatch"
    host.context = None
    assert policy.authorize_tool_call(call("send-email"), phase()).reason == "missing-context"
    host.context = A
    assert policy.authorize_tool_call(call("nope"), phase()).reason == "action-unregistered"
    assert not policy.traces[-1].required_capabilities
    host.context = RuntimeError("directory down")
    assert policy.authorize_tool_call(call("nope"), phase()).reason == "policy-failure"
    for malformed in ({"sessionId": "session-a", "capabilities": []}, "session-a", 7):
        host.context = malformed
        assert policy.authorize_tool_call(call("send-email"), phase()).reason == "policy-failure"
    assert host.calls == len(policy.traces)  # the context is read on every decision
    assert [t.id for t in policy.traces][:3] == ["policy-1", "policy-2", "policy-3"]


async def test_composed_authorizers() -> None:
    host = Host(A)
    policy = create_capability_policy(
        session_id="session-a", get_context=host, requirements=REQUIREMENTS
    )
    asked: list[str] = []

    async def denies(c: ToolCall, ctx: ToolAuthorizationContext) -> ToolAuthorization:
        asked.append(c.name)
        return ToolAuthorization(False, "no")

    assert (await policy.compose(denies)(call("send-email"), phase())).reason == (
        "composed-policy-denied"
    )

    def revokes(c: ToolCall, ctx: ToolAuthorizationContext) -> ToolAuthorization:
        host.context = PolicyContext("session-a", ())
        return ToolAuthorization(True)

    revoked = await policy.compose(revokes)(call("send-email"), phase("execute"))
    assert revoked.reason == "missing-capability"

    def raises(c: ToolCall, ctx: ToolAuthorizationContext) -> ToolAuthorization:
        raise RuntimeError("boom")

    host.context = A
    assert (await policy.compose(raises)(call("send-email"), phase())).reason == "policy-failure"
    assert (await policy.compose()(call("send-email"), phase())).allowed
    host.context = None
    await policy.compose(denies)(call("send-email"), phase())
    assert asked == ["send-email"]  # not asked when the policy already denies
    assert [t.reason for t in policy.traces] == [
        "composed-policy-denied",
        "missing-capability",
        "policy-failure",
        "allowed",
        "missing-context",
    ]  # exactly one trace per call


async def test_revoked_after_proposal_never_executes_and_the_existing_authorizer_runs_once() -> (
    None
):
    host = Host(A)
    policy = create_capability_policy(
        session_id="session-a", get_context=host, requirements=REQUIREMENTS
    )
    existing_calls: list[str] = []

    def existing(c: ToolCall, ctx: ToolAuthorizationContext) -> ToolAuthorization:
        existing_calls.append(ctx.phase)
        return ToolAuthorization(True)

    executor = Executor()
    definition = with_action_policy(
        define_chat(
            id="policy",
            chat=ChatConfig(
                adapter=EchoAdapter(),
                tools=(ChatTool(name="send-email", execute=executor, requires_confirmation=True),),
                authorize_tool_call=existing,
            ),
        ),
        policy,
    )
    assert definition.chat.authorize_tool_call is not existing
    controller = ChatController(definition.chat)
    await controller.propose_tool_call(id="call-1", name="send-email", args={})
    host.context = PolicyContext("session-a", ())
    await controller.approve("call-1")
    assert executor.runs == []
    assert existing_calls == ["propose"]
    last = policy.traces[-1]
    assert (last.phase, last.decision, last.reason) == ("execute", "deny", "missing-capability")
    assert len(policy.traces) == 2


async def test_traces_never_hold_the_context_or_the_arguments() -> None:
    secret_capability = "vault.secret-capability-7f3a"
    host = Host(PolicyContext("session-a", ("email.send", secret_capability)))
    seen: list[PolicyTrace] = []

    def observer(trace: PolicyTrace) -> None:
        seen.append(trace)
        raise RuntimeError("a failing observer changes nothing")

    policy = create_capability_policy(
        session_id="session-a", get_context=host, requirements=REQUIREMENTS, on_trace=observer
    )
    executor = Executor()
    controller = controller_with(policy.authorize_tool_call, executor, "send-email")
    secret_argument = "password=hunter2-93b1"
    await controller.propose_tool_call(
        id="call-1", name="send-email", args={"body": secret_argument}
    )
    await controller.approve("call-1")
    policy.authorize_tool_call(call("delete-user", args={"token": secret_argument}), phase())
    traces = policy.traces
    assert len(traces) == 3
    assert seen == list(traces)
    text = json.dumps([trace.to_wire() for trace in traces])
    assert secret_argument not in text
    assert secret_capability not in text
    assert "session-a" not in text
    assert set(traces[0].to_wire()) == {
        "id",
        "toolCallId",
        "action",
        "phase",
        "decision",
        "reason",
        "requiredCapabilities",
        "timestamp",
    }


@pytest.mark.parametrize(
    ("session_id", "requirements", "message"),
    [
        ("", REQUIREMENTS, "Action policy session is invalid."),
        (7, REQUIREMENTS, "Action policy session is invalid."),
        ("s", {"bad name": []}, "Action policy requirements are invalid."),
        ("s", {"ok": ["bad capability"]}, "Action policy requirements are invalid."),
        ("s", {"ok": "email.send"}, "Action policy requirements are invalid."),
        ("s", ["send-email"], "Action policy requirements are invalid."),
    ],
)
def test_invalid_configuration(session_id: Any, requirements: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        create_capability_policy(
            session_id=session_id, get_context=lambda: None, requirements=requirements
        )
    assert error.value.message == message


def test_an_empty_requirement_list_is_public_to_its_session_only() -> None:
    host = Host(PolicyContext("session-a", ()))
    policy = create_capability_policy(
        session_id="session-a", get_context=host, requirements={"status": []}
    )
    assert policy.authorize_tool_call(call("status"), phase()).allowed
    host.context = None
    assert policy.authorize_tool_call(call("status"), phase()).reason == "missing-context"


def test_an_async_get_context_is_a_failure_not_an_allowance() -> None:
    async def get_context() -> PolicyContext:
        return A

    policy = create_capability_policy(
        session_id="session-a", get_context=get_context, requirements=REQUIREMENTS
    )
    assert policy.authorize_tool_call(call("send-email"), phase()).reason == "policy-failure"
