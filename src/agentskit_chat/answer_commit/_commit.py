"""``answer_commit``: a final answer rendered by code, from a validated payload.

A model finishes by calling ``answer_commit`` with the chosen values; :func:`commit_answer`
checks the payload and renders it deterministically, so the same values always read the same
way. Exactly one of three shapes carries the answer: ``fields`` (one field per requested item),
``rows`` (a table) or ``unresolved`` (a reason). A ``basis`` is always required; ``answer_only``
drops it and every label from the reply. An advisory ``readings`` ledger is kept, never shown.

Clients in strict-schema mode send every property, filling the unused ones with ``null``,
``""``, ``[]`` or blanks: those count as absent. Every refusal is an :class:`AnswerCommitError`
with a one-line reason and a minimal valid example, and names places by path, never by value.
See ``docs/answer-commit.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentskit_chat.errors import AnswerCommitError
from agentskit_chat.protocol._json import JsonSyntaxError, parse_json_text
from agentskit_chat.protocol._text import utf16_len

from ._format import Cell, TableFormat, number_problem, render_table, scalar_text
from ._schema import (
    MAX_BASIS_CHARACTERS,
    MAX_PRECISION,
    MAX_RENDERED_ANSWER_CHARACTERS,
    TABLE_FORMATS,
)

__all__ = ["AnswerReading", "AnswerShape", "CommittedAnswer", "commit_answer", "render_answer"]

#: Which of the three shapes a payload used.
AnswerShape = Literal["fields", "rows", "unresolved"]

_SHAPES: Final[tuple[AnswerShape, ...]] = ("fields", "rows", "unresolved")
_KEYS: Final = frozenset({*_SHAPES, "basis", "answer_only", "readings"})
_ROW_KEYS: Final = frozenset({"columns", "data", "precision", "format"})
_READING_KEYS: Final = ("clause", "reading", "result", "decision")
_BARE_LABELS: Final = frozenset({"answer", "result", "value"})
_BASIS: Final = "Counted all orders placed in 2024, one row per order, from orders.id."
_EXAMPLES: Final[Mapping[AnswerShape, str]] = {
    "fields": '{"fields":[{"label":"Orders in 2024","value":1234}],"basis":"' + _BASIS + '"}',
    "rows": (
        '{"rows":{"columns":["region","orders"],"data":[["North",700],["South",534]],'
        '"format":"markdown"},"basis":"' + _BASIS + '"}'
    ),
    "unresolved": (
        '{"unresolved":{"reason":"The data has no region column."},"basis":"' + _BASIS + '"}'
    ),
}


@dataclass(frozen=True, slots=True)
class AnswerReading:
    """One entry of the advisory ``readings`` ledger: how a clause of the request was read.

    Attributes:
        clause: The clause of the request.
        reading: How it was read.
        result: A summary of what that reading gave.
        decision: What was decided, and why.
    """

    clause: str | None = None
    reading: str | None = None
    result: str | None = None
    decision: str | None = None


@dataclass(frozen=True, slots=True)
class CommittedAnswer:
    """A payload that passed validation, with its rendered text.

    Attributes:
        text: The rendered final answer, exactly as it is shown (no trailing newline).
        shape: ``fields``, ``rows`` or ``unresolved``.
        answer_only: Whether the reply is the bare answer (no basis, no labels for one field).
        readings: The advisory ledger, in the order given; never rendered.
    """

    text: str
    shape: AnswerShape
    answer_only: bool
    readings: tuple[AnswerReading, ...] = ()

    def metadata(self) -> dict[str, Any]:
        """What a host keeps beside the message: the shape and the readings ledger, as JSON data.

        >>> CommittedAnswer("42", "fields", True).metadata()
        {'shape': 'fields', 'answer_only': True, 'readings': []}
        """
        readings = [
            {key: getattr(r, key) for key in _READING_KEYS if getattr(r, key) is not None}
            for r in self.readings
        ]
        return {"shape": self.shape, "answer_only": self.answer_only, "readings": readings}


def _is_filler(value: Any) -> bool:
    """What a strict-schema client sends for a property it does not mean to use."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, list | tuple):
        return all(_is_filler(item) for item in value)
    if isinstance(value, Mapping):
        return all(_is_filler(item) for item in value.values())
    return False


