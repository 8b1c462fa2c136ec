"""The packages that defer imports answer a deferred name from its module, once, and refuse an
unknown name as a missing attribute."""

from __future__ import annotations

import importlib

import pytest

#: (package, one of its deferred names)
DEFERRED = [
    ("agentskit_chat", "InMemoryChatMemory"),
    ("agentskit_chat.protocol", "decode_turn_event"),
    ("agentskit_chat.answers", "DeterministicAnswerAdapter"),
    ("agentskit_chat.retrieval", "FederatedRetriever"),
]


@pytest.mark.parametrize(("package", "name"), DEFERRED)
def test_a_deferred_name_is_imported_once_and_kept(package: str, name: str) -> None:
    module = importlib.import_module(package)
    value = getattr(module, name)
    assert vars(module)[name] is value  # kept: the next lookup does not come back here
    assert name in dir(module)


@pytest.mark.parametrize("package", [package for package, _ in DEFERRED])
def test_an_unknown_name_is_a_missing_attribute(package: str) -> None:
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018
    assert not hasattr(module, "nothing_here")
