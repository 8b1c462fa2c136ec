"""The chat web page: HTML, CSS and ES modules shipped inside the package (no build step).

The page talks to a chat handler at ``/api/chat`` over the turn protocol, and loads two files
its server makes: ``/static/theme.css`` (the semantic theme as CSS variables) and
``/static/components.json`` (the props schema of every component it may draw). The server that
serves it (:func:`agentskit_chat.server.create_docs_assistant_app`) sets a strict
Content-Security-Policy: the page runs no inline script and loads nothing from elsewhere.

Example:
    >>> from agentskit_chat.web import read_asset
    >>> read_asset("index.html")[:15]
    b'<!doctype html>'
"""

from __future__ import annotations

from importlib import resources
from typing import Final

__all__ = ["ASSET_NAMES", "ASSET_TYPES", "read_asset"]

#: The media type of each kind of file the page is made of, by suffix.
ASSET_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
}


def _names() -> frozenset[str]:
    root = resources.files(__name__).joinpath("static")
    found: set[str] = set()

    def walk(folder: resources.abc.Traversable, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif any(entry.name.endswith(suffix) for suffix in ASSET_TYPES):
                found.add(prefix + entry.name)

    walk(root, "")
    return frozenset(found)


#: Every file of the page, by its path under ``static/`` (``app.js``, ``vendor/marked.esm.js``).
ASSET_NAMES: Final = _names()


def read_asset(name: str) -> bytes:
    """The bytes of one file of the page.

    Raises:
        KeyError: ``name`` is not one of :data:`ASSET_NAMES` (nothing outside the page's own
            folder can be read).
    """
    if name not in ASSET_NAMES:
        raise KeyError(name)
    return resources.files(__name__).joinpath("static", *name.split("/")).read_bytes()
