"""Any LlamaIndex retriever behind the ``Retriever`` port (extra ``llamaindex``).

``llama_index.core`` is imported when an adapter is built, never when this package is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from agentskit_chat.errors import ConfigurationError, RetrievalError

from ._adapters import AdapterReport, ReportingRetriever, SourceMapper, missing_extra

if TYPE_CHECKING:
    from llama_index.core.retrievers import BaseRetriever

    from agentskit_chat.service import RetrievalRequest

__all__ = ["LlamaIndexRetriever"]


class LlamaIndexRetriever(ReportingRetriever):
    """Adapts a LlamaIndex retriever to the :class:`~agentskit_chat.service.Retriever` port.

    Any ``llama_index.core.retrievers.BaseRetriever`` works, including
    ``index.as_retriever(similarity_top_k=5)``: each retrieval awaits
    ``retriever.aretrieve(query)`` with the latest question, so cancelling the request cancels
    the LlamaIndex call. LlamaIndex runs a retriever that implements only the synchronous
    ``_retrieve`` on the calling thread, which would block the event loop; such a retriever is
    called through ``retrieve`` in a worker thread instead (abandoned, not waited for, when
    the request is cancelled).

    Each ``NodeWithScore`` becomes a grounded source, in the order the retriever returned them
    (best score first for the index retrievers; the order is never changed here):

    - ``href`` from the node's ``metadata[href_key]``: nodes with no link or an unsafe one are
      dropped;
    - ``excerpt`` from the node's content without metadata, trimmed and cut to 4,096 UTF-16
      units without splitting a character; nodes with blank content are dropped;
    - ``title`` from ``metadata[title_key]`` (cut to 256 units), else the link;
    - ``id`` from ``metadata[id_key]`` when it is a safe id, else a stable id derived from the
      link and the content (node ids are random per ingestion, so they are not used).

    :meth:`retrieve_report` also says how many nodes were dropped, and why.

    Args:
        retriever: The LlamaIndex retriever.
        title_key: The metadata key of a node's title.
        href_key: The metadata key of a node's link.
        id_key: The metadata key of a node's id.
        top_k: Keep at most this many sources (after dropping); ``None`` keeps what the
            retriever returns (configure its own ``similarity_top_k``).

    Raises:
        ImportError: the ``llamaindex`` extra is not installed.
        ConfigurationError: ``retriever`` is not a LlamaIndex retriever, a key is empty, or
            ``top_k`` is not in 1..100.

    Example:
        >>> index = VectorStoreIndex.from_documents(documents, embed_model=embed_model)
        ... # doctest: +SKIP
        >>> retriever = LlamaIndexRetriever(index.as_retriever(similarity_top_k=5))
        ... # doctest: +SKIP
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
            from llama_index.core.retrievers import (  # noqa: PLC0415 - the extra is optional
                BaseRetriever,
            )
            from llama_index.core.schema import MetadataMode  # noqa: PLC0415
        except ImportError as exc:
            raise missing_extra("LlamaIndexRetriever", "llamaindex") from exc
        if not isinstance(retriever, BaseRetriever):
            raise ConfigurationError("retriever must be a LlamaIndex BaseRetriever")
        self._retriever = retriever
        self._content_only = MetadataMode.NONE
        # The base class's ``_aretrieve`` just calls the synchronous ``_retrieve``.
        self._native_async = type(retriever)._aretrieve is not BaseRetriever._aretrieve
        self._mapper = SourceMapper(
            title_key=title_key, href_key=href_key, id_key=id_key, top_k=top_k
        )

    async def retrieve_report(self, request: RetrievalRequest) -> AdapterReport:
        """Like :meth:`retrieve`, with how many nodes were dropped and why.

        Raises:
            RetrievalError: the LlamaIndex retriever raised, or returned something other than
                a list of nodes.
        """
        try:
            if self._native_async:
                nodes = await self._retriever.aretrieve(request.query)
            else:
                call: Callable[[], Any] = partial(self._retriever.retrieve, request.query)
                nodes = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        except Exception as exc:
            # LlamaIndex's own message may echo the query or a connection string: name the type.
            raise RetrievalError(
                f"The LlamaIndex retriever failed ({type(exc).__name__})."
            ) from None
        if not isinstance(nodes, Sequence) or isinstance(nodes, str | bytes):
            raise RetrievalError("The LlamaIndex retriever did not return a list of nodes.")
        return self._mapper.report(self._fields(item) for item in nodes)

    def _fields(self, item: object) -> tuple[object, object]:
        node = getattr(item, "node", item)
        get_content = getattr(node, "get_content", None)
        if not callable(get_content):
            return None, None
        try:
            text = get_content(metadata_mode=self._content_only)
        except Exception:
            text = None  # a node kind without text content: counted as empty
        return getattr(node, "metadata", None), text
