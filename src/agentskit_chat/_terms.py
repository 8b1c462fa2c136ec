"""Words, stop words and stems: the one text analysis of questions and docs.

Relevance (:mod:`agentskit_chat.retrieval`) and extractive answers
(:mod:`agentskit_chat.generation`) compare a question's terms with a section's; they must cut,
filter and stem text the same way, or a section judged relevant would yield no sentence to quote.
Words are runs of letters, marks and digits after NFKC case folding; stop words are English
function words plus question scaffolding ("how", "happens", "way"); stems come from the Snowball
English stemmer, so "limits", "limiting" and "limiter" are one term.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from agentskit_chat._stemmer import english_stemmer, source_files

__all__ = [
    "DOING_TERMS",
    "STOP_WORDS",
    "asks_how_to",
    "by_default",
    "command_terms",
    "content_terms",
    "corrected",
    "followup_question",
    "is_followup",
    "know_stems",
    "known_stems",
    "name_terms",
    "prefixed",
    "question_clauses",
    "rooted",
    "stem",
    "stemmer_files",
    "term_set",
    "words",
]

_STOP_TEXT: Final = """
    a about above after again against all also am an and any anything are as at be because been
    before being below between both but by can cannot could did do does doing done down during
    each either else etc ever every few for from further get gets getting give given go goes
    going got had has have having he her here hers herself him himself his how however i if in
    into is it its itself just kind let lets like many may me might mine more most much must my
    myself need needs neither no nor not now of off on once one ones only or other others our
    ours ourselves out over own please possible put rather really same say says shall she should
    show so some something such sure tell than thank thanks that the their theirs them themselves
    then
    there these they thing things this those through to too under until up upon us very via want
    wants was way ways we well were what whatever when where whether which while who whom whose
    why will with within without would yes yet you your yours yourself yourselves happen happens
    happened work works working able anyone someone somebody exactly actually use uses used using
    make makes made explain s t don doesn isn aren wasn weren won wouldn shouldn couldn
    inside outside across among amongst onto toward towards beyond beside besides throughout
"""
#: Function words and question scaffolding: they say nothing about what is asked.
STOP_WORDS: Final = frozenset(_STOP_TEXT.split())

_WORD: Final = re.compile(r"[^\W_]+")
_TOKEN: Final = re.compile(r"[@\w][\w@/.:+-]*")
_SENTENCE_END: Final = frozenset(".!?:")
_STEMMER: Final = english_stemmer()
#: Where a question's clauses part: ", and", "; ", "and then", a second question mark.
_CLAUSE: Final = re.compile(
    r",\s*(?:and|but|or)\s+|;\s+|\?\s+(?=\S)|\s+and\s+then\s+", re.IGNORECASE
)
#: The context every clause shares: what comes before a colon or a dash.
_CONTEXT: Final = re.compile(r"^([^?]{1,120}?)\s*(?::|\s[—–-])\s+")


def words(text: str) -> list[str]:
    """The words of ``text``, NFKC case-folded, in order (punctuation and ``_`` split them)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


#: The stems known so far, computed or taken from a start cache (:func:`know_stems`); at most
#: :data:`_STEMS_KEPT` of them.
_STEMS: dict[str, str] = {}
_STEMS_KEPT: Final = 65536


def stem(word: str) -> str:
    """The Snowball English stem of a folded word; numbers are their own stem."""
    found = _STEMS.get(word)
    if found is None:
        found = word if word.isdigit() else str(_STEMMER.stemWord(word))
        if len(_STEMS) < _STEMS_KEPT:
            _STEMS[word] = found
    return found


def known_stems(folded: Iterable[str]) -> dict[str, str]:
    """The stems this process already knows of the words ``folded``; none is stemmed here."""
    return {word: found for word in folded if (found := _STEMS.get(word)) is not None}


def know_stems(stems: Mapping[str, str]) -> None:
    """Take ``stems`` (folded words and the stems :func:`stem` gives them) as known.

    The start cache keeps the stems of a folder's words beside its vocabulary: a start that
    reads them runs the stemmer (pure Python: ~15 ms for the sections of one answer) on none
    of them. Nothing else may be passed: a wrong stem is a wrong answer.
    """
    room = _STEMS_KEPT - len(_STEMS)
    if room > 0:
        _STEMS.update(stems if len(stems) <= room else dict(list(stems.items())[:room]))


def stemmer_files() -> tuple[Path, ...]:
    """The files of the Snowball algorithm behind :func:`stem`: what every stem depends on."""
    return source_files(_STEMMER)


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


#: A ``#`` comment in code: from a ``#`` at a line's start or after a space to the line's end.
_CODE_COMMENT: Final = re.compile(r"(?:^|(?<=\s))#.*$", re.MULTILINE)


