"""Valid props for every standard component, and helpers to change one field of them."""

from __future__ import annotations

import copy
from typing import Any, Final

from agentskit_chat.components import STANDARD_COMPONENT_CATALOG, ComponentDefinition

#: Marks a field to remove.
DROP: Final = object()

#: Valid props per component key, every optional field present where that helps the bounds.
VALID_PROPS: Final[dict[str, dict[str, Any]]] = {
    "button-group": {
        "label": "Actions",
        "buttons": [
            {"id": "save", "label": "Save", "variant": "primary"},
            {"id": "delete", "label": "Delete", "disabled": True, "variant": "danger"},
        ],
    },
    "choice-list": {
        "prompt": "Where should we go?",
        "choices": [
            {
                "id": "docs",
                "label": "Documentation",
                "description": "Read the component guide.",
                "action": {"name": "open-docs", "input": {"page": "components"}},
            },
            {"id": "demo", "label": "Demo"},
        ],
    },
    "form": {
        "title": "Contact",
        "fields": [
            {"id": "name", "label": "Name", "type": "text", "required": True, "placeholder": "Ada"},
            {"id": "email", "label": "Email", "type": "email"},
            {"id": "age", "label": "Age", "type": "number"},
            {"id": "agree", "label": "Agree", "type": "checkbox"},
            {
                "id": "color",
                "label": "Color",
                "type": "select",
                "options": [{"id": "red", "label": "Red"}, {"id": "blue", "label": "Blue"}],
            },
        ],
        "submitLabel": "Send",
    },
    "confirmation": {
        "title": "Delete?",
        "message": "This cannot be undone.",
        "confirmLabel": "Delete",
        "cancelLabel": "Cancel",
    },
    "progress": {"label": "Upload", "value": 42, "status": "Uploading"},
    "source-list": {
        "label": "Sources",
        "sources": [
            {"id": "docs", "title": "Documentation", "url": "/docs", "snippet": "Start here."},
            {"id": "book", "title": "A book"},
        ],
    },
    "link-card": {
        "title": "Guide",
        "description": "Read the guide.",
        "href": "https://example.com/guide",
        "label": "Open the guide",
    },
    "error-notice": {
        "title": "Failed",
        "message": "Try again.",
        "code": "E_TEST",
        "retryLabel": "Retry",
    },
    "tool-call": {
        "name": "Search",
        "status": "complete",
        "arguments": {"q": "AgentsKit"},
        "result": "Found",
    },
    "approval-request": {
        "title": "Approve send?",
        "description": "Send the email.",
        "approveLabel": "Approve",
        "denyLabel": "Deny",
    },
    "table": {
        "caption": "Users",
        "columns": [{"key": "name", "label": "Name"}, {"key": "age", "label": "Age"}],
        "rows": [{"name": "Ada", "age": 36}, {"name": "Alan", "age": None, "admin": True}],
    },
    "file-attachment": {
        "name": "report.pdf",
        "mimeType": "application/pdf",
        "sizeBytes": 1024,
        "url": "/report.pdf",
    },
}

DEFINITIONS: Final[dict[str, ComponentDefinition]] = {d.key: d for d in STANDARD_COMPONENT_CATALOG}


def props(key: str) -> dict[str, Any]:
    """A fresh copy of the valid props of ``key``."""
    return copy.deepcopy(VALID_PROPS[key])


def changed(key: str, path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """The valid props of ``key`` with the field at ``path`` set to ``value`` (or dropped)."""
    result = props(key)
    node: Any = result
    for step in path[:-1]:
        node = node[step]
    if value is DROP:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return result


def s(units: int, char: str = "a") -> str:
    """A string of ``units`` UTF-16 code units (an astral ``char`` counts 2)."""
    width = 2 if ord(char) > 0xFFFF else 1
    return char * (units // width) + "a" * (units % width)
