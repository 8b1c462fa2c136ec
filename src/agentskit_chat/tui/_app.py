"""The Textual terminal chat: a transcript, the component that owns the keyboard, an input.

Everything the app shows comes from the newest snapshot the client's cursor holds, drawn by
:func:`~agentskit_chat.tui._transcript.build_transcript`; everything it sends is one turn of
:class:`~agentskit_chat.tui._client.ChatTurnClient`. One turn runs at a time, in a worker, so
the screen keeps answering keys (Escape stops the stream) while the answer arrives.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Final

from rich.console import Group
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Input, OptionList, Static

from agentskit_chat.components import select_choice
from agentskit_chat.protocol import SnapshotEvent

from ._client import ChatTurnClient, Decision, OperationKind, TurnResult
from ._panel import ComponentPanel, ComponentPicker
from ._prompts import ButtonPrompt, FormPrompt, InteractivePrompt
from ._render import ChoicePrompt, PendingConfirmation, Prompt, RenderedMessage, plain_text
from ._theme import THEME_NAMES, ThemeChoice, chat_theme, textual_theme
from ._transcript import Transcript, answered_choices, build_transcript

__all__ = ["COMMANDS_HELP", "TerminalChatApp"]

#: What ``/help`` shows.
COMMANDS_HELP: Final = (
    "Enter sends · /retry asks the last question again · /edit <text> changes your last "
    "question · /regenerate writes a new answer · Escape stops an answer · Ctrl+C quits · "
    "any other /command goes to the chat"
)
_IDLE_HINT: Final = "Type a message and press Enter. /help lists the commands."
#: The commands the terminal answers itself; any other ``/word`` is sent to the chat, whose
#: own routes may answer it.
_OWN_COMMANDS: Final = frozenset({"/retry", "/regenerate", "/edit", "/help", "/quit", "/exit"})
_INSTANCE_ID: Final = re.compile(r'"instanceId":"[^"]*"')
_UNCHANGED: Final = (
    "Regenerated: the answer is the same as before. Rephrase the question for a different one."
)
_STREAMING_HINT: Final = "Answering… press Escape to stop."
_CHOICE_HINT: Final = "Pick a choice: Up/Down or its number, then Enter (Tab: back to typing)."
_CONFIRM_HINT: Final = "Decide: a approves, r rejects (or Up/Down, then Enter)."
_FORM_HINT: Final = "Fill in the form: Tab moves between fields, Enter submits."
_BUTTONS_HINT: Final = "Choose a button: Tab moves between them, Enter presses."
_CHOICE_UNAVAILABLE: Final = "CHOICE_UNAVAILABLE"
_INTERACTION_UNAVAILABLE: Final = "INTERACTION_UNAVAILABLE"

TurnStart = Callable[[Callable[[SnapshotEvent], None]], Awaitable[TurnResult]]


class MessageView(Static):
    """One message of the transcript."""

    DEFAULT_CSS = """
    MessageView {
        padding: 0 1;
        margin: 0 0 1 0;
        border-left: thick $border;
    }
    MessageView.user { border-left: thick $primary; color: $foreground; }
    MessageView.assistant { border-left: thick $border; }
    MessageView.tool, MessageView.system { color: $text-muted; }
    """

    def __init__(self, rendered: RenderedMessage) -> None:
        super().__init__(_with_role(rendered), classes=rendered.role)
        self.rendered = rendered

    def show(self, rendered: RenderedMessage) -> None:
        """Draw ``rendered`` instead."""
        self.rendered = rendered
        self.update(_with_role(rendered))


_ROLE_LABELS: Final = {"user": "You", "assistant": "Assistant", "tool": "Tool", "system": "System"}


def _last_answer(snapshot: SnapshotEvent | None) -> str | None:
    """The content of the newest assistant message of ``snapshot``, if any, without its
    components' instance ids (new on every answer; the words and props are what is read)."""
    messages = snapshot.payload.messages if snapshot is not None else ()
    answers = [message.content for message in messages if message.role == "assistant"]
    return _INSTANCE_ID.sub("", str(answers[-1])) if answers else None


def _with_role(rendered: RenderedMessage) -> Group:
    label = Text(_ROLE_LABELS.get(rendered.role, rendered.role), style="bold")
    return Group(label, rendered.renderable)


