"""base36: ``number.toString(36)`` of the ids made from a counter or a clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.protocol._text import base36


@given(st.integers(min_value=1, max_value=2**64))
def test_a_positive_number_is_written_in_lower_case_base_36(number: int) -> None:
    written = base36(number)
    assert int(written, 36) == number
    assert written == written.lower() and not written.startswith("0")


def test_known_values_and_what_is_not_positive() -> None:
    assert [base36(n) for n in (1, 35, 36, 1_700_000_000_000)] == ["1", "z", "10", "loyw3v28"]
    assert base36(0) == base36(-5) == "0"
