"""Each example loads the way ``agentskit-chat serve examples/<name>/app.py:chat`` loads it,
and serves its page and its health check."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agentskit_chat.server import create_app, load_chat_target
from tests.assistant._support import serve

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).parents[2] / "examples"
TITLES = {
    "support": "Support desk",
    "operations": "Operations desk",
    "onboarding": "Onboarding",
    "rag": "Lumen Notes help",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("name", sorted(TITLES))
async def test_the_documented_command_serves_the_example(name: str) -> None:
    target = load_chat_target(f"{EXAMPLES / name / 'app.py'}:chat")
    async with serve(create_app(target)) as url, httpx.AsyncClient() as http:
        page = await http.get(f"{url}/")
        health = await http.get(f"{url}/healthz")
    assert page.status_code == 200
    assert f"<title>{TITLES[name]}</title>" in page.text
    assert health.json() == {"status": "ok"}


def test_every_example_folder_is_tested_and_documented() -> None:
    folders = sorted(p.name for p in EXAMPLES.iterdir() if (p / "app.py").is_file())
    assert folders == sorted(TITLES)
    index = (EXAMPLES / "README.md").read_text("utf-8")
    for name in folders:
        assert f"python examples/{name}/app.py" in index
        readme = (EXAMPLES / name / "README.md").read_text("utf-8")
        assert f"agentskit-chat serve examples/{name}/app.py:chat" in readme
        assert f"agentskit-chat chat examples/{name}/app.py:chat" in readme
