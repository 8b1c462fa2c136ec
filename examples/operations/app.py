"""Protected operations: reading a service's status and restarting it need different rights.

``operations`` offers "Read status" and "Restart operation" for ``checkout-api``; a model
can propose the same calls ("restart checkout-api"). Each call needs a human's confirmation,
and a capability policy fed by the host's trusted context decides, at proposal and again at
execution: ``operations.read`` to read, ``operations.restart`` to restart. A restart is sent
to the service with the idempotency key ``<sessionId>:<toolCallId>``, and every decision is
written to an audit trace (never a token, secret or credential): ``trace`` shows it, and
``--trace-file`` appends it as JSON lines. (``operations`` and ``trace`` answer with or
without their slash.)

Run it (no API key needed: a scripted pydantic-ai model answers by default)::

    python examples/operations/app.py                          # an operator: read and restart
    python examples/operations/app.py --identity viewer        # read only: restarts are refused
    agentskit-chat serve examples/operations/app.py:chat       # AGENTSKIT_OPERATIONS_IDENTITY
    agentskit-chat chat examples/operations/app.py:chat
    python examples/operations/app.py --model openai:gpt-4o-mini
"""

from __future__ import annotations

import argparse
import contextvars
import json
import os
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolReturnPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from agentskit_chat import serve
from agentskit_chat.actions import PolicyContext, PolicyTrace, create_capability_policy
from agentskit_chat.agents import from_pydantic_ai, resolve_model
from agentskit_chat.conversation import (
    ChatDefinition,
    ChatPage,
    ConversationDefinition,
    ConversationStateDefinition,
    Route,
    RouteContext,
    define_chat,
    with_action_policy,
)
from agentskit_chat.errors import ToolError
from agentskit_chat.protocol import create_assistant_content_encoder
from agentskit_chat.runtime import ChatConfig, ChatTool

__all__ = [
    "IDENTITIES",
    "OPERATION_SCHEMA",
    "READ_TOOL",
    "RESTART_TOOL",
    "HostContext",
    "InMemoryOperationsService",
    "OperationStatus",
    "OperationsService",
    "TraceCapture",
    "build_operations_chat",
    "chat",
    "main",
    "safe_id",
]

READ_TOOL: Final = "read-operation-status"
RESTART_TOOL: Final = "restart-operation"
#: Both tools take one operation id.
OPERATION_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {"id": {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,63}$"}},
    "required": ["id"],
    "additionalProperties": False,
}
#: The fields whose values never reach the trace.
REDACTED_FIELDS: Final = frozenset({"token", "secret", "credential"})
_MAX_DETAIL_BYTES: Final = 65_536
_MAX_SHOWN: Final = 40
_SYSTEM_PROMPT: Final = (
    "You operate the checkout-api service. To read its status call read-operation-status, to "
    "restart it call restart-operation, each with {'id': 'checkout-api'}. A human approves "
    "every call; report the tool's result in one sentence."
)
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._:-]+")
#: An operation the scripted model recognises, as written (the tools' schema checks it).
_OPERATION: Final = re.compile(r"\b([A-Za-z][A-Za-z0-9-]{0,63}-api)\b", re.IGNORECASE)


def safe_id(prefix: str, identity: str) -> str:
    """``<prefix>-<identity>`` as a safe identifier (characters outside ``A-Za-z0-9._:-``
    become ``-``; at most 128)."""
    return _UNSAFE.sub("-", f"{prefix}-{identity}")[:128]


# --- the host's trusted context ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostContext:
    """The caller as the host authenticated them (never read from a prompt or a tool call)."""

    session_id: str
    customer_id: str
    capabilities: tuple[str, ...] = ()


#: The demo's identities: ``operator`` may read and restart, ``viewer`` may only read.
IDENTITIES: Final[Mapping[str, HostContext]] = {
    "operator": HostContext(
        "operations-demo", "operator-demo", ("operations.read", "operations.restart")
    ),
    "viewer": HostContext("operations-viewer", "viewer-demo", ("operations.read",)),
}

# --- the service -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OperationStatus:
    """What the service reports about one operation."""

    id: str
    status: Literal["healthy", "degraded"]
    revision: int


