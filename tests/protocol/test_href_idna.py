"""IDNA hosts in safe links: never safer-looking than the reference's parser allows."""

from __future__ import annotations

from itertools import pairwise
from urllib.parse import quote

import pytest

from agentskit_chat.protocol import is_safe_href
from agentskit_chat.protocol._idna_reference import REFERENCE_DISALLOWED

DISALLOWED = [cp for first, last in REFERENCE_DISALLOWED for cp in range(first, last + 1)]


def test_table_is_sorted_disjoint_non_ascii_runs() -> None:
    assert all(0x80 <= first <= last for first, last in REFERENCE_DISALLOWED)
    assert all(a[1] < b[0] for a, b in pairwise(REFERENCE_DISALLOWED))
    assert 0x180E in DISALLOWED and 0x3164 in DISALLOWED


def test_no_host_holding_a_code_point_the_reference_disallows_is_safe() -> None:
    unsafe = [
        f"U+{cp:04X}"
        for cp in DISALLOWED
        if is_safe_href(f"https://a{chr(cp)}b/") or is_safe_href(f"http:{chr(cp)}x.com")
    ]
    assert not unsafe


@pytest.mark.parametrize("cp", [0x180E, 0x3164, 0x115F, 0x1C8A, 0x105C0])
def test_percent_encoded_and_punycode_forms_are_refused_too(cp: int) -> None:
    char = chr(cp)
    assert not is_safe_href(f"https://{quote(char)}example.com/")
    assert not is_safe_href(f"https://www.{quote('a' + char + 'b')}.com/x")
    assert not is_safe_href(f"https://xn--{('a' + char + 'b').encode('punycode').decode()}/")


@pytest.mark.parametrize(
    "href",
    [
        "https://bücher.de/",
        "https://xn--bcher-kva.de/",
        "https://例え.jp/",
        "https://Ⓔxample.com/",
        "https://%C3%A9.com/",
        "https://example.com/\u180e",
        "https://example.com/?q=\u3164#\u180e",
    ],
)
def test_ordinary_idn_hosts_and_paths_stay_safe(href: str) -> None:
    assert is_safe_href(href)


@pytest.mark.parametrize(
    "href", ["https://\u0660/", "https://a\u0660/", "https://xn--1-/", "https://xn---0ij/"]
)
def test_idna_hosts_also_meet_the_current_url_standard(href: str) -> None:
    # The reference's older parser accepts these: an Arabic-Indic digit label breaks the
    # bidirectional-text rule, ``xn--1-`` spells the all-ASCII ``1`` and ``xn---0ij`` is not
    # the form ``ⳃ`` encodes to. Each makes one host look like another, so none is safe here.
    assert not is_safe_href(href)
