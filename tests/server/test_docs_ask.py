"""The docs chat reaches its Ask service in process: a model's tokens stream as they come."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentskit_chat.agents import PydanticAIGenerator
from agentskit_chat.assistant import Caller, DocsAssistant, create_docs_assistant
from agentskit_chat.protocol import decode_assistant_content
from agentskit_chat.runtime import AdapterRequest, ChatMessage
from agentskit_chat.server import create_app
from agentskit_chat.server._docs_ask import InProcessAskAdapter
from agentskit_chat.server._docs_chat import docs_chat_target
from tests.assistant._support import NOW, clock, serve, write_docs
from tests.server._chat_support import JSON, submit

pytestmark = pytest.mark.anyio

CHUNKS = 20
GAP_S = 0.05


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class SlowModel:
    """A ``FunctionModel`` writing ``CHUNKS`` pieces ``GAP_S`` apart; it notes when it wrote
    each one."""

    def __init__(self) -> None:
        self.produced: list[float] = []

    def model(self) -> FunctionModel:
        def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return ModelResponse(parts=[TextPart("unused")])

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
            for n in range(CHUNKS):
                if n:
                    await anyio.sleep(GAP_S)
                self.produced.append(time.monotonic())
                yield f"part{n} [1] "

        return FunctionModel(whole, stream_function=stream, model_name="slow")


@pytest.fixture
async def slow(tmp_path: Path) -> AsyncIterator[tuple[DocsAssistant, SlowModel]]:
    model = SlowModel()
    generator = PydanticAIGenerator(model.model())
    docs = write_docs(tmp_path / "docs")
    async with create_docs_assistant(docs, generator=generator, now=clock) as assistant:
        yield assistant, model


def _request(text: str) -> AdapterRequest:
    return AdapterRequest(
        messages=(ChatMessage(id="u1", role="user", content=text, created_at=NOW),)
    )


async def test_the_first_chunk_arrives_before_the_model_writes_the_last(
    slow: tuple[DocsAssistant, SlowModel],
) -> None:
    assistant, model = slow
    adapter = InProcessAskAdapter(assistant.service, Caller("in-process", "chat"))
    source = adapter.create_source(_request("How do I set the cache size?"))
    arrived: list[float] = []
    records: list[str] = []
    async for chunk in source.stream():
        if chunk.type == "text" and chunk.content:
            arrived.append(time.monotonic())
            records.append(chunk.content)
    assert len(model.produced) == CHUNKS
    assert arrived and arrived[0] < model.produced[-1]
    # The records make one valid ordered-content envelope: the text, then the citations.
    content = decode_assistant_content("".join(records))
    assert content.ok and content.complete
    kinds = [type(part).__name__ for part in content.parts]
    assert kinds[0] == "TextPart" and kinds[-1] == "ComponentPart"


async def test_a_refusal_and_an_aborted_source(slow: tuple[DocsAssistant, SlowModel]) -> None:
    assistant, model = slow
    adapter = InProcessAskAdapter(assistant.service, Caller("in-process", "chat"))
    refused = [
        c async for c in adapter.create_source(_request("What is the capital of Peru?")).stream()
    ]
    assert [(c.type, c.content) for c in refused] == [("error", "Ask request failed (422).")]
    source = adapter.create_source(_request("How do I set the cache size?"))
    source.abort()
    assert [c async for c in source.stream()] == []
    assert model.produced == []  # an aborted source never asks the model


async def test_over_api_chat_the_page_gets_the_first_words_before_the_model_ends(
    slow: tuple[DocsAssistant, SlowModel],
) -> None:
    assistant, model = slow
    app = create_app(docs_chat_target(assistant))
    first_text: float | None = None
    async with serve(app) as url, httpx.AsyncClient(timeout=30) as http:
        body = submit(session_id="stream-1", turn_id="t1", text="How do I set the cache size?")
        async with http.stream("POST", f"{url}/api/chat", content=body, headers=JSON) as reply:
            assert reply.status_code == 200
            async for line in reply.aiter_lines():
                if not line:
                    continue
                event: dict[str, Any] = json.loads(line)
                if first_text is None and "part0" in json.dumps(event.get("payload", {})):
                    first_text = time.monotonic()
    assert len(model.produced) == CHUNKS
    assert first_text is not None and first_text < model.produced[-1]
