"""Guides before lists of third-party packages and change logs."""

from __future__ import annotations

from agentskit_chat.retrieval import RetrievedChunk, guides_first
from agentskit_chat.retrieval._page_kinds import is_third_party, set_aside


def hit(href: str, title: str) -> RetrievedChunk:
    return RetrievedChunk(
        id=href.strip("/").replace("/", "-"), title=title, href=href, text="", score=1.0
    )


PLUGINS = hit(
    "/docs/plugins/environment#known-third-party", "Environment plugins › Known third-party"
)
PACKAGES = hit("/docs/third-party-packages#compress", "Packages › Compress")
GUIDE = hit("/docs/environment#shell", "Environments › Entering a shell")
NOTES = hit("/docs/history#140", "History › 1.4.0")


def test_a_list_of_third_party_packages_is_known_by_its_title_or_link() -> None:
    assert is_third_party(PLUGINS)
    assert is_third_party(PACKAGES)
    assert not is_third_party(GUIDE)
    assert not is_third_party(NOTES)


def test_guides_come_before_third_party_lists_and_those_before_change_logs() -> None:
    hits = [NOTES, PLUGINS, PACKAGES, GUIDE]
    assert guides_first("How do I enter a shell?", hits) == [GUIDE, PLUGINS, PACKAGES, NOTES]
    # A question about third-party packages keeps them where the search put them.
    assert guides_first("Which third-party plugins give me a shell?", hits) == [
        PLUGINS,
        PACKAGES,
        GUIDE,
        NOTES,
    ]


def test_an_answer_draws_on_guides_when_there_are_any() -> None:
    assert set_aside("How do I enter a shell?", [PLUGINS, GUIDE, NOTES]) == [GUIDE]
    assert set_aside("Which community plugins exist?", [PLUGINS, GUIDE, NOTES]) == [
        PLUGINS,
        GUIDE,
    ]
    # Nothing but a list of packages: it is what there is to answer from.
    assert set_aside("How do I compress responses?", [PACKAGES]) == [PACKAGES]
