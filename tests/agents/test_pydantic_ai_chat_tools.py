"""One place where tools meet: a chat's tools and policy reach a pydantic-ai agent's calls.

Driven end to end through the chat controller with a scripted ``FunctionModel`` (no network).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent

from agentskit_chat.actions import PolicyContext, create_capability_policy
from agentskit_chat.agents import create_agent, from_pydantic_ai
from agentskit_chat.errors import ConfigurationError, ToolError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.runtime import (
    AdapterContext,
    AdapterRequest,
    ChatConfig,
    ChatController,
    ChatTool,
    ToolAuthorization,
    ToolAuthorizationContext,
)
from tests._loop import no_blocking
from tests.agents._pydantic_ai_fakes import (
    T0,
    Script,
    collect,
    ids,
    placeholder,
    summary,
    tool_call,
    user,
)

pytestmark = pytest.mark.anyio

INVALID_ARGUMENTS = "Tool call arguments do not match the tool's schema."
LOOKUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"word": {"type": "string", "minLength": 1}},
    "required": ["word"],
    "additionalProperties": False,
}
MAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"to": {"type": "string"}},
    "required": ["to"],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- fakes ---------------------------------------------------------------------------------------


@dataclass
class Executor:
    """A chat tool's executor: records each run's arguments, answers ``result`` (or raises it)."""

    result: Any = "ok"
    runs: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, args: Mapping[str, Any]) -> Any:
        self.runs.append(dict(args))
        await anyio.sleep(0)
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


def lookup(executor: Executor | None = None) -> ChatTool:
    return ChatTool(
        name="lookup",
        description="Look a word up in the glossary.",
        parameters=LOOKUP_SCHEMA,
        execute=executor or Executor(),
    )


def send_mail(executor: Executor | None = None) -> ChatTool:
    return ChatTool(
        name="send_mail",
        description="Send an email.",
        parameters=MAIL_SCHEMA,
        execute=executor or Executor("sent"),
        requires_confirmation=True,
    )


@dataclass
class Policy:
    """A plain authorizer: denies (name, phase) pairs listed in ``deny``; records every ask."""

    deny: dict[tuple[str, str], str] = field(default_factory=dict)
    asked: list[tuple[str, str, str, str | None]] = field(default_factory=list)

    def __call__(self, call: ToolCall, context: ToolAuthorizationContext) -> ToolAuthorization:
        tool = context.tool.name if context.tool is not None else None
        self.asked.append((call.id, call.name, context.phase, tool))
        reason = self.deny.get((call.name, context.phase))
        return ToolAuthorization(reason is None, reason)


@dataclass
class OwnTools:
    """The agent's own tools: ``add`` (runs at once) and ``delete`` (needs approval)."""

    runs: list[str] = field(default_factory=list)

    def install(self, agent: Agent[None, str]) -> None:
        @agent.tool_plain
        def add(a: int, b: int) -> int:
            self.runs.append("add")
            return a + b

        @agent.tool_plain(requires_approval=True)
        def delete(path: str) -> str:
            self.runs.append("delete")
            return f"deleted {path}"


def chat(
    script: Script,
    *tools: ChatTool,
    policy: Any = None,
    own: OwnTools | None = None,
) -> ChatController:
    agent: Agent[None, str] = Agent(script.model())
    (own or OwnTools()).install(agent)
    config = ChatConfig(
        adapter=from_pydantic_ai(agent),
        tools=tools,
        authorize_tool_call=policy,
        id_factory=ids(),
        clock=lambda: T0,
    )
    return ChatController(config)


def recorded(controller: ChatController, call_id: str) -> ToolCall:
    found = [
        call
        for message in controller.state.messages
        for call in message.tool_calls or ()
        if call.id == call_id
    ]
    assert len(found) == 1
    return found[0]


def last_returns(script: Script) -> tuple[str, ...]:
    """The tool returns of the newest request the model was sent."""
    assert script.seen
    return summary(script.seen[-1])[-1]


# --- chat tools the agent calls -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "shown"),
    [
        ("a small cat", "a small cat"),
        ({"word": "cat", "senses": 2, "exact": True}, '{"word":"cat","senses":2,"exact":true}'),
        ([1, 2.5, None], "[1,2.5,null]"),
    ],
    ids=["text", "object", "list"],
)
async def test_a_chat_tool_the_agent_calls_runs_once_and_its_result_reaches_the_model(
    result: Any, shown: str
) -> None:
    executor = Executor(result)
    policy = Policy()
    script = Script([[tool_call(0, "lookup", '{"word": "cat"}', "c1")], ["Found it."]])
    controller = chat(script, lookup(executor), policy=policy)
    async with no_blocking():
        await controller.send("what is a cat?")
    assert executor.runs == [{"word": "cat"}]
    assert last_returns(script) == ("request", f"return:c1:success:{shown}")
    call = recorded(controller, "c1")
    assert (call.status, call.result) == ("complete", shown)
    assert policy.asked == [("c1", "lookup", "execute", "lookup")]
    assert controller.state.messages[-1].content == "Found it."
    assert controller.state.status == "idle"


