"""The docs assistant: ask questions about a folder of Markdown, and get honest answers.

:func:`create_docs_assistant` composes the whole main job from one folder: the knowledge artifact
(built and verified), the deterministic resolver in front, the chunk index, and the Ask service
in process behind it, with a relevance rule that refuses to answer from weakly related text.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final, Literal, get_args

import anyio
import anyio.to_thread

from agentskit_chat._doclinks import page_href
from agentskit_chat._observers import notify
from agentskit_chat._terms import content_terms
from agentskit_chat.answers import (
    ArtifactBuild,
    DeterministicAnswerResolver,
    SourceDocument,
    create_deterministic_answer_resolver,
)
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.generation import ExtractiveGenerator
from agentskit_chat.protocol import (
    BackendMetric,
    BackendSiteConfig,
    ChoicesAnswer,
    EscalationAnswer,
    ExactAnswer,
)
from agentskit_chat.protocol._types import is_safe_id
from agentskit_chat.retrieval import (
    IndexReport,
    RelevanceRule,
    RelevantRetriever,
    RetrievedChunk,
    SQLiteFTSRetriever,
    guides_first,
)
from agentskit_chat.service import (
    AskService,
    AskSessionStore,
    Generator,
    InMemoryRateLimiter,
    MetricSink,
    RateLimiter,
)

from ._backend import (
    IN_PROCESS,
    Caller,
    HttpOnlyLimiter,
    ask_request,
    read_answer,
    site_config,
    subject_of,
)
from ._sections import SectionAnswers
from ._start import start_parts

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = [
    "AGENT_ENV",
    "MODEL_ENV",
    "AnswerOutcome",
    "DocsAgent",
    "DocsAssistant",
]

#: The environment variable naming a pydantic-ai model when neither ``model`` nor ``generator``
#: is given.
MODEL_ENV: Final = "AGENTSKIT_MODEL"

#: The environment variable choosing the agent (``writer`` or ``analyst``) when neither
#: ``agent`` nor ``generator`` is given.
AGENT_ENV: Final = "AGENTSKIT_AGENT"

#: Who writes grounded answers when a model is configured: ``writer`` streams the model's
#: prose (:class:`~agentskit_chat.agents.PydanticAIGenerator`); ``analyst`` runs an analyst
#: agent whose answer is rendered by ``answer_commit``
#: (:class:`~agentskit_chat.agents.AnalystGenerator`).
DocsAgent = Literal["writer", "analyst"]

_AGENTS: Final[tuple[str, ...]] = get_args(DocsAgent)
_NEEDS_MODEL: Final = (
    "The analyst agent needs a model: pass model= (--model) or set AGENTSKIT_MODEL."
)

#: What :meth:`DocsAssistant.ask` returns.
AnswerOutcome = ExactAnswer | ChoicesAnswer | EscalationAnswer

_MAX_SOURCES: Final = 8
#: The pages that stand for the folder itself: their title is the site's name.
_ROOT_PAGES: Final = frozenset({"index.md", "readme.md", "index.markdown", "readme.markdown"})


@dataclass(slots=True)
class _State:
    """Everything an open assistant holds."""

    build: ArtifactBuild
    resolver: DeterministicAnswerResolver
    index: SQLiteFTSRetriever
    retriever: RelevantRetriever
    site: BackendSiteConfig
    service: AskService
    generator: Generator
    pages: dict[str, DocsPage]
    sections: SectionAnswers


@dataclass(frozen=True, slots=True)
class DocsPage:
    """One page of the assistant's docs folder, as its citations link to it.

    Attributes:
        document: The page as read (path, text, front matter).
        title: Its title, as citations name it.
    """

    document: SourceDocument
    title: str


class DocsAssistant:
    """Answers questions about a folder of Markdown: exact answers first, then grounded ones.

    Build it with :func:`create_docs_assistant` and use it as an async context manager;
    entering builds and verifies the knowledge artifact, indexes the chunks and starts the Ask
    service in process. See :func:`create_docs_assistant` for the options.
    """

    def __init__(
        self,
        docs_dir: str | Path,
        *,
        site_id: str,
        index_path: str | Path | None,
        generator: Generator | None,
        model: str | Model | None,
        agent: DocsAgent | None,
        session_store: AskSessionStore | None,
        now: Callable[[], datetime] | None,
        api_key: str | None,
        rate_limiter: RateLimiter | None,
        relevance: RelevanceRule | None,
        href_prefix: str,
        max_sources: int,
    ) -> None:
        if not is_safe_id(site_id):
            raise ConfigurationError("site_id must be a safe identifier")
        if generator is not None and model is not None:
            raise ConfigurationError("Pass either a generator or a model, not both.")
        if agent is not None and agent not in _AGENTS:
            raise ConfigurationError("agent must be 'writer' or 'analyst'.")
        if generator is not None and agent is not None:
            raise ConfigurationError("Pass either a generator or an agent, not both.")
        if api_key is not None and (not api_key.strip() or any(c.isspace() for c in api_key)):
            raise ConfigurationError("The API key must be a non-empty token without spaces.")
        if type(max_sources) is not int or not 1 <= max_sources <= _MAX_SOURCES:
            raise ConfigurationError("max_sources must be an integer from 1 to 8")
        self.docs_dir = Path(docs_dir)
        self.site_id = site_id
        self._index_path = None if index_path is None else Path(index_path)
        self._generator = generator
        self._model = model
        self._agent = agent
        self._store = session_store
        self._now = now
        self.api_key = api_key
        self._limiter = HttpOnlyLimiter(
            rate_limiter or InMemoryRateLimiter(capacity=60, refill_per_second=5.0)
        )
        self._new_sessions = HttpOnlyLimiter(None)
        self._relevance = relevance or RelevanceRule()
        self._href_prefix = href_prefix
        self._max_sources = max_sources
        self._state: _State | None = None
        self._lock = anyio.Lock()
        self._metric_sinks: list[MetricSink] = []

    # --- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> DocsAssistant:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def is_open(self) -> bool:
        """Whether the assistant is open (between :meth:`open` and :meth:`aclose`)."""
        return self._state is not None

    async def open(self) -> None:
        """Build, verify and index; start the Ask service. Does nothing when already open.

        Raises:
            BuildError: the docs folder is missing, holds no Markdown, or a file is unreadable.
            ConfigurationError: the model cannot be configured, or the analyst agent was
                chosen without a model.
            ImportError: a model was asked for and the ``llm`` extra is missing.
            RetrievalError: the index file cannot be opened or written.
        """
        async with self._lock:
            if self._state is None:
                self._state = await self._build()

    async def _build(self) -> _State:
        generator = self._resolve_generator()
        # The folder is read once: exact answers and retrieval see the very same pages. With
        # the start cache, while no page changes, no page is parsed (docs/retrieval.md).
        start_now = partial(
            start_parts,
            self.docs_dir,
            site_id=self.site_id,
            href_prefix=self._href_prefix,
            index_path=self._index_path,
            now=self._now,
            prepare=self._create_resolver,
        )
        folder, start, index, resolver = await anyio.to_thread.run_sync(start_now)
        if index is None:  # an index file of its own
            assert self._index_path is not None
            await anyio.to_thread.run_sync(self._make_index_folder)
            index = await SQLiteFTSRetriever.open(self._index_path, corpus=start.corpus)
        corpus, build = start.corpus, start.build
        weights, vocabulary = start.weights, start.vocabulary
        # The site's own name: the title of the folder's root page, when it has one.
        site_terms = [
            term
            for document in corpus.documents
            if document.path.lower() in _ROOT_PAGES
            for term in content_terms(document.title)
        ]
        # The root page's opening: a landing page naming every feature in passing.
        overviews = [
            chunk.href
            for chunk in corpus.chunks
            if chunk.path.lower() in _ROOT_PAGES and not chunk.heading_path
        ]
        try:
            retriever = RelevantRetriever(
                index,
                weights,
                self._relevance,
                vocabulary=vocabulary,
                site_terms=site_terms,
                overviews=overviews,
                sections=corpus.chunks,
            )
            site = site_config(self.site_id, self._store is not None, self._max_sources)
            service = AskService(
                resolve_site=lambda context: site,
                resolve_subject_id=subject_of,
                retrievers={"local": retriever},
                generator=generator,
                session_store=self._store,
                rate_limiter=self._limiter,
                new_session_limiter=self._new_sessions,
                on_metric=self._emit_metric,
            )
        except BaseException:
            await index.aclose()
            raise
        titles = {document.path: document.title for document in corpus.documents}
        pages = {
            page_href(self._href_prefix.rstrip("/"), document.path): DocsPage(
                document, titles.get(document.path, document.path)
            )
            for document in folder.documents
        }
        sections = SectionAnswers(build.artifact, corpus.chunks)
        return _State(build, resolver, index, retriever, site, service, generator, pages, sections)

    def _resolve_generator(self) -> Generator:
        if self._generator is not None:
            return self._generator
        model = self._model
        if model is None:
            model = os.environ.get(MODEL_ENV, "").strip() or None
        agent = self._agent
        if agent is None:
            chosen = os.environ.get(AGENT_ENV, "").strip().lower() or "writer"
            if chosen not in _AGENTS:
                raise ConfigurationError(f"{AGENT_ENV} must be 'writer' or 'analyst'.")
            agent = "analyst" if chosen == "analyst" else "writer"
        if model is None:
            if agent == "analyst":
                raise ConfigurationError(_NEEDS_MODEL)
            return ExtractiveGenerator()
        # Builds the model (and imports pydantic-ai and the agents) only now, when a model is
        # asked for: a start without one never imports them.
        from agentskit_chat.agents import AnalystGenerator, PydanticAIGenerator  # noqa: PLC0415

        if agent == "analyst":
            return AnalystGenerator(model)
        return PydanticAIGenerator(model)

    def _create_resolver(self, build: ArtifactBuild) -> DeterministicAnswerResolver:
        # Verified again from its text (the model the build decoded from it, proved anew):
        # decoding the text is a quarter of the work of dumping the model to decode it.
        return create_deterministic_answer_resolver(
            build.artifact_json,
            expected_content_hash=build.site_config.artifact.content_hash,
            expected_site_id=self.site_id,
            now=self._now,
        )

    def _make_index_folder(self) -> None:
        assert self._index_path is not None
        self._index_path.parent.mkdir(parents=True, exist_ok=True)

    async def aclose(self) -> None:
        """Close the index. Idempotent; the assistant can be opened again afterwards."""
        async with self._lock:
            state, self._state = self._state, None
            if state is not None:
                await state.index.aclose()

    def _require(self) -> _State:
        if self._state is None:
            raise ConfigurationError("The docs assistant is not open: use 'async with'.")
        return self._state

    # --- what it knows ------------------------------------------------------------------------

    @property
    def site(self) -> BackendSiteConfig:
        """The trusted site configuration of the assistant's Ask service."""
        return self._require().site

    @property
    def service(self) -> AskService:
        """The Ask service pipeline behind the assistant (for in-process NDJSON)."""
        return self._require().service

    @property
    def resolver(self) -> DeterministicAnswerResolver:
        """The deterministic resolver over the verified artifact."""
        return self._require().resolver

    @property
    def artifact_build(self) -> ArtifactBuild:
        """The artifact built from the docs folder (with its site configuration and stats)."""
        return self._require().build

    @property
    def index_report(self) -> IndexReport | None:
        """What indexing the docs folder changed in the index when the assistant opened."""
        return self._require().index.last_report

    @property
    def relevance(self) -> RelevanceRule:
        """The relevance rule in force."""
        return self._relevance

    def expand_answer(self, answer: ExactAnswer) -> ExactAnswer:
        """``answer`` as the reader sees it: an exact answer that points at a heading (``See
        Limits in Operations.``, what a picked choice gets too) shows the section itself, with
        the same citation; any other answer is returned unchanged."""
        return self._require().sections.expand(answer)

    def page(self, href: str) -> DocsPage | None:
        """The page a citation link points at (its path: ``/docs/guide``), or ``None``.

        Only pages of the folder read when the assistant opened are found: the path is looked
        up, never joined to a file system path.
        """
        return self._require().pages.get(href)

    async def ready(self) -> bool:
        """Whether the assistant is open and its index answers (the ``/healthz`` check)."""
        state = self._state
        if state is None:
            return False
        await state.index.manifest()
        return True

    def limit_new_sessions(self, limiter: RateLimiter | None) -> None:
        """Hold HTTP callers to ``limiter`` whenever a question would start a stored
        conversation (a ``session_store`` was given, and nothing is stored under the session
        id yet); ``None`` lifts the bound. In-process questions (:meth:`ask`, the docs chat)
        are never limited. Takes effect at once, open or not; the web app
        (:func:`~agentskit_chat.server.create_docs_assistant_app`) sets it to its new-sessions
        bucket per client.
        """
        self._new_sessions.use(limiter)

    def watch_session_store(self, wrap: Callable[[AskSessionStore], AskSessionStore]) -> bool:
        """Put the ``session_store`` behind ``wrap(store)`` (a host observing its calls, as the
        web app does to log and count their failures), when there is one and the assistant
        is not open yet; whether it did. An open assistant keeps the store it opened with.
        """
        if self._store is None or self._state is not None:
            return False
        self._store = wrap(self._store)
        return True

    def add_metric_sink(self, sink: MetricSink) -> None:
        """Also send every backend metric of the Ask service to ``sink`` (isolated)."""
        self._metric_sinks.append(sink)

    def _emit_metric(self, metric: BackendMetric) -> None:
        for sink in tuple(self._metric_sinks):
            notify(sink, metric)

    # --- asking -------------------------------------------------------------------------------

    async def retrieve(self, question: str, top_k: int = 5) -> list[RetrievedChunk]:
        """The ``top_k`` best chunks for ``question``, best first (no relevance rule applied;
        change-log sections after the others unless the question is about changes).

        Raises:
            ConfigurationError: ``top_k`` is not in 1..100, or the assistant is not open.
        """
        return guides_first(question, await self._require().index.search(question, top_k))

    async def ask(self, question: str, *, session_id: str | None = None) -> AnswerOutcome:
        """Answer ``question``: exactly from the artifact, else grounded in the docs, else refuse.

        The deterministic resolver decides first: an exact answer or a list of choices is
        returned as is. Any escalation (``miss``, ``stale``, ``corrupt``) goes to the Ask
        service in process, with the escalation attached as ``deterministic``. A streamed
        answer becomes a ``high/backend`` answer envelope whose Markdown is the streamed text
        and whose citations are the sources of the ``cite`` event (``[n]`` in the text is the
        n-th citation). When nothing relevant enough was found, the result is a ``miss``
        escalation whose message is :data:`NO_GROUNDED_SOURCES`.

        Args:
            question: The user's question (at most 16,384 UTF-16 units).
            session_id: The conversation, when the assistant stores conversations (a
                ``session_store`` was given); a fresh one per call otherwise.

        Raises:
            AskServiceError: the Ask service refused or failed the request (a blank or
                over-long question, a timeout, a generator or storage failure), with its fixed
                diagnostic.
            ConfigurationError: the assistant is not open.
        """
        return await self.answer_for(question, IN_PROCESS, session_id=session_id)

    async def answer_for(
        self, question: str, caller: Caller, *, session_id: str | None = None
    ) -> AnswerOutcome:
        """:meth:`ask` on behalf of ``caller`` (the web app passes the HTTP caller)."""
        state = self._require()
        decision = state.resolver.resolve(question)
        if isinstance(decision, ExactAnswer):
            return state.sections.expand(decision)
        if not isinstance(decision, EscalationAnswer):
            return decision
        if session_id is None and state.site.persistence.mode == "required":
            session_id = f"ask-{uuid.uuid4().hex}"
        response = await state.service.answer(caller, ask_request(question, decision, session_id))
        return await read_answer(response, decision, getattr(state.generator, "model_name", None))
