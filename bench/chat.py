"""Chat runtime benchmarks: controller turns, routed turns and answer_commit rendering.

Run with ``.venv/bin/python bench/chat.py``. The reference has no figure for these (its chat
controller is an upstream package it stubbed), so each figure is printed beside its floor only:

- **controller turn**: ``ChatController.send`` over an adapter that streams 20 text chunks,
  against the floor of iterating the same source and joining its text by hand. The ratio is the
  controller's own cost per turn (state snapshots, listeners, message records).
- **routed turn**: a command answered by a deterministic route through a chat session (prune,
  rebuild, route selection, decision cache, trace) and the controller, against a controller
  turn over an adapter that streams the same reply directly. The ratio is what routing adds.
- **render_answer**: a 1,000-row, 4-column table payload rendered as Markdown, against joining
  the same cells with ``|`` by hand (no validation, no escaping, no number formatting).

Each group runs in a fresh process; ``gc.collect()`` before each timed run, warm-up first, the
median of five runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio

from _harness import Row, collect, measure, print_table
from agentskit_chat.answer_commit import render_answer
from agentskit_chat.conversation import (
    ConversationDefinition,
    ConversationStateDefinition,
    command_route,
    create_chat_session,
    define_chat,
)
from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterRequest,
    ChatConfig,
    ChatController,
    ChatSource,
    StreamChunk,
)

TURNS = 200  # turns per measured run
CONVERSATION = 20  # turns per conversation (a new controller and session after that)
WORDS = [f"word{i} " for i in range(20)]


class _Source:
    def __init__(self, parts: list[str]) -> None:
        self._parts = parts

    async def stream(self) -> AsyncIterator[StreamChunk]:
        for part in self._parts:
            yield StreamChunk("text", content=part)
        yield StreamChunk("done")

    def abort(self) -> None:
        return None


class _Adapter:
    capabilities: AdapterCapabilities | None = None

    def __init__(self, parts: list[str]) -> None:
        self._parts = parts

    def create_source(self, request: AdapterRequest) -> ChatSource:
        return _Source(self._parts)


def _run(body: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    return lambda: anyio.run(body)


def group_controller() -> dict[str, float]:
    adapter = _Adapter(WORDS)

    async def ours() -> None:
        for _ in range(TURNS // CONVERSATION):
            controller = ChatController(ChatConfig(adapter=adapter))
            for turn in range(CONVERSATION):
                await controller.send(f"question {turn}")

    async def floor() -> None:
        history: list[str] = []
        for _ in range(TURNS // CONVERSATION):
            history.clear()
            for turn in range(CONVERSATION):
                history.append(f"question {turn}")
                text = ""
                async for chunk in _Source(WORDS).stream():
                    if chunk.type == "text" and chunk.content:
                        text += chunk.content
                history.append(text)

    return {
        "controller": measure(_run(ours), warmup=2, work=TURNS, rate=True),
        "controller_floor": measure(_run(floor), warmup=2, work=TURNS, rate=True),
    }


def group_routes() -> dict[str, float]:
    reply = "Routed reply."
    conversation = ConversationDefinition(
        initial="idle",
        states={"idle": ConversationStateDefinition(on={"ask": "idle"})},
        routes=(
            command_route(
                id="ask", command="/ask", event="ask", response=lambda text, context: reply
            ),
        ),
    )
    definition = define_chat(
        id="bench", chat=ChatConfig(adapter=_Adapter([])), conversation=conversation
    )
    direct = _Adapter([reply])

    async def ours() -> None:
        for index in range(TURNS // CONVERSATION):
            session = create_chat_session(definition, session_id=f"bench-{index}")
            controller = ChatController(session.chat)
            for _ in range(CONVERSATION):
                await controller.send("/ask")

    async def floor() -> None:
        for _ in range(TURNS // CONVERSATION):
            controller = ChatController(ChatConfig(adapter=direct))
            for _ in range(CONVERSATION):
                await controller.send("/ask")

    return {
        "routes": measure(_run(ours), warmup=2, work=TURNS, rate=True),
        "routes_floor": measure(_run(floor), warmup=2, work=TURNS, rate=True),
    }


def group_render() -> dict[str, float]:
    columns = ["name", "count", "share", "active"]
    data = [[f"item-{i}", i * 7, i / 1000, i % 2 == 0] for i in range(1000)]
    payload = {
        "rows": {"columns": columns, "data": data, "format": "markdown"},
        "basis": "All 1,000 items of the benchmark table, one row per item.",
    }
    calls = 20
    sink = 0

    def ours() -> None:
        nonlocal sink
        for _ in range(calls):
            sink += len(render_answer(payload))

    def floor() -> None:
        nonlocal sink
        for _ in range(calls):
            lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            lines.extend("| " + " | ".join(str(cell) for cell in row) + " |" for row in data)
            sink += len("\n".join(lines))

    return {
        "render": measure(ours, warmup=2, work=calls, rate=True),
        "render_floor": measure(floor, warmup=2, work=calls, rate=True),
        "sink": float(sink),
    }


GROUPS = {"controller": group_controller, "routes": group_routes, "render": group_render}
ROWS: list[Row] = [
    (
        "controller turn, 20 chunks (turns/s)",
        "controller",
        "controller_floor",
        None,
        "turns/s",
        True,
    ),
    ("routed turn through a session (turns/s)", "routes", "routes_floor", None, "turns/s", True),
    ("render_answer, 1,000-row table (calls/s)", "render", "render_floor", None, "calls/s", True),
]


def main() -> None:
    results = collect(__file__, __doc__, GROUPS, Path(__file__).parent)
    if results is None:
        return
    print_table(ROWS, results, {}, width=42)


if __name__ == "__main__":
    main()
