"""The chat web page and the docs pages its citations link to.

- ``GET /``: the page (:mod:`agentskit_chat.web`);
- ``GET /static/<file>``: its files, plus two made here: ``theme.css`` (the chat's semantic
  theme as CSS variables, light and, when the system prefers it, dark) and
  ``components.json`` (the props schema of every component the manifest registers, from the
  same pydantic models the server validates with);
- ``GET /docs/<page>``: a page of the docs folder rendered as HTML, with the anchors citations
  point at.

Every response carries a strict Content-Security-Policy: scripts, styles and requests only
from this origin, no inline script or style, no frames, no plugins.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agentskit_chat.assistant import DocsAssistant
from agentskit_chat.components import (
    DARK_CHAT_THEME,
    DEFAULT_CHAT_THEME,
    STANDARD_COMPONENT_MANIFEST,
    ChatTheme,
    ComponentManifest,
    theme_css,
)
from agentskit_chat.conversation import LOGO_MEDIA_TYPES, MAX_LOGO_BYTES, ChatPage
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.retrieval import render_page_html
from agentskit_chat.web import ASSET_NAMES, ASSET_TYPES, read_asset

from ._asgi import ASGIApp, Receive, Scope, Send, handle_non_http, send_response
from ._errors import error_headers, method_allowed, send_case

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DocsPages",
    "PageBundle",
    "StaticAssets",
    "WebPage",
    "create_chat_page_app",
    "method_not_allowed",
    "not_found",
    "page_words",
    "render_page_bundle",
]

#: The page's Content-Security-Policy: nothing runs or loads that this origin did not serve.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
_SECURITY: Final = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
_METHOD: Final = js_stringify(
    {
        "error": {
            "code": "REQUEST_METHOD_NOT_ALLOWED",
            "message": "This method is not allowed here.",
            "retryable": False,
        }
    }
).encode()
_ERROR_HEADERS: Final = {"x-content-type-options": "nosniff", "cache-control": "no-store"}
#: The error body of a page or file that does not exist (the JSON error shape of every route).
_NOT_FOUND: Final = js_stringify(
    {"error": {"code": "NOT_FOUND", "message": "There is no such page.", "retryable": False}}
).encode()


def _headers(media_type: str) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", media_type.encode()), *_SECURITY]


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:] if dot >= 0 else ""


def render_theme_css(light: ChatTheme, dark: ChatTheme | None) -> str:
    """The theme's CSS variables on ``:root``, and the dark theme's under
    ``prefers-color-scheme: dark``."""
    css = theme_css(light, ":root")
    if dark is not None:
        css += "\n@media (prefers-color-scheme: dark) {\n" + theme_css(dark, ":root") + "}\n"
    return css


def render_components_json(manifest: ComponentManifest) -> str:
    """``{key: {"schema": <props JSON Schema>, "events": [...]}}`` for every registered key."""
    catalog = {
        key: {
            "schema": manifest[key].props_schema.model_json_schema(),
            "events": [event.name for event in manifest[key].events],
        }
        for key in manifest
    }
    return json.dumps(catalog, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


async def not_found(request: Any, exc: Exception) -> Any:
    """The app's answer to a path no route serves: the JSON ``NOT_FOUND`` error."""
    from starlette.responses import Response  # noqa: PLC0415 - the server extra

    return Response(_NOT_FOUND, 404, media_type="application/json", headers=_ERROR_HEADERS)


async def method_not_allowed(request: Any, exc: Exception) -> Any:
    """The app's answer to a method a route does not take: the JSON 405 error."""
    from starlette.responses import Response  # noqa: PLC0415 - the server extra

    return Response(_METHOD, 405, media_type="application/json", headers=_ERROR_HEADERS)


@dataclass(frozen=True, slots=True)
class PageBundle:
    """The page of one chat, rendered once: its HTML and the files made for it.

    Attributes:
        html: ``/`` (the page with the chat's title, words and logo).
        files: ``/static/<name>`` → (bytes, media type): ``theme.css``, ``components.json``,
            ``page.json`` (the chat's words, for other interfaces) and the logo file, if any.
    """

    html: bytes
    files: Mapping[str, tuple[bytes, str]]


