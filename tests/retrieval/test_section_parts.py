"""Option rows joining the best section: looked up on the best section's own page."""

from __future__ import annotations

from agentskit_chat.retrieval import MarkdownCorpus
from agentskit_chat.retrieval._results import RetrievedChunk
from agentskit_chat.retrieval._section_parts import SectionParts

_TABLE = "| Option | Default | Description |\n| --- | --- | --- |\n"


def _page(name: str, row: str) -> str:
    return (
        f"# {name}\n\n## Fetching\n\nHow long a fetch may wait is set with `fetch_timeout`.\n\n"
        f"## Options\n\n{_TABLE}| `fetch_timeout` | `10.0` | {row} |\n\n"
        f"## More options\n\n{_TABLE}| `fetch_timeout` | `20.0` | Seconds, again. |\n"
    )


PAGES = {
    "alpha.md": _page("Alpha", "Seconds before giving up on a server."),
    "beta.md": _page("Beta", "Seconds to wait for a mirror."),
}


def _hit(corpus: MarkdownCorpus, href: str) -> RetrievedChunk:
    chunk = next(c for c in corpus.chunks if c.href == href)
    return RetrievedChunk(chunk.id, chunk.title, chunk.href, chunk.text, 1.0)


def test_an_option_row_comes_from_the_best_sections_own_page() -> None:
    corpus = MarkdownCorpus.from_texts(PAGES)
    parts = SectionParts(corpus.chunks)
    question = "How long does a fetch wait for a mirror?"
    for page in ("alpha", "beta"):
        first = _hit(corpus, f"/docs/{page}#fetching")
        joined = [hit.href for hit in parts.joined(question, [first])]
        if page == "beta":
            # The page's first table naming the option joins: "mirror" is in its row.
            assert joined == ["/docs/beta#fetching", "/docs/beta#options"]
        else:
            # Alpha's row says "server": nothing of the question beyond the option's name; the
            # row of the other page, which does, never joins a section of this one.
            assert joined == ["/docs/alpha#fetching"]


def test_a_page_without_option_rows_keeps_its_hits() -> None:
    corpus = MarkdownCorpus.from_texts({"plain.md": "# Plain\n\nSet `fetch_timeout` to wait.\n"})
    parts = SectionParts(corpus.chunks)
    hits = [_hit(corpus, "/docs/plain")]
    assert parts.joined("How long does a fetch wait?", hits) == hits
