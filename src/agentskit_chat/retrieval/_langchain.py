"""Any LangChain retriever behind the ``Retriever`` port (extra ``langchain``).

``langchain_core`` is imported when an adapter is built, never when this package is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentskit_chat.errors import ConfigurationError, RetrievalError

from ._adapters import AdapterReport, ReportingRetriever, SourceMapper, missing_extra

if TYPE_CHECKING:
    from langchain_core.retrievers import BaseRetriever

    from agentskit_chat.service import RetrievalRequest

__all__ = ["LangChainRetriever"]


class LangChainRetriever(ReportingRetriever):
    """Adapts a LangChain retriever to the :class:`~agentskit_chat.service.Retriever` port.

    Any ``langchain_core.retrievers.BaseRetriever`` works, including
    ``vectorstore.as_retriever()``: each retrieval awaits ``retriever.ainvoke(query)`` with the
    latest question, so cancelling the request (the site's retrieval deadline, a client that
    went away) cancels the LangChain call. Retrievers without a native async implementation are
    run by LangChain in a worker thread, so the event loop never blocks.

    Each ``Document`` becomes a grounded source, in the retriever's order:

    - ``href`` from ``metadata[href_key]``: documents with no link or an unsafe one (anything
      but a root-relative path or an ``http(s)`` URL without credentials) are dropped;
    - ``excerpt`` from ``page_content``, trimmed and cut to 4,096 UTF-16 units without
      splitting a character; documents with blank content are dropped;
    - ``title`` from ``metadata[title_key]`` (cut to 256 units), else the link;
    - ``id`` from ``metadata[id_key]`` when it is a safe id, else a stable id derived from the
      link and the content.

    :meth:`retrieve_report` also says how many documents were dropped, and why.

    Args:
        retriever: The LangChain retriever.
        title_key: The metadata key of a document's title.
        href_key: The metadata key of a document's link.
        id_key: The metadata key of a document's id.
        top_k: Keep at most this many sources (after dropping); ``None`` keeps what the
            retriever returns (configure its own ``k``, e.g. ``search_kwargs={"k": 5}``).

    Raises:
        ImportError: the ``langchain`` extra is not installed.
        ConfigurationError: ``retriever`` is not a LangChain retriever, a key is empty, or
            ``top_k`` is not in 1..100.

    Example:
        >>> store = InMemoryVectorStore(embeddings)  # doctest: +SKIP
        >>> retriever = LangChainRetriever(store.as_retriever(search_kwargs={"k": 5}))
        ... # doctest: +SKIP
        >>> app = create_ask_service_app(..., retrievers={"local": retriever})  # doctest: +SKIP
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        *,
        title_key: str = "title",
        href_key: str = "href",
        id_key: str = "id",
        top_k: int | None = None,
    ) -> None:
        try:
            from langchain_core.retrievers import (  # noqa: PLC0415 - the extra is optional
                BaseRetriever,
            )
        except ImportError as exc:
            raise missing_extra("LangChainRetriever", "langchain") from exc
        if not isinstance(retriever, BaseRetriever):
            raise ConfigurationError("retriever must be a LangChain BaseRetriever")
        self._retriever = retriever
        self._mapper = SourceMapper(
            title_key=title_key, href_key=href_key, id_key=id_key, top_k=top_k
        )

    async def retrieve_report(self, request: RetrievalRequest) -> AdapterReport:
        """Like :meth:`retrieve`, with how many documents were dropped and why.

        Raises:
            RetrievalError: the LangChain retriever raised, or returned something other than
                a list of documents.
        """
        try:
            documents = await self._retriever.ainvoke(request.query)
        except Exception as exc:
            # LangChain's own message may echo the query or a connection string: name the type.
            raise RetrievalError(
                f"The LangChain retriever failed ({type(exc).__name__})."
            ) from None
        if not isinstance(documents, Sequence) or isinstance(documents, str | bytes):
            raise RetrievalError("The LangChain retriever did not return a list of documents.")
        return self._mapper.report(
            (getattr(document, "metadata", None), getattr(document, "page_content", None))
            for document in documents
        )