async def test_the_chat_tools_are_offered_to_the_agent_as_they_are_defined() -> None:
    script = Script([["hello"]])
    no_executor = ChatTool(name="client_only", description="Run in the browser.")
    controller = chat(script, lookup(), send_mail(), no_executor)
    await controller.send("hi")
    offered = {tool.name: tool for tool in script.infos[0].function_tools}
    assert sorted(offered) == ["add", "delete", "lookup", "send_mail"]
    assert offered["lookup"].description == "Look a word up in the glossary."
    assert offered["lookup"].parameters_json_schema == LOOKUP_SCHEMA
    assert offered["lookup"].kind == "function"
    assert offered["send_mail"].parameters_json_schema == MAIL_SCHEMA
    assert offered["send_mail"].kind == "unapproved"


async def test_a_request_without_the_controllers_runner_offers_no_chat_tool() -> None:
    script = Script([["hello"]])
    agent: Agent[None, str] = Agent(script.model())
    OwnTools().install(agent)
    request = AdapterRequest(
        messages=(user("hi"), placeholder()), context=AdapterContext(tools=(lookup(),))
    )
    await collect(from_pydantic_ai(agent).create_source(request))
    assert sorted(tool.name for tool in script.infos[0].function_tools) == ["add", "delete"]


@pytest.mark.parametrize(
    "args",
    ['{"word": ""}', '{"word": 3}', "{}", '{"word": "cat", "extra": 1}'],
    ids=["too-short", "not-a-string", "missing", "unknown-property"],
)
async def test_a_chat_tool_whose_arguments_fail_its_schema_never_runs(args: str) -> None:
    executor = Executor()
    policy = Policy()
    script = Script([[tool_call(0, "lookup", args, "c1")], ["Let me retry."]])
    controller = chat(script, lookup(executor), policy=policy)
    await controller.send("look it up")
    assert executor.runs == []
    assert policy.asked == []
    call = recorded(controller, "c1")
    assert (call.status, call.error) == ("error", INVALID_ARGUMENTS)
    assert last_returns(script) == ("request", f"return:c1:failed:{INVALID_ARGUMENTS}")


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (ToolError("AK_TOOL_FORBIDDEN", "The glossary is offline."), "The glossary is offline."),
        (RuntimeError("secret connection string"), "Tool execution failed."),
    ],
    ids=["tool-error", "crash"],
)
async def test_an_executor_failure_is_recorded_and_shown_as_a_failed_tool(
    failure: Exception, error: str
) -> None:
    script = Script([[tool_call(0, "lookup", '{"word": "cat"}', "c1")], ["Sorry."]])
    controller = chat(script, lookup(Executor(failure)))
    await controller.send("look it up")
    call = recorded(controller, "c1")
    assert (call.status, call.error) == ("error", error)
    assert last_returns(script) == ("request", f"return:c1:failed:{error}")
    assert "secret" not in json.dumps([m.to_wire() for m in controller.state.messages])


# --- confirmation-gated chat tools ---------------------------------------------------------------


def mail_script() -> Script:
    return Script([["Sending. ", tool_call(1, "send_mail", '{"to": "a@b.c"}', "c1")], ["Handled."]])


async def test_a_gated_chat_tool_pauses_and_approval_runs_it_exactly_once() -> None:
    executor = Executor("sent")
    policy = Policy()
    script = mail_script()
    controller = chat(script, send_mail(executor), policy=policy)
    async with no_blocking():
        await controller.send("mail a@b.c")
        assert recorded(controller, "c1").status == "requires_confirmation"
        assert executor.runs == []
        await controller.approve("c1")
        await controller.approve("c1")  # no longer awaiting: nothing happens
    assert executor.runs == [{"to": "a@b.c"}]
    assert len(script.seen) == 2
    assert last_returns(script) == ("request", "return:c1:success:sent")
    call = recorded(controller, "c1")
    assert (call.status, call.result) == ("complete", "sent")
    assert controller.state.messages[-1].content == "Handled."
    assert policy.asked == [
        ("c1", "send_mail", "propose", "send_mail"),
        ("c1", "send_mail", "execute", "send_mail"),
    ]


