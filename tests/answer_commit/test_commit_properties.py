"""Properties of the ``answer_commit`` renderer: tables read back, numbers stay exact."""

from __future__ import annotations

import csv
import io
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agentskit_chat.answer_commit import render_answer
from agentskit_chat.answer_commit._format import format_number, number_problem

text = st.text(max_size=12)
cells = st.one_of(st.none(), text, st.integers(-(10**12), 10**12), st.booleans())


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[list[Any]]]:
    width = draw(st.integers(1, 4))
    columns = draw(st.lists(text.filter(str.strip), min_size=width, max_size=width))
    data = draw(st.lists(st.lists(cells, min_size=width, max_size=width), min_size=1, max_size=6))
    return columns, data


def expected_text(cell: Any) -> str:
    if cell is None or (isinstance(cell, str) and not cell.strip()):
        return ""
    if isinstance(cell, bool):
        return "true" if cell else "false"
    return str(cell)


@settings(max_examples=200)
@given(tables(), st.sampled_from(["csv", "tsv"]))
def test_csv_and_tsv_read_back_cell_for_cell(
    table: tuple[list[str], list[list[Any]]], table_format: str
) -> None:
    columns, data = table
    rendered = render_answer(
        {
            "rows": {"columns": columns, "data": data, "format": table_format},
            "basis": "b",
            "answer_only": True,
        }
    )
    delimiter = "," if table_format == "csv" else "\t"
    read = list(csv.reader(io.StringIO(rendered, newline=""), delimiter=delimiter))
    assert read[0] == [c.strip() for c in columns]
    assert read[1:] == [[expected_text(c) for c in row] for row in data]


@settings(max_examples=200)
@given(tables())
def test_markdown_tables_keep_one_line_per_row_and_one_cell_per_column(
    table: tuple[list[str], list[list[Any]]],
) -> None:
    columns, data = table
    rendered = render_answer({"rows": {"columns": columns, "data": data}, "basis": "b"})
    basis, blank, *lines = rendered.split("\n")
    assert (basis, blank) == ("b", "")
    assert len(lines) == len(data) + 2
    for line in lines:
        # Unescaped pipes: the borders and one separator between cells.
        unescaped = re.findall(r"(?<!\\)(?:\\\\)*\|", line)
        assert len(unescaped) == len(columns) + 1


finite = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=200)
@given(st.one_of(finite, st.integers(-(2**60), 2**60)))
def test_accepted_numbers_render_exactly_and_positionally(value: float) -> None:
    assume(number_problem(value) is None)
    rendered = format_number(value)
    assert "e" not in rendered.lower()
    assert float(rendered) == value
    assert Decimal(rendered) == Decimal(repr(value) if isinstance(value, float) else value)


@settings(max_examples=200)
@given(finite.filter(lambda v: number_problem(v) is None), st.integers(0, 10))
def test_precision_gives_exactly_that_many_decimals(value: float, places: int) -> None:
    rendered = format_number(value, places)
    decimals = rendered.partition(".")[2]
    assert len(decimals) == places
    expected = Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)
    assert Decimal(rendered) == expected
    assert not rendered.startswith("-") or Decimal(rendered) != 0


@settings(max_examples=200)
@given(st.integers(-(2**60), 2**60))
def test_integers_are_refused_exactly_when_unsafe_or_longer_than_15_digits(value: int) -> None:
    digits = len(str(abs(value)).rstrip("0") or "0")
    refused = abs(value) > 2**53 - 1 or digits > 15
    assert (number_problem(value) is not None) is refused
