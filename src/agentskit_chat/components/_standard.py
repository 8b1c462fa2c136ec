"""The twelve standard components: their definitions, in catalog order.

Each definition pairs a props model with the events it emits, how assistive technology sees it,
what it can do and how it reads as plain text. The definitions are immutable and are the only
definitions a manifest may register under these keys.
"""

from __future__ import annotations

from typing import Final

from agentskit_chat.protocol._json import js_number

from ._definition import ComponentAccessibility, ComponentDefinition, ComponentEventSpec
from ._interaction import validate_standard_component_interaction
from ._standard_props import (
    ApprovalRequestProps,
    ButtonGroupButton,
    ButtonGroupProps,
    ChoiceAction,
    ChoiceListChoice,
    ChoiceListProps,
    ConfirmationProps,
    ErrorNoticeProps,
    FileAttachmentProps,
    FormField,
    FormOption,
    FormProps,
    LinkCardProps,
    ProgressProps,
    SourceListProps,
    SourceListSource,
    TableColumn,
    TableProps,
    ToolCallProps,
)

__all__ = [
    "APPROVAL_REQUEST_COMPONENT",
    "BUTTON_GROUP_COMPONENT",
    "CHOICE_LIST_COMPONENT",
    "CHOICE_LIST_COMPONENT_KEY",
    "CONFIRMATION_COMPONENT",
    "ERROR_NOTICE_COMPONENT",
    "FILE_ATTACHMENT_COMPONENT",
    "FORM_COMPONENT",
    "LINK_CARD_COMPONENT",
    "PROGRESS_COMPONENT",
    "SOURCE_LIST_COMPONENT",
    "STANDARD_COMPONENT_CATALOG",
    "STANDARD_COMPONENT_KEYS",
    "TABLE_COMPONENT",
    "TOOL_CALL_COMPONENT",
    "ApprovalRequestProps",
    "ButtonGroupButton",
    "ButtonGroupProps",
    "ChoiceAction",
    "ChoiceListChoice",
    "ChoiceListProps",
    "ConfirmationProps",
    "ErrorNoticeProps",
    "FileAttachmentProps",
    "FormField",
    "FormOption",
    "FormProps",
    "LinkCardProps",
    "ProgressProps",
    "SourceListProps",
    "SourceListSource",
    "TableColumn",
    "TableProps",
    "ToolCallProps",
    "validate_standard_component_interaction",
]

#: The key of the choice list, the one standard component that selects instead of interacting.
CHOICE_LIST_COMPONENT_KEY: Final = "choice-list"

_SELECT: Final = ComponentEventSpec("select", "id")
_OPEN_URL: Final = ComponentEventSpec("open", "url")


def _joined(labels: tuple[str, ...] | list[str]) -> str:
    return ", ".join(labels)


def _button_group_fallback(props: ButtonGroupProps) -> str:
    return f"{props.label}: {_joined([b.label for b in props.buttons])}."


def _choice_list_fallback(props: ChoiceListProps) -> str:
    return f"{props.prompt} {_joined([c.label for c in props.choices])}."


def _form_fallback(props: FormProps) -> str:
    title = props.title if props.title is not None else "Form"
    return f"{title}: {_joined([f.label for f in props.fields])}."


def _confirmation_fallback(props: ConfirmationProps) -> str:
    return f"{props.title}: {props.message}"


def _progress_fallback(props: ProgressProps) -> str:
    # JavaScript prints 42, never 42.0, and 42.5 as is.
    return f"{props.label}: {js_number(props.value)}%."


def _source_list_fallback(props: SourceListProps) -> str:
    return f"{props.label}: {_joined([s.title for s in props.sources])}."


def _link_card_fallback(props: LinkCardProps) -> str:
    detail = props.description if props.description is not None else props.href
    return f"{props.title}: {detail}"


def _error_notice_fallback(props: ErrorNoticeProps) -> str:
    return f"{props.title}: {props.message}"


def _tool_call_fallback(props: ToolCallProps) -> str:
    return f"{props.name}: {props.status}."


def _approval_request_fallback(props: ApprovalRequestProps) -> str:
    return f"{props.title}: {props.description}"


def _table_fallback(props: TableProps) -> str:
    # Always "rows", one row included: the wire-compatible text.
    return f"{props.caption}: {len(props.rows)} rows."


def _file_attachment_fallback(props: FileAttachmentProps) -> str:
    return f"{props.name} ({props.mime_type})."


