"""What the terminal shows for one chat message, as Rich renderables (no Textual here).

A message goes through :func:`~agentskit_chat.components.present_chat_message` first, so the
terminal shows exactly what the web page shows: text runs as Markdown, each resolved component
in its own small panel, a frame that does not resolve as its semantic fallback, content that
does not decode as an alert. Components that act (a choice list, a tool call waiting for a
confirmation) are also returned as data, so the app can give the latest one the keyboard.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from markdown_it import MarkdownIt
from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.style import Style
from rich.table import Table
from rich.text import Text

from agentskit_chat.components import (
    DARK_CHAT_THEME,
    ApprovalRequestProps,
    ButtonGroupProps,
    ChatTheme,
    ChoiceListProps,
    ConfirmationProps,
    ErrorNoticeProps,
    FileAttachmentProps,
    FormProps,
    LinkCardProps,
    PresentedComponent,
    PresentedDiagnostic,
    PresentedFallback,
    PresentedText,
    ProgressProps,
    SourceListProps,
    TableProps,
    ToolCallProps,
    present_chat_message,
)
from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol import ComponentFrame, MessageRecord
from agentskit_chat.runtime import ChatMessage

from ._prompts import InteractivePrompt, prompt_for

__all__ = [
    "CHOICE_METADATA_KEY",
    "INTERACTION_METADATA_KEY",
    "ChoiceOption",
    "ChoicePrompt",
    "PendingConfirmation",
    "Prompt",
    "RenderedMessage",
    "plain_text",
    "render_message",
]

#: The user-message metadata key that marks which choice list a click answered.
CHOICE_METADATA_KEY: Final = "agentskit.chat.choice"
#: The user-message metadata key of a component interaction (``{"event": {...}, "text"}``).
INTERACTION_METADATA_KEY: Final = "agentskit.chat.interaction"
#: Markdown inline links whose target is site-relative: ``[text](/docs/page)``.
_RELATIVE_LINK: Final = re.compile(r"\]\((/(?!/)[^)\s]*)\)")
_STREAMING_MARK: Final = "▍"


class _TextMarkdown(Markdown):
    """Rich's Markdown with raw HTML kept as the text it is (Rich would drop ``<tags>``)."""

    def __init__(self, markup: str, *, hyperlinks: bool) -> None:
        super().__init__("", hyperlinks=hyperlinks)
        self.markup = markup
        parser = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")
        self.parsed = parser.parse(markup)


@dataclass(frozen=True, slots=True)
class ChoiceOption:
    """One choice of a choice list: its id, label and optional description."""

    id: str
    label: str
    description: str | None


@dataclass(frozen=True, slots=True)
class ChoicePrompt:
    """A choice list the user can answer by picking one choice.

    Attributes:
        message_id: The assistant message that shows it.
        frame: The frame (its ``instance_id`` names the list in a selection).
        prompt: The question.
        choices: The choices, in order (numbered from 1 on screen).
    """

    message_id: str
    frame: ComponentFrame
    prompt: str
    choices: tuple[ChoiceOption, ...]

    @property
    def instance_id(self) -> str:
        """The list's instance id."""
        return self.frame.instance_id

    def caption(self, index: int) -> str:
        """How choice ``index`` reads in a picker: its label, and its description when that
        says more (two choices may share a label)."""
        choice = self.choices[index]
        return _caption(choice.label, choice.description)


@dataclass(frozen=True, slots=True)
class PendingConfirmation:
    """A tool call that waits for a human's decision.

    Attributes:
        message_id: The assistant message that carries the call.
        tool_call_id: The call's id (what a decision names).
        name: The tool's name.
        args: The arguments it would run with.
        approve_label: What approving is called (from a confirmation or approval component
            of the same message, else ``Approve``).
        reject_label: What rejecting is called (else ``Reject``).
    """

    message_id: str
    tool_call_id: str
    name: str
    args: Mapping[str, Any]
    approve_label: str = "Approve"
    reject_label: str = "Reject"


#: A component that can take the keyboard: a choice list, a form or a row of buttons.
Prompt = ChoicePrompt | InteractivePrompt


@dataclass(frozen=True, slots=True)
class RenderedMessage:
    """One message, ready to show.

    Attributes:
        message_id: The message's id.
        role: ``user``, ``assistant``, ``system`` or ``tool``.
        status: The message's status (``streaming`` while its answer arrives).
        renderable: What to draw.
        links: ``(title, absolute URL)`` of every source and link the message shows.
        choices: Its choice lists, in order.
        confirmations: Its tool calls that wait for a decision, in order.
        prompts: Its choice lists, forms and rows of buttons, in order.
    """

    message_id: str
    role: str
    status: str
    renderable: RenderableType
    links: tuple[tuple[str, str], ...] = ()
    choices: tuple[ChoicePrompt, ...] = ()
    confirmations: tuple[PendingConfirmation, ...] = ()
    prompts: tuple[Prompt, ...] = ()


