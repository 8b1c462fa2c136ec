"""The final-sigma rule of key normalization, decided with Unicode 17 Cased / Case_Ignorable."""

from __future__ import annotations

import unicodedata
from itertools import pairwise

import pytest
import unicodedata2
from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.protocol import normalize_knowledge_key
from agentskit_chat.protocol._text import JS_WHITESPACE, _js_lower
from agentskit_chat.protocol._unicode_case import CASE_IGNORABLE, CASED

SIGMA = "\u03a3"
SMALL_SIGMA = "\u03c3"
FINAL_SIGMA = "\u03c2"


def _points(table: tuple[tuple[int, int], ...]) -> frozenset[int]:
    return frozenset(cp for first, last in table for cp in range(first, last + 1))


CASED_POINTS = _points(CASED)
IGNORABLE_POINTS = _points(CASE_IGNORABLE)
ASSIGNED = [
    chr(cp)
    for cp in range(0x110000)
    if unicodedata2.category(chr(cp)) != "Cn" and not 0xD800 <= cp <= 0xDFFF
]


def _cased(char: str) -> bool:
    return ord(char) in CASED_POINTS


def _ignorable(char: str) -> bool:
    return ord(char) in IGNORABLE_POINTS


def _expected_sigma(text: str, index: int) -> str:
    """Final_Sigma as the Unicode standard states it, over the generated tables."""
    before = [c for c in text[:index] if not _ignorable(c)]
    after = [c for c in text[index + 1 :] if not _ignorable(c)]
    preceded = bool(before) and _cased(before[-1])
    followed = bool(after) and _cased(after[0])
    return FINAL_SIGMA if preceded and not followed else SMALL_SIGMA


def test_tables_are_sorted_disjoint_runs() -> None:
    for table in (CASED, CASE_IGNORABLE):
        assert all(first <= last for first, last in table)
        assert all(a[1] + 1 < b[0] for a, b in pairwise(table))


def test_tables_hold_the_unicode_17_changes_python_3_11_lacks() -> None:
    # U+0295 stopped being a lower-case letter; U+1C8A and U+A7CD are new lower-case letters.
    assert unicodedata.category("\u0295") == "Ll"
    assert not _cased("\u0295")
    assert _cased("\u1c8a") and _cased("\ua7cd") and _cased("\U00010d70")
    # Modifier letters that are both: skipped as case-ignorable, as ICU does.
    assert _cased("\u02b0") and _ignorable("\u02b0")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("\ua7cc\u03a3", "\ua7cd\u03c2"),
        ("A\u03a3\u0295", "a\u03c2\u0295"),
        ("\u0295\u03a3", "\u0295\u03c3"),
        ("A\u03a3\u1c8a", "a\u03c3\u1c8a"),
        ("\U00010d60\u03a3", "\U00010d80\u03c2"),
        ("A\u03a3\u03a3", "a\u03c3\u03c2"),
        ("A\u03a3'\u03a3'", "a\u03c3'\u03c2'"),
    ],
)
def test_reference_examples(value: str, expected: str) -> None:
    assert normalize_knowledge_key(value) == expected


def test_every_assigned_code_point_before_the_sigma() -> None:
    wrong = [
        f"U+{ord(x):04X}"
        for x in ASSIGNED
        if _js_lower(x + SIGMA)[-1] != _expected_sigma(x + SIGMA, 1)
    ]
    assert not wrong


def test_every_assigned_code_point_between_a_cased_letter_and_the_sigma() -> None:
    wrong = [
        f"U+{ord(x):04X}"
        for x in ASSIGNED
        if _js_lower("A" + x + SIGMA)[-1] != _expected_sigma("A" + x + SIGMA, 2)
    ]
    assert not wrong


def test_every_assigned_code_point_after_the_sigma() -> None:
    wrong = [
        f"U+{ord(x):04X}"
        for x in ASSIGNED
        if _js_lower("A" + SIGMA + x)[1] != _expected_sigma("A" + SIGMA + x, 1)
    ]
    assert not wrong


def test_every_context_through_the_whole_normalization() -> None:
    # Where NFKC leaves the character alone and it is not whitespace, the key is the lowering.
    wrong: list[str] = []
    for x in ASSIGNED:
        if x in JS_WHITESPACE or unicodedata2.normalize("NFKC", x) != x:
            continue
        # (text, index of its sigma, where the sigma lands in the key)
        for text, index, where in (
            (x + SIGMA, 1, -1),
            ("A" + x + SIGMA, 2, -1),
            ("A" + SIGMA + x, 1, 1),
        ):
            if unicodedata2.normalize("NFKC", text) != text:
                continue
            if normalize_knowledge_key(text)[where] != _expected_sigma(text, index):
                wrong.append(f"U+{ord(x):04X}")
    assert not wrong


_POOL = st.sampled_from(
    [
        *(SIGMA, "A", "a", "'", ".", " ", "1", "\u0295", "\u1c8a", "\u02b0", "\u0345"),
        *("\u00ad", "\u0301", "\U00010d60", "\U00010d75", "\u2019", "\u0130", "\ua7cc"),
    ]
)


@given(st.lists(_POOL, max_size=12).map("".join))
def test_every_sigma_of_any_text_follows_the_rule(text: str) -> None:
    lowered = _js_lower(text)
    sigmas = [i for i, c in enumerate(text) if c == SIGMA]
    got = [c for c in lowered if c in (SMALL_SIGMA, FINAL_SIGMA)]
    assert got == [_expected_sigma(text, i) for i in sigmas]
    # Everything else is lowered as without the rule.
    assert lowered.replace(FINAL_SIGMA, SMALL_SIGMA) == _js_lower(text.replace(SIGMA, SMALL_SIGMA))
