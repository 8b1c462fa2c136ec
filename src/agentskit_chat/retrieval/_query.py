"""Turning a user's question into search terms that no search engine can misread.

User text never reaches a query parser. It is cut into words (letters and digits only), stop
words are dropped, duplicates removed and the count capped; each backend then writes its own
safe query from these terms (quoted FTS5 strings, a ``websearch_to_tsquery`` OR-list).
"""

from __future__ import annotations

import re
import unicodedata

from agentskit_chat._terms import STOP_WORDS as _STOP_WORDS

__all__ = ["MAX_QUERY_TERMS", "MAX_TERM_CHARS", "STOP_WORDS", "query_terms"]

#: At most this many distinct terms are searched for; later ones are ignored.
MAX_QUERY_TERMS = 24

#: A longer "word" (a pasted hash, a base64 blob) is cut to this many characters.
MAX_TERM_CHARS = 64

#: Function words that carry no topic, shared with relevance and extractive answers.
STOP_WORDS = _STOP_WORDS

# A word is a run of letters, marks and digits: punctuation, underscores, quotes and operators
# separate words, so no query syntax survives.
_WORD = re.compile(r"[^\W_]+")


def query_terms(text: str, *, max_terms: int = MAX_QUERY_TERMS) -> tuple[str, ...]:
    """The distinct lower-case search words of ``text``, in order, stop words removed.

    When every word is a stop word, the stop words themselves are returned (a question such as
    "what is this?" still searches for something). Never raises, whatever the input.

    Args:
        text: Untrusted user text of any length.
        max_terms: Cap on the number of terms returned.

    Returns:
        Up to ``max_terms`` words, each at most :data:`MAX_TERM_CHARS` characters.

    Example:
        >>> query_terms("How do I configure the rate-limiter? foo AND NEAR(")
        ('configure', 'rate', 'limiter', 'foo', 'near')
    """
    normalized = unicodedata.normalize("NFC", text)
    kept: list[str] = []
    stops: list[str] = []
    seen: set[str] = set()
    for match in _WORD.finditer(normalized):
        word = match.group().lower()[:MAX_TERM_CHARS]
        if word in seen:
            continue
        seen.add(word)
        if word in STOP_WORDS:
            if len(stops) < max_terms:
                stops.append(word)
            continue
        kept.append(word)
        if len(kept) >= max_terms:
            break
    return tuple(kept or stops)