async def test_denying_a_gated_chat_tool_never_runs_it() -> None:
    executor = Executor("sent")
    script = mail_script()
    controller = chat(script, send_mail(executor))
    await controller.send("mail a@b.c")
    await controller.deny("c1", "not now")
    assert executor.runs == []
    assert last_returns(script) == ("request", "return:c1:denied:Permission denied: not now")
    assert recorded(controller, "c1").error == "Permission denied: not now"
    assert controller.state.messages[-1].content == "Handled."


async def test_a_gated_chat_tool_that_fails_on_approval_tells_the_model() -> None:
    executor = Executor(ToolError("AK_TOOL_FORBIDDEN", "Mailbox full."))
    script = mail_script()
    controller = chat(script, send_mail(executor))
    await controller.send("mail a@b.c")
    await controller.approve("c1")
    assert len(executor.runs) == 1
    assert recorded(controller, "c1").error == "Mailbox full."
    assert last_returns(script) == ("request", "return:c1:failed:Mailbox full.")


async def test_a_gated_chat_tool_with_invalid_arguments_is_never_put_to_a_human() -> None:
    executor = Executor("sent")
    policy = Policy()
    script = Script([[tool_call(0, "send_mail", '{"to": 7}', "c1")], ["Fixed."]])
    controller = chat(script, send_mail(executor), policy=policy)
    await controller.send("mail someone")
    call = recorded(controller, "c1")
    assert (call.status, call.error) == ("error", INVALID_ARGUMENTS)
    assert executor.runs == []
    assert policy.asked == []
    # The model hears of it in one follow-up run.
    assert last_returns(script) == ("request", f"return:c1:failed:{INVALID_ARGUMENTS}")
    assert controller.state.messages[-1].content == "Fixed."


# --- the chat's policy on every call ------------------------------------------------------------


@pytest.mark.parametrize("tool", ["add", "lookup"], ids=["agent-tool", "chat-tool"])
async def test_a_policy_denial_in_phase_execute_blocks_the_call(tool: str) -> None:
    own = OwnTools()
    executor = Executor()
    policy = Policy(deny={(tool, "execute"): "missing-capability"})
    args = '{"a": 1, "b": 2}' if tool == "add" else '{"word": "cat"}'
    script = Script([[tool_call(0, tool, args, "c1")], ["I may not."]])
    controller = chat(script, lookup(executor), policy=policy, own=own)
    await controller.send("go")
    assert own.runs == []
    assert executor.runs == []
    denial = "Permission denied: missing-capability"
    call = recorded(controller, "c1")
    assert (call.status, call.error) == ("error", denial)
    assert last_returns(script) == ("request", f"return:c1:denied:{denial}")
    assert [phase for _, _, phase, _ in policy.asked] == ["execute"]
    assert controller.state.messages[-1].content == "I may not."


@pytest.mark.parametrize("tool", ["delete", "send_mail"], ids=["agent-tool", "chat-tool"])
async def test_a_policy_denial_in_phase_propose_ends_a_gated_call_unrun(tool: str) -> None:
    own = OwnTools()
    executor = Executor("sent")
    policy = Policy(deny={(tool, "propose"): "session-mismatch"})
    args = '{"path": "a.txt"}' if tool == "delete" else '{"to": "a@b.c"}'
    script = Script([[tool_call(0, tool, args, "c1")], ["I may not."]])
    controller = chat(script, send_mail(executor), policy=policy, own=own)
    await controller.send("go")
    denial = "Permission denied: session-mismatch"
    call = recorded(controller, "c1")
    assert (call.status, call.error) == ("error", denial)
    await controller.approve("c1")  # not awaiting confirmation: nothing runs
    assert own.runs == []
    assert executor.runs == []
    assert [phase for _, _, phase, _ in policy.asked] == ["propose"]
    # One follow-up run tells the model, which answers.
    assert len(script.seen) == 2
    assert last_returns(script) == ("request", f"return:c1:denied:{denial}")
    assert controller.state.messages[-1].content == "I may not."


async def test_a_model_that_proposes_a_refused_call_again_gets_one_follow_up_only() -> None:
    policy = Policy(deny={("delete", "propose"): "missing-capability"})
    script = Script(
        [
            [tool_call(0, "delete", '{"path": "a"}', "c1")],
            [tool_call(0, "delete", '{"path": "a"}', "c2")],
            ["never asked"],
        ]
    )
    controller = chat(script, policy=policy)
    await controller.send("delete a")
    assert len(script.seen) == 2
    assert [recorded(controller, i).status for i in ("c1", "c2")] == ["error", "error"]
    assert controller.state.status == "idle"


async def test_an_approved_agent_tool_is_authorized_once_in_each_phase() -> None:
    own = OwnTools()
    policy = Policy()
    script = Script([[tool_call(0, "delete", '{"path": "a.txt"}', "c1")], ["Deleted."]])
    controller = chat(script, policy=policy, own=own)
    await controller.send("delete a.txt")
    await controller.approve("c1")
    assert own.runs == ["delete"]
    assert policy.asked == [("c1", "delete", "propose", None), ("c1", "delete", "execute", None)]
    assert recorded(controller, "c1").result == "deleted a.txt"


