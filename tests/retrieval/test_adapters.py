"""LangChain and LlamaIndex retrievers behind the ``Retriever`` port, with the real libraries.

The retrievers (see ``_adapter_support``) are the libraries' own in-memory ones, or small
subclasses of their ``BaseRetriever`` where a test needs exact documents or a slow call.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core.schema import NodeWithScore, TextNode

from agentskit_chat.errors import ConfigurationError, RetrievalError
from agentskit_chat.generation import ExtractiveGenerator
from agentskit_chat.protocol import decode_grounded_source, is_safe_href
from agentskit_chat.protocol._text import js_trim, utf16_len
from agentskit_chat.protocol._types import is_safe_id
from agentskit_chat.retrieval import (
    AdapterReport,
    FederatedRetriever,
    LangChainRetriever,
    LlamaIndexRetriever,
    MarkdownCorpus,
    SQLiteFTSRetriever,
)
from agentskit_chat.service import Retriever
from tests.service._support import (
    CONTEXT,
    FEDERATED_SITE,
    ScriptedGenerator,
    body,
    make_service,
    read_all,
    site,
)

from ._adapter_support import (
    CASES,
    EXACT,
    IN_MEMORY,
    WIKI,
    Adapter,
    Doc,
    FailingLangChain,
    FailingLlama,
    FixedLangChain,
    FixedLlama,
    SlowLangChain,
    SlowLlama,
    fixed_langchain,
    fixed_llama,
    hrefs,
    langchain_store,
    llama_index,
)
from ._support import CORPUS, request


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- import and construction ---------------------------------------------------------------------


def test_importing_retrieval_imports_neither_library() -> None:
    code = (
        "import sys, agentskit_chat.retrieval; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langchain_core', 'llama_index')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("adapter", "module", "extra"),
    [
        (LangChainRetriever, "langchain_core.retrievers", "langchain"),
        (LlamaIndexRetriever, "llama_index.core.retrievers", "llamaindex"),
    ],
)
def test_missing_library_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, adapter: Any, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=rf"agentskit-chat\[{extra}\]"):
        adapter(object())


@pytest.mark.parametrize("make", EXACT, ids=["langchain", "llamaindex"])
@pytest.mark.parametrize(
    "options",
    [{"top_k": 0}, {"top_k": 101}, {"top_k": True}, {"href_key": ""}, {"title_key": 3}],
    ids=["top_k-0", "top_k-101", "top_k-bool", "href_key", "title_key"],
)
def test_invalid_options_are_refused(make: Callable[..., Adapter], options: Any) -> None:
    with pytest.raises(ConfigurationError):
        make(WIKI, **options)


@pytest.mark.parametrize(
    ("adapter", "wrong"),
    [(LangChainRetriever, FixedLlama([])), (LlamaIndexRetriever, FixedLangChain(documents=[]))],
)
def test_a_foreign_object_is_not_a_retriever(adapter: Any, wrong: object) -> None:
    with pytest.raises(ConfigurationError, match="BaseRetriever"):
        adapter(wrong)


def test_adapters_implement_the_port() -> None:
    assert isinstance(fixed_langchain(WIKI), Retriever)
    assert isinstance(fixed_llama(WIKI), Retriever)


# --- mapping -------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("make", EXACT, ids=["langchain", "llamaindex"])
async def test_unusable_documents_are_dropped_and_counted(make: Callable[..., Adapter]) -> None:
    docs = [(meta, text) for _, meta, text, _ in CASES]
    report = await make(docs).retrieve_report(request("anything"))
    verdicts = [verdict for *_, verdict in CASES]
    assert report.missing_href == verdicts.count("missing")
    assert report.unsafe_href == verdicts.count("unsafe")
    assert report.empty_text == verdicts.count("empty")
    assert report.dropped == len(CASES) - verdicts.count("kept")
    assert hrefs(report.sources) == [
        "/docs/guide",
        "https://wiki.example/a",
        "/docs/untitled",
        "/docs/padded",
    ]
    for source in report.sources:
        decoded = decode_grounded_source(source.model_dump(by_alias=True))
        assert decoded.ok and decoded.value == source
    titles = [source.title for source in report.sources]
    assert titles == ["Guide", "Wiki", "/docs/untitled", "Padded"]


@pytest.mark.anyio
@pytest.mark.parametrize("make", EXACT, ids=["langchain", "llamaindex"])
async def test_ids_come_from_metadata_or_are_derived_stably(make: Callable[..., Adapter]) -> None:
    docs: list[Doc] = [
        ({"href": "/docs/a", "id": "page-a"}, "First."),
        ({"href": "/docs/a", "id": "not safe!"}, "Second."),
        ({"href": "/docs/a"}, "Third."),
        ({"href": "/docs/a", "id": 7}, "Fourth."),
        ({"href": "https://wiki.example/Ünïcode page"}, "Fifth."),
    ]
    first = await make(docs).retrieve(request("q"))
    again = await make(list(docs)).retrieve(request("q"))
    ids = [source.id for source in first]
    assert ids == [source.id for source in again]
    assert ids[0] == "page-a"
    assert ids[3] == "7"
    assert ids[1].startswith("docs-a-") and ids[2].startswith("docs-a-")
    assert ids[1] != ids[2]
    assert ids[4].startswith("wiki.example-Unicode-page-")
    assert all(is_safe_id(i) for i in ids)


@pytest.mark.anyio
async def test_both_libraries_derive_the_same_id_for_the_same_document() -> None:
    docs: list[Doc] = [({"href": "/docs/shared"}, "The same text in both.")]
    from_langchain = await fixed_langchain(docs).retrieve(request("q"))
    from_llama = await fixed_llama(docs).retrieve(request("q"))
    assert from_langchain == from_llama


@pytest.mark.anyio
@pytest.mark.parametrize("make", EXACT, ids=["langchain", "llamaindex"])
@pytest.mark.parametrize(
    ("text", "excerpt"),
    [
        ("a" * 4095 + "😀" + "tail", "a" * 4095),
        ("a" * 4094 + "😀" + "tail", "a" * 4094 + "😀"),
        ("a" * 4096 + "b", "a" * 4096),
        ("a" * 4096, "a" * 4096),
        ("  \n" + "x" * 5000, "x" * 4096),
        ("a" * 4095 + " b", "a" * 4095),
        ("😀" * 3000, "😀" * 2048),
        ("bad \ud800 surrogate", "bad \ufffd surrogate"),
    ],
    ids=["emoji-over", "emoji-fits", "bmp", "exact", "leading-space", "trailing", "all", "lone"],
)
async def test_long_content_is_cut_at_4096_units_never_inside_a_character(
    make: Callable[..., Adapter], text: str, excerpt: str
) -> None:
    [source] = await make([({"title": "Long", "href": "/docs/long"}, text)]).retrieve(request("q"))
    assert source.excerpt == excerpt
    assert utf16_len(source.excerpt) <= 4096
    assert decode_grounded_source(source.model_dump(by_alias=True)).ok


@pytest.mark.anyio
@pytest.mark.parametrize("make", EXACT, ids=["langchain", "llamaindex"])
async def test_long_titles_are_cut_and_marked(make: Callable[..., Adapter]) -> None:
    [source] = await make([({"title": "T" * 300, "href": "/docs/t"}, "Text.")]).retrieve(
        request("q")
    )
    assert source.title == "T" * 255 + "…"


@pytest.mark.anyio
@pytest.mark.parametrize("make", EXACT, ids=["langchain", "llamaindex"])
async def test_top_k_keeps_the_first_citable_documents(make: Callable[..., Adapter]) -> None:
    docs = [({"title": "Bad", "href": "javascript:x"}, "Dropped."), *WIKI]
    report = await make(docs, top_k=2).retrieve_report(request("q"))
    assert hrefs(report.sources) == ["/wiki/install", "https://wiki.example/themes"]
    assert report.unsafe_href == 1


_HREFS = st.sampled_from(
    [None, "", "/docs/a", "/docs/b#x", "https://example.org/p", "javascript:x", "//e", "a/b", 5]
)
_TEXTS = st.text(
    st.characters(blacklist_categories=["Cs"]) | st.sampled_from(["😀", " ", "\n", "\ud800"]),
    max_size=40,
).map(lambda s: s * 150 if len(s) % 3 == 0 else s)
_DOCS = st.lists(
    st.tuples(
        st.fixed_dictionaries(
            {"href": _HREFS},
            optional={"title": st.text(max_size=300), "id": st.text(max_size=20)},
        ),
        _TEXTS,
    ),
    max_size=8,
)


@settings(max_examples=60)
@given(docs=_DOCS)
def test_every_kept_document_is_a_valid_source_in_the_original_order(docs: list[Doc]) -> None:
    report: AdapterReport = anyio.run(fixed_langchain(docs).retrieve_report, request("q"))
    assert len(report.sources) + report.dropped == len(docs)
    kept = [
        (meta, text)
        for meta, text in docs
        if isinstance(meta["href"], str)
        and is_safe_href(js_trim(meta["href"]))
        and js_trim(text.replace("\ud800", "\ufffd"))
    ]
    assert hrefs(report.sources) == [js_trim(meta["href"]) for meta, _ in kept]
    for source, (_, text) in zip(report.sources, kept, strict=True):
        assert decode_grounded_source(source.model_dump(by_alias=True)).ok
        assert js_trim(text.replace("\ud800", "\ufffd")).startswith(source.excerpt)
        assert utf16_len(source.excerpt) <= 4096
        assert is_safe_id(source.id)


# --- the libraries' in-memory retrievers ---------------------------------------------------------


@pytest.mark.anyio
async def test_langchain_vector_store_results_keep_their_order() -> None:
    docs = [*WIKI, ({"title": "Bad", "href": "javascript:alert(1)"}, "Script link.")]
    store = langchain_store(docs)
    raw = await store.ainvoke("Install the toolkit with pip install acme-widgets on Python 3.11.")
    report = await LangChainRetriever(store).retrieve_report(
        request("Install the toolkit with pip install acme-widgets on Python 3.11.")
    )
    expected = [d.metadata["href"] for d in raw if d.metadata["href"].startswith(("/", "https"))]
    assert hrefs(report.sources) == expected
    assert report.sources[0].href == "/wiki/install"  # the fake embedding matches equal text
    assert report.unsafe_href == 1
    assert len(report.sources) == len(WIKI)


@pytest.mark.anyio
async def test_llamaindex_vector_index_results_keep_their_order() -> None:
    docs = [*WIKI, ({"title": "Orphan"}, "A page with no link.")]
    retriever = llama_index(docs)
    raw = await retriever.aretrieve("How do I install it?")
    report = await LlamaIndexRetriever(retriever).retrieve_report(request("How do I install it?"))
    expected = [n.node.metadata["href"] for n in raw if "href" in n.node.metadata]
    assert hrefs(report.sources) == expected
    assert sorted(hrefs(report.sources)) == sorted(meta["href"] for meta, _ in WIKI)
    assert report.missing_href == 1
    assert {s.title for s in report.sources} == {meta["title"] for meta, _ in WIKI}


@pytest.mark.anyio
async def test_llamaindex_order_is_the_retrievers_not_resorted_by_score() -> None:
    scores = [0.2, 0.9, 0.5, 0.7]
    nodes = [
        NodeWithScore(node=TextNode(text=text, metadata=meta), score=score)
        for (meta, text), score in zip(WIKI, scores, strict=True)
    ]
    sources = await LlamaIndexRetriever(FixedLlama(nodes)).retrieve(request("q"))
    assert hrefs(sources) == [meta["href"] for meta, _ in WIKI]


@pytest.mark.anyio
async def test_a_sync_only_llamaindex_retriever_runs_off_the_event_loop() -> None:
    gate = threading.Event()
    node = NodeWithScore(node=TextNode(text="Text.", metadata={"href": "/docs/x"}), score=1.0)
    slow = FixedLlama([node], gate=gate)
    adapter = LlamaIndexRetriever(slow)
    result: list[Any] = []

    async def ask() -> None:
        result.extend(await adapter.retrieve(request("q")))

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        with anyio.fail_after(30):
            while not slow.entered.is_set():
                await anyio.sleep(0.01)
        gate.set()  # reached in time only if the loop is free while the retriever waits
    assert slow.gate_opened is True
    assert hrefs(result) == ["/docs/x"]


# --- errors and cancellation ---------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "adapter",
    [lambda: LangChainRetriever(FailingLangChain()), lambda: LlamaIndexRetriever(FailingLlama())],
    ids=["langchain", "llamaindex"],
)
async def test_library_errors_become_fixed_retrieval_errors(adapter: Callable[[], Adapter]) -> None:
    with pytest.raises(RetrievalError) as caught:
        await adapter().retrieve(request("my secret question"))
    message = str(caught.value)
    assert "ConnectionError" in message
    assert "hunter2" not in message and "secret" not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


async def _cancel_once_started(
    started: anyio.Event, retrieve: Callable[[], Awaitable[object]]
) -> bool:
    """Run ``retrieve`` under ``move_on_after``; cancel it as soon as the library call began."""
    with anyio.move_on_after(30) as scope:
        async with anyio.create_task_group() as group:

            async def cancel() -> None:
                await started.wait()
                scope.cancel()

            group.start_soon(cancel)
            await retrieve()
    return scope.cancelled_caught


@pytest.mark.anyio
async def test_cancelling_a_request_cancels_the_langchain_call() -> None:
    slow = SlowLangChain(started=anyio.Event())
    adapter = LangChainRetriever(slow)
    assert await _cancel_once_started(slow.started, lambda: adapter.retrieve(request("q")))
    assert slow.cancelled


@pytest.mark.anyio
async def test_cancelling_a_request_cancels_the_llamaindex_call() -> None:
    slow = SlowLlama(anyio.Event())
    adapter = LlamaIndexRetriever(slow)
    assert await _cancel_once_started(slow.started, lambda: adapter.retrieve(request("q")))
    assert slow.cancelled


@pytest.mark.anyio
async def test_the_sites_retrieval_deadline_cancels_a_slow_langchain_retriever() -> None:
    slow = SlowLangChain(started=anyio.Event())
    service = make_service(
        retrievers={"local": LangChainRetriever(slow)}, site=site(retrievalTimeoutMs=100)
    )
    response = await service.stream(CONTEXT, body())
    assert response.status == 408
    assert response.diagnostic is not None and response.diagnostic.code == "ASK_TIMEOUT"
    assert slow.started.is_set() and slow.cancelled


# --- behind the real Ask service -----------------------------------------------------------------


def _cited(events: list[dict[str, Any]]) -> list[str]:
    [cite] = [event for event in events if event["type"] == "tool" and event["name"] == "cite"]
    return [source["path"] for source in cite["args"]["sources"]]


@pytest.mark.anyio
@pytest.mark.parametrize("make", IN_MEMORY, ids=["langchain", "llamaindex"])
async def test_an_adapter_answers_behind_the_ask_service(
    make: Callable[[Sequence[Doc]], Adapter],
) -> None:
    adapter = make([*WIKI, ({"title": "Bad", "href": "javascript:alert(1)"}, "Never cited.")])
    expected = hrefs(await adapter.retrieve(request("q")))
    generator = ScriptedGenerator()
    service = make_service(retrievers={"local": adapter}, generator=generator)
    events = await read_all(await service.stream(CONTEXT, body()))
    assert [event["type"] for event in events] == ["text", "tool", "done"]
    assert _cited(events) == expected
    assert sorted(expected) == sorted(meta["href"] for meta, _ in WIKI)
    assert [s.href for s in generator.requests[0].sources] == expected


@pytest.mark.anyio
@pytest.mark.parametrize("make", IN_MEMORY, ids=["langchain", "llamaindex"])
async def test_the_model_free_generator_quotes_an_adapters_documents(
    make: Callable[[Sequence[Doc]], Adapter],
) -> None:
    service = make_service(retrievers={"local": make(WIKI)}, generator=ExtractiveGenerator())
    question = "Which pip command installs acme-widgets?"
    events = await read_all(await service.stream(CONTEXT, body(("user", question))))
    text = "".join(event["delta"] for event in events if event["type"] == "text")
    assert "pip install acme-widgets" in text
    cited = _cited(events)
    assert f"[{cited.index('/wiki/install') + 1}]" in text


@pytest.mark.anyio
async def test_federated_retrieval_fuses_sqlite_and_langchain() -> None:
    sqlite = SQLiteFTSRetriever(corpus=MarkdownCorpus.from_texts(CORPUS))
    wiki = LangChainRetriever(langchain_store(WIKI))
    federated = FederatedRetriever({"docs": sqlite, "wiki": wiki})
    question = "How do I install it with pip?"
    result = await federated.retrieve_fused(request(question))
    fused = [f.source.href for f in result.sources]
    assert result.failed == () and result.timed_out == ()
    assert "/docs/install" in fused and "/wiki/install" in fused
    expected_wiki = {meta["href"] for meta, _ in WIKI}
    assert set(fused) >= expected_wiki
    assert all(f.ranks[1] is not None for f in result.sources if f.source.href in expected_wiki)
    service = make_service(site=FEDERATED_SITE, retrievers={"federated": federated})
    events = await read_all(await service.stream(CONTEXT, body(("user", question))))
    cited = _cited(events)
    assert len(cited) == 5  # the site's maxSources
    assert cited == fused[:5]
    await sqlite.aclose()


@pytest.mark.anyio
async def test_federation_merges_a_langchain_copy_of_an_indexed_page_by_href() -> None:
    sqlite = SQLiteFTSRetriever(corpus=MarkdownCorpus.from_texts(CORPUS))
    copy: Doc = ({"title": "Installing Acme"}, "Install the toolkit with pip.")
    copy[0]["href"] = "/docs/install"
    wiki = LangChainRetriever(langchain_store([copy, *WIKI]))
    federated = FederatedRetriever({"docs": sqlite, "wiki": wiki}, dedupe="href")
    result = await federated.retrieve_fused(request("How do I install it with pip?"))
    merged = [f for f in result.sources if f.source.href == "/docs/install"]
    assert len(merged) == 1
    assert all(rank is not None for rank in merged[0].ranks)
    await sqlite.aclose()