def command_terms(code: str) -> frozenset[str]:
    """The terms of ``code`` without its ``#`` comments: what a command or a configuration
    names, not what its comments say about it.

    >>> sorted(command_terms("pip install widget  # then PostgreSQL"))
    ['instal', 'pip', 'widget']
    """
    return term_set(_CODE_COMMENT.sub("", code))


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
    return frozenset(stem(word) for token in _name_tokens(text) for word in words(token))


def _name_tokens(text: str) -> list[str]:
    """The tokens ``text`` writes as names (see :func:`name_terms`), as written."""
    found: list[str] = []
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
            found.append(token)
        sentence_start = match.group()[-1] in _SENTENCE_END or _follows_sentence_end(
            normalized, match.end()
        )
    return found


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


#: "when I don't pass one", "if you do not set it", "unless I change it", "out of the box": the
#: question asks what happens by default. The verb names no topic ("pass" is not "Passing
#: arguments").
_UNLESS_GIVEN: Final = re.compile(
    r"\bout\s+of\s+the\s+box\b|"
    r"\b(?:(?:when|if)\s+(?:i|you|we)\s+(?:do\s+not|don['’]?t|never)|unless\s+(?:i|you|we))"
    r"\s+(?:pass|set|give|specify|provide|supply|change|configure|choose|pick|define|override)"
    r"(?:\s+(?:one|it|them|any|anything|that|this))?(?=\s*(?:[?.!,;]|$))",
    re.IGNORECASE,
)


def by_default(question: str) -> str:
    """``question`` with a clause asking what happens when nothing is given ("when I don't
    pass one", "unless I change it", "out of the box") written as what it asks: "by default".

    >>> by_default("Into which directory are builds written when I don't pass one?")
    'Into which directory are builds written by default?'
    """
    return _UNLESS_GIVEN.sub("by default", question)


#: A question with one of these terms asks for something to type (a command, a setting).
DOING_TERMS: Final = frozenset(
    content_terms("install run setup set configure start deploy command")
)
#: "How do I …?", "How can I …?", "How to …?": a question asking for steps.
_HOW_TO: Final = re.compile(r"\s*how\s+(?:(?:do|can|could|should)\s+(?:i|we|you)|to)\b", re.I)


def asks_how_to(question: str) -> bool:
    """Whether ``question`` asks how to do something ("How do I …?", "How to …?", or to
    install, run, set up, start, deploy or configure something): what a section's code shows.

    >>> asks_how_to("How do I run the soak?"), asks_how_to("What does the soak print?")
    (True, False)
    """
    if _HOW_TO.match(question) is not None:
        return True
    return any(term in DOING_TERMS for term in content_terms(question))


# --- follow-ups and typos -------------------------------------------------------------------------

#: What an elliptic follow-up starts with: "and for Redis?", "what about Windows?".
_FOLLOWUP: Final = re.compile(
    r"^\W*(?:and|or|but|also|what\s+about|how\s+about|same\s+for|then)\b(?:\s+(?:for|with|in|on"
    r"|about|to|if|when|using|via|under))?\s*",
    re.IGNORECASE,
)
#: A follow-up has at most this many content terms of its own.
_FOLLOWUP_TERMS: Final = 3


def is_followup(question: str) -> bool:
    """Whether ``question`` only makes sense after the previous one: it starts like a
    continuation ("and for Redis?", "what about Windows?") and names at most three things.

    >>> is_followup("and for Redis?"), is_followup("How do I use Redis?")
    (True, False)
    """
    return bool(_FOLLOWUP.match(question)) and 0 < len(content_terms(question)) <= _FOLLOWUP_TERMS


def followup_question(question: str, earlier: Sequence[str]) -> str:
    """The question an elliptic follow-up asks, written out with the previous question.

    ``earlier`` are the conversation's earlier user questions, oldest first. When
    ``question`` is a follow-up (:func:`is_followup`) and there is a previous question (itself
    written out when it was a follow-up too), the follow-up's names take the place of the
    previous question's last names ("How do I run the server with PostgreSQL?" then "and for
    Redis?" asks "How do I run the server with Redis?"); without names to swap, the
    follow-up's words are added to the previous question. Any other question is returned as
    it is.

    >>> followup_question("and for Redis?", ["How do I run the server with PostgreSQL?"])
    'How do I run the server with Redis?'
    """
    if not earlier or not is_followup(question):
        return question
    previous = followup_question(earlier[-1], earlier[:-1])
    rest = _FOLLOWUP.sub("", question, count=1).strip().rstrip("?!. ")
    new_names = _name_tokens(f"x {rest}")
    old_names = _name_tokens(previous)
    if new_names and old_names:
        swapped = previous
        for old, new in zip(reversed(old_names), reversed(new_names), strict=False):
            at = swapped.rfind(old)
            swapped = swapped[:at] + new + swapped[at + len(old) :]
        return swapped
    return f"{previous.rstrip()} {rest}".strip()