def plain_text(renderable: RenderableType, width: int = 100) -> str:
    """What ``renderable`` shows, as plain text (``width`` columns, no colours)."""
    console = Console(
        file=io.StringIO(), width=width, record=True, color_system=None, legacy_windows=False
    )
    console.print(renderable)
    return console.export_text()


class _Painter:
    """Builds the renderables of one message with the theme's colours."""

    def __init__(
        self,
        theme: ChatTheme,
        resolve_href: Callable[[str], str],
        used_choices: Mapping[str, str],
    ) -> None:
        colors = theme.colors
        self.accent = colors.accent
        self.danger = colors.danger
        self.muted = colors.muted
        self.border = colors.border
        self.resolve_href = resolve_href
        self.used_choices = used_choices
        self.links: list[tuple[str, str]] = []
        self.choices: list[ChoicePrompt] = []
        self.prompts: list[Prompt] = []
        self.labels: tuple[str, str] | None = None
        self.last_text = ""

    def link(self, title: str, href: str, indent: str = "") -> Text:
        """``title`` as a link, with its address on the next line (for terminals that cannot
        open links)."""
        url = self.resolve_href(href)
        self.links.append((title, url))
        text = Text(title, style=Style(bold=True, color=self.accent, link=url))
        text.append(f"\n{indent}{url}", style=Style(color=self.muted, link=url))
        return text

    def panel(self, kind: str, *body: RenderableType) -> Panel:
        return Panel(
            Group(*body),
            title=Text(kind, style=self.muted),
            title_align="left",
            border_style=self.border,
            expand=True,
        )

    def summary(self, component: PresentedComponent) -> Text:
        return Text(component.fallback_text)

    def markdown(self, text: str) -> Markdown:
        absolute = _RELATIVE_LINK.sub(lambda m: f"]({self.resolve_href(m.group(1))})", text)
        return _TextMarkdown(absolute, hyperlinks=True)

    # --- one renderer per standard component ---------------------------------------------------

    def component(self, message_id: str, part: PresentedComponent) -> RenderableType:
        key = part.definition.key
        props = part.props
        if isinstance(props, ChoiceListProps):
            return self.choice_list(message_id, part.frame, props)
        if isinstance(props, SourceListProps):
            return self.source_list(props)
        summary = self.summary(part)
        body: list[RenderableType] = [summary]
        prompt = prompt_for(message_id, part.frame, props)
        if prompt is not None:
            self.prompts.append(prompt)
        if isinstance(props, ButtonGroupProps):
            body.append(Text("  ".join(f"[ {b.label} ]" for b in props.buttons), style=self.muted))
        elif isinstance(props, FormProps):
            for field in props.fields:
                required = ", required" if field.required else ""
                body.append(Text(f"  • {field.label} ({field.type}{required})", style=self.muted))
        elif isinstance(props, ConfirmationProps):
            self.labels = (props.confirm_label, props.cancel_label)
            body.append(Text(f"[ {props.confirm_label} ]  [ {props.cancel_label} ]", self.muted))
        elif isinstance(props, ApprovalRequestProps):
            self.labels = (props.approve_label, props.deny_label)
            body.append(Text(f"[ {props.approve_label} ]  [ {props.deny_label} ]", self.muted))
        elif isinstance(props, ProgressProps):
            bar = ProgressBar(total=100, completed=float(props.value), width=40)
            body.append(bar)
            if props.status:
                body.append(Text(props.status, style=self.muted))
        elif isinstance(props, ErrorNoticeProps):
            summary.stylize(f"bold {self.danger}")
            if props.code:
                body.append(Text(f"code {props.code}", style=self.muted))
        elif isinstance(props, ToolCallProps):
            if props.arguments:
                body.append(Text(_compact(props.arguments), style=self.muted))
            if props.result is not None:
                body.append(Text(f"→ {_compact(props.result)}"))
        elif isinstance(props, TableProps):
            table = Table(border_style=self.border, show_lines=False)
            for column in props.columns:
                table.add_column(column.label)
            for row in props.rows:
                table.add_row(*(_cell(row.get(column.key)) for column in props.columns))
            body.append(table)
        elif isinstance(props, FileAttachmentProps):
            size = f", {props.size_bytes} bytes" if props.size_bytes is not None else ""
            body.append(Text(f"{props.mime_type}{size}", style=self.muted))
            if props.url:
                body.append(self.link(props.name, props.url))
        elif isinstance(props, LinkCardProps):
            body.append(self.link(props.label or props.title, props.href))
        answered = self.used_choices.get(part.frame.instance_id) if prompt else None
        if answered is not None:
            body.append(Text(f"✓ {answered or 'Answered'}", style=self.muted))
        return self.panel(key, *body)

    def choice_list(
        self, message_id: str, frame: ComponentFrame, props: ChoiceListProps
    ) -> RenderableType:
        options = tuple(ChoiceOption(c.id, c.label, c.description) for c in props.choices)
        prompt = ChoicePrompt(message_id, frame, props.prompt, options)
        self.choices.append(prompt)
        self.prompts.append(prompt)
        chosen = self.used_choices.get(frame.instance_id)
        body: list[RenderableType] = []
        if props.prompt.strip() != self.last_text:
            body.append(Text(props.prompt, style="bold"))
        for number, option in enumerate(options, start=1):
            mark = "✓" if chosen and chosen in (option.label, option.description) else " "
            line = Text(f" {mark}{number}. ", style=self.accent)
            line.append(
                _caption(option.label, option.description),
                style="bold" if chosen is None else self.muted,
            )
            body.append(line)
        if chosen is None:
            hint = "Pick one: Up/Down or its number, then Enter."
            body.append(Text(hint, style=f"italic {self.muted}"))
        else:
            body.append(Text(f"✓ Chosen{': ' + chosen if chosen else ''}", style=self.muted))
        return self.panel("choices", *body)

    def source_list(self, props: SourceListProps) -> RenderableType:
        body: list[RenderableType] = [Text(props.label, style="bold")]
        for number, source in enumerate(props.sources, start=1):
            line = Text(f"  [{number}] ", style=self.muted)
            if source.url:
                line.append_text(self.link(source.title, source.url, " " * len(line)))
            else:
                line.append(source.title)
            body.append(line)
            if source.snippet:
                body.append(Text(f"      {source.snippet}", style=f"italic {self.muted}"))
        return self.panel("sources", *body)