class _Check:
    """Validation of one payload; its errors carry the example of the shape in play."""

    def __init__(self) -> None:
        self.shape: AnswerShape = "fields"

    def error(self, reason: str) -> AnswerCommitError:
        return AnswerCommitError(reason, _EXAMPLES[self.shape])

    def number(self, value: int | float, where: str) -> None:
        problem = number_problem(value)
        if problem is not None:
            raise self.error(f"The number at {where} {problem}.")

    def text(self, value: Any, where: str, what: str) -> str:
        if _is_filler(value):
            raise self.error(f"{where} is empty: give {what}.")
        if not isinstance(value, str):
            raise self.error(f"{where} must be text: give {what}.")
        return value.strip()

    def shape_of(self, payload: Mapping[str, Any]) -> AnswerShape:
        present = [name for name in _SHAPES if _present(name, payload.get(name))]
        if len(present) == 1:
            self.shape = present[0]
            return present[0]
        if present:
            self.shape = present[0]
            raise self.error(
                f"Give exactly one of fields, rows or unresolved; this payload has "
                f"{' and '.join(present)}."
            )
        raise self.error("Give exactly one of fields, rows or unresolved; this payload has none.")

    def basis(self, value: Any, answer_only: bool) -> str:
        also = " (also when answer_only is true)" if answer_only else ""
        what = "one or two sentences naming the population, grain and source object or column"
        if _is_filler(value):
            raise self.error(f"basis is required{also}: {what}.")
        basis = self.text(value, "basis", what)
        size = utf16_len(basis)
        if size > MAX_BASIS_CHARACTERS:
            raise self.error(
                f"basis is {size} characters; keep it to at most {MAX_BASIS_CHARACTERS} "
                "(one or two sentences)."
            )
        return basis

    def answer_only(self, value: Any) -> bool:
        if _is_filler(value):
            return False
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise self.error("answer_only must be true or false.")

    def value(self, value: Any, where: str) -> Cell:
        if _is_filler(value):
            raise self.error(f"{where} is empty: every field needs one value.")
        if isinstance(value, str):
            return value.strip()
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            self.number(value, where)
            return value
        if isinstance(value, list | tuple):
            raise self.error(
                f"{where} holds several values: give one value per field, a field per item, "
                "or use rows for a list."
            )
        raise self.error(f"{where} must be text, a number or a boolean.")

    def cell(self, value: Any, where: str) -> Cell:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, str | bool):
            return value
        if isinstance(value, int | float):
            self.number(value, where)
            return value
        raise self.error(f"{where} must be text, a number, a boolean or null (one value per cell).")


def _present(shape: AnswerShape, value: Any) -> bool:
    if shape == "rows" and isinstance(value, Mapping):
        # A strict client must pick a format even for an unused table.
        return not (_is_filler(value.get("columns")) and _is_filler(value.get("data")))
    if shape == "unresolved" and isinstance(value, Mapping):
        return not _is_filler(value.get("reason"))
    return not _is_filler(value)


