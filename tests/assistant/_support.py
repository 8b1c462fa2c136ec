"""A small docs folder, a fixed clock, and a real uvicorn socket for the assistant's tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import uvicorn

#: Every test clock reads this instant: no test depends on today's date.
NOW = datetime(2026, 7, 13, 12, tzinfo=UTC)

GUIDE = """\
# Setup guide

Install the widget, then tune its cache.

## Installing the widget

Run the installer to put the widget on your machine.

```sh
pip install widget
```

## Configuring the cache

The cache keeps rendered pages in memory. Set `cache_size` to the number of pages the cache
holds. A larger cache size uses more memory but renders pages faster.
"""

OPTIONS = """\
# Options reference

Every option of the widget, one section each.

## Configuring the cache

The `cache_ttl` option sets how many seconds a rendered page stays cached.

## Logging

Set `log_level` to `debug` to see every render in the log.
"""

FAQ = """\
# Frequently asked questions

## Licensing

The widget is released under the MIT license.

## Themes

The widget ships a light theme and a dark theme. Pick one with the `theme` option.
"""

#: The tmp docs folder: two pages share the heading "Configuring the cache" (a choice).
DOCS: Mapping[str, str] = {
    "guide.md": GUIDE,
    "reference/options.md": OPTIONS,
    "faq.md": FAQ,
}

#: Every sentence of the docs folder's prose, to prove a refusal quotes none of them.
DOC_SENTENCES = (
    "Install the widget, then tune its cache.",
    "The cache keeps rendered pages in memory.",
    "A larger cache size uses more memory but renders pages faster.",
    "sets how many seconds a rendered page stays cached",
    "The widget is released under the MIT license.",
    "The widget ships a light theme and a dark theme.",
    "to see every render in the log",
)


def write_docs(root: Path, files: Mapping[str, str] = DOCS) -> Path:
    """Write ``files`` (relative path → Markdown) under ``root``; return ``root``."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return root


def clock() -> datetime:
    return NOW


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1, port 0 (lifespan on); yield its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
