"""Text forms of committed values: numbers, cells, and the four table formats.

Numbers render in their shortest exact decimal form, always positional (``5``, ``0.1``,
``0.0000001``, never ``1e-7``), or with a column's fixed decimals, rounded half away from zero on
the decimal the number was written as (``2.675`` to 2 places is ``2.68``, as a person would
round it, not ``2.67`` as binary floating point would). A zero never carries a minus sign.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Final, Literal

from agentskit_chat.protocol._json import MAX_SAFE_INTEGER

from ._schema import MAX_SIGNIFICANT_DIGITS

__all__ = [
    "Cell",
    "TableFormat",
    "format_number",
    "number_problem",
    "render_table",
    "scalar_text",
]

#: A table cell or field value after validation (``None`` is an empty cell).
Cell = str | int | float | bool | None

TableFormat = Literal["markdown", "csv", "tsv", "lines"]

_LINE_BREAK: Final = re.compile(r"\r\n|[\r\n\u2028\u2029]")


def _significant_digits(value: int | float) -> int:
    if isinstance(value, int):
        digits = str(abs(value)).rstrip("0")
    else:
        mantissa = repr(abs(value)).partition("e")[0]
        digits = mantissa.replace(".", "").lstrip("0").rstrip("0")
    return max(len(digits), 1)


def number_problem(value: int | float) -> str | None:
    """Why ``value`` cannot be rendered exactly, or ``None`` when it can.

    A JSON number has already been rounded to a double when the renderer sees it:
    ``1234567890123456.7`` arrives as ``1234567890123456.8``. More than 15 significant digits, or
    a magnitude past the safe-integer range, means the digits may no longer be the ones written.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if abs(value) > MAX_SAFE_INTEGER:
        return (
            f"is outside the safe-integer range (+/-{MAX_SAFE_INTEGER}), so its digits may "
            "already be changed; pass the exact value as a string"
        )
    if _significant_digits(value) > MAX_SIGNIFICANT_DIGITS:
        return (
            f"has more than {MAX_SIGNIFICANT_DIGITS} significant digits, so its digits may "
            "already be changed; pass the exact value as a string"
        )
    return None


def _decimal(value: int | float) -> Decimal:
    # repr() is the shortest text that reads back as the same double: the number as written.
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


def _positional(value: Decimal) -> str:
    text = format(value, "f")
    if text.startswith("-") and value.is_zero():
        text = text[1:]
    return text


def format_number(value: int | float, precision: int | None = None) -> str:
    """A checked number as text: shortest exact decimal, or ``precision`` fixed decimals.

    >>> format_number(5), format_number(5.0), format_number(1e-7), format_number(5, 2)
    ('5', '5', '0.0000001', '5.00')
    >>> format_number(2.675, 2), format_number(-0.001, 2)
    ('2.68', '0.00')
    """
    number = _decimal(value)
    if precision is not None:
        return _positional(number.quantize(Decimal(1).scaleb(-precision), ROUND_HALF_UP))
    text = _positional(number)
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def scalar_text(value: Cell, precision: int | None = None) -> str:
    """A validated value as text: strings as given, ``true``/``false``, numbers, ``""`` for null.

    ``precision`` applies to numbers only; strings are never touched.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return format_number(value, precision)


def _one_line(text: str) -> str:
    return _LINE_BREAK.sub(" ", text)


def _markdown_cell(text: str) -> str:
    return _one_line(text).replace("\\", "\\\\").replace("|", "\\|")


def _delimited_cell(text: str, separator: str) -> str:
    # RFC 4180: a cell holding the separator, a quote or a line break is quoted, quotes doubled.
    if separator in text or '"' in text or "\n" in text or "\r" in text:
        return '"' + text.replace('"', '""') + '"'
    return text


def render_table(
    columns: Sequence[str], rows: Sequence[Sequence[str]], table_format: TableFormat
) -> str:
    """Cells already turned into text, laid out in ``table_format`` (no trailing newline).

    Markdown has a header row, a ``---`` separator row and one row per data row, with pipes,
    backslashes and line breaks escaped; csv and tsv have a header row and RFC 4180 quoting;
    lines has one row per line, cells separated by one space, and no header.
    """
    if table_format == "markdown":
        lines = ["| " + " | ".join(_markdown_cell(c) for c in columns) + " |"]
        lines.append("| " + " | ".join("---" for _ in columns) + " |")
        lines += ["| " + " | ".join(_markdown_cell(c) for c in row) + " |" for row in rows]
        return "\n".join(lines)
    if table_format == "lines":
        return "\n".join(" ".join(_one_line(c) for c in row) for row in rows)
    separator = "," if table_format == "csv" else "\t"
    return "\n".join(_delimited_row(row, separator) for row in (columns, *rows))


def _delimited_row(row: Sequence[str], separator: str) -> str:
    if len(row) == 1 and not row[0]:
        # A lone empty cell would be a blank line, which readers skip: quote it.
        return '""'
    return separator.join(_delimited_cell(c, separator) for c in row)