async def test_a_capability_policy_guards_agent_and_chat_tools_alike() -> None:
    granted = ["glossary.read", "mail.send"]
    policy = create_capability_policy(
        session_id="s1",
        get_context=lambda: PolicyContext("s1", tuple(granted)),
        requirements={"lookup": ["glossary.read"], "add": ["math"], "send_mail": ["mail.send"]},
        now=lambda: 0,
    )
    own = OwnTools()
    lookups, mails = Executor("a small cat"), Executor("sent")
    both = {
        **tool_call(0, "lookup", '{"word": "cat"}', "c1"),
        **tool_call(1, "add", '{"a": 1, "b": 1}', "c2"),
    }
    script = Script([[both], [tool_call(0, "send_mail", '{"to": "a@b.c"}', "c3")], ["Done."]])
    controller = chat(
        script, lookup(lookups), send_mail(mails), policy=policy.authorize_tool_call, own=own
    )
    await controller.send("look up cat, add, then mail")
    assert recorded(controller, "c3").status == "requires_confirmation"
    granted.remove("mail.send")  # revoked between the proposal and the approval
    await controller.approve("c3")
    assert lookups.runs == [{"word": "cat"}]
    assert own.runs == []
    assert mails.runs == []
    denial = "Permission denied: missing-capability"
    assert [recorded(controller, i).error for i in ("c1", "c2", "c3")] == [None, denial, denial]
    # One chat message holds the turn's two steps: the model is shown every return at once.
    assert last_returns(script) == (
        "request",
        "return:c1:success:a small cat",
        f"return:c2:denied:{denial}",
        f"return:c3:denied:{denial}",
    )
    traces = [(t.tool_call_id, t.phase, t.reason) for t in policy.traces]
    # The first two ran side by side, in either order.
    assert sorted(traces[:2]) == [
        ("c1", "execute", "allowed"),
        ("c2", "execute", "missing-capability"),
    ]
    assert traces[2:] == [("c3", "propose", "allowed"), ("c3", "execute", "missing-capability")]
    assert controller.state.messages[-1].content == "Done."


# --- names --------------------------------------------------------------------------------------


def colliding(name: str) -> ChatTool:
    return ChatTool(name=name, description="Clashes.", execute=Executor())


@pytest.mark.parametrize("name", ["add", "delete"])
async def test_a_chat_tool_named_like_an_agent_tool_is_a_configuration_error(name: str) -> None:
    script = Script([["never"]])
    agent: Agent[None, str] = Agent(script.model())
    OwnTools().install(agent)
    adapter = from_pydantic_ai(agent)
    with pytest.raises(ConfigurationError) as raised:
        ChatController(ChatConfig(adapter=adapter, tools=(colliding(name),)))
    assert raised.value.code == "AK_CONFIG_INVALID"
    assert name not in raised.value.message
    controller = ChatController(ChatConfig(adapter=adapter, tools=(lookup(),)))
    with pytest.raises(ConfigurationError):
        controller.update_config(controller.config.with_changes(tools=(colliding(name),)))
    assert [tool.name for tool in controller.config.tools] == ["lookup"]
    request = AdapterRequest(
        messages=(user("hi"), placeholder()), context=AdapterContext(tools=(colliding(name),))
    )
    with pytest.raises(ConfigurationError):
        adapter.create_source(request)
    assert script.seen == []


def test_a_chat_tool_named_answer_commit_clashes_with_an_analyst() -> None:
    script = Script([["never"]])
    adapter = from_pydantic_ai(create_agent(script.model(), name="analyst"))
    with pytest.raises(ConfigurationError):
        ChatController(ChatConfig(adapter=adapter, tools=(colliding("answer_commit"),)))
    ChatController(ChatConfig(adapter=adapter, tools=(lookup(),)))


# --- properties ---------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=40)
@given(result=_JSON)
def test_the_model_is_shown_exactly_the_result_the_chat_records(result: Any) -> None:
    async def scenario() -> tuple[ToolCall, Sequence[str]]:
        script = Script([[tool_call(0, "lookup", '{"word": "cat"}', "c1")], ["ok"]])
        controller = chat(script, lookup(Executor(result)))
        await controller.send("go")
        return recorded(controller, "c1"), last_returns(script)

    call, returns = anyio.run(scenario)
    shown = result if isinstance(result, str) else js_stringify(result)
    assert (call.status, call.result) == ("complete", shown)
    assert returns == ("request", f"return:c1:success:{shown}")