class OperationsService(Protocol):
    """Your operations API."""

    async def read_status(self, operation_id: str) -> OperationStatus:
        """The operation's current status."""
        ...

    async def restart(self, operation_id: str, idempotency_key: str) -> OperationStatus:
        """Restart it; a repeated ``idempotency_key`` returns the first result and restarts
        nothing."""
        ...


@dataclass
class InMemoryOperationsService:
    """The demo's operations API: restarts are counted, and keyed for idempotency."""

    restarts: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    results: dict[str, OperationStatus] = field(default_factory=dict)

    async def read_status(self, operation_id: str) -> OperationStatus:
        """Healthy, at revision ``restarts + 1``."""
        return OperationStatus(operation_id, "healthy", len(self.restarts) + 1)

    async def restart(self, operation_id: str, idempotency_key: str) -> OperationStatus:
        """Restart once per key."""
        self.keys.append(idempotency_key)
        known = self.results.get(idempotency_key)
        if known is not None:
            return known
        self.restarts.append(operation_id)
        result = OperationStatus(operation_id, "healthy", len(self.restarts) + 1)
        self.results[idempotency_key] = result
        return result


# --- the audit trace -----------------------------------------------------------------------------


def _redacted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            key: "[REDACTED]" if key.lower() in REDACTED_FIELDS else _redacted(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redacted(item) for item in value]
    return value


@dataclass
class TraceCapture:
    """An ordered audit trace: ``{id, sequence, at, category, parentId?, detail}`` records.

    Categories are ``policy`` (each authorization decision), ``action`` (a confirmed call
    about to run) and ``lifecycle`` (its result or error). A detail field named ``token``,
    ``secret`` or ``credential`` (in any letter case, at any depth) is stored as
    ``[REDACTED]``; error messages are never recorded, only their class name.

    Args:
        path: A file each record is appended to as one JSON line, if any.
    """

    path: Path | None = None
    records: list[dict[str, Any]] = field(default_factory=list)

    def append(
        self, category: str, detail: Mapping[str, Any], parent_id: str | None = None
    ) -> dict[str, Any]:
        """Record one entry and return it."""
        if parent_id is not None and all(r["id"] != parent_id for r in self.records):
            raise ValueError("Trace parent must refer to an earlier record.")
        clean = _redacted(detail)
        text = json.dumps(clean, separators=(",", ":"), ensure_ascii=False)
        if len(text.encode()) > _MAX_DETAIL_BYTES:
            raise ValueError("Trace detail exceeds 64 KiB.")
        sequence = len(self.records)
        record: dict[str, Any] = {
            "id": f"trace-{sequence}",
            "sequence": sequence,
            "at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "category": category,
            "detail": clean,
        }
        if parent_id is not None:
            record["parentId"] = parent_id
        self.records.append(record)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as log:
                log.write(json.dumps(record, ensure_ascii=False) + "\n")
        return record

    def policy(self, trace: PolicyTrace) -> None:
        """Record a policy decision (the ``on_trace`` observer of the capability policy)."""
        self.append(
            "policy",
            {
                "policyTraceId": trace.id,
                "toolCallId": trace.tool_call_id,
                "action": trace.action,
                "phase": trace.phase,
                "decision": trace.decision,
                "reason": trace.reason,
                "requiredCapabilities": list(trace.required_capabilities),
            },
        )

    def render(self) -> str:
        """The newest records, one line each: ``category:phase-or-status`` and the call."""
        if not self.records:
            return "The audit trace is empty: run an operation first (type operations)."
        lines = ["Audit trace (newest last):", ""]
        for record in self.records[-_MAX_SHOWN:]:
            detail = record["detail"]
            step = detail.get("status") or detail.get("phase") or ""
            extra = detail.get("decision") or detail.get("operationId") or ""
            lines.append(
                f"- `{record['id']}` **{record['category']}:{step}** {detail.get('action', '')}"
                f" {extra}".rstrip()
            )
        return "\n".join(lines)


# --- the tools -----------------------------------------------------------------------------------

