"""``/docs`` pages keep only the links the chat page would keep: relative, http(s), mailto."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.server import create_docs_assistant_app
from agentskit_chat.storage import open_chat_stores
from tests.assistant._support import DOCS, clock, serve, write_docs

pytestmark = pytest.mark.anyio

LINKS = """# Links

Read [the setup](guide.md#setup), [the site](https://example.com/a),
[write to us](mailto:help@example.com), [this section](#links) and
[the options](/docs/reference/options).

Never [an image made a page](data:image/png;base64,iVBORw0KGgo=),
[a page on another host](//evil.example/login), [a script](javascript:alert(1)),
[another scheme](ftp://evil.example/x) or [a file](file:///etc/passwd).
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_docs_page_drops_data_and_protocol_relative_links(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs", {**DOCS, "links.md": LINKS})
    stores = open_chat_stores("memory:")
    async with (
        stores,
        create_docs_assistant(docs, now=clock) as assistant,
        serve(create_docs_assistant_app(assistant, stores=stores)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        page = await client.get("/docs/links")
    assert page.status_code == 200
    hrefs = re.findall(r'<a href="([^"]*)"', page.text)
    assert hrefs == [
        "/docs/guide#setup",
        "https://example.com/a",
        "mailto:help@example.com",
        "#links",
        "/docs/reference/options",
    ]
    for text in ("an image made a page", "a page on another host", "another scheme"):
        assert text in page.text  # the words stay, as text
    assert "evil.example" not in "".join(hrefs)
    assert "data:" not in "".join(hrefs)