class TerminalChatApp(App[None]):
    """The terminal chat over one chat handler (``/api/chat`` of ``url``).

    Args:
        url: The server; ``None`` to connect later with :meth:`connect` (a local server
            that is still starting).
        api_key: Sent as ``Authorization: Bearer <key>``.
        session_id: A session to continue: its stored conversation is loaded first.
        theme: ``dark`` (the default) or ``light``: the semantic chat theme's colours.
        starting: What to show while there is no server yet.

    Keys: Enter sends, Escape stops a streaming answer (the app keeps running), Ctrl+C quits
    with status 0. Commands: ``/retry``, ``/edit <text>``, ``/regenerate``, ``/help``.
    """

    TITLE = "agentskit-chat"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #transcript { height: 1fr; padding: 1 1 0 1; }
    #welcome { color: $text-muted; margin: 0 0 1 0; }
    #notice { height: auto; padding: 0 1; display: none; }
    #notice.error { display: block; color: $error; text-style: bold; }
    #notice.info { display: block; color: $text-muted; }
    #hint { height: 1; padding: 0 1; color: $text-muted; }
    #prompt { margin: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "quit_chat", "Quit", priority=True),
        Binding("ctrl+q", "quit_chat", "Quit", show=False, priority=True),
        Binding("escape", "stop", "Stop the answer", priority=True),
    ]

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        session_id: str | None = None,
        theme: ThemeChoice = "dark",
        starting: str = "Connecting…",
    ) -> None:
        super().__init__()
        self._url = url
        self._api_key = api_key
        self._session_id = session_id
        self._palette = theme
        self._starting = starting
        self.client: ChatTurnClient | None = None
        self.transcript: Transcript | None = None
        self._views: dict[str, MessageView] = {}
        self._picked: dict[str, str] = {}
        #: What a form's widgets held when it was submitted, shown again after a refusal.
        self._drafts: dict[str, dict[str, Any]] = {}
        self._decided: set[str] = set()
        self._owner_key: str | None = None
        self._notice = ""
        #: The status of every snapshot drawn, in order (``streaming``, ``complete``, ...).
        self.drawn: list[str] = []
        self._mounted_once = False
        self._startup_failure: str | None = None

    # --- layout -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="›")
        with VerticalScroll(id="transcript"):
            yield Static(self._starting, id="welcome")
        yield Static(id="notice")
        yield ComponentPicker()
        yield ComponentPanel()
        yield Static(_IDLE_HINT, id="hint")
        yield Input(placeholder="Ask a question…", id="prompt", select_on_focus=False)
        yield Footer()

    def on_mount(self) -> None:
        for choice in THEME_NAMES:
            self.register_theme(textual_theme(choice))
        self.theme = THEME_NAMES[self._palette]
        self.query_one(ComponentPicker).own(None)
        self.query_one(ComponentPanel).own(None, {})
        prompt = self.query_one("#prompt", Input)
        self._mounted_once = True
        if self._startup_failure is not None:
            self.show_startup_failure(self._startup_failure)
        elif self._url is None:
            self.sub_title = self._starting
            prompt.disabled = True
        else:
            self.connect(self._url)
        prompt.focus()

    async def on_unmount(self) -> None:
        if self.client is not None:
            await self.client.aclose()

    # --- what tests and hosts read ------------------------------------------------------

    @property
    def notice(self) -> str:
        """The notice on screen (an error or a status line), or ``""``."""
        return self._notice

    @property
    def notice_is_error(self) -> bool:
        """Whether the notice on screen is an error."""
        return self.query_one("#notice", Static).has_class("error")

    def message_texts(self, width: int = 100) -> list[str]:
        """What each message of the transcript shows, as plain text, in order."""
        views = self.query_one("#transcript", VerticalScroll).query(MessageView)
        return [plain_text(view.rendered.renderable, width) for view in views]

    @property
    def keyboard_owner(self) -> Prompt | PendingConfirmation | None:
        """The component that owns the keyboard now, if any."""
        return self.query_one(ComponentPicker).owner or self.query_one(ComponentPanel).owner

    # --- connecting ---------------------------------------------------------------------

    def connect(self, url: str) -> None:
        """Talk to the chat handler of ``url`` (loads the stored session first, if named).

        Called before the app is on screen, it connects as soon as it is.
        """
        if not self._mounted_once:
            self._url = url
            return
        self.client = ChatTurnClient(url, api_key=self._api_key, session_id=self._session_id)
        self.sub_title = url
        welcome = self.query_one("#welcome", Static)
        welcome.update(Text(f"Connected to {url}. {_IDLE_HINT}\n{COMMANDS_HELP}"))
        prompt = self.query_one("#prompt", Input)
        prompt.disabled = False
        prompt.focus()
        self.run_worker(self._present(), group="page", exit_on_error=False)
        if self._session_id is not None:
            self.run_worker(self._resume(), group="turn", exit_on_error=False)

    async def _present(self) -> None:
        """Show the chat's own title, words and suggestions (when its server tells them)."""
        assert self.client is not None
        words = await self.client.page()
        if words is None:
            return
        self.title = words.title
        if words.subtitle:
            self.sub_title = words.subtitle
        lines = [line for line in (words.welcome_title, words.welcome) if line]
        if words.suggestions:
            lines.append("Try: " + " · ".join(words.suggestions))
        lines.append(f"Connected to {self.client.base_url}. {_IDLE_HINT}\n{COMMANDS_HELP}")
        self.query_one("#welcome", Static).update(Text("\n".join(lines)))
        if words.placeholder:
            self.query_one("#prompt", Input).placeholder = words.placeholder

    def show_startup_failure(self, message: str) -> None:
        """Show that the server did not start (the input stays disabled)."""
        if not self._mounted_once:
            self._startup_failure = message
            return
        self._startup_failure = message
        self.query_one("#prompt", Input).disabled = True
        self.query_one("#welcome", Static).update("Nothing to chat with. Press Ctrl+C to quit.")
        self.query_one("#hint", Static).update("")
        self.sub_title = "not connected"
        self._notify(message, error=True)

    async def _resume(self) -> None:
        assert self.client is not None
        result = await self.client.resume()
        if result.failure is not None:
            self._notify(f"Could not load the session: {result.failure.message}", error=True)
        self._draw()

    # --- notices ------------------------------------------------------------------------

    def _notify(self, message: str, *, error: bool = False) -> None:
        widget = self.query_one("#notice", Static)
        widget.set_classes("error" if error else "info")
        widget.update(Text(("⚠ " if error else "") + message))
        self._notice = message

    def _clear_notice(self) -> None:
        widget = self.query_one("#notice", Static)
        widget.set_classes("")
        widget.update("")
        self._notice = ""

    # --- input --------------------------------------------------------------------------

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id != "prompt":
            return
        text = event.value.strip()
        if not text:
            return
        if self.client is None:
            self._notify("Not connected yet.", error=True)
            return
        if self.client.running:
            self._notify("An answer is still streaming: press Escape to stop it first.")
            return
        event.input.value = ""
        self._clear_notice()
        owner = self.keyboard_owner
        if isinstance(owner, ChoicePrompt) and text.isdigit():
            if not 1 <= int(text) <= len(owner.choices):
                self._notify(f"Pick a number from 1 to {len(owner.choices)}.", error=True)
                return
            self.pick_choice(owner, int(text) - 1)
            return
        if isinstance(owner, PendingConfirmation) and text.lower() in ("a", "r"):
            self.decide(owner, "approve" if text.lower() == "a" else "reject")
            return
        if text.partition(" ")[0] in _OWN_COMMANDS:
            self._command(text)
            return
        client = self.client
        self._start(lambda shown: client.submit(text, on_snapshot=shown), retype=text)

    def _command(self, text: str) -> None:
        assert self.client is not None
        client = self.client
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        if name in ("/retry", "/regenerate"):
            kind: OperationKind = "retry" if name == "/retry" else "regenerate"
            replaced = _last_answer(client.snapshot)

            def done() -> str:
                if kind == "retry":
                    return "Asked again."
                if replaced is not None and _last_answer(client.snapshot) == replaced:
                    return _UNCHANGED  # a chat without a model answers the same way again
                return "A new answer replaced the last one."

            self._start(lambda shown: client.operation(kind, on_snapshot=shown), done=done)
        elif name == "/edit":
            target = self.transcript.last_user_message_id if self.transcript else None
            if not rest:
                self._notify("Write the new question after /edit: /edit How do I …?", error=True)
            elif target is None:
                self._notify("There is no question to edit yet.", error=True)
            else:
                self._start(
                    lambda shown: client.operation(
                        "edit", text=rest, message_id=target, on_snapshot=shown
                    ),
                    done=lambda: "Your question was changed and answered again.",
                )
        elif name == "/help":
            self._notify(COMMANDS_HELP)
        else:
            self.action_quit_chat()

    # --- components ---------------------------------------------------------------------

    def pick_choice(self, prompt: ChoicePrompt, index: int) -> bool:
        """Answer choice list ``prompt`` with its choice ``index``; ``False`` (nothing sent)
        when the list was answered already, a turn is running or ``index`` is not a choice."""
        client = self.client
        if (
            client is None
            or client.running
            or prompt.instance_id in self._picked
            or not 0 <= index < len(prompt.choices)
        ):
            return False
        choice = prompt.choices[index]
        text = choice.description or choice.label
        self._picked[prompt.instance_id] = text
        selection = select_choice(prompt.frame, choice.id).to_wire()

        async def run(shown: Callable[[SnapshotEvent], None]) -> TurnResult:
            result = await client.select(selection, text, on_snapshot=shown)
            failure = result.failure
            if result.stopped or (failure is not None and failure.code != _CHOICE_UNAVAILABLE):
                # The server released the reservation: the list may be answered again.
                self._picked.pop(prompt.instance_id, None)
            return result

        self._start(run)
        return True

    def decide(self, pending: PendingConfirmation, decision: Decision) -> bool:
        """Approve or reject ``pending``; ``False`` (nothing sent) when already decided or a
        turn is running."""
        client = self.client
        if client is None or client.running or pending.tool_call_id in self._decided:
            return False
        self._decided.add(pending.tool_call_id)
        call_id = pending.tool_call_id

        async def run(shown: Callable[[SnapshotEvent], None]) -> TurnResult:
            result = await client.decide(call_id, decision, on_snapshot=shown)
            if result.failure is not None and result.failure.retryable:
                self._decided.discard(call_id)
            return result

        self._start(run)
        return True

    def answer(
        self,
        prompt: InteractivePrompt,
        interaction: dict[str, Any],
        text: str,
        draft: dict[str, Any] | None = None,
    ) -> bool:
        """Send what the user did with a form or a row of buttons (``payload.interaction``);
        ``False`` (nothing sent) when it was answered already or a turn is running. A refused
        form owns the keyboard again with ``draft`` in its fields."""
        client = self.client
        instance = prompt.instance_id
        if client is None or client.running or instance in self._picked:
            return False
        self._picked[instance] = ""
        if draft is not None:
            self._drafts[instance] = draft

        async def run(shown: Callable[[SnapshotEvent], None]) -> TurnResult:
            result = await client.interact(interaction, text, on_snapshot=shown)
            failure = result.failure
            if result.snapshot is not None and instance in answered_choices(result.snapshot):
                # Used for good: drawn with the text the server made of it.
                self._picked[instance] = answered_choices(result.snapshot)[instance]
            elif failure is None or failure.code != _INTERACTION_UNAVAILABLE:
                self._picked.pop(instance, None)  # refused or stopped: it may be answered again
            return result

        self._start(run)
        return True

    def on_component_panel_answered(self, event: ComponentPanel.Answered) -> None:
        event.stop()
        self.answer(event.prompt, event.interaction, event.text, event.draft)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        owner = self.keyboard_owner
        option_id = event.option.id
        if isinstance(owner, ChoicePrompt) and option_id is not None:
            self.pick_choice(owner, int(option_id))
        elif isinstance(owner, PendingConfirmation):
            self.decide(owner, "approve" if option_id == "approve" else "reject")

    # --- turns --------------------------------------------------------------------------

    def _start(
        self,
        start: TurnStart,
        *,
        done: Callable[[], str] | None = None,
        retype: str | None = None,
    ) -> None:
        self._clear_notice()
        self._own(None)
        self.query_one("#hint", Static).update(_STREAMING_HINT)
        self.query_one("#prompt", Input).focus()
        self.run_worker(self._turn(start, done, retype), group="turn", exit_on_error=False)

    async def _turn(
        self, start: TurnStart, done: Callable[[], str] | None, retype: str | None
    ) -> None:
        """Run one turn; a question the server never took is put back into the input."""
        result: TurnResult | None = None
        try:
            result = await start(self._shown)
        finally:
            self._draw()
            if result is not None and result.stopped:
                self._notify("Stopped. What was written so far is kept.")
            elif result is not None and result.failure is not None:
                failure = result.failure
                self._notify(f"{failure.message} ({failure.code})", error=True)
                prompt = self.query_one("#prompt", Input)
                if retype is not None and result.accepted == 0 and not prompt.value:
                    prompt.value = retype
                    prompt.cursor_position = len(retype)
            elif result is not None and done is not None:
                self._notify(done())

    def _shown(self, snapshot: SnapshotEvent) -> None:
        self.drawn.append(snapshot.payload.status)
        self._draw()

    def _draw(self) -> None:
        """Draw the newest snapshot and give the keyboard to its latest unresolved component."""
        client = self.client
        snapshot = client.snapshot if client is not None else None
        if client is None or snapshot is None:
            self._own(None)
            return
        transcript = build_transcript(
            snapshot,
            theme=chat_theme(self._palette),
            resolve_href=client.absolute_url,
            picked=self._picked,
        )
        self.transcript = transcript
        self._sync(transcript.messages)
        owner = transcript.active
        if isinstance(owner, PendingConfirmation) and owner.tool_call_id in self._decided:
            owner = None
        self._own(None if client.running else owner)

    def _sync(self, messages: tuple[RenderedMessage, ...]) -> None:
        box = self.query_one("#transcript", VerticalScroll)
        ids = [m.message_id for m in messages]
        kept = [i for i in self._views if i in set(ids)]
        if ids[: len(kept)] != kept:
            kept = []
        for message_id in list(self._views):
            if message_id not in kept:
                self._views.pop(message_id).remove()
        fresh: list[MessageView] = []
        for message in messages:
            view = self._views.get(message.message_id)
            if view is None:
                view = MessageView(message)
                self._views[message.message_id] = view
                fresh.append(view)
            elif view.rendered != message:
                view.show(message)
        if fresh:
            box.mount_all(fresh)
        box.scroll_end(animate=False)

    def _own(self, owner: Prompt | PendingConfirmation | None) -> None:
        picker = self.query_one(ComponentPicker)
        panel = self.query_one(ComponentPanel)
        key = None
        if isinstance(owner, ChoicePrompt):
            key = f"choice:{owner.instance_id}"
        elif isinstance(owner, PendingConfirmation):
            key = f"confirm:{owner.tool_call_id}"
        elif owner is not None:
            key = f"component:{owner.instance_id}"
        hint = self.query_one("#hint", Static)
        running = self.client is not None and self.client.running
        if key == self._owner_key:
            if owner is None and not running:
                hint.update(_IDLE_HINT)
            return
        self._owner_key = key
        widgets = owner if isinstance(owner, FormPrompt | ButtonPrompt) else None
        focused_panel = panel.has_focus_within
        picker.own(owner if isinstance(owner, ChoicePrompt | PendingConfirmation) else None)
        panel.own(widgets, self._drafts.get(widgets.instance_id, {}) if widgets else {})
        if owner is None:
            hint.update(_STREAMING_HINT if running else _IDLE_HINT)
            if picker.has_focus or focused_panel:
                self.query_one("#prompt", Input).focus()
            return
        if widgets is not None:
            hint.update(_FORM_HINT if isinstance(widgets, FormPrompt) else _BUTTONS_HINT)
            panel.focus_first()
            return
        hint.update(_CHOICE_HINT if isinstance(owner, ChoicePrompt) else _CONFIRM_HINT)
        picker.focus()

    # --- actions ------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop":
            return self.client is not None and self.client.running
        return True

    def action_stop(self) -> None:
        """Stop the streaming answer (the app keeps running)."""
        if self.client is not None:
            self.client.stop()

    def action_quit_chat(self) -> None:
        """Quit cleanly: the running turn is stopped and the exit status is 0 (1 when the
        server never started)."""
        if self.client is not None:
            self.client.stop()
        self.exit(return_code=0 if self._startup_failure is None else 1)