def _caption(label: str, description: str | None) -> str:
    """A choice as one line: the label, and the description when it says more (a description
    that starts with the label stands alone)."""
    if not description or description == label:
        return label
    if description.startswith(label):
        return description
    return f"{label} — {description}"


def _compact(value: object) -> str:
    try:
        return json.dumps(_plain(value), ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        return str(value)


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


def _cell(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _compact(value)


def render_message(
    record: MessageRecord,
    *,
    theme: ChatTheme = DARK_CHAT_THEME,
    resolve_href: Callable[[str], str] = lambda href: href,
    used_choices: Mapping[str, str] | None = None,
) -> RenderedMessage:
    """The renderable of one snapshot message, and what in it can act.

    Args:
        record: The message, as the snapshot carries it.
        theme: Whose colours to use (accent, danger, muted, border).
        resolve_href: Turns a site-relative link into one a terminal can open.
        used_choices: Instance ids of choice lists, forms and buttons already answered, with
            what was chosen (an empty string when unknown); they are drawn as answered.

    Never raises on message content: what does not decode is drawn as an alert.
    """
    painter = _Painter(theme, resolve_href, used_choices or {})
    try:
        message = ChatMessage.from_record(record)
    except ProtocolError:
        message = None
    if record.role != "assistant" or message is None:
        style = painter.muted if record.role in ("tool", "system") else ""
        prefix = "tool result: " if record.role == "tool" else ""
        return RenderedMessage(
            record.id, record.role, record.status, Text(prefix + record.content, style=style)
        )
    parts: list[RenderableType] = []
    for part in present_chat_message(message):
        if isinstance(part, PresentedText):
            if part.message.content.strip():
                painter.last_text = part.message.content.strip()
                parts.append(painter.markdown(part.message.content))
        elif isinstance(part, PresentedComponent):
            parts.append(painter.component(record.id, part))
        elif isinstance(part, PresentedFallback):
            parts.append(Text(part.text, style=f"italic {painter.muted}"))
        elif isinstance(part, PresentedDiagnostic):
            parts.append(Text(f"⚠ {part.message}", style=f"bold {painter.danger}"))
    confirmations = _tool_calls(record, painter, parts)
    if record.status == "streaming":
        parts.append(Text(_STREAMING_MARK, style=painter.accent))
    elif record.status == "error":
        parts.append(Text("This answer did not finish.", style=f"italic {painter.danger}"))
    return RenderedMessage(
        record.id,
        record.role,
        record.status,
        Group(*parts),
        tuple(painter.links),
        tuple(painter.choices),
        confirmations,
        tuple(painter.prompts),
    )


def _tool_calls(
    record: MessageRecord, painter: _Painter, parts: list[RenderableType]
) -> tuple[PendingConfirmation, ...]:
    pending: list[PendingConfirmation] = []
    approve, reject = painter.labels or ("Approve", "Reject")
    for call in record.tool_calls or ():
        line = Text("⚙ ", style=painter.accent)
        line.append(call.name, style="bold")
        line.append(f" {_compact(call.args)}", style=painter.muted)
        line.append(f"  {call.status.replace('_', ' ')}")
        parts.append(line)
        if call.result is not None:
            parts.append(Text(f"  → {call.result}"))
        if call.error is not None:
            parts.append(Text(f"  ✗ {call.error}", style=painter.danger))
        if call.status == "requires_confirmation":
            pending.append(
                PendingConfirmation(record.id, call.id, call.name, call.args, approve, reject)
            )
            hint = f"Waiting for you: a to {approve.lower()}, r to {reject.lower()}."
            parts.append(Text(f"  {hint}", style=f"italic {painter.accent}"))
    return tuple(pending)
