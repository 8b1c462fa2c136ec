"""``render_answer`` refusals: one-line reasons, a valid example, no values, the size cap."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentskit_chat.answer_commit import (
    MAX_BASIS_CHARACTERS,
    MAX_RENDERED_ANSWER_CHARACTERS,
    render_answer,
)
from agentskit_chat.errors import AgentsKitChatError, AnswerCommitError

SECRET = "SECRET-7f3a"
BASIS = f"Rows of {SECRET}_table, one per order."
TABLE = {"columns": [f"{SECRET}-name", "count"], "data": [[SECRET, 1]]}


def payload(**members: Any) -> dict[str, Any]:
    return {"basis": BASIS, **members}


def field(label: str, value: Any) -> dict[str, Any]:
    return {"label": label, "value": value}


def fields(value: Any) -> dict[str, Any]:
    return payload(fields=[field(SECRET, value)])


def rows(**table: Any) -> dict[str, Any]:
    return payload(rows={**TABLE, **table})


SIXTEEN_DIGITS = (
    "The number at {where} has more than 15 significant digits, so its digits may already be "
    "changed; pass the exact value as a string."
)
UNSAFE = (
    "The number at {where} is outside the safe-integer range (+/-9007199254740991), so its "
    "digits may already be changed; pass the exact value as a string."
)
PRECISION_RANGE = "rows.precision values must be whole numbers from 0 to 10 (decimal places)."
EMPTY_VALUE = "fields[0].value is empty: every field needs one value."

ERRORS = [
    # Empty values, one value per field.
    pytest.param(fields(""), "fields", EMPTY_VALUE, id="empty-value"),
    pytest.param(fields("   "), "fields", EMPTY_VALUE, id="whitespace-value"),
    pytest.param(fields(None), "fields", EMPTY_VALUE, id="null-value"),
    pytest.param(fields([]), "fields", EMPTY_VALUE, id="empty-array-value"),
    pytest.param(
        fields([SECRET, "b"]),
        "fields",
        "fields[0].value holds several values: give one value per field, a field per item, or "
        "use rows for a list.",
        id="several-values",
    ),
    pytest.param(
        fields({"x": SECRET}),
        "fields",
        "fields[0].value must be text, a number or a boolean.",
        id="object-value",
    ),
    pytest.param(
        payload(fields=[field(SECRET, 1), {"value": SECRET}]),
        "fields",
        "fields[1].label is empty: give what the value is.",
        id="missing-label",
    ),
    pytest.param(
        payload(fields=[{**field(SECRET, 1), SECRET: 1}]),
        "fields",
        "fields[0] may only have label and value.",
        id="extra-field-member",
    ),
    pytest.param(
        payload(fields={"label": SECRET}),
        "fields",
        "fields must be an array.",
        id="fields-not-array",
    ),
    # Shapes.
    pytest.param(
        payload(fields=[field(SECRET, 1)], rows=TABLE),
        "fields",
        "Give exactly one of fields, rows or unresolved; this payload has fields and rows.",
        id="two-shapes",
    ),
    pytest.param(
        payload(rows=TABLE, unresolved={"reason": SECRET}),
        "rows",
        "Give exactly one of fields, rows or unresolved; this payload has rows and unresolved.",
        id="two-shapes-rows-unresolved",
    ),
    pytest.param(
        payload(fields=[], rows=None, unresolved={"reason": ""}),
        "fields",
        "Give exactly one of fields, rows or unresolved; this payload has none.",
        id="no-shape",
    ),
    pytest.param(
        payload(unresolved=SECRET),
        "unresolved",
        "unresolved must be an object with only a reason.",
        id="unresolved-not-object",
    ),
    # Basis.
    pytest.param(
        {"fields": [field(SECRET, 1)]},
        "fields",
        "basis is required: one or two sentences naming the population, grain and source "
        "object or column.",
        id="missing-basis",
    ),
    pytest.param(
        {"fields": [field(SECRET, 1)], "basis": "  ", "answer_only": True},
        "fields",
        "basis is required (also when answer_only is true): one or two sentences naming the "
        "population, grain and source object or column.",
        id="missing-basis-answer-only",
    ),
    pytest.param(
        {"rows": TABLE, "answer_only": "true"},
        "rows",
        "basis is required (also when answer_only is true): one or two sentences naming the "
        "population, grain and source object or column.",
        id="missing-basis-answer-only-rows",
    ),
    pytest.param(
        {"fields": [field(SECRET, 1)], "basis": "x" * 401},
        "fields",
        "basis is 401 characters; keep it to at most 400 (one or two sentences).",
        id="basis-over-400",
    ),
    pytest.param(
        {"fields": [field(SECRET, 1)], "basis": 12},
        "fields",
        "basis must be text: give one or two sentences naming the population, grain and source "
        "object or column.",
        id="basis-not-text",
    ),
    # Rows.
    pytest.param(
        rows(data=[[SECRET, 1], [SECRET]]),
        "rows",
        "rows.data[1] has 1 cell but there are 2 columns: every row needs one cell per column "
        "(null for an empty cell).",
        id="ragged-rows-short",
    ),
    pytest.param(
        rows(data=[[SECRET, 1, 2]]),
        "rows",
        "rows.data[0] has 3 cells but there are 2 columns: every row needs one cell per column "
        "(null for an empty cell).",
        id="ragged-rows-long",
    ),
    pytest.param(
        rows(data=[]),
        "rows",
        "rows.data is empty: give at least one row, or commit a field saying so.",
        id="no-rows",
    ),
    pytest.param(
        rows(columns=[]),
        "rows",
        "rows.columns is empty: give one label per column.",
        id="no-columns",
    ),
    pytest.param(
        rows(columns=[SECRET, " "]),
        "rows",
        "rows.columns[1] is empty: give a column label.",
        id="blank-column-label",
    ),
    pytest.param(
        rows(data=[[SECRET, {"n": 1}]]),
        "rows",
        "rows.data[0][1] must be text, a number, a boolean or null (one value per cell).",
        id="object-cell",
    ),
    pytest.param(
        rows(data=[SECRET]),
        "rows",
        "rows.data[0] must be an array.",
        id="row-not-array",
    ),
    pytest.param(
        rows(format="xlsx"),
        "rows",
        "rows.format must be one of markdown, csv, tsv or lines.",
        id="unknown-format",
    ),
    pytest.param(
        rows(**{SECRET: 1}),
        "rows",
        "rows may only have columns, data, precision and format.",
        id="unknown-rows-member",
    ),
    # Precision.
    *(
        pytest.param(rows(precision={"count": places}), "rows", PRECISION_RANGE, id=f"prec-{i}")
        for i, places in enumerate([11, -1, 2.5, "2", True])
    ),
    pytest.param(
        rows(precision={f"{SECRET}-nam": 2}),
        "rows",
        "Every rows.precision key must name a column exactly as written in rows.columns.",
        id="precision-key-not-a-column",
    ),
    pytest.param(
        rows(columns=["count", "count"], precision={"count": 2}),
        "rows",
        "rows.columns must be unique labels when rows.precision is used.",
        id="precision-needs-unique-labels",
    ),
    pytest.param(
        rows(precision=[2]),
        "rows",
        "rows.precision must be an object mapping column labels to 0 to 10.",
        id="precision-not-object",
    ),
    # Precision loss.
    pytest.param(
        '{"fields":[{"label":"n","value":1234567890123456.7}],"basis":"b"}',
        "fields",
        SIXTEEN_DIGITS.format(where="fields[0].value"),
        id="loss-1234567890123456.7",
    ),
    pytest.param(
        '{"rows":{"columns":["a","b"],"data":[["x",0.30000000000000004]]},"basis":"b"}',
        "rows",
        SIXTEEN_DIGITS.format(where="rows.data[0][1]"),
        id="loss-in-a-cell",
    ),
    pytest.param(
        fields(9007199254740991),
        "fields",
        SIXTEEN_DIGITS.format(where="fields[0].value"),
        id="loss-sixteen-digit-integer",
    ),
    pytest.param(
        '{"fields":[{"label":"n","value":9007199254740993}],"basis":"b"}',
        "fields",
        UNSAFE.format(where="fields[0].value"),
        id="loss-beyond-safe-integer",
    ),
    pytest.param(
        fields(1e21),
        "fields",
        UNSAFE.format(where="fields[0].value"),
        id="loss-1e21",
    ),
    pytest.param(
        fields(float("nan")),
        "fields",
        "The number at fields[0].value is not a finite number.",
        id="not-finite",
    ),
    # The payload as a whole.
    pytest.param(
        payload(fields=[field(SECRET, 1)], answer_only="yes"),
        "fields",
        "answer_only must be true or false.",
        id="answer-only-not-boolean",
    ),
    pytest.param(
        payload(fields=[field(SECRET, 1)], answer_only=2),
        "fields",
        "answer_only must be true or false.",
        id="answer-only-two",
    ),
    pytest.param(
        payload(fields=[field(SECRET, 1)], **{SECRET: 1}),
        "fields",
        "The payload may only have fields, rows, unresolved, basis, answer_only and readings.",
        id="unknown-member",
    ),
    pytest.param(
        payload(fields=[field(SECRET, 1)], readings=[SECRET]),
        "fields",
        "readings[0] must be an object with clause, reading, result and decision.",
        id="reading-not-object",
    ),
    pytest.param(
        payload(fields=[field(SECRET, 1)], readings=[{"clause": 3}]),
        "fields",
        "readings[0].clause must be text.",
        id="reading-member-not-text",
    ),
    pytest.param(f'{{"basis": "{SECRET}", ', "fields", "The payload is not valid JSON.", id="json"),
    pytest.param(f'["{SECRET}"]', "fields", "The payload must be a JSON object.", id="array"),
]


def example_shape(example: str) -> str:
    shapes = [name for name in ("fields", "rows", "unresolved") if name in json.loads(example)]
    assert len(shapes) == 1
    return shapes[0]


@pytest.mark.parametrize(("data", "shape", "reason"), ERRORS)
def test_validation_errors_are_one_line_with_a_valid_example(
    data: Any, shape: str, reason: str
) -> None:
    with pytest.raises(AnswerCommitError) as caught:
        render_answer(data)
    error = caught.value
    assert isinstance(error, AgentsKitChatError)
    assert error.reason == reason
    assert "\n" not in error.reason
    assert str(error) == f"{reason}\nExample: {error.example}"
    # The example is compact JSON of the shape in play, and is itself a valid payload.
    assert example_shape(error.example) == shape
    assert json.dumps(json.loads(error.example), separators=(",", ":")) == error.example
    assert render_answer(error.example)
    # Places are named by path, never by the payload's own values.
    assert SECRET not in str(error)


def test_basis_length_counts_utf16_units_and_allows_exactly_400() -> None:
    ok = "x" * MAX_BASIS_CHARACTERS
    assert render_answer({"fields": [field("n", 1)], "basis": ok}).startswith(ok)
    # 399 + one astral character is 400 code points but 401 UTF-16 code units.
    with pytest.raises(AnswerCommitError, match="basis is 401 characters"):
        render_answer({"fields": [field("n", 1)], "basis": "x" * 399 + "\U0001f600"})


def sized_payload(target: int) -> dict[str, Any]:
    """A Markdown table whose rendered text is ``target`` characters, escaping and basis included.

    Each ``|`` in the cell renders as ``\\|`` (two characters), so the escaping is counted.
    """
    basis = "Every file of the repository, one row per file, from files.path."
    base = {"rows": {"columns": ["path", "size"], "data": [["", 1]]}, "basis": basis}
    empty = len(render_answer(base))
    missing = target - empty
    cell = "|" * (missing // 2) + "x" * (missing % 2)
    return {**base, "rows": {"columns": ["path", "size"], "data": [[cell, 1]]}}


@pytest.mark.parametrize("size", [59_999, 60_000])
def test_rendered_size_up_to_the_cap_is_accepted(size: int) -> None:
    text = render_answer(sized_payload(size))
    assert len(text) == size
    assert text.startswith("Every file of the repository")
    assert "\\|\\|" in text


def test_rendered_size_one_past_the_cap_is_refused_with_instructions() -> None:
    data = sized_payload(MAX_RENDERED_ANSWER_CHARACTERS + 1)
    # Without the basis and escaping the table would fit: both are counted.
    cell = data["rows"]["data"][0][0]
    assert len(cell) + len(data["basis"]) < MAX_RENDERED_ANSWER_CHARACTERS
    with pytest.raises(AnswerCommitError) as caught:
        render_answer(data)
    assert caught.value.reason == (
        "The rendered answer is 60001 characters, over the limit of 60000: aggregate or narrow "
        "the rows, or write the full table to a file and commit a summary of it."
    )


def test_rendered_size_cap_counts_csv_quoting() -> None:
    # One quote renders as four characters (""""): 15,000 rows of 5 characters, then the header.
    data = {
        "rows": {"columns": ["q"], "data": [['"'] for _ in range(15_000)], "format": "csv"},
        "basis": "b",
        "answer_only": True,
    }
    with pytest.raises(AnswerCommitError, match="The rendered answer is 75001 characters"):
        render_answer(data)
