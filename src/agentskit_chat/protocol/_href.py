"""The safe-link rule behind every ``href`` field."""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from typing import Final
from urllib.parse import unquote

import ada_url

from ._idna_reference import REFERENCE_DISALLOWED
from ._text import utf16_len

__all__ = ["is_safe_href"]

_MAX_UNITS: Final = 2048
_UNSAFE_CHAR: Final = re.compile(r"[\x00-\x1f\x7f\\]")
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_AUTHORITY_END: Final = re.compile("[/?#]")
_DISALLOWED_STARTS: Final = tuple(first for first, _ in REFERENCE_DISALLOWED)


def _reference_disallows(text: str) -> bool:
    """Whether ``text`` holds a code point the reference's IDNA table disallows in a host."""
    for char in text:
        cp = ord(char)
        if cp < 0x80:
            continue
        i = bisect_right(_DISALLOWED_STARTS, cp) - 1
        if i >= 0 and cp <= REFERENCE_DISALLOWED[i][1]:
            return True
    return False


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
    if not candidate.isascii() or "%" in candidate:
        # ``ada-url`` maps hosts with a newer IDNA table than the reference's parser, which
        # disallows some code points the newer table maps away or allows (U+180E, say). A
        # link the reference refuses is never safe here: look at the host as written,
        # percent-decoded as the host parser decodes it. (The authority is scheme-relative
        # after any slashes; a code point there outside the host means credentials or a bad
        # port, which fail anyway.)
        rest = candidate[candidate.index(":") + 1 :].lstrip("/")
        end = _AUTHORITY_END.search(rest)
        authority = rest if end is None else rest[: end.start()]
        if _reference_disallows(unquote(authority, errors="replace")):
            return False
    return all(_punycode_label_ok(label) for label in url.hostname.split("."))


@lru_cache(maxsize=1024)
def _punycode_label_ok(label: str) -> bool:
    """UTS #46 validity of an ``xn--`` label, which ada-url does not check.

    The payload must decode, must not be empty or all ASCII, must hold no code point the
    reference's IDNA table disallows, and must be in the form the IDNA mapping itself produces:
    mapping the decoded label again yields the same ``xn--`` label. The reference's older
    parser skips the empty, all-ASCII and same-form checks; they stay, because each rejected
    label is a second spelling of a name (``xn--1-`` of ``1``) or fails the URL Standard's
    bidirectional-text rule, both ways to make one host look like another.
    """
    if not label.lower().startswith("xn--"):
        return True
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
    except (UnicodeError, ValueError, IndexError):
        return False
    if not decoded or decoded.isascii() or _reference_disallows(decoded):
        return False
    try:
        remapped = ada_url.URL(f"http://{decoded}/").hostname
    except (ValueError, UnicodeError):
        return False
    return remapped == label.lower()