def _logo_file(path: Path) -> tuple[bytes, str]:
    media_type = LOGO_MEDIA_TYPES.get(path.suffix.lower())
    if media_type is None:
        raise ConfigurationError(f"ChatPage.logo is not an image file: {path.name}")
    try:
        with path.open("rb") as file:
            data = file.read(MAX_LOGO_BYTES + 1)
    except OSError:
        raise ConfigurationError(f"ChatPage.logo cannot be read: {path}") from None
    if len(data) > MAX_LOGO_BYTES:
        raise ConfigurationError(f"ChatPage.logo is larger than {MAX_LOGO_BYTES} bytes: {path}")
    return data, media_type


def page_words(page: ChatPage) -> dict[str, object]:
    """The chat's words as ``page.json`` serves them (what the terminal chat shows)."""
    return {
        "title": page.title,
        "subtitle": page.subtitle,
        "welcomeTitle": page.welcome_title,
        "welcome": page.welcome,
        "suggestions": list(page.suggestions),
        "placeholder": page.placeholder,
    }


def render_page_bundle(page: ChatPage | None, manifest: ComponentManifest) -> PageBundle:
    """The page of a chat whose presentation is ``page`` and whose components are
    ``manifest`` (every text escaped; the logo file read and checked here).

    Raises:
        ConfigurationError: the logo file cannot be read, is too large or is not an image.
    """
    page = page or ChatPage()
    files: dict[str, tuple[bytes, str]] = {
        "theme.css": (
            render_theme_css(
                page.theme or DEFAULT_CHAT_THEME,
                page.dark_theme or DARK_CHAT_THEME,
            ).encode(),
            ASSET_TYPES[".css"],
        ),
        "components.json": (render_components_json(manifest).encode(), ASSET_TYPES[".json"]),
        "page.json": (
            json.dumps(page_words(page), ensure_ascii=False).encode(),
            ASSET_TYPES[".json"],
        ),
    }
    logo_file = page.logo_file
    if logo_file is not None:
        name = "logo" + logo_file.suffix.lower()
        files[name] = _logo_file(logo_file)
        logo = f'<img class="logo" src="static/{name}" alt="">'
    elif page.logo_mark is not None:
        logo = f'<span class="logo" aria-hidden="true">{html.escape(page.logo_mark)}</span>'
    else:
        logo = ""
    suggestions = ""
    if page.suggestions:
        items = "".join(
            f'        <li><button type="button" class="suggestion" data-ask="{html.escape(text)}">'
            f"{html.escape(text)}</button></li>\n"
            for text in page.suggestions
        )
        suggestions = (
            '      <ul class="suggestions" aria-label="Suggestions">\n' + items + "      </ul>\n"
        )
    fills = {
        "{{title}}": html.escape(page.title),
        "{{logo}}": logo,
        "{{subtitle}}": (
            ""
            if page.subtitle is None
            else f'        <p class="tagline">{html.escape(page.subtitle)}</p>\n'
        ),
        "{{welcome_title}}": html.escape(page.welcome_title),
        "{{welcome}}": (
            "" if page.welcome is None else f"      <p>{html.escape(page.welcome)}</p>\n"
        ),
        "{{suggestions}}": suggestions,
        "{{placeholder}}": html.escape(page.placeholder),
    }
    # One pass over the template: a chat's own text that looks like a marker stays text.
    text = _MARKER.sub(lambda found: fills[found.group(0)], _TEMPLATE)
    return PageBundle(text.encode(), files)


_TEMPLATE: Final = read_asset("index.html").decode()
_MARKER: Final = re.compile(r"\{\{[a-z_]+\}\}")


class WebPage:
    """``GET /``: the chat page of the chat ``bundle()`` presents."""

    def __init__(self, bundle: Callable[[], Awaitable[PageBundle]]) -> None:
        self._bundle = bundle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await handle_non_http(scope, receive, send) or not await method_allowed(scope, send):
            return
        try:
            body = (await self._bundle()).html
        except ConfigurationError:
            await send_case(scope, send, "internal")
            return
        await send_response(scope, send, 200, _headers(ASSET_TYPES[".html"]), body)