#: Buttons with a label; emits ``select`` with a button id.
BUTTON_GROUP_COMPONENT: Final = ComponentDefinition(
    key="button-group",
    props_schema=ButtonGroupProps,
    events=(_SELECT,),
    accessibility=ComponentAccessibility("group", keyboard=True, live="none"),
    capabilities=("display", "selection"),
    fallback=_button_group_fallback,
)
#: A question with choices; selected through a selection event, not an interaction.
CHOICE_LIST_COMPONENT: Final = ComponentDefinition(
    key=CHOICE_LIST_COMPONENT_KEY,
    props_schema=ChoiceListProps,
    events=(_SELECT,),
    accessibility=ComponentAccessibility("group", keyboard=True, live="none"),
    capabilities=("display", "selection"),
    fallback=_choice_list_fallback,
)
#: A form; emits ``submit`` with the form's values.
FORM_COMPONENT: Final = ComponentDefinition(
    key="form",
    props_schema=FormProps,
    events=(ComponentEventSpec("submit", "form"),),
    accessibility=ComponentAccessibility("form", keyboard=True, live="none"),
    capabilities=("display", "input"),
    fallback=_form_fallback,
)
#: A confirm-or-cancel question; emits ``confirm`` or ``cancel``.
CONFIRMATION_COMPONENT: Final = ComponentDefinition(
    key="confirmation",
    props_schema=ConfirmationProps,
    events=(ComponentEventSpec("confirm", "none"), ComponentEventSpec("cancel", "none")),
    accessibility=ComponentAccessibility("group", keyboard=True, live="none"),
    capabilities=("display", "action"),
    fallback=_confirmation_fallback,
)
#: A progress bar; emits nothing.
PROGRESS_COMPONENT: Final = ComponentDefinition(
    key="progress",
    props_schema=ProgressProps,
    events=(),
    accessibility=ComponentAccessibility("progressbar", keyboard=False, live="polite"),
    capabilities=("display", "progress"),
    fallback=_progress_fallback,
)
#: A list of sources; emits ``open`` with the id of a source that has a URL.
SOURCE_LIST_COMPONENT: Final = ComponentDefinition(
    key="source-list",
    props_schema=SourceListProps,
    events=(ComponentEventSpec("open", "id"),),
    accessibility=ComponentAccessibility("list", keyboard=True, live="none"),
    capabilities=("display", "navigation"),
    fallback=_source_list_fallback,
)
#: A link to one page; emits ``open`` with its ``href``.
LINK_CARD_COMPONENT: Final = ComponentDefinition(
    key="link-card",
    props_schema=LinkCardProps,
    events=(_OPEN_URL,),
    accessibility=ComponentAccessibility("link", keyboard=True, live="none"),
    capabilities=("display", "navigation"),
    fallback=_link_card_fallback,
)
#: An error notice; emits ``retry`` when it has a retry label.
ERROR_NOTICE_COMPONENT: Final = ComponentDefinition(
    key="error-notice",
    props_schema=ErrorNoticeProps,
    events=(ComponentEventSpec("retry", "none"),),
    accessibility=ComponentAccessibility("alert", keyboard=True, live="none"),
    capabilities=("display", "action"),
    fallback=_error_notice_fallback,
)
#: A tool call and its status; emits nothing.
TOOL_CALL_COMPONENT: Final = ComponentDefinition(
    key="tool-call",
    props_schema=ToolCallProps,
    events=(),
    accessibility=ComponentAccessibility("status", keyboard=False, live="polite"),
    capabilities=("display",),
    fallback=_tool_call_fallback,
)
#: An approve-or-deny request; emits ``approve`` or ``deny``.
APPROVAL_REQUEST_COMPONENT: Final = ComponentDefinition(
    key="approval-request",
    props_schema=ApprovalRequestProps,
    events=(ComponentEventSpec("approve", "none"), ComponentEventSpec("deny", "none")),
    accessibility=ComponentAccessibility("group", keyboard=True, live="none"),
    capabilities=("display", "action"),
    fallback=_approval_request_fallback,
)
#: A table; emits nothing.
TABLE_COMPONENT: Final = ComponentDefinition(
    key="table",
    props_schema=TableProps,
    events=(),
    accessibility=ComponentAccessibility("table", keyboard=False, live="none"),
    capabilities=("display",),
    fallback=_table_fallback,
)
#: An attached file; emits ``open`` with its ``url``.
FILE_ATTACHMENT_COMPONENT: Final = ComponentDefinition(
    key="file-attachment",
    props_schema=FileAttachmentProps,
    events=(_OPEN_URL,),
    accessibility=ComponentAccessibility("link", keyboard=True, live="none"),
    capabilities=("display", "download"),
    fallback=_file_attachment_fallback,
)

#: The twelve standard components, in catalog order.
STANDARD_COMPONENT_CATALOG: Final[tuple[ComponentDefinition, ...]] = (
    BUTTON_GROUP_COMPONENT,
    CHOICE_LIST_COMPONENT,
    FORM_COMPONENT,
    CONFIRMATION_COMPONENT,
    PROGRESS_COMPONENT,
    SOURCE_LIST_COMPONENT,
    LINK_CARD_COMPONENT,
    ERROR_NOTICE_COMPONENT,
    TOOL_CALL_COMPONENT,
    APPROVAL_REQUEST_COMPONENT,
    TABLE_COMPONENT,
    FILE_ATTACHMENT_COMPONENT,
)
#: The standard component keys, in catalog order.
STANDARD_COMPONENT_KEYS: Final[tuple[str, ...]] = tuple(d.key for d in STANDARD_COMPONENT_CATALOG)
