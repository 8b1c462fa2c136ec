"""The semantic chat theme as Textual themes: one palette for the web page and the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from agentskit_chat.components import DARK_CHAT_THEME, DEFAULT_CHAT_THEME, ChatTheme

if TYPE_CHECKING:
    from textual.theme import Theme

__all__ = ["THEME_NAMES", "ThemeChoice", "chat_theme", "textual_theme"]

#: Which palette the terminal uses.
ThemeChoice = Literal["dark", "light"]
#: The Textual theme name of each palette.
THEME_NAMES: Final[dict[ThemeChoice, str]] = {
    "dark": "agentskit-dark",
    "light": "agentskit-light",
}


def chat_theme(choice: ThemeChoice) -> ChatTheme:
    """The semantic theme of ``choice``."""
    return DARK_CHAT_THEME if choice == "dark" else DEFAULT_CHAT_THEME


def textual_theme(choice: ThemeChoice) -> Theme:
    """The Textual theme of ``choice``: accent is Textual's primary and accent, danger its
    error, surface its surface and panel; muted and border override the variables of the same
    role, so every widget's CSS picks them up."""
    from textual.theme import Theme  # noqa: PLC0415 - the tui extra is optional

    colors = chat_theme(choice).colors
    return Theme(
        name=THEME_NAMES[choice],
        primary=colors.accent,
        secondary=colors.accent,
        accent=colors.accent,
        error=colors.danger,
        warning=colors.danger,
        foreground=colors.text,
        background=colors.background,
        surface=colors.surface,
        panel=colors.surface,
        dark=choice == "dark",
        variables={
            "text-muted": colors.muted,
            "foreground-muted": colors.muted,
            "border": colors.border,
            "border-blurred": colors.border,
            "block-cursor-background": colors.accent,
            "block-cursor-foreground": colors.on_accent,
        },
    )