class StaticAssets:
    """``GET /static/<file>``: the page's files, and those made for the chat ``bundle()``
    presents (theme, component schemas, words, logo)."""

    def __init__(self, bundle: Callable[[], Awaitable[PageBundle]]) -> None:
        self._bundle = bundle
        self._files: Mapping[str, bytes] = {
            name: read_asset(name) for name in ASSET_NAMES if name != "index.html"
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await handle_non_http(scope, receive, send) or not await method_allowed(scope, send):
            return
        name = str(scope.get("path_params", {}).get("name", ""))
        body = self._files.get(name)
        media_type = ASSET_TYPES.get(_suffix(name))
        if body is None:
            try:
                made = (await self._bundle()).files.get(name)
            except ConfigurationError:
                made = None
            if made is not None:
                body, media_type = made
        if body is None or media_type is None:
            await send_response(scope, send, 404, error_headers(), _NOT_FOUND)
            return
        await send_response(scope, send, 200, _headers(media_type), body)


_PAGE: Final = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <meta name="color-scheme" content="light dark">
  <title>{title}</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="/static/theme.css">
  <link rel="stylesheet" href="/static/app.css">
</head>
<body class="doc-page">
  <header class="top">
    <div class="brand"><span class="logo" aria-hidden="true">◆</span>
      <p class="doc-path">{path}</p></div>
    <a class="secondary button-link" href="/">Back to the assistant</a>
  </header>
  <main class="main doc">
{body}  </main>
</body>
</html>
"""


class DocsPages:
    """``GET /docs/<page>``: a page of the assistant's folder, as its citations link to it."""

    def __init__(self, assistant: DocsAssistant, prefix: str = "/docs") -> None:
        self._assistant = assistant
        self._prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await handle_non_http(scope, receive, send) or not await method_allowed(scope, send):
            return
        if not self._assistant.is_open:
            await send_case(scope, send, "internal")
            return
        raw = scope.get("raw_path")
        path = raw.decode("latin-1") if isinstance(raw, bytes) else str(scope.get("path", ""))
        path = path.rstrip("/") or self._prefix
        page = self._assistant.page(path)
        if page is None:
            await send_response(scope, send, 404, error_headers(), _NOT_FOUND)
            return
        body = _PAGE.format(
            title=html.escape(page.title),
            path=html.escape(page.document.path),
            body=render_page_html(page.document, href_prefix=self._prefix),
        )
        await send_response(scope, send, 200, _headers(ASSET_TYPES[".html"]), body.encode())


def create_chat_page_app(
    chat: ASGIApp,
    *,
    page: ChatPage | None = None,
    manifest: ComponentManifest = STANDARD_COMPONENT_MANIFEST,
) -> Starlette:
    """The chat page in front of a chat handler: ``/``, ``/static/...`` and ``/api/chat``.

    To serve a whole chat definition (page, handler, storage, health), use
    :func:`~agentskit_chat.server.create_app` instead.

    Args:
        chat: The chat turn handler (:func:`create_chat_app`), mounted at ``/api/chat``.
        page: The page's title, words, logo and theme (``None``: a plain page).
        manifest: The components the page may draw (the chat definition's manifest).

    Raises:
        ConfigurationError: the page's logo file cannot be read or is too large.
        ImportError: the ``server`` extra is not installed.

    Example::

        app = create_chat_page_app(create_chat_app(resolve_definition=..., session_storage=...))
        # uvicorn.run(app, host="127.0.0.1", port=8000)
    """
    from starlette.applications import Starlette  # noqa: PLC0415 - the server extra
    from starlette.routing import Route  # noqa: PLC0415

    bundle = render_page_bundle(page, manifest)

    async def current() -> PageBundle:
        return bundle

    return Starlette(
        routes=[
            Route("/", WebPage(current)),
            Route("/static/{name:path}", StaticAssets(current)),
            Route("/api/chat", chat),
        ],
        exception_handlers={404: not_found, 405: method_not_allowed},
    )
