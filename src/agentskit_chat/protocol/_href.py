"""The safe-link rule behind every ``href`` field (``protocol-deterministic.md`` §3)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

import ada_url

from ._text import utf16_len

__all__ = ["is_safe_href"]

_MAX_UNITS: Final = 2048
_UNSAFE_CHAR: Final = re.compile(r"[\x00-\x1f\x7f\\]")
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def is_safe_href(value: object) -> bool:
    """Whether ``value`` is a link the protocol accepts.

    A safe link is 1..2048 UTF-16 units with no control character, DEL or backslash, and is
    either root-relative (``/docs``, never ``//host``) or an absolute WHATWG URL with scheme
    ``http``/``https`` and no credentials. The value itself is never rewritten.

    >>> is_safe_href("/docs"), is_safe_href("javascript:alert(1)"), is_safe_href("//evil")
    (True, False, False)
    """
    if not isinstance(value, str) or not value:
        return False
    if len(value) > _MAX_UNITS or utf16_len(value) > _MAX_UNITS:
        return False
    if _UNSAFE_CHAR.search(value) is not None or value.startswith("//"):
        return False
    if _SCHEME.match(value) is None:
        return value.startswith("/")
    return _absolute_ok(value)


@lru_cache(maxsize=4096)
def _absolute_ok(value: str) -> bool:
    # WHATWG USVString conversion: lone surrogates become U+FFFD before parsing.
    candidate = _SURROGATE.sub("\ufffd", value) if not value.isascii() else value
    try:
        url = ada_url.URL(candidate)
    except (ValueError, UnicodeError):
        return False
    if url.protocol not in ("http:", "https:"):
        return False
    if url.username or url.password:
        return False
    return all(_punycode_label_ok(label) for label in url.hostname.split("."))


@lru_cache(maxsize=1024)
def _punycode_label_ok(label: str) -> bool:
    """UTS #46 validity of an ``xn--`` label, which ada-url does not check.

    The payload must decode, must not be empty or all ASCII, and must be in the form the IDNA
    mapping itself produces: mapping the decoded label again yields the same ``xn--`` label.
    """
    if not label.lower().startswith("xn--"):
        return True
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
    except (UnicodeError, ValueError, IndexError):
        return False
    if not decoded or decoded.isascii():
        return False
    try:
        remapped = ada_url.URL(f"http://{decoded}/").hostname
    except (ValueError, UnicodeError):
        return False
    return remapped == label.lower()
