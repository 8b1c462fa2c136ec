"""create_app: any chat definition on the web, over a real uvicorn socket on 127.0.0.1 (and over
httpx's ASGI transport where a client address other than loopback, or no lifespan, is the point).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from agentskit_chat.components import resolve_chat_theme
from agentskit_chat.conversation import MAX_LOGO_BYTES, ChatDefinition, ChatPage, define_chat
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.runtime import AdapterRequest, ChatConfig, reply_adapter
from agentskit_chat.server import create_app
from agentskit_chat.server._web_page import CONTENT_SECURITY_POLICY
from agentskit_chat.service import Authenticated, AuthResult, Refused
from agentskit_chat.storage import open_chat_stores
from tests.assistant._support import serve
from tests.server._chat_support import JSON, lines, submit

pytestmark = pytest.mark.anyio

KEY = "s3cret-key"
#: An address that is not loopback, for clients the API-key rule must refuse.
REMOTE = ("203.0.113.7", 40000)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def answer(text: str, request: AdapterRequest) -> str:
    """The reply: the user's text and how many messages the request carried."""
    return f"You said: {text} (#{len(request.messages)})"


def chat(page: ChatPage | None = None) -> ChatDefinition:
    return define_chat(id="support", chat=ChatConfig(adapter=reply_adapter(answer)), page=page)


def contents(snapshot: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in snapshot["payload"]["messages"]]


async def turn(
    client: httpx.AsyncClient, text: str, number: int = 1, session_id: str = "session-1"
) -> dict[str, Any]:
    """Submit one turn; the last snapshot it streamed."""
    response = await client.post(
        "/api/chat",
        content=submit(
            session_id=session_id, turn_id=f"turn-{number}", event_id=f"event-{number}", text=text
        ),
        headers=JSON,
    )
    assert response.status_code == 200, response.text
    events = lines(response.content)
    assert events, "the turn streamed nothing"
    return events[-1]


async def resumed(client: httpx.AsyncClient, session_id: str = "session-1") -> dict[str, Any]:
    response = await client.get("/api/chat", params={"sessionId": session_id})
    assert response.status_code == 200, response.text
    snapshot: dict[str, Any] = response.json()
    return snapshot


