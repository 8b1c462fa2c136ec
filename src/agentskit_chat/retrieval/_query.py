"""Turning a user's question into search terms that no search engine can misread.

User text never reaches a query parser. It is cut into words (letters and digits only), stop
words are dropped, duplicates removed and the count capped; each backend then writes its own
safe query from these terms (quoted FTS5 strings, a ``websearch_to_tsquery`` OR-list).

Beside single words, :func:`query_phrases` gives the pairs of content words that stand next to
each other in the question ("rate limit", "react native", the parts of ``snake_case`` or
``@scope/pkg``): a section holding the pair as written ranks above one holding both words apart.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterator

from agentskit_chat._terms import STOP_WORDS as _STOP_WORDS

__all__ = ["MAX_QUERY_TERMS", "MAX_TERM_CHARS", "STOP_WORDS", "query_phrases", "query_terms"]

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
    kept: list[str] = []
    stops: list[str] = []
    seen: set[str] = set()
    for word in _words(text):
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


def _words(text: str) -> Iterator[str]:
    normalized = unicodedata.normalize("NFC", text)
    for match in _WORD.finditer(normalized):
        yield match.group().lower()[:MAX_TERM_CHARS]


def query_phrases(text: str, *, max_phrases: int = MAX_QUERY_TERMS) -> tuple[tuple[str, str], ...]:
    """The distinct pairs of adjacent content words of ``text``, in order.

    Two words are adjacent when nothing but punctuation or spaces stands between them, so the
    parts of an identifier (``snake_case``, ``kebab-case``, ``@scope/pkg``) pair up as well as
    the words of a phrase. A pair with a stop word is left out. Never raises, whatever the input.

    Example:
        >>> query_phrases("How do I rate limit the @agentskit/react package?")
        (('rate', 'limit'), ('agentskit', 'react'), ('react', 'package'))
    """
    pairs: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for pair in itertools.pairwise(_words(text)):
        if pair[0] in STOP_WORDS or pair[1] in STOP_WORDS or pair in seen:
            continue
        seen.add(pair)
        pairs.append(pair)
        if len(pairs) >= max_phrases:
            break
    return tuple(pairs)