#: The call the policy has just allowed to execute, as ``(tool call id, action)``: the tool
#: executors only receive their arguments, and the idempotency key needs the call's id.
_EXECUTING: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "operations_executing", default=None
)


def _executing(action: str) -> str:
    bound = _EXECUTING.get()
    if bound is None or bound[1] != action:
        # Fail closed: a restart is never sent without its idempotency key.
        raise ToolError("AK_TOOL_FORBIDDEN", "The call was not authorized to run.")
    _EXECUTING.set(None)
    return bound[0]


def _tools(
    context: HostContext, service: OperationsService, traces: TraceCapture
) -> tuple[ChatTool, ...]:
    async def read_status(args: Mapping[str, Any]) -> str:
        call_id = _executing(READ_TOOL)
        status = await service.read_status(args["id"])
        traces.append(
            "lifecycle",
            {
                "action": READ_TOOL,
                "phase": "result",
                "toolCallId": call_id,
                "operationId": status.id,
                "status": status.status,
                "revision": status.revision,
            },
        )
        return f"{status.id} is {status.status} at revision {status.revision}."

    async def restart(args: Mapping[str, Any]) -> str:
        call_id = _executing(RESTART_TOOL)
        operation = args["id"]
        base = {"action": RESTART_TOOL, "toolCallId": call_id}
        traces.append("action", {**base, "phase": "confirmed-execution", "operationId": operation})
        try:
            status = await service.restart(operation, f"{context.session_id}:{call_id}")
        except Exception as error:
            traces.append(
                "lifecycle", {**base, "phase": "error", "errorType": type(error).__name__}
            )
            raise
        traces.append(
            "lifecycle",
            {
                **base,
                "phase": "result",
                "operationId": status.id,
                "status": status.status,
                "revision": status.revision,
            },
        )
        return f"{status.id} restarted at revision {status.revision}."

    return (
        ChatTool(
            name=READ_TOOL,
            description="Read the current operation status after operator confirmation.",
            parameters=OPERATION_SCHEMA,
            execute=read_status,
            requires_confirmation=True,
        ),
        ChatTool(
            name=RESTART_TOOL,
            description="Restart an operation after explicit confirmation.",
            parameters=OPERATION_SCHEMA,
            execute=restart,
            requires_confirmation=True,
        ),
    )


# --- the scripted model --------------------------------------------------------------------------


async def _script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    last = messages[-1]
    returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
    if returns:
        yield " ".join(str(part.content) for part in returns)
        return
    prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), "")
    written = prompt if isinstance(prompt, str) else ""
    text = written.lower()
    found = _OPERATION.search(written)
    tool = RESTART_TOOL if "restart" in text else READ_TOOL if "status" in text else None
    if tool is None or found is None:
        yield (
            "I'm the operations desk's scripted assistant. Ask for the status of checkout-api, "
            "ask me to restart checkout-api, or type operations. trace shows the audit trace."
        )
        return
    yield "This needs your confirmation. "
    yield {0: DeltaToolCall(name=tool, json_args=json.dumps({"id": found.group(1)}))}


