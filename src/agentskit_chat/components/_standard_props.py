"""The props of the twelve standard components, as strict pydantic models.

Every model is frozen, refuses unknown keys, coerces nothing, reads its wire fields by their
camelCase names and emits a draft 2020-12 JSON Schema that a tool-calling model can be given.
Arrays are held as tuples and free-form JSON as read-only mappings. Optional fields are
``None`` when absent; an explicit JSON ``null`` for one of them is invalid.

>>> ProgressProps.model_validate({"label": "Upload", "value": 42}).value
42
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from agentskit_chat.protocol._types import array, not_null, one_of, text, thaw

from ._fields import (
    AnyJson,
    Id,
    JsonRecord,
    Label,
    OptBool,
    OptJsonRecord,
    OptLabel,
    OptPortableUrl,
    OptText,
    PortableUrl,
    StandardProps,
    Text,
    number_between,
    safe_integer,
    table_row,
    unique_by,
)

__all__ = [
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
    "FormFieldType",
    "FormOption",
    "FormProps",
    "LinkCardProps",
    "ProgressProps",
    "SourceListProps",
    "SourceListSource",
    "TableColumn",
    "TableProps",
    "ToolCallProps",
    "ToolCallStatus",
]

#: How a button is drawn.
ButtonVariant = Literal["primary", "secondary", "danger"]
#: The kinds of form field.
FormFieldType = Literal["text", "email", "number", "checkbox", "select"]
#: Where a tool call is in its life.
ToolCallStatus = Literal["pending", "running", "complete", "error"]

_VARIANTS = ("primary", "secondary", "danger")
_FIELD_TYPES = ("text", "email", "number", "checkbox", "select")
_STATUSES = ("pending", "running", "complete", "error")


def _enum(*values: str) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "enum": list(values)})


# --- selection -----------------------------------------------------------------------------------


class ButtonGroupButton(StandardProps):
    """One button of a button group."""

    id: Id = Field(description="Sent as the select event's value.")
    label: Label = Field(description="The button's text.")
    disabled: OptBool = Field(None, description="A disabled button cannot be selected.")
    variant: Annotated[
        ButtonVariant | None, PlainValidator(one_of(*_VARIANTS)), _enum(*_VARIANTS)
    ] = Field(None, description="How the button is drawn.")


class ButtonGroupProps(StandardProps):
    """A labelled row of buttons; the user picks one."""

    label: Label = Field(description="What the buttons are about.")
    buttons: Annotated[
        tuple[ButtonGroupButton, ...],
        BeforeValidator(array),
        AfterValidator(unique_by("id")),
    ] = Field(min_length=1, max_length=12, description="1 to 12 buttons with unique ids.")


class ChoiceAction(StandardProps):
    """The action a choice runs when it is picked: a name and its input."""

    name: Id = Field(description="The action's name.")
    input: JsonRecord = Field(description="The action's input (keys up to 128 characters).")


class ChoiceListChoice(StandardProps):
    """One choice of a choice list."""

    id: Id = Field(description="Sent as the selection's choiceId.")
    label: Label = Field(description="The choice's text.")
    description: OptText = Field(None, description="A longer explanation of the choice.")
    action: Annotated[ChoiceAction | SkipJsonSchema[None], BeforeValidator(not_null)] = Field(
        None, description="The action picking this choice runs."
    )


class ChoiceListProps(StandardProps):
    """A question with choices; the user picks one, and the pick may run an action."""

    prompt: Text = Field(description="The question.")
    choices: Annotated[
        tuple[ChoiceListChoice, ...],
        BeforeValidator(array),
        AfterValidator(unique_by("id")),
    ] = Field(min_length=1, max_length=20, description="1 to 20 choices with unique ids.")


# --- input ---------------------------------------------------------------------------------------


class FormOption(StandardProps):
    """One option of a select form field."""

    id: Id = Field(description="The value submitted when this option is chosen.")
    label: Label = Field(description="The option's text.")


class FormField(StandardProps):
    """One field of a form: select fields need options, other types must not have them."""

    id: Id = Field(description="The key of this field's value in the submitted form.")
    label: Label = Field(description="The field's label.")
    type: Annotated[FormFieldType, PlainValidator(one_of(*_FIELD_TYPES)), _enum(*_FIELD_TYPES)] = (
        Field(description="text, email, number, checkbox or select.")
    )
    required: OptBool = Field(None, description="A required field must have a non-empty value.")
    placeholder: Annotated[
        str | None,
        PlainValidator(text(0, 256)),
        WithJsonSchema({"type": "string", "maxLength": 256}),
    ] = Field(None, description="Hint text shown in an empty field.")
    options: Annotated[
        Annotated[tuple[FormOption, ...], Field(min_length=1, max_length=50)]
        | SkipJsonSchema[None],
        BeforeValidator(not_null),
        BeforeValidator(array),
    ] = Field(
        None, description="1 to 50 options: required for select fields, refused for the others."
    )

    @model_validator(mode="after")
    def _options_only_for_select(self) -> FormField:
        if (self.type == "select") != (self.options is not None):
            raise ValueError("select fields need options; other fields must not have them")
        return self


class FormProps(StandardProps):
    """A form: fields the user fills in and submits as one value."""

    title: OptLabel = Field(None, description="The form's title.")
    fields: Annotated[
        tuple[FormField, ...],
        BeforeValidator(array),
        AfterValidator(unique_by("id")),
    ] = Field(min_length=1, max_length=30, description="1 to 30 fields with unique ids.")
    submit_label: Label = Field(description="The submit button's text.")


# --- actions -------------------------------------------------------------------------------------


class ConfirmationProps(StandardProps):
    """A question the user confirms or cancels."""

    title: Label = Field(description="What is being confirmed.")
    message: Text = Field(description="What happens on confirmation.")
    confirm_label: Label = Field(description="The confirm button's text.")
    cancel_label: Label = Field(description="The cancel button's text.")


class ApprovalRequestProps(StandardProps):
    """A request for the user to approve or deny something an agent wants to do."""

    title: Label = Field(description="What needs approval.")
    description: Text = Field(description="What will happen when it is approved.")
    approve_label: Label = Field(description="The approve button's text.")
    deny_label: Label = Field(description="The deny button's text.")


class ErrorNoticeProps(StandardProps):
    """An error shown to the user, with an optional retry button."""

    title: Label = Field(description="What failed.")
    message: Text = Field(description="What the user can do about it.")
    code: Annotated[
        str | None,
        PlainValidator(text(0, 128)),
        WithJsonSchema({"type": "string", "maxLength": 128}),
    ] = Field(None, description="A machine-readable error code (may be empty).")
    retry_label: OptLabel = Field(
        None, description="The retry button's text; without it there is no retry event."
    )


# --- display -------------------------------------------------------------------------------------


class ProgressProps(StandardProps):
    """How far a task has come, as a percentage."""

    label: Label = Field(description="What is in progress.")
    value: Annotated[
        float,
        PlainValidator(number_between(0, 100)),
        WithJsonSchema({"type": "number", "minimum": 0, "maximum": 100}),
    ] = Field(description="The percentage done, 0 to 100.")
    status: OptText = Field(None, description="A short status line.")


class SourceListSource(StandardProps):
    """One source of a source list."""

    id: Id = Field(description="Sent as the open event's value.")
    title: Label = Field(description="The source's title.")
    url: OptPortableUrl = Field(None, description="Where the source is; only these can open.")
    snippet: OptText = Field(None, description="A quote from the source.")


class SourceListProps(StandardProps):
    """A list of sources, such as the pages an answer cites."""

    label: Label = Field(description="What the sources are for.")
    sources: Annotated[
        tuple[SourceListSource, ...],
        BeforeValidator(array),
        AfterValidator(unique_by("id")),
    ] = Field(min_length=1, max_length=50, description="1 to 50 sources with unique ids.")


class LinkCardProps(StandardProps):
    """A card that links to one page."""

    title: Label = Field(description="The linked page's title.")
    description: OptText = Field(None, description="What the page is about.")
    href: PortableUrl = Field(description="Where the link goes.")
    label: OptLabel = Field(None, description="The link's text.")


class ToolCallProps(StandardProps):
    """A tool call an agent made, with its arguments and result."""

    name: Label = Field(description="The tool's name.")
    status: Annotated[ToolCallStatus, PlainValidator(one_of(*_STATUSES)), _enum(*_STATUSES)] = (
        Field(description="pending, running, complete or error.")
    )
    arguments: OptJsonRecord = Field(None, description="The arguments the tool was called with.")
    result: AnyJson = Field(None, description="The tool's result, any JSON value.")

    @property
    def has_result(self) -> bool:
        """Whether ``result`` was given (``None`` then means JSON ``null``, not absence)."""
        return "result" in self.model_fields_set


class TableColumn(StandardProps):
    """One column of a table."""

    key: Id = Field(description="The key of this column's cell in each row.")
    label: Label = Field(description="The column heading.")


#: A table row: string keys to short strings, finite numbers, booleans or null.
TableRow = Annotated[
    Mapping[str, Any],
    PlainValidator(table_row),
    PlainSerializer(thaw),
    WithJsonSchema(
        {
            "type": "object",
            "additionalProperties": {
                "type": ["string", "number", "boolean", "null"],
                "maxLength": 4096,
            },
        }
    ),
]


class TableProps(StandardProps):
    """A table of rows under labelled columns."""

    caption: Label = Field(description="What the table shows.")
    columns: Annotated[
        tuple[TableColumn, ...],
        BeforeValidator(array),
        AfterValidator(unique_by("key")),
    ] = Field(min_length=1, max_length=30, description="1 to 30 columns with unique keys.")
    rows: Annotated[tuple[TableRow, ...], BeforeValidator(array)] = Field(
        max_length=1000,
        description="Up to 1,000 rows; each maps column keys to cells (strings up to 4,096 "
        "characters, numbers, booleans or null).",
    )


class FileAttachmentProps(StandardProps):
    """A file attached to a message."""

    name: Label = Field(description="The file's name.")
    mime_type: Annotated[
        str,
        PlainValidator(text(1, 256)),
        WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 256}),
    ] = Field(description="The file's media type, such as application/pdf.")
    size_bytes: Annotated[
        int | None,
        PlainValidator(safe_integer(0)),
        WithJsonSchema({"type": "integer", "minimum": 0, "maximum": 9007199254740991}),
    ] = Field(None, description="The file's size in bytes.")
    url: OptPortableUrl = Field(None, description="Where to download it; only then can it open.")
