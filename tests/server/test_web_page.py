"""The page's routes without a browser: files, the theme and schemas made from Python, the docs
pages with the anchors citations point at, the security headers and the one authentication rule.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import jsonschema
import pytest

from agentskit_chat.assistant import DocsAssistant, create_docs_assistant
from agentskit_chat.components import STANDARD_COMPONENT_KEYS
from agentskit_chat.protocol.fixtures.component import STANDARD_COMPONENT_FRAME_FIXTURES
from agentskit_chat.server import create_docs_assistant_app
from agentskit_chat.server._web_page import CONTENT_SECURITY_POLICY
from agentskit_chat.web import ASSET_NAMES
from tests.assistant._support import clock, serve, write_docs

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def assistant(tmp_path: Path) -> AsyncIterator[DocsAssistant]:
    async with create_docs_assistant(write_docs(tmp_path), now=clock) as opened:
        yield opened


async def test_the_page_and_every_file_are_served_with_their_type_and_policy(
    assistant: DocsAssistant,
) -> None:
    # index.html is the page's template: it is served, filled in, at / only.
    names = sorted(ASSET_NAMES - {"index.html"})
    assert "app.js" in names and "vendor/marked.esm.js" in names
    async with (
        serve(create_docs_assistant_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        page = await client.get("/")
        template = await client.get("/static/index.html")
        files = {name: await client.get(f"/static/{name}") for name in names}
        head = await client.head("/static/app.js")
        post = await client.post("/static/app.js")
    assert page.status_code == 200 and template.status_code == 404
    assert "{{" not in page.text and "<title>Docs assistant</title>" in page.text
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "<script>" not in page.text and 'type="module" src="static/app.js"' in page.text
    types = {
        ".js": "text/javascript",
        ".css": "text/css",
        ".html": "text/html",
        ".md": "text/markdown",
    }
    for name, response in files.items():
        assert response.status_code == 200, name
        assert response.headers["content-type"].startswith(types[name[name.rfind(".") :]])
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert head.status_code == 200 and head.content == b""
    assert post.status_code == 405


@pytest.mark.parametrize(
    "path",
    [
        "/static/nope.js",
        "/static/../pyproject.toml",
        "/static/%2e%2e/__init__.py",
        "/static/__init__.py",
        "/static/",
        "/docs/nope",
        "/docs/../pyproject",
        "/docs/guide.md",
    ],
)
async def test_anything_else_is_a_json_not_found(assistant: DocsAssistant, path: str) -> None:
    async with (
        serve(create_docs_assistant_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        got = await client.get(path)
    assert got.status_code == 404
    assert got.headers["content-type"].startswith("application/json")
    assert got.json()["error"]["code"] == "NOT_FOUND"


async def test_the_component_schemas_are_the_python_models_and_accept_every_fixture(
    assistant: DocsAssistant,
) -> None:
    async with (
        serve(create_docs_assistant_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        catalog = (await client.get("/static/components.json")).json()
    assert sorted(catalog) == sorted(STANDARD_COMPONENT_KEYS)
    assert len(STANDARD_COMPONENT_FRAME_FIXTURES) == 12
    for frame in STANDARD_COMPONENT_FRAME_FIXTURES:
        schema = catalog[frame["componentKey"]]["schema"]
        jsonschema.validate(frame["props"], schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**frame["props"], "smuggled": 1}, schema)
    assert catalog["choice-list"]["events"] == ["select"]


async def test_the_theme_is_css_variables_for_light_and_dark(assistant: DocsAssistant) -> None:
    async with (
        serve(create_docs_assistant_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        css = (await client.get("/static/theme.css")).text
    assert css.startswith(":root {")
    assert "--ak-color-bg: #ffffff;" in css
    assert "--ak-color-button: #2563eb;" in css
    assert "@media (prefers-color-scheme: dark)" in css


async def test_a_docs_page_has_the_anchor_of_every_cited_section(assistant: DocsAssistant) -> None:
    async with (
        serve(create_docs_assistant_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        answer = (
            await client.post(
                "/api/answer", json={"question": "Configuring the cache (Setup guide)"}
            )
        ).json()
        guide = await client.get("/docs/guide")
        nested = await client.get("/docs/reference/options")
    assert guide.status_code == 200
    assert guide.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert '<h1 id="setup-guide">Setup guide</h1>' in guide.text
    assert 'id="configuring-the-cache"' in guide.text and 'id="installing-the-widget"' in guide.text
    assert "<title>Setup guide</title>" in guide.text
    assert 'id="logging"' in nested.text
    hrefs = json.dumps(answer)
    assert "/docs/guide#configuring-the-cache" in hrefs


async def test_raw_html_in_a_page_is_text(tmp_path: Path) -> None:
    docs = write_docs(
        tmp_path,
        {
            "evil.md": "# Evil\n\n<script>alert(1)</script>\n\n"
            "[x](javascript:alert(1)) [ok](evil.md#evil)\n"
        },
    )
    async with (
        create_docs_assistant(docs, now=clock) as assistant,
        serve(create_docs_assistant_app(assistant)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        page = await client.get("/docs/evil")
    assert "<script>alert" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert 'href="javascript' not in page.text
    assert '<a href="/docs/evil#evil">ok</a>' in page.text


async def test_with_a_key_the_page_loads_but_the_docs_and_chat_need_it(
    assistant: DocsAssistant,
) -> None:
    transport = httpx.ASGITransport(
        create_docs_assistant_app(assistant, api_key="k-123"), client=("203.0.113.7", 40000)
    )
    async with httpx.AsyncClient(transport=transport, base_url="http://docs") as client:
        page = await client.get("/")
        script = await client.get("/static/app.js")
        doc = await client.get("/docs/guide")
        chat = await client.get("/api/chat", params={"sessionId": "s1"})
        keyed = await client.get("/docs/guide", headers={"authorization": "Bearer k-123"})
    assert (page.status_code, script.status_code) == (200, 200)
    assert doc.status_code == 401 and chat.status_code == 401
    assert keyed.status_code == 200