def _scripted_model() -> FunctionModel:
    def unused(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("the chat streams")

    return FunctionModel(unused, stream_function=_script)


# --- the chat definition -------------------------------------------------------------------------


def _command(word: str) -> Callable[[str], bool]:
    """Matches ``word`` or ``/word``, whichever the user types."""
    accepted = {word, f"/{word}"}
    return lambda text: text.strip().lower() in accepted


def _operations_offer(text: str, context: RouteContext) -> str:
    identity = context.message_id or context.session_id
    frame = {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": "choice-list",
        "instanceId": safe_id("operations", identity),
        "props": {
            "prompt": "Operation checkout-api",
            "choices": [
                {
                    "id": "status",
                    "label": "Read status",
                    "action": {"name": READ_TOOL, "input": {"id": "checkout-api"}},
                },
                {
                    "id": "restart",
                    "label": "Restart operation",
                    "description": "Requires restart capability and confirmation.",
                    "action": {"name": RESTART_TOOL, "input": {"id": "checkout-api"}},
                },
            ],
        },
        "fallback": {"kind": "choice-list", "summary": "Read or restart checkout-api."},
    }
    return create_assistant_content_encoder().encode({"kind": "component", "frame": frame})


def build_operations_chat(
    *,
    context: HostContext = IDENTITIES["operator"],
    service: OperationsService | None = None,
    traces: TraceCapture | None = None,
    model: Model | str | None = None,
) -> ChatDefinition:
    """The operations chat for one authenticated caller.

    Args:
        context: The caller, from the host's authentication (build the chat once per
            authenticated session in a host with real identities).
        service: The operations API; a new in-memory one by default.
        traces: Where the audit trace goes; a new in-memory capture by default.
        model: A pydantic-ai model or model string; the scripted model by default.
    """
    api = service if service is not None else InMemoryOperationsService()
    audit = traces if traces is not None else TraceCapture()

    def observe(trace: PolicyTrace) -> None:
        audit.policy(trace)
        if trace.phase == "execute" and trace.decision == "allow":
            _EXECUTING.set((trace.tool_call_id, trace.action))

    policy = create_capability_policy(
        session_id=context.session_id,
        get_context=lambda: PolicyContext(context.session_id, context.capabilities),
        requirements={READ_TOOL: ["operations.read"], RESTART_TOOL: ["operations.restart"]},
        on_trace=observe,
    )
    agent: Agent[None, str] = Agent(
        resolve_model(model) if model is not None else _scripted_model()
    )
    definition = define_chat(
        id="operations-reference",
        chat=ChatConfig(
            adapter=from_pydantic_ai(agent),
            tools=_tools(context, api, audit),
            system_prompt=_SYSTEM_PROMPT,
        ),
        conversation=ConversationDefinition(
            initial="ready",
            states={"ready": ConversationStateDefinition(on={"operations": "ready"})},
            routes=(
                Route(
                    id="operations",
                    event="operations",
                    match=_command("operations"),
                    response=_operations_offer,
                ),
                Route(
                    id="trace",
                    event="operations",
                    match=_command("trace"),
                    response=lambda text, route: audit.render(),
                ),
            ),
        ),
        page=ChatPage(
            title="Operations desk",
            subtitle=f"Signed in as {context.customer_id}: {', '.join(context.capabilities)}.",
            suggestions=("operations", "restart checkout-api", "trace"),
            placeholder="Ask about checkout-api, or type operations",
            logo="OP",
        ),
    )
    return with_action_policy(definition, policy)


def _identity(name: str) -> HostContext:
    context = IDENTITIES.get(name)
    if context is None:
        raise SystemExit(f"unknown identity {name!r}: use one of {', '.join(IDENTITIES)}")
    return context


def chat() -> ChatDefinition:
    """The demo chat: the identity ``AGENTSKIT_OPERATIONS_IDENTITY`` names (``operator`` by
    default, or ``viewer``), the trace file ``AGENTSKIT_TRACE_FILE`` (if set), and the model
    ``AGENTSKIT_MODEL`` (the scripted one when it is not set)."""
    trace_file = os.environ.get("AGENTSKIT_TRACE_FILE")
    return build_operations_chat(
        context=_identity(os.environ.get("AGENTSKIT_OPERATIONS_IDENTITY", "operator")),
        traces=TraceCapture(Path(trace_file) if trace_file else None),
        model=os.environ.get("AGENTSKIT_MODEL") or None,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """``python examples/operations/app.py [--identity viewer] [--trace-file F] [--model M]
    [--port N] [--store URL]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--identity", choices=sorted(IDENTITIES), default="operator")
    parser.add_argument("--trace-file", type=Path, help="Append the audit trace as JSON lines.")
    parser.add_argument("--model", help="A pydantic-ai model, e.g. openai:gpt-4o-mini.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--store", default="memory:", help="memory:, sqlite:///ops.db, ...")
    options = parser.parse_args(argv)
    model = options.model or os.environ.get("AGENTSKIT_MODEL") or None
    context = _identity(options.identity)
    traces = TraceCapture(options.trace_file)
    serve(
        lambda: build_operations_chat(context=context, traces=traces, model=model),
        port=options.port,
        store=options.store,
    )


if __name__ == "__main__":
    main()
