"""``render_answer``: golden texts for every shape and format, fillers, coercion and numbers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentskit_chat.answer_commit import (
    AnswerReading,
    CommittedAnswer,
    commit_answer,
    render_answer,
)

BASIS = "All orders placed in 2024, one row per order, from orders.id."


def payload(**members: Any) -> dict[str, Any]:
    return {"basis": BASIS, **members}


def field(label: str, value: Any) -> dict[str, Any]:
    return {"label": label, "value": value}


TABLE = {"columns": ["name", "count"], "data": [["alpha", 1], ["beta", 22]]}

GOLDEN = [
    pytest.param(
        payload(fields=[field("Repository", "acme/api")]),
        f"{BASIS}\n\n**Answer:** Repository: acme/api",
        id="one-field",
    ),
    pytest.param(
        payload(fields=[field("Repository", "acme/api"), field("Most copied file", "a.py")]),
        f"{BASIS}\n\n**Answer:**\n- Repository: acme/api\n- Most copied file: a.py",
        id="several-fields-in-order",
    ),
    pytest.param(
        payload(fields=[field("Repository", "acme/api")], answer_only=True),
        "acme/api",
        id="one-field-answer-only",
    ),
    pytest.param(
        payload(fields=[field("Repository", "acme/api"), field("Files", 3)], answer_only=True),
        "Repository: acme/api\nFiles: 3",
        id="several-fields-answer-only",
    ),
    pytest.param(
        payload(rows=TABLE),
        f"{BASIS}\n\n| name | count |\n| --- | --- |\n| alpha | 1 |\n| beta | 22 |",
        id="rows-markdown-default",
    ),
    pytest.param(
        payload(rows={**TABLE, "format": "markdown"}, answer_only=True),
        "| name | count |\n| --- | --- |\n| alpha | 1 |\n| beta | 22 |",
        id="rows-markdown-answer-only",
    ),
    pytest.param(
        payload(rows={**TABLE, "format": "csv"}, answer_only=True),
        "name,count\nalpha,1\nbeta,22",
        id="rows-csv",
    ),
    pytest.param(
        payload(rows={**TABLE, "format": "tsv"}, answer_only=True),
        "name\tcount\nalpha\t1\nbeta\t22",
        id="rows-tsv",
    ),
    pytest.param(
        payload(rows={**TABLE, "format": "lines"}, answer_only=True),
        "alpha 1\nbeta 22",
        id="rows-lines",
    ),
    pytest.param(
        payload(rows={**TABLE, "format": "csv"}),
        f"{BASIS}\n\nname,count\nalpha,1\nbeta,22",
        id="rows-csv-with-basis",
    ),
    pytest.param(
        payload(unresolved={"reason": "The data has no region column."}),
        f"{BASIS}\n\n**Unresolved:** The data has no region column.",
        id="unresolved",
    ),
    pytest.param(
        payload(unresolved={"reason": "The data has no region column."}, answer_only=True),
        "Unresolved: The data has no region column.",
        id="unresolved-answer-only",
    ),
]


@pytest.mark.parametrize(("data", "expected"), GOLDEN)
def test_golden_renderings(data: dict[str, Any], expected: str) -> None:
    assert render_answer(data) == expected
    assert render_answer(json.dumps(data)) == expected
    assert not expected.endswith("\n")


@pytest.mark.parametrize("label", ["Answer", "result", "VALUE", " Value "])
def test_label_dedupe_a_single_answer_field_is_not_double_labelled(label: str) -> None:
    assert render_answer(payload(fields=[field(label, 42)])) == f"{BASIS}\n\n**Answer:** 42"


def test_label_dedupe_applies_to_a_single_field_only() -> None:
    text = render_answer(payload(fields=[field("Answer", 1), field("Result", 2)]))
    assert text == f"{BASIS}\n\n**Answer:**\n- Answer: 1\n- Result: 2"


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        pytest.param(
            {"columns": ["a|b", "c\\d"], "data": [["x|y", "back\\slash"]]},
            "| a\\|b | c\\\\d |\n| --- | --- |\n| x\\|y | back\\\\slash |",
            id="pipes-and-backslashes",
        ),
        pytest.param(
            {"columns": ["note"], "data": [["two\nlines"], ["crlf\r\nhere"]]},
            "| note |\n| --- |\n| two lines |\n| crlf here |",
            id="line-breaks-become-spaces",
        ),
        pytest.param(
            {"columns": ["a", "b", "c"], "data": [[None, True, False]]},
            "| a | b | c |\n| --- | --- | --- |\n|  | true | false |",
            id="null-empty-booleans-as-words",
        ),
    ],
)
def test_markdown_cells_are_escaped(table: dict[str, Any], expected: str) -> None:
    assert render_answer(payload(rows=table, answer_only=True)) == expected


def test_csv_with_a_comma_and_a_quote_in_one_cell() -> None:
    table = {
        "columns": ["name", "say"],
        "data": [['Smith, "Jr"', "hi"], [None, "a\nb"]],
        "format": "csv",
    }
    text = render_answer(payload(rows=table, answer_only=True))
    assert text == 'name,say\n"Smith, ""Jr""",hi\n,"a\nb"'


