"""In the browser, over the docs chat: a model's answer shows while the model still writes."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest
from playwright.sync_api import Browser, Page, expect
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentskit_chat.agents import PydanticAIGenerator
from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.server import create_docs_assistant_app
from tests.assistant._support import clock, write_docs
from tests.web._support import serving

CHUNKS = 20
GAP_S = 0.05
#: When the model wrote each chunk (wall clock, comparable with the page's ``Date.now()``).
PRODUCED: list[float] = []


def _model() -> FunctionModel:
    def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("unused")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for n in range(CHUNKS):
            if n:
                await anyio.sleep(GAP_S)
            PRODUCED.append(time.time())
            yield f"chunk{n} of the answer [1]. "

    return FunctionModel(whole, stream_function=stream, model_name="slow")


@pytest.fixture(scope="module")
def slow_docs_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    docs = write_docs(tmp_path_factory.mktemp("docs"))
    generator = PydanticAIGenerator(_model())
    assistant = create_docs_assistant(docs, generator=generator, now=clock)
    with serving(create_docs_assistant_app(assistant)) as url:
        yield url


def test_the_page_shows_the_first_chunk_before_the_model_writes_the_last(
    browser: Browser, slow_docs_url: str
) -> None:
    page: Page = browser.new_page()
    try:
        page.goto(slow_docs_url)
        expect(page.locator("body[data-ready=true]")).to_be_attached()
        page.evaluate(
            """() => {
            window.__firstSeen = null;
            const log = document.getElementById("log");
            new MutationObserver(() => {
              if (window.__firstSeen === null && log.textContent.includes("chunk0")) {
                window.__firstSeen = Date.now();
              }
            }).observe(log, {childList: true, subtree: true, characterData: true});
          }"""
        )
        PRODUCED.clear()
        page.get_by_label("Your message").fill("How do I see every render in the log?")
        page.locator("#send").click()
        expect(page.locator("article.message.assistant").last).to_contain_text("chunk19")
        first_seen = page.evaluate("window.__firstSeen")
    finally:
        page.close()
    assert len(PRODUCED) == CHUNKS
    assert first_seen is not None
    # The page showed the first words while the model had more than half its answer to write.
    assert first_seen / 1000 < PRODUCED[CHUNKS // 2]
