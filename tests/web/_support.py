"""The web page's test rig: Debian's Chromium through Playwright, and real servers in threads.

Two servers: the docs assistant over a small docs folder (exact answers, choices, the Ask
backend with citations), and a "lab" chat whose scripted model streams what a test needs (a
slow answer to stop, every standard component, raw HTML, a gated action, a failure).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import pytest
import uvicorn
from playwright.sync_api import Browser, Page, expect
from starlette.applications import Starlette

from agentskit_chat.conversation import InMemorySessionStorage, define_chat
from agentskit_chat.protocol import create_assistant_content_encoder
from agentskit_chat.protocol.fixtures.component import STANDARD_COMPONENT_FRAME_FIXTURES
from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterRequest,
    ChatConfig,
    ChatSource,
    InMemoryChatMemory,
    StreamChunk,
    ToolAuthorization,
)
from agentskit_chat.server import create_chat_app, create_chat_page_app
from tests.server._chat_support import SUPPORT_OFFER_FRAME, support_ticket_tool

#: The flags every Chromium start gets (this machine's network is closed: no background calls).
CHROMIUM_ARGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)
#: Where screenshots are written (a CI artifact; not committed).
ARTIFACTS: Final = Path(os.environ.get("AGENTSKIT_ARTIFACTS", "build/artifacts"))
AXE: Final = Path(__file__).parent / "vendor" / "axe.min.js"


def chromium_path() -> str:
    """Debian's Chromium, or a skip (a failure in CI, where it is installed)."""
    path = os.environ.get("AGENTSKIT_CHROMIUM") or shutil.which("chromium")
    if path is None:
        message = "Chromium not available: apt-get install chromium (scripts/test-services.sh)"
        if os.environ.get("AGENTSKIT_REQUIRE_SERVICES"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@contextmanager
def chat_page(browser: Browser, url: str, *, heading: str | None = None) -> Iterator[Page]:
    """A fresh page on ``url`` (its own session), ready, with ``heading`` shown when given;
    fails on any script error of the page."""
    errors: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(15000)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(url)
        expect(page.locator("body[data-ready=true]")).to_be_attached()
        if heading is not None:
            expect(page.get_by_role("heading", name=heading)).to_be_visible()
        yield page
    finally:
        context.close()
    assert errors == []


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` under uvicorn on 127.0.0.1 (port 0) in a thread; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


# --- the lab chat ----------------------------------------------------------------------------

UNKNOWN_FRAME: Final = {
    "protocol": "agentskit.chat.component",
    "version": 1,
    "type": "render",
    "componentKey": "revenue-chart",
    "instanceId": "chart-1",
    "props": {"series": [1, 2, 3]},
    "fallback": {"kind": "chart", "summary": "Revenue rose 12%."},
}
TICKET_FRAME: Final = SUPPORT_OFFER_FRAME
INJECTION: Final = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def _content(*parts: Mapping[str, Any]) -> list[str]:
    encoder = create_assistant_content_encoder()
    return [encoder.encode(part) for part in parts]


class _Source:
    def __init__(self, lab: Lab, text: str) -> None:
        self._lab = lab
        self._text = text

    def abort(self) -> None:
        self._lab.aborts += 1

    async def stream(self) -> AsyncIterator[StreamChunk]:
        lab = self._lab
        if lab.fail_next:
            lab.fail_next = False
            raise RuntimeError("the model failed")
        text = self._text
        if text == "components":
            frames = [*STANDARD_COMPONENT_FRAME_FIXTURES, UNKNOWN_FRAME]
            chunks = _content(
                {"kind": "text", "text": "Every standard component:\n"},
                *({"kind": "component", "frame": frame} for frame in frames),
            )
        elif text == "support":
            chunks = _content(
                {"kind": "text", "text": "I can open a ticket for you."},
                {"kind": "component", "frame": TICKET_FRAME},
            )
        elif text == "slow":
            for index in range(40):
                yield StreamChunk("text", content=f"part {index} ")
                await anyio.sleep(0.25)
            chunks = []
        elif text.startswith("markdown"):
            chunks = [
                f"Raw HTML stays text: {INJECTION}\n\n**bold** and [a link](javascript:alert(1))"
            ]
        else:
            chunks = [f"Echo: {text}"]
        for chunk in chunks:
            yield StreamChunk("text", content=chunk)
        yield StreamChunk("done")


@dataclass
class Lab:
    """The lab chat's scripted model and its injected ticket service."""

    calls: int = 0
    aborts: int = 0
    fail_next: bool = False
    inputs: list[str] = field(default_factory=list)
    tickets: list[dict[str, Any]] = field(default_factory=list)
    capabilities: AdapterCapabilities | None = None

    def create_source(self, request: AdapterRequest) -> ChatSource:
        self.calls += 1
        last = next(m.content for m in reversed(request.messages) if m.role == "user")
        self.inputs.append(last)
        return _Source(self, last)

    async def create_ticket(self, args: Mapping[str, Any]) -> str:
        self.tickets.append(dict(args))
        return f"SUP-{len(self.tickets)}"


def lab_app(lab: Lab) -> Starlette:
    """The page, its files and a chat handler over in-memory stores, for ``lab``'s model."""
    tool = support_ticket_tool(lab.create_ticket)

    def authorize(call: Any, context: Any) -> ToolAuthorization:
        return ToolAuthorization(True)

    definition = define_chat(
        id="lab", chat=ChatConfig(adapter=lab, tools=(tool,), authorize_tool_call=authorize)
    )
    storage = InMemorySessionStorage()
    memories: dict[str, InMemoryChatMemory] = {}
    chat = create_chat_app(
        resolve_definition=lambda context, session_id: definition,
        session_storage=lambda context: storage,
        chat_memory=lambda context, session_id: memories.setdefault(
            session_id, InMemoryChatMemory()
        ),
    )
    return create_chat_page_app(chat)


__all__ = [
    "ARTIFACTS",
    "AXE",
    "CHROMIUM_ARGS",
    "INJECTION",
    "Lab",
    "chromium_path",
    "lab_app",
    "serving",
]