def test_tsv_with_a_tab() -> None:
    table = {"columns": ["k", "v"], "data": [["a\tb", 'say "x"'], ["plain", None]], "format": "tsv"}
    text = render_answer(payload(rows=table, answer_only=True))
    assert text == 'k\tv\n"a\tb"\t"say ""x"""\nplain\t'


def test_lines_has_no_header_and_one_row_per_line() -> None:
    table = {"columns": ["a", "b", "c"], "data": [["x", None, 3], ["two\nlines", 1.5, True]]}
    text = render_answer(payload(rows={**table, "format": "lines"}, answer_only=True))
    assert text == "x  3\ntwo lines 1.5 true"


@pytest.mark.parametrize(
    ("table_format", "expected"),
    [
        ("csv", "item,price,code\npen,5.00,007\nink,2.68,8\ncap,-1.50,x"),
        (
            "markdown",
            "| item | price | code |\n| --- | --- | --- |\n| pen | 5.00 | 007 |\n"
            "| ink | 2.68 | 8 |\n| cap | -1.50 | x |",
        ),
        ("lines", "pen 5.00 007\nink 2.68 8\ncap -1.50 x"),
    ],
)
def test_precision_fixes_decimals_of_numeric_cells_only(table_format: str, expected: str) -> None:
    table = {
        "columns": ["item", "price", "code"],
        "data": [["pen", 5, "007"], ["ink", 2.675, 8], ["cap", -1.5, "x"]],
        "precision": {"price": 2},
        "format": table_format,
    }
    assert render_answer(payload(rows=table, answer_only=True)) == expected


def test_precision_is_independent_per_column() -> None:
    table = {
        "columns": ["a", "b", "c"],
        "data": [[1, 1, 1.25]],
        "precision": {"a": 0, "b": 3},
    }
    text = render_answer(payload(rows={**table, "format": "csv"}, answer_only=True))
    assert text == "a,b,c\n1,1.000,1.25"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, "5"),
        (5.0, "5"),
        (0.1, "0.1"),
        (-0.0, "0"),
        (1e-7, "0.0000001"),
        (123456789012345, "123456789012345"),
        (1.5e15, "1500000000000000"),
        (-2.5, "-2.5"),
        (True, "true"),
        (False, "false"),
        ("0.10000000000000001", "0.10000000000000001"),
    ],
)
def test_numbers_render_in_their_shortest_exact_decimal_form(value: Any, expected: str) -> None:
    assert render_answer(payload(fields=[field("n", value)], answer_only=True)) == expected


