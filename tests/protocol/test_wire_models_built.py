"""A server builds every wire model before it takes requests; a command line builds on first use.

Each check runs in a fresh interpreter, where no other test has used a model yet.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: Prints how many wire models and module-level adapters are defined, and how many are built.
_COUNT = """
import json
from agentskit_chat.protocol import _types
import agentskit_chat.protocol as protocol
{setup}
for name in protocol.__all__:
    getattr(protocol, name)
models, pending = [], [_types.WireModel]
while pending:
    model = pending.pop()
    pending.extend(model.__subclasses__())
    models.append(model)
print(json.dumps({{
    "models": len(models),
    "built": sum(1 for m in models if m.__pydantic_complete__),
    "adapters": len(_types._ADAPTERS),
    "adapters_built": sum(1 for a in _types._ADAPTERS if a.pydantic_complete),
}}))
"""


def _count(setup: str) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _COUNT.format(setup=setup)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    counts: dict[str, int] = json.loads(done.stdout)
    return counts


def test_creating_a_chat_app_builds_every_wire_model_and_adapter() -> None:
    counts = _count(
        "from agentskit_chat.server import create_chat_app\n"
        "create_chat_app(resolve_definition=lambda c, s: None, "
        "session_storage=lambda c: None)"
    )
    assert counts["models"] > 50 and counts["adapters"] == 4
    assert counts["built"] == counts["models"]
    assert counts["adapters_built"] == counts["adapters"]


def test_creating_an_ask_service_app_builds_them_too() -> None:
    counts = _count(
        "from agentskit_chat.server import create_ask_service_app\n"
        "from agentskit_chat.generation import ExtractiveGenerator\n"
        "create_ask_service_app(authenticate=lambda r: None, resolve_site=lambda c: None, "
        "resolve_subject_id=lambda r, c: 's', "
        "retrievers={}, generator=ExtractiveGenerator())"
    )
    assert counts["built"] == counts["models"] > 50
    assert counts["adapters_built"] == counts["adapters"] == 4


def test_without_a_server_the_models_wait_for_their_first_use() -> None:
    counts = _count("")
    assert counts["models"] > 50
    assert counts["built"] < counts["models"] // 2
    assert counts["adapters_built"] == 0
