"""The ``answer_commit`` tool as a model sees it: its name, description and argument schema.

The schema is valid JSON Schema draft 2020-12 and stays inside what tool-calling providers
accept (Anthropic's restrictions included): an object at the root, no root ``$schema``, no
``prefixItems`` tuples, no composition keywords at the root. It describes the payload loosely
enough for clients in strict-schema mode (which fill every property); the renderer treats their
fillers as absent and does the real validation, with messages a model can act on.
"""

from __future__ import annotations

import copy
import unicodedata
from typing import Any, Final

__all__ = [
    "ANSWER_COMMIT_DESCRIPTION",
    "ANSWER_COMMIT_TOOL_NAME",
    "MAX_BASIS_CHARACTERS",
    "MAX_PRECISION",
    "MAX_RENDERED_ANSWER_CHARACTERS",
    "MAX_SIGNIFICANT_DIGITS",
    "TABLE_FORMATS",
    "answer_commit_json_schema",
    "is_reserved_tool_name",
]

#: The tool's name. Reserved: no other tool may use it, in any letter case.
ANSWER_COMMIT_TOOL_NAME: Final = "answer_commit"

#: The longest rendered answer, basis and escaping included, in UTF-16 code units.
MAX_RENDERED_ANSWER_CHARACTERS: Final = 60000

#: The longest ``basis``, in UTF-16 code units.
MAX_BASIS_CHARACTERS: Final = 400

#: The largest per-column ``precision`` (the smallest is 0).
MAX_PRECISION: Final = 10

#: Numbers with more significant digits than this must be passed as strings.
MAX_SIGNIFICANT_DIGITS: Final = 15

#: The text forms of a ``rows`` table; the first is the default.
TABLE_FORMATS: Final = ("markdown", "csv", "tsv", "lines")

ANSWER_COMMIT_DESCRIPTION: Final = (
    "Commit the final answer. Call this last, once the values are computed; the text it "
    "returns is the final answer, rendered exactly, so do not restate it. Give exactly one of: "
    "`fields` (one field per item the request asks for, in the order asked, so a request for "
    "two things carries two fields; never collapse a compound request into one field), `rows` "
    "(a table: `columns` and `data`, one array of cells per row; optional `precision` maps a "
    "column label to 0 to 10 fixed decimals for its numeric cells; optional `format`: "
    "markdown (default), csv, tsv or lines, when the request names one) or `unresolved` (with "
    "a `reason`, when the request cannot be answered). Always give `basis`: one or two "
    "sentences, at most 400 characters, naming the population, the grain and the source "
    "object or column that supplies the requested value. Set `answer_only` when the request "
    "asks for only the answer: the reply is then the bare value or table. Numbers may have at "
    "most 15 significant digits and must be whole numbers within +/-9007199254740991 when "
    "integral; pass exact decimals and longer numbers as strings. The rendered answer is "
    "limited to 60000 characters: over it, aggregate, narrow the rows, or write the full table "
    "to a file and commit a summary. `readings` is an optional ledger of how each clause of "
    "the request was read; it is kept as metadata and never shown."
)

_SCALAR: Final = ["string", "number", "boolean"]
_TEXT: Final = {"type": "string"}

_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "fields": {
            "type": "array",
            "description": (
                "One field per item the request asks for, in the order asked; one value each."
            ),
            "items": {
                "type": "object",
                "properties": {
                    "label": {"type": "string", "description": "What the value is."},
                    "value": {"type": _SCALAR, "description": "The single chosen value."},
                },
                "required": ["label", "value"],
                "additionalProperties": False,
            },
        },
        "rows": {
            "type": "object",
            "description": "A table, when the answer is a list of rows.",
            "properties": {
                "columns": {"type": "array", "items": _TEXT},
                "data": {
                    "type": "array",
                    "description": "One array per row, one cell per column.",
                    "items": {"type": "array", "items": {"type": [*_SCALAR, "null"]}},
                },
                "precision": {
                    "type": "object",
                    "description": "Fixed decimals (0 to 10) per column label.",
                    "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 10},
                },
                "format": {"type": "string", "enum": list(TABLE_FORMATS)},
            },
            "required": ["columns", "data"],
            "additionalProperties": False,
        },
        "unresolved": {
            "type": "object",
            "description": "When the request cannot be answered.",
            "properties": {"reason": _TEXT},
            "required": ["reason"],
            "additionalProperties": False,
        },
        "basis": {
            "type": "string",
            "maxLength": MAX_BASIS_CHARACTERS,
            "description": (
                "One or two sentences: population, grain, and the source object or column."
            ),
        },
        "answer_only": {
            "type": "boolean",
            "description": "True when the request asks for only the answer.",
        },
        "readings": {
            "type": "array",
            "description": "Advisory: how each clause of the request was read. Never shown.",
            "items": {
                "type": "object",
                "properties": {
                    "clause": _TEXT,
                    "reading": _TEXT,
                    "result": _TEXT,
                    "decision": _TEXT,
                },
                "additionalProperties": False,
            },
        },
    },
    "required": ["basis"],
    "additionalProperties": False,
}


def answer_commit_json_schema() -> dict[str, Any]:
    """The JSON Schema of the ``answer_commit`` arguments (a fresh copy, safe to change).

    >>> answer_commit_json_schema()["required"]
    ['basis']
    """
    return copy.deepcopy(_SCHEMA)


def is_reserved_tool_name(name: str) -> bool:
    """Whether ``name`` spells the reserved ``answer_commit``, in any letter case or width.

    Case-insensitive file systems and tool registries treat ``Answer_Commit`` as the same name,
    so no user, MCP or plugin tool may take it.

    >>> is_reserved_tool_name("Answer_COMMIT"), is_reserved_tool_name("answer_commits")
    (True, False)
    """
    folded = unicodedata.normalize("NFKC", name).casefold().strip()
    return folded == ANSWER_COMMIT_TOOL_NAME
