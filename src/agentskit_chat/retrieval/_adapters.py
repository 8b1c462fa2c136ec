"""What the LangChain and LlamaIndex adapters share: turning foreign documents into sources.

A foreign document is its metadata and its text. It becomes a grounded source when its
metadata holds a safe link and its text is not blank; anything else is dropped here, early, and
counted, instead of being handed to the service only to be dropped there.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import GroundedSource, is_safe_href

if TYPE_CHECKING:
    from agentskit_chat.service import RetrievalRequest
from agentskit_chat.protocol._text import js_trim, utf16_len
from agentskit_chat.protocol._types import is_safe_id

from ._results import check_top_k

__all__ = ["AdapterReport", "SourceMapper", "check_key", "missing_extra"]

#: The protocol's bounds, in UTF-16 code units.
MAX_EXCERPT_UNITS: Final = 4096
MAX_TITLE_UNITS: Final = 256

_MAX_READABLE_ID: Final = 96
_NOT_ID: Final = re.compile(r"[^A-Za-z0-9._:-]+")
_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class AdapterReport:
    """What one retrieval through a LangChain or LlamaIndex adapter returned and dropped.

    Attributes:
        sources: The citable documents as grounded sources, in the wrapped retriever's order.
        missing_href: Documents dropped because their metadata has no link.
        unsafe_href: Documents dropped because their link is not a safe link (``javascript:``,
            ``//host``, a relative path, credentials in the URL, ...).
        empty_text: Documents dropped because their text is blank.
    """

    sources: tuple[GroundedSource, ...]
    missing_href: int = 0
    unsafe_href: int = 0
    empty_text: int = 0

    @property
    def dropped(self) -> int:
        """How many documents were dropped, for any reason."""
        return self.missing_href + self.unsafe_href + self.empty_text


class SourceMapper:
    """Maps ``(metadata, text)`` pairs to grounded sources with the adapters' rules.

    - ``href``: ``metadata[href_key]``, trimmed; missing or blank drops the document, and so
      does a link that is not safe.
    - ``excerpt``: the text, trimmed, then cut to 4,096 UTF-16 units at a code point boundary;
      blank text drops the document.
    - ``title``: ``metadata[title_key]`` trimmed and cut to 256 units, else the link.
    - ``id``: ``metadata[id_key]`` when it is a safe id, else a stable id derived from the link
      and a digest of the link and the full text.
    """

    def __init__(self, *, title_key: str, href_key: str, id_key: str, top_k: int | None) -> None:
        self._title_key = check_key(title_key, "title_key")
        self._href_key = check_key(href_key, "href_key")
        self._id_key = check_key(id_key, "id_key")
        self._top_k = None if top_k is None else check_top_k(top_k)

    def report(self, documents: Iterable[tuple[object, object]]) -> AdapterReport:
        """Map ``(metadata, text)`` pairs in order, keeping at most ``top_k`` sources."""
        sources: list[GroundedSource] = []
        missing = unsafe = empty = 0
        for metadata, text in documents:
            if self._top_k is not None and len(sources) >= self._top_k:
                break
            fields: Mapping[Any, Any] = metadata if isinstance(metadata, Mapping) else {}
            raw_href = fields.get(self._href_key)
            href = js_trim(raw_href) if isinstance(raw_href, str) else raw_href
            if href is None or href == "":
                missing += 1
                continue
            if not is_safe_href(href) or _SURROGATE.search(href) is not None:
                unsafe += 1
                continue
            assert isinstance(href, str)  # is_safe_href accepts strings only
            full = _usable(text if isinstance(text, str) else "")
            excerpt = clip_units(full, MAX_EXCERPT_UNITS)
            if not excerpt:
                empty += 1
                continue
            source = self._source(fields, href, full, excerpt)
            if source is None:  # pragma: no cover - every field is valid by construction
                empty += 1
                continue
            sources.append(source)
        return AdapterReport(tuple(sources), missing, unsafe, empty)

    def _source(
        self, fields: Mapping[Any, Any], href: str, full: str, excerpt: str
    ) -> GroundedSource | None:
        raw_title = fields.get(self._title_key)
        title = _usable(raw_title) if isinstance(raw_title, str) else ""
        title = _clip_title(title or href)
        raw_id = fields.get(self._id_key)
        if isinstance(raw_id, int) and not isinstance(raw_id, bool):
            raw_id = str(raw_id)
        source_id = raw_id if is_safe_id(raw_id) else derived_id(href, full)
        try:
            return GroundedSource(id=source_id, title=title, href=href, excerpt=excerpt)
        except ValidationError:  # pragma: no cover - guarded above
            return None


def derived_id(href: str, text: str) -> str:
    """A safe, stable id for a document without one: its link folded, plus a digest.

    The digest covers the exact link and text, so two chunks of one page differ, and the id
    changes only when the document does.

    >>> derived_id("/docs/guide#install", "Run pip.")[:19]
    'docs-guide-install-'
    """
    readable = _SCHEME.sub("", href)
    folded = unicodedata.normalize("NFKD", readable).encode("ascii", "ignore").decode("ascii")
    folded = _NOT_ID.sub("-", folded).strip("-.:")[:_MAX_READABLE_ID].rstrip("-.:") or "doc"
    key = f"{href}\x00{text}".encode("utf-8", "surrogatepass")
    return f"{folded}-{hashlib.sha256(key).hexdigest()[:12]}"


def clip_units(text: str, units: int) -> str:
    """``text`` cut to at most ``units`` UTF-16 units, never inside a surrogate pair, trimmed."""
    if len(text) * 2 <= units or utf16_len(text) <= units:
        return text
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return js_trim(text[:index])
    return text  # pragma: no cover - the loop returns for an over-long text


def check_key(key: object, name: str) -> str:
    """``key`` if it is a non-empty metadata key.

    Raises:
        ConfigurationError: otherwise.
    """
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"{name} must be a non-empty string")
    return key


def missing_extra(adapter: str, extra: str) -> ImportError:
    """The error an adapter raises when its library is not installed."""
    return ImportError(
        f"{adapter} needs the '{extra}' extra: pip install 'agentskit-chat[{extra}]'"
    )


def _usable(text: str) -> str:
    # JSON encoders refuse lone surrogates; make them U+FFFD, as the Markdown loader does.
    if not text.isascii() and _SURROGATE.search(text) is not None:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return js_trim(text)


def _clip_title(title: str) -> str:
    if utf16_len(title) <= MAX_TITLE_UNITS:
        return title
    return clip_units(title, MAX_TITLE_UNITS - 1) + "…"


class ReportingRetriever(ABC):
    """The ``Retriever`` port on top of a ``retrieve_report`` that also counts what it dropped."""

    async def retrieve(self, request: RetrievalRequest) -> list[GroundedSource]:
        """The ``Retriever`` port: the citable documents for ``request.query``, in order.

        Raises:
            RetrievalError: the wrapped retriever raised, or returned something unexpected.
        """
        return list((await self.retrieve_report(request)).sources)

    @abstractmethod
    async def retrieve_report(self, request: RetrievalRequest) -> AdapterReport:
        """The kept sources, with how many documents were dropped and why."""
