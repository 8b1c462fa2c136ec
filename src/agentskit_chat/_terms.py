"""Words, stop words and stems: the one text analysis of questions and docs.

Relevance (:mod:`agentskit_chat.retrieval`) and extractive answers
(:mod:`agentskit_chat.generation`) compare a question's terms with a section's; they must cut,
filter and stem text the same way, or a section judged relevant would yield no sentence to quote.
Words are runs of letters, marks and digits after NFKC case folding; stop words are English
function words plus question scaffolding ("how", "happens", "way"); stems come from the Snowball
English stemmer, so "limits", "limiting" and "limiter" are one term.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final

import snowballstemmer

__all__ = [
    "STOP_WORDS",
    "content_terms",
    "name_terms",
    "question_clauses",
    "stem",
    "term_set",
    "words",
]

_STOP_TEXT: Final = """
    a about above after again against all also am an and any anything are as at be because been
    before being below between both but by can cannot could did do does doing done down during
    each either else etc ever every few for from further get gets getting give given go goes
    going got had has have having he her here hers herself him himself his how however i if in
    into is it its itself just kind let lets like may me might mine more most much must my myself
    need needs neither no nor not now of off on once one ones only or other others our ours
    ourselves out over own please possible put rather really same say says shall she should show
    so some something such sure tell than thank thanks that the their theirs them themselves then
    there these they thing things this those through to too under until up upon us very via want
    wants was way ways we well were what whatever when where whether which while who whom whose
    why will with within without would yes yet you your yours yourself yourselves happen happens
    happened work works working able anyone someone somebody exactly actually use uses used using
    make makes made explain s t don doesn isn aren wasn weren won wouldn shouldn couldn
"""
#: Function words and question scaffolding: they say nothing about what is asked.
STOP_WORDS: Final = frozenset(_STOP_TEXT.split())

_WORD: Final = re.compile(r"[^\W_]+")
_TOKEN: Final = re.compile(r"[@\w][\w@/.:+-]*")
_SENTENCE_END: Final = frozenset(".!?:")
_STEMMER: Final = snowballstemmer.stemmer("english")
#: Where a question's clauses part: ", and", "; ", "and then", a second question mark.
_CLAUSE: Final = re.compile(
    r",\s*(?:and|but|or)\s+|;\s+|\?\s+(?=\S)|\s+and\s+then\s+", re.IGNORECASE
)
#: The context every clause shares: what comes before a colon or a dash.
_CONTEXT: Final = re.compile(r"^([^?]{1,120}?)\s*(?::|\s[—–-])\s+")


def words(text: str) -> list[str]:
    """The words of ``text``, NFKC case-folded, in order (punctuation and ``_`` split them)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of a folded word; numbers are their own stem."""
    if word.isdigit():
        return word
    return str(_STEMMER.stemWord(word))


def content_terms(text: str) -> tuple[str, ...]:
    """The distinct content terms of ``text``, in order: stop words dropped, stemmed.

    Single letters are dropped; numbers are kept (``429`` is a fine term).

    >>> content_terms("How do I configure the rate limiter?")
    ('configur', 'rate', 'limit')
    """
    seen: dict[str, None] = {}
    for word in words(text):
        if word in STOP_WORDS or (len(word) < 2 and not word.isdigit()):
            continue
        seen.setdefault(stem(word), None)
    return tuple(seen)


def term_set(text: str) -> frozenset[str]:
    """Every stemmed word of ``text``, stop words included (what a text can match)."""
    return frozenset(stem(word) for word in words(text))


def name_terms(text: str) -> frozenset[str]:
    """The stems of the words ``text`` writes as names, not as plain words.

    A name is a token of two characters or more (letters, digits and ``@ / . : + - _``
    inside) that has a capital
    letter after its first character (``GraphQL``, ``CORS``), starts with a capital letter
    anywhere but at the start of a sentence (``Datadog``), holds ``@``, ``/`` or ``_``
    (``@scope/pkg``, ``snake_case``), or mixes letters and digits (``Auth0``).

    >>> sorted(name_terms("How do I send metrics to Datadog from @acme/web?"))
    ['acm', 'datadog', 'web']
    """
    found: set[str] = set()
    sentence_start = True
    normalized = unicodedata.normalize("NFKC", text)
    for match in _TOKEN.finditer(normalized):
        token = match.group().rstrip(".:-+")
        letters = [char for char in token if char.isalpha()]
        named = len(token) > 1 and (
            any(char.isupper() for char in token[1:])
            or (token[0].isupper() and not sentence_start)
            or any(char in token for char in "@/_")
            or (bool(letters) and any(char.isdigit() for char in token))
        )
        if named:
            found.update(stem(word) for word in words(token))
        sentence_start = match.group()[-1] in _SENTENCE_END or _follows_sentence_end(
            normalized, match.end()
        )
    return frozenset(found)


def _follows_sentence_end(text: str, end: int) -> bool:
    rest = text[end : end + 3].lstrip()
    return bool(rest) and rest[0] in _SENTENCE_END


def question_clauses(text: str) -> tuple[str, list[str]]:
    """The context of a question and its clauses, in order (blank clauses dropped).

    Clauses are joined by ``, and`` (``but``, ``or``), ``and then``, ``;`` or a second
    question mark; the context is what comes before a colon or a dash, shared by every clause.
    A question without parts is one clause.

    >>> question_clauses("Angular: which peers go in, and which versions work?")
    ('Angular', ['which peers go in', 'which versions work?'])
    """
    body = text.strip()
    context = ""
    lead = _CONTEXT.match(body)
    if lead is not None:
        context, body = lead.group(1), body[lead.end() :]
    return context, [piece for piece in _CLAUSE.split(body) if piece.strip()]