#: Words this long may differ from a known word by one edit, and by two from this long.
_ONE_EDIT: Final = 5
_TWO_EDITS: Final = 9


def _distance(a: str, b: str, limit: int) -> int:
    """The optimal-string-alignment distance of ``a`` and ``b`` (``limit + 1`` when larger)."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i] + [0] * len(b)
        for j, char_b in enumerate(b, start=1):
            cost = char_a != char_b
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and char_a == b[j - 2] and a[i - 2] == char_b:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return previous[-1]


#: Prefixes that make a new word of a known one: "uncompressed" is not a typo of "compressed".
_PREFIXES: Final = (
    "anti", "dis", "non", "un", "in", "im", "il", "ir", "mis", "de", "re", "pre", "sub",
    "over", "under", "multi", "auto", "co",
)  # fmt: skip
#: The prefixes among them that say "not": "unsigned" is "not signed".
_NEGATING: Final = frozenset({"anti", "dis", "non", "un", "in", "im", "il", "ir"})
#: The shortest known word a prefix is read before.
_ROOT_LETTERS: Final = 4


def prefixed(word: str, vocabulary: Mapping[str, int]) -> tuple[str, str] | None:
    """The prefix and known word ``word`` is made of ("uncompressed" → ``("un",
    "compressed")``), or ``None`` when it is not a prefix before a word ``vocabulary`` holds.

    >>> prefixed("uncompressed", {"compressed": 2}), prefixed("compresed", {"compressed": 2})
    (('un', 'compressed'), None)
    """
    for prefix in _PREFIXES:
        root = word[len(prefix) :].lstrip("-")
        if word.startswith(prefix) and len(root) >= _ROOT_LETTERS and root in vocabulary:
            return prefix, root
    return None


def rooted(question: str, vocabulary: Mapping[str, int]) -> str:
    """``question`` with each word the corpus never writes but that is a prefix before a word
    it does (:func:`prefixed`) written with that word, so search finds the pages about it: a
    negating prefix is written out ("left uncompressed" → "left not compressed"), others
    dropped ("recompressed" → "compressed"). :func:`corrected` keeps such words as asked.

    >>> rooted("Which responses stay uncompressed?", {"compressed": 2})
    'Which responses stay not compressed?'
    """
    roots: dict[str, str] = {}
    for word in set(words(question)):
        if word in vocabulary or word in STOP_WORDS:
            continue
        if (found := prefixed(word, vocabulary)) is not None:
            prefix, root = found
            roots[word] = f"not {root}" if prefix in _NEGATING else root
    if not roots:
        return question
    pattern = re.compile(r"\b(" + "|".join(re.escape(word) for word in roots) + r")\b", re.I)
    return pattern.sub(lambda m: roots[m.group(0).casefold()], question)


def corrected(question: str, vocabulary: Mapping[str, int]) -> tuple[str, dict[str, str]]:
    """``question`` with its misspelled words replaced by the words ``vocabulary`` holds.

    ``vocabulary`` counts the folded words of a corpus (:func:`words`). A word of the question
    that the corpus never writes, of at least five letters and no digit, becomes the corpus word
    one edit away (two for words of nine letters or more: a swap of two neighbouring letters is
    one edit), the most frequent when several are; a word with no such neighbour is kept, and so
    is a known prefix before a corpus word that the correction would only drop
    (:func:`prefixed`: "uncompressed" is not a misspelled "compressed", which asks the
    opposite; "regenerate" still becomes "regenerated"). Returns the question and what was replaced
    (``{"confgure": "configure"}``).

    >>> corrected("How do I confgure the limiter?", {"configure": 3, "limiter": 1})
    ('How do I configure the limiter?', {'confgure': 'configure'})
    """
    replaced: dict[str, str] = {}
    for word in set(words(question)):
        if word in vocabulary or word in STOP_WORDS or len(word) < _ONE_EDIT:
            continue
        if any(char.isdigit() for char in word):
            continue
        limit = 2 if len(word) >= _TWO_EDITS else 1
        best: tuple[int, int, str] | None = None
        for known, count in vocabulary.items():
            if abs(len(known) - len(word)) > limit or (known[0] != word[0] and limit == 1):
                continue
            distance = _distance(word, known, limit)
            if distance <= limit and (best is None or (distance, -count) < best[:2]):
                best = (distance, -count, known)
        root = prefixed(word, vocabulary)
        if best is not None and (root is None or stem(best[2]) != stem(root[1])):
            replaced[word] = best[2]
    if not replaced:
        return question, {}
    pattern = re.compile(
        r"\b(" + "|".join(re.escape(word) for word in replaced) + r")\b", re.IGNORECASE
    )
    return pattern.sub(lambda m: replaced[m.group(0).casefold()], question), replaced