def remote(app: Any) -> httpx.AsyncClient:
    """A client of ``app`` from an address that is not loopback (no lifespan runs)."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=REMOTE), base_url="http://localhost"
    )


class Resources:
    """A chat whose definition holds resources: counts how often they are opened and closed."""

    def __init__(self) -> None:
        self.entered = 0
        self.exited = 0

    @contextlib.asynccontextmanager
    async def __call__(self) -> AsyncIterator[ChatDefinition]:
        self.entered += 1
        await anyio.sleep(0.01)  # an open that takes a moment, as a pool's would
        try:
            yield chat(ChatPage(title="Pooled"))
        finally:
            self.exited += 1


# --- the page ------------------------------------------------------------------------------------


async def test_the_page_shows_the_definitions_words_escaped() -> None:
    page = ChatPage(
        title="Acme <script>alert(1)</script>",
        subtitle="Orders & returns, any hour",
        welcome_title="Hi there, I'm Acme's bot",
        welcome="Ask me about an order.",
        suggestions=("Where is my order?", 'Return "the red one"'),
        placeholder="Your question…",
        logo="AC",
    )
    async with serve(create_app(chat(page))) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    text = response.text
    escaped = "Acme &lt;script&gt;alert(1)&lt;/script&gt;"
    assert f"<title>{escaped}</title>" in text
    assert f"<h1>{escaped}</h1>" in text
    assert "<script>alert" not in text
    assert '<p class="tagline">Orders &amp; returns, any hour</p>' in text
    assert '<h2 id="empty-title">Hi there, I&#x27;m Acme&#x27;s bot</h2>' in text
    assert "<p>Ask me about an order.</p>" in text
    assert 'data-ask="Where is my order?">Where is my order?</button>' in text
    assert 'data-ask="Return &quot;the red one&quot;">' in text
    assert 'placeholder="Your question…"' in text
    assert '<span class="logo" aria-hidden="true">AC</span>' in text
    assert "{{" not in text


async def test_a_definition_without_a_page_gets_the_plain_page() -> None:
    async with serve(create_app(chat())) as url, httpx.AsyncClient(base_url=url) as client:
        text = (await client.get("/")).text
        words = (await client.get("/static/page.json")).json()
    assert "<title>Chat</title>" in text
    assert 'class="tagline"' not in text
    assert 'class="suggestions"' not in text
    assert words["title"] == "Chat"
    assert words["suggestions"] == []


async def test_page_json_holds_the_chats_words() -> None:
    page = ChatPage(
        title="Acme",
        subtitle="Orders",
        welcome_title="Welcome",
        welcome="Ask away.",
        suggestions=("One", "Two"),
        placeholder="Type…",
    )
    async with serve(create_app(chat(page))) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.get("/static/page.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {
        "title": "Acme",
        "subtitle": "Orders",
        "welcomeTitle": "Welcome",
        "welcome": "Ask away.",
        "suggestions": ["One", "Two"],
        "placeholder": "Type…",
    }


async def test_theme_css_reflects_a_custom_light_and_dark_theme() -> None:
    page = ChatPage(
        theme=resolve_chat_theme({"colors": {"accent": "#123456"}}),
        dark_theme=resolve_chat_theme({"colors": {"accent": "#654321"}}),
    )
    async with (
        serve(create_app(chat(page))) as url,
        serve(create_app(chat())) as plain_url,
        httpx.AsyncClient() as client,
    ):
        custom = await client.get(f"{url}/static/theme.css")
        plain = await client.get(f"{plain_url}/static/theme.css")
    assert custom.status_code == 200
    assert custom.headers["content-type"].startswith("text/css")
    light, _, dark = custom.text.partition("@media (prefers-color-scheme: dark)")
    assert dark, "the theme has no dark part"
    assert "--ak-color-button: #123456;" in light
    assert "--ak-color-button: #654321;" in dark
    assert "#123456" not in plain.text and "#654321" not in plain.text


@pytest.mark.parametrize(
    ("suffix", "media_type"), [(".png", "image/png"), (".svg", "image/svg+xml")]
)
async def test_a_logo_file_is_served_with_its_media_type(
    tmp_path: Path, suffix: str, media_type: str
) -> None:
    logo = tmp_path / f"brand{suffix}"
    data = PNG if suffix == ".png" else b'<svg xmlns="http://www.w3.org/2000/svg"/>'
    logo.write_bytes(data)
    app = create_app(chat(ChatPage(logo=logo)))
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        page = await client.get("/")
        served = await client.get(f"/static/logo{suffix}")
        other = await client.get("/static/logo.jpg")
    assert f'<img class="logo" src="static/logo{suffix}" alt="">' in page.text
    assert served.status_code == 200
    assert served.headers["content-type"] == media_type
    assert served.content == data
    assert other.status_code == 404


async def test_a_logo_of_exactly_256_kib_is_served(tmp_path: Path) -> None:
    logo = tmp_path / "big.png"
    logo.write_bytes(b"\x89PNG" + b"x" * (MAX_LOGO_BYTES - 4))
    app = create_app(chat(ChatPage(logo=logo)))
    async with app.state.chat_site:
        files = app.state.chat_site.page().files
    assert len(files["logo.png"][0]) == MAX_LOGO_BYTES


@pytest.mark.parametrize("problem", ["too large", "missing"])
async def test_a_bad_logo_fails_when_the_site_opens(tmp_path: Path, problem: str) -> None:
    logo = tmp_path / "big.png"
    if problem == "too large":
        logo.write_bytes(b"\x89PNG" + b"x" * (MAX_LOGO_BYTES - 3))
    resources = Resources()
    definition = chat(ChatPage(logo=logo))

    @contextlib.asynccontextmanager
    async def target() -> AsyncIterator[ChatDefinition]:
        async with resources():
            yield definition

    app = create_app(target)
    expected = "larger than 262144 bytes" if problem == "too large" else "cannot be read"
    with pytest.raises(ConfigurationError, match=expected):
        async with app.state.chat_site:
            pass
    assert not app.state.chat_site.is_open
    # What the site opened before the page failed is closed again.
    assert (resources.entered, resources.exited) == (1, 1)


# --- turns ---------------------------------------------------------------------------------------


async def test_a_turn_answers_through_the_reply_function_and_resumes() -> None:
    async with serve(create_app(chat())) as url, httpx.AsyncClient(base_url=url) as client:
        last = await turn(client, "hello")
        snapshot = await resumed(client)
        missing = await resumed(client, "session-never-used")
        bad = await client.get("/api/chat", params={"sessionId": "not a safe id!"})
    assert last["event"] == "server.turn.snapshot"
    assert last["payload"]["status"] == "complete"
    assert contents(last)[-1] == ("assistant", "You said: hello (#2)")
    assert snapshot["payload"]["status"] == "complete"
    assert contents(snapshot) == [("user", "hello"), ("assistant", "You said: hello (#2)")]
    assert contents(missing) == []
    assert bad.status_code == 400


async def test_two_apps_over_one_sqlite_file_share_the_session(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    async with (
        serve(create_app(chat(), store=store)) as first,
        serve(create_app(chat(), store=store)) as second,
        httpx.AsyncClient(base_url=first) as one,
        httpx.AsyncClient(base_url=second) as two,
    ):
        await turn(one, "first question")
        seen_by_two = await resumed(two)
        # The second worker answers the next turn with the whole conversation (#4 messages).
        last = await turn(two, "second question", number=2)
        seen_by_one = await resumed(one)
    expected = [
        ("user", "first question"),
        ("assistant", "You said: first question (#2)"),
    ]
    assert contents(seen_by_two) == expected
    assert contents(last)[-1] == ("assistant", "You said: second question (#4)")
    assert contents(seen_by_one) == [
        *expected,
        ("user", "second question"),
        ("assistant", "You said: second question (#4)"),
    ]


async def test_borrowed_stores_stay_open_after_the_app_stops(tmp_path: Path) -> None:
    stores = open_chat_stores(f"sqlite:///{tmp_path / 'chat.db'}")
    async with stores:
        async with (
            serve(create_app(chat(), store=stores)) as url,
            httpx.AsyncClient(base_url=url) as client,
        ):
            await turn(client, "kept")
        memory = stores.memory("session-1")
        messages = list(await memory.load())
        await getattr(memory, "aclose", _nothing)()
    assert [m.content for m in messages] == ["kept", "You said: kept (#2)"]


async def _nothing() -> None:
    return None


# --- who may call --------------------------------------------------------------------------------


async def hello(request: Request) -> Response:
    return PlainTextResponse("extra route")


EXTRA = [Route("/api/extra", hello)]
PUBLIC = ["/", "/static/app.js", "/static/page.json", "/static/theme.css", "/healthz"]


async def test_without_a_key_loopback_clients_are_served() -> None:
    app = create_app(chat(), routes=EXTRA)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        await turn(client, "hello")
        extra = await client.get("/api/extra")
        unknown = await client.get("/no-such-route")
    assert (extra.status_code, extra.text) == (200, "extra route")
    assert unknown.status_code == 404


async def test_without_a_key_other_clients_are_refused_but_for_the_public_routes() -> None:
    app = create_app(chat(), routes=EXTRA)
    async with remote(app) as client:
        post = await client.post("/api/chat", content=submit(), headers=JSON)
        get = await client.get("/api/chat", params={"sessionId": "session-1"})
        extra = await client.get("/api/extra")
        unknown = await client.get("/no-such-route")
        public = [await client.get(path) for path in PUBLIC]
    for refused in (post, get, extra, unknown):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
    assert PUBLIC
    for response in public:
        assert response.status_code == 200, response.url


async def test_with_a_key_every_route_but_the_public_ones_needs_it() -> None:
    app = create_app(chat(), api_key=KEY, routes=EXTRA)
    bearer = {"authorization": f"Bearer {KEY}"}
    wrong = {"authorization": "Bearer not-the-key"}
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        without = [
            await client.post("/api/chat", content=submit(), headers=JSON),
            await client.get("/api/chat", params={"sessionId": "session-1"}),
            await client.get("/api/extra"),
            await client.get("/no-such-route"),
            await client.post("/api/chat", content=submit(), headers={**JSON, **wrong}),
            await client.get("/api/extra", headers=wrong),
        ]
        posted = await client.post("/api/chat", content=submit(), headers={**JSON, **bearer})
        read = await client.get("/api/chat", params={"sessionId": "session-1"}, headers=bearer)
        extra = await client.get("/api/extra", headers=bearer)
        unknown = await client.get("/no-such-route", headers=bearer)
        public = [await client.get(path) for path in PUBLIC]
    for refused in without:
        assert refused.status_code == 401, refused.url
        assert refused.headers["www-authenticate"] == "Bearer"
        assert KEY not in refused.text
    assert posted.status_code == 200
    assert contents(lines(posted.content)[-1])[-1] == ("assistant", "You said: hello (#2)")
    assert read.status_code == 200
    assert len(contents(read.json())) == 2
    assert extra.status_code == 200
    assert unknown.status_code == 404
    assert PUBLIC
    for response in public:
        assert response.status_code == 200, response.url


async def test_with_a_key_a_remote_client_that_sends_it_is_served() -> None:
    app = create_app(chat(), api_key=KEY, routes=EXTRA)
    async with remote(app) as client:
        headers = {"authorization": f"Bearer {KEY}"}
        last = await turn_with(client, headers)
        extra = await client.get("/api/extra", headers=headers)
    assert contents(last)[-1] == ("assistant", "You said: hello (#2)")
    assert extra.status_code == 200


async def turn_with(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    response = await client.post("/api/chat", content=submit(), headers={**JSON, **headers})
    assert response.status_code == 200, response.text
    return lines(response.content)[-1]


async def test_a_hosts_authenticate_decides_for_the_chat_routes() -> None:
    refusal = Response(b"go away", 403, headers={"x-refused-by": "host"})
    seen: list[str] = []

    def authenticate(request: Request) -> AuthResult:
        seen.append(request.url.path)
        if request.headers.get("x-user") == "ada":
            return Authenticated({"user": "ada"})
        return Refused(refusal)

    app = create_app(chat(), authenticate=authenticate, routes=EXTRA)
    async with remote(app) as client:
        refused_post = await client.post("/api/chat", content=submit(), headers=JSON)
        refused_get = await client.get("/api/chat", params={"sessionId": "session-1"})
        # Admitted by the host's rule, from an address the default rule would refuse.
        last = await turn_with(client, {"x-user": "ada"})
        # The extra routes keep the default rule.
        extra = await client.get("/api/extra", headers={"x-user": "ada"})
    for refused in (refused_post, refused_get):
        assert refused.status_code == 403
        assert refused.content == b"go away"
        assert refused.headers["x-refused-by"] == "host"
    assert contents(last)[-1] == ("assistant", "You said: hello (#2)")
    assert extra.status_code == 401
    assert seen == ["/api/chat", "/api/chat", "/api/chat"]


# --- opening and closing -------------------------------------------------------------------------


async def test_healthz_answers_ok_once_the_chat_is_open() -> None:
    async with serve(create_app(chat())) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_a_chat_that_cannot_open_is_unavailable_without_its_reason() -> None:
    def factory() -> ChatDefinition:
        raise ConfigurationError("zq9SECRET the database URL is wrong")

    app = create_app(factory, checks={"extra": lambda: True})
    async with remote(app) as client:
        health = await client.get("/healthz")
        page = await client.get("/")
        words = await client.get("/static/page.json")
        script = await client.get("/static/app.js")
    assert health.status_code == 503
    assert health.json() == {"status": "unavailable", "failing": ["chat"]}
    assert page.status_code == 500
    assert words.status_code == 404
    assert script.status_code == 200
    for response in (health, page, words):
        assert "zq9SECRET" not in response.text


async def test_a_context_manager_target_is_entered_at_startup_and_exited_at_shutdown() -> None:
    resources = Resources()
    app = create_app(resources)
    async with serve(app) as url:
        # Opened by the lifespan, before any request.
        assert (resources.entered, resources.exited) == (1, 0)
        assert app.state.chat_site.is_open
        async with httpx.AsyncClient(base_url=url) as client:
            page = await client.get("/")
            for number in range(1, 4):
                await turn(client, f"question {number}", number=number)
            health = await client.get("/healthz")
        assert "<title>Pooled</title>" in page.text
        assert health.status_code == 200
        assert (resources.entered, resources.exited) == (1, 0)
    assert (resources.entered, resources.exited) == (1, 1)
    assert not app.state.chat_site.is_open


async def test_without_a_lifespan_the_first_requests_open_the_site_once() -> None:
    resources = Resources()
    app = create_app(resources)
    site = app.state.chat_site
    assert not site.is_open
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        pages: list[httpx.Response] = []

        async def get() -> None:
            pages.append(await client.get("/"))

        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(get)
        last = await turn(client, "hello")
    assert len(pages) == 5
    assert {response.status_code for response in pages} == {200}
    assert all("<title>Pooled</title>" in response.text for response in pages)
    assert contents(last)[-1] == ("assistant", "You said: hello (#2)")
    assert (resources.entered, resources.exited) == (1, 0)
    # The host closes what the first request opened.
    await site.aclose()
    assert (resources.entered, resources.exited) == (1, 1)


async def test_an_async_factory_is_served() -> None:
    async def factory() -> ChatDefinition:
        return chat(ChatPage(title="Awaited"))

    async with serve(create_app(factory)) as url, httpx.AsyncClient(base_url=url) as client:
        page = await client.get("/")
        last = await turn(client, "hi")
    assert "<title>Awaited</title>" in page.text
    assert contents(last)[-1] == ("assistant", "You said: hi (#2)")


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        (42, {}, "must be a ChatDefinition or a function"),
        ("app.py:chat", {}, "must be a ChatDefinition or a function"),
        (None, {"store": 42}, "store must be a store URL or ChatStores"),
        (None, {"store": "ftp://nowhere"}, "The store URL scheme is not one of"),
        (None, {"api_key": " "}, "The API key must be a non-empty token"),
        (None, {"api_key": "two words"}, "The API key must be a non-empty token"),
        (None, {"timeout": 0}, "timeout must be a positive number"),
        (None, {"timeout": -1.5}, "timeout must be a positive number"),
        (None, {"timeout": float("nan")}, "timeout must be a positive number"),
    ],
)
def test_unusable_options_are_configuration_errors(
    target: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        create_app(chat() if target is None else target, **options)
    assert message in str(raised.value)
    assert "nowhere" not in str(raised.value)
