"""Turning a user's question into search terms that no search engine can misread.

User text never reaches a query parser. It is cut into words (letters and digits only), stop
words are dropped, duplicates removed and the count capped; each backend then writes its own
safe query from these terms (quoted FTS5 strings, a ``websearch_to_tsquery`` OR-list).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["MAX_QUERY_TERMS", "MAX_TERM_CHARS", "STOP_WORDS", "query_terms"]

#: At most this many distinct terms are searched for; later ones are ignored.
MAX_QUERY_TERMS = 24

#: A longer "word" (a pasted hash, a base64 blob) is cut to this many characters.
MAX_TERM_CHARS = 64

_STOP_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t don doesn isn aren
    wasn weren won wouldn shouldn couldn let lets please tell explain show want need get
"""

#: Function words that carry no topic. Questions are mostly made of them ("how do I ...").
STOP_WORDS = frozenset(_STOP_TEXT.split())

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
