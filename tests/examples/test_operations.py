"""The operations example over a real socket: separate rights, one restart per call, a clean
audit trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentskit_chat.server import create_app
from examples.operations import app as operations
from tests.assistant._support import serve
from tests.examples._support import Client, waiting

pytestmark = pytest.mark.anyio

SECRETS = ("token", "secret", "credential", "confirm-")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _steps(traces: operations.TraceCapture) -> list[str]:
    return [
        f"{r['category']}:{r['detail'].get('status') or r['detail']['phase']}"
        for r in traces.records
    ]


async def test_a_viewer_reads_the_status_but_cannot_restart() -> None:
    service = operations.InMemoryOperationsService()
    traces = operations.TraceCapture()
    definition = operations.build_operations_chat(
        context=operations.IDENTITIES["viewer"], service=service, traces=traces
    )
    async with serve(create_app(definition)) as url:
        client = Client(url)
        frame = (await client.send("/operations")).frame()
        restart = await client.select(frame, "restart")
        assert restart.diagnostics == ["ACTION_FORBIDDEN"]
        read = waiting(await client.select(frame, "status"))
        done = await client.decide(read["id"], "approve")
        asked = await client.send("please restart checkout-api")
    assert "checkout-api is healthy at revision 1." in [c.get("result") for c in done.calls()]
    (refused,) = [c for c in asked.calls() if c["name"] == operations.RESTART_TOOL]
    assert refused["status"] == "error"
    assert service.restarts == []
    assert service.keys == []
    denied = [r["detail"] for r in traces.records if r["detail"].get("decision") == "deny"]
    assert len(denied) == 2
    assert {d["reason"] for d in denied} == {"missing-capability"}


async def test_a_restart_approved_twice_on_two_workers_runs_once_with_one_key(
    tmp_path: Path,
) -> None:
    service = operations.InMemoryOperationsService()
    trace_file = tmp_path / "trace.jsonl"
    traces = operations.TraceCapture(trace_file)
    store = f"sqlite:///{tmp_path / 'chat.db'}"

    def app() -> object:
        return create_app(
            operations.build_operations_chat(service=service, traces=traces), store=store
        )

    async with serve(app()) as one, serve(app()) as two:
        client = Client(one)
        frame = (await client.send("/operations")).frame()
        call = waiting(await client.select(frame, "restart"))
        assert service.restarts == []  # the capability alone is not enough
        approved = await client.decide(call["id"], "approve")
        client.url = two
        again = await client.decide(call["id"], "approve")
        shown = (await client.send("trace")).answer
    assert "checkout-api restarted at revision 2." in [c.get("result") for c in approved.calls()]
    assert again.diagnostics == ["CONFIRMATION_UNAVAILABLE"]
    assert service.restarts == ["checkout-api"]
    assert service.keys == [f"operations-demo:{call['id']}"]
    assert _steps(traces) == [
        "policy:propose",
        "policy:execute",
        "action:confirmed-execution",
        "lifecycle:healthy",
    ]
    assert "action:confirmed-execution" in shown.replace("**", "")
    written = trace_file.read_text("utf-8")
    assert [json.loads(line)["id"] for line in written.splitlines()] == [
        f"trace-{n}" for n in range(4)
    ]
    for text in (written, shown):
        assert not any(secret in text.lower() for secret in SECRETS)


async def test_a_rejected_restart_never_runs_and_bad_arguments_are_refused() -> None:
    service = operations.InMemoryOperationsService()
    definition = operations.build_operations_chat(service=service)
    async with serve(create_app(definition)) as url:
        client = Client(url)
        call = waiting(await client.send("restart checkout-api"))
        rejected = await client.decide(call["id"], "reject")
        bad = await client.send("restart Checkout-API now")  # not a valid operation id
    assert [c["status"] for c in rejected.calls()] == ["error"]
    assert rejected.calls()[0]["error"].startswith("Permission denied")
    (malformed,) = [c for c in bad.calls() if c["id"] != call["id"]]
    assert malformed["status"] == "error"
    assert malformed["error"] == "Tool call arguments do not match the tool's schema."
    assert service.restarts == []


def test_the_trace_redacts_secret_fields_and_refuses_unknown_parents() -> None:
    traces = operations.TraceCapture()
    record = traces.append(
        "action",
        {"Token": "abc", "nested": {"secret": {"deep": 1}}, "list": [{"Credential": "x"}]},
    )
    assert record["detail"] == {
        "Token": "[REDACTED]",
        "nested": {"secret": "[REDACTED]"},
        "list": [{"Credential": "[REDACTED]"}],
    }
    assert record["at"].endswith("Z")
    assert traces.append("lifecycle", {"ok": True}, parent_id="trace-0")["id"] == "trace-1"
    with pytest.raises(ValueError, match="earlier"):
        traces.append("lifecycle", {}, parent_id="trace-9")
    with pytest.raises(ValueError, match="64 KiB"):
        traces.append("lifecycle", {"text": "é" * 40_000})
