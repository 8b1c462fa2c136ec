"""How a chat presents itself: the title, words and look every interface shows.

A :class:`ChatPage` belongs to a chat definition (``define_chat(..., page=ChatPage(...))``):
the web page renders its title, subtitle, welcome text, suggestions, input placeholder, logo
and theme, and the terminal chat shows the same title, subtitle and suggestions. Everything is
checked when the page is built, so a mistake fails at import time with a clear message rather
than on a user's screen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from agentskit_chat.components import ChatTheme
from agentskit_chat.errors import ConfigurationError

__all__ = [
    "LOGO_MEDIA_TYPES",
    "MAX_LOGO_BYTES",
    "MAX_PAGE_SUGGESTIONS",
    "ChatPage",
]

#: The most suggestions a page shows.
MAX_PAGE_SUGGESTIONS: Final = 8
#: The largest logo file served, in bytes.
MAX_LOGO_BYTES: Final = 256 * 1024
#: The logo files a page serves, by suffix.
LOGO_MEDIA_TYPES: Final = {
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
}
#: The longest text mark used as a logo (a glyph or initials), in characters.
_MAX_MARK: Final = 4
_LIMITS: Final = {
    "title": 80,
    "subtitle": 200,
    "welcome_title": 120,
    "welcome": 1000,
    "placeholder": 120,
}
_MAX_SUGGESTION: Final = 200


def _text(name: str, value: object, *, required: bool) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"ChatPage.{name} must be a non-blank string.")
    if len(value) > _LIMITS[name]:
        raise ConfigurationError(f"ChatPage.{name} must be at most {_LIMITS[name]} characters.")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatPage:
    """The words and look of a chat, shown by the web page and the terminal chat.

    Attributes:
        title: The chat's name (page title and heading; 1 to 80 characters).
        subtitle: One line under the title (at most 200 characters), if any.
        welcome_title: The heading shown before the first message (at most 120 characters).
        welcome: The text under it (at most 1,000 characters).
        suggestions: Up to 8 messages offered before the first one (each at most 200
            characters); a click sends one.
        placeholder: The input box's placeholder (at most 120 characters).
        logo: A text mark of at most 4 characters (``"◆"``, ``"AC"``), or the path of a PNG,
            SVG, JPEG or WebP file of at most 256 KiB, served by the page (read, and its size
            checked, when the app is built).
        theme: The page's light theme (see :func:`~agentskit_chat.components.resolve_chat_theme`);
            ``None`` for the default.
        dark_theme: The theme used when the system prefers dark colours; ``None`` for the
            default dark theme.

    Raises:
        ConfigurationError: a blank or too long text, too many suggestions, or a logo that
            is neither a short mark nor an image file name.

    Example:
        >>> page = ChatPage(
        ...     title="Support",
        ...     subtitle="Tickets and answers, with a human in the loop.",
        ...     suggestions=("Open a ticket", "What are your hours?"),
        ... )
        >>> page.title
        'Support'
    """

    title: str = "Chat"
    subtitle: str | None = None
    welcome_title: str = "How can I help?"
    welcome: str | None = None
    suggestions: tuple[str, ...] = ()
    placeholder: str = "Type a message…"
    logo: str | Path | None = "◆"
    theme: ChatTheme | None = field(default=None, compare=False)
    dark_theme: ChatTheme | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _text("title", self.title, required=True)
        _text("subtitle", self.subtitle, required=False)
        _text("welcome_title", self.welcome_title, required=True)
        _text("welcome", self.welcome, required=False)
        _text("placeholder", self.placeholder, required=True)
        if isinstance(self.suggestions, str):
            raise ConfigurationError("ChatPage.suggestions must be a sequence of strings.")
        suggestions = tuple(self.suggestions)
        if len(suggestions) > MAX_PAGE_SUGGESTIONS:
            raise ConfigurationError(
                f"ChatPage.suggestions holds at most {MAX_PAGE_SUGGESTIONS} suggestions."
            )
        for suggestion in suggestions:
            if not isinstance(suggestion, str) or not suggestion.strip():
                raise ConfigurationError("Every ChatPage suggestion must be a non-blank string.")
            if len(suggestion) > _MAX_SUGGESTION:
                raise ConfigurationError(
                    f"A ChatPage suggestion must be at most {_MAX_SUGGESTION} characters."
                )
        object.__setattr__(self, "suggestions", suggestions)
        for name in ("theme", "dark_theme"):
            theme = getattr(self, name)
            if theme is not None and not isinstance(theme, ChatTheme):
                raise ConfigurationError(
                    f"ChatPage.{name} must be a ChatTheme (see resolve_chat_theme)."
                )
        self._check_logo()

    def _check_logo(self) -> None:
        logo = self.logo
        if logo is None:
            return
        if isinstance(logo, str) and not _looks_like_file(logo):
            if not logo.strip() or len(logo) > _MAX_MARK:
                raise ConfigurationError(
                    f"ChatPage.logo must be a text mark of 1 to {_MAX_MARK} characters "
                    "or the path of an image file."
                )
            return
        if not isinstance(logo, str | Path):
            raise ConfigurationError("ChatPage.logo must be a string or a path.")
        path = Path(logo)
        if path.suffix.lower() not in LOGO_MEDIA_TYPES:
            kinds = ", ".join(sorted(LOGO_MEDIA_TYPES))
            raise ConfigurationError(f"ChatPage.logo must be one of {kinds}: {path.name}")

    @property
    def logo_file(self) -> Path | None:
        """The logo's image file, or ``None`` when the logo is a text mark (or absent)."""
        logo = self.logo
        if logo is None or (isinstance(logo, str) and not _looks_like_file(logo)):
            return None
        return Path(logo)

    @property
    def logo_mark(self) -> str | None:
        """The logo's text mark, or ``None`` when the logo is a file (or absent)."""
        logo = self.logo
        if isinstance(logo, str) and not _looks_like_file(logo):
            return logo
        return None


def _looks_like_file(value: str) -> bool:
    return any(value.lower().endswith(suffix) for suffix in LOGO_MEDIA_TYPES) or "/" in value