@pytest.mark.parametrize(
    ("places", "value", "expected"),
    [
        (2, 5, "5.00"),
        (2, 2.675, "2.68"),
        (2, 1.005, "1.01"),
        (0, 2.5, "3"),
        (0, -2.5, "-3"),
        (2, -0.001, "0.00"),
        (10, 0.1, "0.1000000000"),
        (3, 123456789012.5, "123456789012.500"),
    ],
)
def test_precision_rounds_half_up_on_the_written_decimal(
    places: int, value: float, expected: str
) -> None:
    table = {"columns": ["v"], "data": [[value]], "precision": {"v": places}, "format": "lines"}
    assert render_answer(payload(rows=table, answer_only=True)) == expected


FILLERS: list[Any] = [None, "", "   ", [], {}]


@pytest.mark.parametrize("filler", FILLERS)
def test_filler_tolerance_unused_shapes_from_strict_clients_are_absent(filler: Any) -> None:
    data = {
        "fields": [field("Total", 3)],
        "rows": filler,
        "unresolved": filler,
        "basis": BASIS,
        "answer_only": filler,
        "readings": filler,
    }
    assert render_answer(data) == f"{BASIS}\n\n**Answer:** Total: 3"


def test_filler_tolerance_strict_client_fills_every_member() -> None:
    data = {
        "fields": [],
        "rows": {"columns": [], "data": [], "precision": None, "format": "markdown"},
        "unresolved": {"reason": " "},
        "basis": BASIS,
        "answer_only": False,
        "readings": [{"clause": "", "reading": "", "result": "", "decision": ""}],
    }
    data["unresolved"] = {"reason": "No such table."}
    assert render_answer(data) == f"{BASIS}\n\n**Unresolved:** No such table."
    data["unresolved"] = {"reason": ""}
    data["rows"] = {**TABLE, "precision": {}, "format": ""}
    assert render_answer(data).endswith("| beta | 22 |")
    data["rows"] = {"columns": [], "data": [], "format": "csv"}
    data["fields"] = [field("Total", 3), {"label": "", "value": None}]
    assert render_answer(data) == f"{BASIS}\n\n**Answer:** Total: 3"


def test_whitespace_cells_are_empty_and_values_are_trimmed() -> None:
    table = {"columns": [" a ", "b"], "data": [["  ", " x "]], "format": "csv"}
    assert render_answer(payload(rows=table, answer_only=True)) == "a,b\n, x "
    assert render_answer(payload(fields=[field(" Repo ", " acme ")])) == (
        f"{BASIS}\n\n**Answer:** Repo: acme"
    )


@pytest.mark.parametrize(
    ("flag", "answer_only"),
    [
        (True, True),
        (False, False),
        ("true", True),
        ("false", False),
        (" TRUE ", True),
        ("False", False),
        (1, True),
        (0, False),
        (1.0, True),
        (None, False),
        ("", False),
    ],
)
def test_boolean_coercion_of_answer_only(flag: Any, answer_only: bool) -> None:
    committed = commit_answer(payload(fields=[field("Total", 3)], answer_only=flag))
    assert committed.answer_only is answer_only
    assert committed.text == ("3" if answer_only else f"{BASIS}\n\n**Answer:** Total: 3")


def test_readings_are_kept_in_metadata_and_never_rendered() -> None:
    readings = [
        {"clause": "most copied", "reading": "by copies", "result": "a.py", "decision": "kept"},
        {"clause": "repository", "reading": "owner/name"},
    ]
    committed = commit_answer(payload(fields=[field("Repository", "acme/api")], readings=readings))
    assert committed == CommittedAnswer(
        text=f"{BASIS}\n\n**Answer:** Repository: acme/api",
        shape="fields",
        answer_only=False,
        readings=(
            AnswerReading("most copied", "by copies", "a.py", "kept"),
            AnswerReading("repository", "owner/name"),
        ),
    )
    assert committed.metadata() == {
        "shape": "fields",
        "answer_only": False,
        "readings": readings,
    }
    for word in ("most copied", "by copies", "owner/name", "kept"):
        assert word not in committed.text


def test_a_json_string_payload_follows_javascript_parsing() -> None:
    text = '{"fields":[{"label":"n","value":1.50}],"basis":"b","answer_only":true}'
    assert render_answer(text) == "1.5"
