"""A relevant section holding clearly more of the question leads, whatever search's order."""

from __future__ import annotations

from agentskit_chat.retrieval import RelevanceRule, RetrievedChunk, TermWeights
from agentskit_chat.retrieval._relevance import COVERING_MARGIN

SECTIONS = [
    "Release process › Publish\nThe release is published by the workflow to the registry.",
    "Release handoff › Ownership\nDo not publish a release from a developer machine.",
    *(f"Guide › Part {n}\nThe widget renders page {n}." for n in range(6)),
]
WEIGHTS = TermWeights.from_texts(SECTIONS)
QUESTION = "Can I publish a release from my own machine?"


def hit(id_: str, title: str, text: str, score: float = 5.0) -> RetrievedChunk:
    return RetrievedChunk(id=id_, title=title, href=f"/docs/{id_}", text=text, score=score)


# Search ranks first the section writing "release" and "publish" most; it never says where from.
PUBLISH = hit(
    "publish",
    "Release process › Publish",
    "The release is published by the workflow. Each release publishes both packages.",
    score=9.0,
)
OWNERSHIP = hit(
    "ownership", "Release handoff › Ownership", "Do not publish a release from a developer machine."
)


def test_a_section_covering_clearly_more_of_the_question_leads() -> None:
    rule = RelevanceRule()
    first = rule.judge(QUESTION, PUBLISH, WEIGHTS)
    better = rule.judge(QUESTION, OWNERSHIP, WEIGHTS)
    assert first.relevant and better.relevant
    assert better.coverage >= COVERING_MARGIN * first.coverage
    assert rule.select(QUESTION, [PUBLISH, OWNERSHIP], WEIGHTS) == [OWNERSHIP, PUBLISH]


def test_sections_covering_as_much_keep_the_search_order() -> None:
    rule = RelevanceRule()
    twin = hit("twin", "Release handoff › Laptops", "Never publish a release from a machine.")
    assert (
        rule.judge(QUESTION, twin, WEIGHTS).coverage
        == rule.judge(QUESTION, OWNERSHIP, WEIGHTS).coverage
    )
    assert rule.select(QUESTION, [twin, OWNERSHIP], WEIGHTS) == [twin, OWNERSHIP]


def test_a_first_section_leading_on_its_heading_keeps_its_place() -> None:
    rule = RelevanceRule()
    # The question paraphrases its heading, and search ranks it well ahead.
    named = hit("named", "Releases › Publish a release", "The workflow does it.", score=9.0)
    assert rule.select(QUESTION, [named, OWNERSHIP], WEIGHTS) == [named, OWNERSHIP]