def _list(check: _Check, value: Any, where: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise check.error(f"{where} must be an array.")
    return value


def _render_fields(check: _Check, value: Any, answer_only: bool) -> str:
    fields: list[tuple[str, str]] = []
    for index, entry in enumerate(_list(check, value, "fields")):
        where = f"fields[{index}]"
        if _is_filler(entry):
            continue
        if not isinstance(entry, Mapping):
            raise check.error(f"{where} must be an object with a label and a value.")
        if set(entry) - {"label", "value"}:
            raise check.error(f"{where} may only have label and value.")
        label = check.text(entry.get("label"), f"{where}.label", "what the value is")
        fields.append((label, scalar_text(check.value(entry.get("value"), f"{where}.value"))))
    if len(fields) == 1:
        label, text = fields[0]
        if answer_only:
            return text
        if label.casefold() in _BARE_LABELS:
            return f"**Answer:** {text}"
        return f"**Answer:** {label}: {text}"
    if answer_only:
        return "\n".join(f"{label}: {text}" for label, text in fields)
    return "\n".join(["**Answer:**", *(f"- {label}: {text}" for label, text in fields)])


def _precision(check: _Check, value: Any, columns: Sequence[str]) -> dict[str, int]:
    if _is_filler(value):
        return {}
    if not isinstance(value, Mapping):
        raise check.error("rows.precision must be an object mapping column labels to 0 to 10.")
    if len(set(columns)) != len(columns):
        raise check.error("rows.columns must be unique labels when rows.precision is used.")
    precision: dict[str, int] = {}
    for key, places in value.items():
        if key not in columns:
            raise check.error(
                "Every rows.precision key must name a column exactly as written in rows.columns."
            )
        integral = isinstance(places, int | float) and not isinstance(places, bool)
        if not integral or places != int(places) or not 0 <= places <= MAX_PRECISION:
            raise check.error(
                f"rows.precision values must be whole numbers from 0 to {MAX_PRECISION} "
                "(decimal places)."
            )
        precision[key] = int(places)
    return precision


def _table_format(check: _Check, value: Any) -> TableFormat:
    if _is_filler(value):
        return "markdown"
    name = value.strip().lower() if isinstance(value, str) else None
    for known in TABLE_FORMATS:
        if name == known:
            return known
    raise check.error("rows.format must be one of markdown, csv, tsv or lines.")


def _render_rows(check: _Check, value: Any) -> str:
    if not isinstance(value, Mapping):
        raise check.error("rows must be an object with columns and data.")
    if set(value) - _ROW_KEYS:
        raise check.error("rows may only have columns, data, precision and format.")
    columns = [
        check.text(label, f"rows.columns[{i}]", "a column label")
        for i, label in enumerate(_list(check, value.get("columns"), "rows.columns"))
    ]
    if not columns:
        raise check.error("rows.columns is empty: give one label per column.")
    data = _list(check, value.get("data"), "rows.data")
    if not data:
        raise check.error("rows.data is empty: give at least one row, or commit a field saying so.")
    precision = _precision(check, value.get("precision"), columns)
    places = [precision.get(label) for label in columns]
    table_format = _table_format(check, value.get("format"))
    rows: list[list[str]] = []
    for r, row in enumerate(data):
        cells = _list(check, row, f"rows.data[{r}]")
        if len(cells) != len(columns):
            counted = f"{len(cells)} cell" + ("" if len(cells) == 1 else "s")
            raise check.error(
                f"rows.data[{r}] has {counted} but there are {len(columns)} columns: every row "
                "needs one cell per column (null for an empty cell)."
            )
        rows.append(
            [
                scalar_text(check.cell(cell, f"rows.data[{r}][{c}]"), places[c])
                for c, cell in enumerate(cells)
            ]
        )
    return render_table(columns, rows, table_format)


def _reason(check: _Check, value: Any) -> str:
    if not isinstance(value, Mapping) or set(value) - {"reason"}:
        raise check.error("unresolved must be an object with only a reason.")
    return check.text(value.get("reason"), "unresolved.reason", "why it cannot be answered")


def _readings(check: _Check, value: Any) -> tuple[AnswerReading, ...]:
    if _is_filler(value):
        return ()
    readings: list[AnswerReading] = []
    for index, entry in enumerate(_list(check, value, "readings")):
        where = f"readings[{index}]"
        if _is_filler(entry):
            continue
        if not isinstance(entry, Mapping) or set(entry) - set(_READING_KEYS):
            raise check.error(
                f"{where} must be an object with clause, reading, result and decision."
            )
        members: dict[str, str | None] = {}
        for key in _READING_KEYS:
            member = entry.get(key)
            if not _is_filler(member) and not isinstance(member, str):
                raise check.error(f"{where}.{key} must be text.")
            members[key] = member.strip() if isinstance(member, str) and member.strip() else None
        readings.append(AnswerReading(**members))
    return tuple(readings)


def _payload(check: _Check, payload: Mapping[str, Any] | str) -> Mapping[str, Any]:
    if isinstance(payload, str):
        try:
            payload = parse_json_text(payload)
        except JsonSyntaxError:
            raise check.error("The payload is not valid JSON.") from None
    if not isinstance(payload, Mapping):
        raise check.error("The payload must be a JSON object.")
    if any(not isinstance(key, str) or key not in _KEYS for key in payload):
        raise check.error(
            "The payload may only have fields, rows, unresolved, basis, answer_only and readings."
        )
    return payload


def commit_answer(payload: Mapping[str, Any] | str) -> CommittedAnswer:
    """Validate an ``answer_commit`` payload and render its final answer.

    Args:
        payload: The tool's arguments, as a mapping or as JSON text.

    Returns:
        The rendered text with the shape, the ``answer_only`` flag and the readings ledger.

    Raises:
        AnswerCommitError: the payload is not valid or renders past
            :data:`MAX_RENDERED_ANSWER_CHARACTERS`; its text is the reason and an example.

    Example:
        >>> commit_answer({"fields": [{"label": "Total", "value": 5}], "basis": "All rows."}).text
        'All rows.\\n\\n**Answer:** Total: 5'
    """
    check = _Check()
    payload = _payload(check, payload)
    shape = check.shape_of(payload)
    answer_only = check.answer_only(payload.get("answer_only"))
    basis = check.basis(payload.get("basis"), answer_only)
    if shape == "fields":
        answer = _render_fields(check, payload["fields"], answer_only)
    elif shape == "rows":
        answer = _render_rows(check, payload["rows"])
    else:
        reason = _reason(check, payload["unresolved"])
        answer = f"Unresolved: {reason}" if answer_only else f"**Unresolved:** {reason}"
    readings = _readings(check, payload.get("readings"))
    text = answer if answer_only else f"{basis}\n\n{answer}"
    size = utf16_len(text)
    if size > MAX_RENDERED_ANSWER_CHARACTERS:
        raise check.error(
            f"The rendered answer is {size} characters, over the limit of "
            f"{MAX_RENDERED_ANSWER_CHARACTERS}: aggregate or narrow the rows, or write the full "
            "table to a file and commit a summary of it."
        )
    return CommittedAnswer(text=text, shape=shape, answer_only=answer_only, readings=readings)


def render_answer(payload: Mapping[str, Any] | str) -> str:
    """The rendered final answer of an ``answer_commit`` payload (a mapping or JSON text).

    Raises:
        AnswerCommitError: the payload is not valid; ``str(error)`` is the one-line reason,
            a newline, and ``Example: {...}`` with a minimal valid payload.

    Example:
        >>> render_answer('{"fields":[{"label":"Ok","value":true}],"basis":"b","answer_only":1}')
        'true'
    """
    return commit_answer(payload).text
