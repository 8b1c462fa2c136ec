"""create_app mounted inside a bigger site (a Starlette ``Mount`` at ``/support``), over a real
uvicorn socket: every route, the key rule, the rate limits and the metrics work under the prefix
as they do at the root.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route

from agentskit_chat.server import RateLimits, create_app
from agentskit_chat.server._asgi import route_path
from agentskit_chat.tui._client import ChatTurnClient
from tests.assistant._support import serve
from tests.server._chat_support import JSON, lines, submit
from tests.server.test_app import Resources, chat

pytestmark = pytest.mark.anyio

KEY = "s3cret-key"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def home(request: Request) -> Response:
    return PlainTextResponse("the rest of the site")


def site(**options: object) -> Starlette:
    """A site with its own home page and the chat mounted at ``/support``."""
    return Starlette(
        routes=[Route("/", home), Mount("/support", app=create_app(chat(), **options))]  # type: ignore[arg-type]
    )


def body(number: int, text: str = "hello") -> bytes:
    return submit(
        session_id="mounted-1", turn_id=f"turn-{number}", event_id=f"event-{number}", text=text
    )


@pytest.mark.parametrize(
    ("path", "root_path", "expected"),
    [
        ("/support/api/chat", "/support", "/api/chat"),
        ("/support", "/support", "/"),
        ("/support/", "/support/", "/"),
        ("/api/chat", "", "/api/chat"),
        ("/supportive/api/chat", "/support", "/supportive/api/chat"),
        ("/other", "/support", "/other"),
    ],
)
def test_route_path_strips_the_mount(path: str, root_path: str, expected: str) -> None:
    assert route_path({"path": path, "root_path": root_path}) == expected


async def test_every_route_answers_under_the_mount() -> None:
    async with serve(site(rate_limits=None)) as url, httpx.AsyncClient(base_url=url) as client:
        bare = await client.get("/support")
        page = await client.get("/support/")
        script = await client.get("/support/static/app.js")
        words = await client.get("/support/static/page.json")
        health = await client.get("/support/healthz")
        answered = await client.post("/support/api/chat", content=body(1), headers=JSON)
        resumed = await client.get("/support/api/chat", params={"sessionId": "mounted-1"})
        outside = await client.get("/")
    assert bare.status_code == 307 and bare.headers["location"].endswith("/support/")
    assert page.status_code == 200
    # Relative addresses: the page finds its files and its chat under whatever prefix it has.
    assert 'src="static/app.js"' in page.text and 'href="static/app.css"' in page.text
    assert '"/static/' not in page.text
    assert script.status_code == 200 and 'const ENDPOINT = "api/chat";' in script.text
    assert words.json()["title"] == "Chat"
    assert health.status_code == 200
    assert answered.status_code == 200, answered.text
    reply = lines(answered.content)[-1]["payload"]["messages"][-1]["content"]
    assert reply.startswith("You said: hello")
    assert resumed.status_code == 200
    assert resumed.json()["payload"]["messages"][-1]["content"] == reply
    assert outside.text == "the rest of the site"


async def test_the_key_rule_holds_under_the_mount() -> None:
    async with (
        serve(site(api_key=KEY, rate_limits=None)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        page = await client.get("/support/")
        style = await client.get("/support/static/app.css")
        keyless = await client.post("/support/api/chat", content=body(1), headers=JSON)
        metrics = await client.get("/support/metrics")
        keyed = await client.post(
            "/support/api/chat",
            content=body(1),
            headers={**JSON, "authorization": f"Bearer {KEY}"},
        )
    assert page.status_code == 200 and style.status_code == 200  # the page is public
    assert keyless.status_code == 401
    assert metrics.status_code == 401  # the metrics are not public under a prefix either
    assert keyed.status_code == 200


async def test_rate_limits_and_metrics_count_the_mounted_routes() -> None:
    limits = RateLimits(request_burst=2, requests_per_second=0.001)
    async with serve(site(rate_limits=limits)) as url, httpx.AsyncClient(base_url=url) as client:
        statuses = [
            (await client.post("/support/api/chat", content=body(n), headers=JSON)).status_code
            for n in range(1, 5)
        ]
        refused = await client.post("/support/api/chat", content=body(9), headers=JSON)
        metrics = (await client.get("/support/metrics")).text
    assert statuses == [200, 200, 429, 429]
    assert refused.status_code == 429 and refused.headers["retry-after"]
    assert refused.json()["error"]["code"] == "REQUEST_RATE_LIMITED"
    counted = [
        line
        for line in metrics.splitlines()
        if line.startswith("agentskit_chat_rate_limited_total{")
    ]
    assert counted, "no 429 was counted"
    assert counted == [
        'agentskit_chat_rate_limited_total{code="REQUEST_RATE_LIMITED",route="/api/chat"} 3.0'
    ]


async def test_the_hosts_lifespan_opens_and_closes_a_mounted_chat() -> None:
    resources = Resources()
    chat_app = create_app(resources, rate_limits=None)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with chat_app.state.chat_site:
            yield

    host = Starlette(routes=[Mount("/support", app=chat_app)], lifespan=lifespan)
    async with serve(host) as url, httpx.AsyncClient(base_url=url) as client:
        opened = resources.entered
        page = await client.get("/support/")
        answered = await client.post("/support/api/chat", content=body(1), headers=JSON)
    assert opened == 1  # by the host's lifespan, before any request
    assert page.status_code == 200 and "<title>Pooled</title>" in page.text
    assert answered.status_code == 200
    assert (resources.entered, resources.exited) == (1, 1)


async def test_the_terminal_client_talks_to_a_mounted_chat() -> None:
    async with (
        serve(site(rate_limits=None)) as url,
        ChatTurnClient(f"{url}/support/", session_id="terminal-1") as client,
        ChatTurnClient(f"{url}/support", session_id="terminal-1") as other,
    ):
        words = await client.page()
        result = await client.submit("hello")
        resumed = await other.resume()
    assert client.base_url == f"{url}/support"
    assert words is not None and words.title == "Chat"
    assert result.ok and result.snapshot is not None
    reply = result.snapshot.payload.messages[-1].content
    assert reply.startswith("You said: hello")
    assert resumed.snapshot is not None
    assert resumed.snapshot.payload.messages[-1].content == reply
    # A site-relative link in an answer is the site's, as the page reads it, not the chat's.
    assert client.absolute_url("/pricing") == f"{url}/pricing"
