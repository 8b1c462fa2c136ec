"""The semantic theme: a small closed set of design tokens, validated, and its CSS variables.

A theme is colours, spacing, radius and one font family. Hosts pass a partial theme; it is
checked token by token, merged over the defaults and checked again, so a renderer only ever
sees values that cannot break out of a CSS declaration.

>>> theme = resolve_chat_theme({"colors": {"accent": "#123456"}})
>>> theme.colors.accent, theme.colors.background, theme.font_family
('#123456', '#ffffff', 'system')
>>> theme_css_variables(theme)["--ak-color-button"]
'#123456'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, TypeVar

from pydantic import BaseModel, ConfigDict, PlainValidator, field_validator, model_validator

from agentskit_chat.protocol._json import js_number
from agentskit_chat.protocol._types import WireModel

from ._fields import number_between

__all__ = [
    "DARK_CHAT_THEME",
    "DEFAULT_CHAT_THEME",
    "SYSTEM_FONT_STACK",
    "ChatTheme",
    "ThemeColors",
    "ThemeRadius",
    "ThemeSpacing",
    "resolve_chat_theme",
    "theme_css",
    "theme_css_variables",
]

#: The font stack that the ``system`` font family stands for.
SYSTEM_FONT_STACK: Final = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif'

_HEX_COLOR: Final = re.compile(r"#(?:[0-9A-Fa-f]{3,4}|[0-9A-Fa-f]{6}|[0-9A-Fa-f]{8})")
_FONT_FAMILY: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _-]{0,127}")
# A CSS selector may not close the block early or open a comment or another block.
_UNSAFE_SELECTOR: Final = re.compile(r"[{};@\\<\"'\x00-\x1f\x7f]|/\*|\*/")
_MAX_SELECTOR_CHARS: Final = 1024


def _hex_color(value: Any) -> str:
    if type(value) is not str or _HEX_COLOR.fullmatch(value) is None:
        raise ValueError("expected a hex colour: # and 3, 4, 6 or 8 hex digits")
    return value


def _font_family(value: Any) -> str:
    if type(value) is not str or (value != "system" and _FONT_FAMILY.fullmatch(value) is None):
        raise ValueError("expected 'system' or one font family name")
    return value


_size = number_between(0, 1000)

# Defaults are never validated, and every validator rejects ``None``: an absent token is
# ``None`` in a partial theme, while an explicit JSON ``null`` is invalid.
_Color = Annotated[str, PlainValidator(_hex_color)]
_Size = Annotated[float, PlainValidator(_size)]
_FontFamily = Annotated[str, PlainValidator(_font_family)]
_OptColor = Annotated[str | None, PlainValidator(_hex_color)]
_OptSize = Annotated[float | None, PlainValidator(_size)]
_OptFontFamily = Annotated[str | None, PlainValidator(_font_family)]


class _ThemeModel(WireModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, validate_by_name=False, validate_by_alias=True
    )

    @model_validator(mode="before")
    @classmethod
    def _plain_object(cls, data: Any) -> Any:
        # Only JSON objects (or read-only views of them) are read; pydantic would otherwise
        # accept other mappings or read attributes.
        if isinstance(data, cls) or type(data) is dict:
            return data
        if type(data) is MappingProxyType:
            return dict(data)
        raise ValueError("expected an object")


class ThemeColors(_ThemeModel):
    """The colour tokens, each ``#`` and 3, 4, 6 or 8 hex digits (``#fff``, ``#2563ebcc``)."""

    background: _Color
    surface: _Color
    border: _Color
    text: _Color
    muted: _Color
    accent: _Color
    on_accent: _Color
    danger: _Color


class ThemeSpacing(_ThemeModel):
    """The spacing tokens, in pixels: finite numbers from 0 to 1,000 (``True`` is no number)."""

    small: _Size
    medium: _Size
    large: _Size


class ThemeRadius(_ThemeModel):
    """The corner radius tokens, in pixels: finite numbers from 0 to 1,000."""

    medium: _Size
    large: _Size


class ChatTheme(_ThemeModel):
    """A complete semantic theme (frozen; unknown keys are refused at every level).

    ``font_family`` (``fontFamily`` on the wire) is ``"system"`` (the platform's sans-serif
    stack) or one family name: a letter or digit, then up to 127 letters, digits, spaces,
    ``_`` or ``-``. Stacks, commas and quotes are refused, so the value is always safe to put
    into CSS. Build one with :func:`resolve_chat_theme`.
    """

    colors: ThemeColors
    spacing: ThemeSpacing
    radius: ThemeRadius
    font_family: _FontFamily


class _PartialColors(_ThemeModel):
    background: _OptColor = None
    surface: _OptColor = None
    border: _OptColor = None
    text: _OptColor = None
    muted: _OptColor = None
    accent: _OptColor = None
    on_accent: _OptColor = None
    danger: _OptColor = None


class _PartialSpacing(_ThemeModel):
    small: _OptSize = None
    medium: _OptSize = None
    large: _OptSize = None


class _PartialRadius(_ThemeModel):
    medium: _OptSize = None
    large: _OptSize = None


class _PartialTheme(_ThemeModel):
    colors: _PartialColors | None = None
    spacing: _PartialSpacing | None = None
    radius: _PartialRadius | None = None
    font_family: _OptFontFamily = None

    @field_validator("colors", "spacing", "radius", mode="before")
    @classmethod
    def _group_not_null(cls, value: Any) -> Any:
        # An explicit ``null`` group is refused like an explicit ``null`` token.
        if value is None:
            raise ValueError("expected an object")
        return value


#: The default light theme.
DEFAULT_CHAT_THEME: Final = ChatTheme.model_validate(
    {
        "colors": {
            "background": "#ffffff",
            "surface": "#f3f4f6",
            "border": "#d1d5db",
            "text": "#111827",
            "muted": "#6b7280",
            "accent": "#2563eb",
            "onAccent": "#ffffff",
            "danger": "#dc2626",
        },
        "spacing": {"small": 8, "medium": 12, "large": 16},
        "radius": {"medium": 8, "large": 12},
        "fontFamily": "system",
    }
)

#: A dark theme with the default spacing, radius and font. This palette is agentskit-chat's
#: own choice (the reference ships only the light defaults); text on every background keeps
#: a WCAG AA contrast ratio.
DARK_CHAT_THEME: Final = ChatTheme.model_validate(
    {
        **DEFAULT_CHAT_THEME.to_wire(),
        "colors": {
            "background": "#111827",
            "surface": "#1f2937",
            "border": "#374151",
            "text": "#f9fafb",
            "muted": "#9ca3af",
            "accent": "#60a5fa",
            "onAccent": "#0b1220",
            "danger": "#f87171",
        },
    }
)

_M = TypeVar("_M", bound=BaseModel)


def _merge(defaults: _M, partial: BaseModel | None) -> dict[str, Any]:
    merged = defaults.model_dump(by_alias=True)
    if partial is not None:
        merged.update(partial.model_dump(by_alias=True, exclude_unset=True))
    return merged


def resolve_chat_theme(input: object = None) -> ChatTheme:
    """A complete theme: ``input``, a partial theme, merged key by key over the defaults.

    ``input`` is ``None`` (the defaults), a :class:`ChatTheme` (returned as is) or a JSON
    object with any of ``colors``, ``spacing``, ``radius`` and ``fontFamily``, each group
    itself partial. Unknown keys at any level, an explicit ``null`` and any invalid token are
    refused. The merged theme is validated again.

    Raises:
        pydantic.ValidationError: ``input`` is not a valid partial theme. Its errors carry
            the locations of the bad tokens, never their values.

    >>> resolve_chat_theme({"spacing": {"medium": 20}}).spacing.medium
    20
    """
    if input is None:
        return DEFAULT_CHAT_THEME
    if isinstance(input, ChatTheme):
        return input
    partial = _PartialTheme.model_validate(input)
    base = DEFAULT_CHAT_THEME
    return ChatTheme.model_validate(
        {
            "colors": _merge(base.colors, partial.colors),
            "spacing": _merge(base.spacing, partial.spacing),
            "radius": _merge(base.radius, partial.radius),
            "fontFamily": partial.font_family or base.font_family,
        }
    )


def _px(value: float) -> str:
    return f"{js_number(value)}px"


def _font_stack(family: str) -> str:
    if family == "system":
        return SYSTEM_FONT_STACK
    # Quoted, because a family name may start with a digit; it holds no quote to escape.
    return f'"{family}", {SYSTEM_FONT_STACK}'


def theme_css_variables(theme: ChatTheme | None = None) -> dict[str, str]:
    """The CSS custom properties the web renderers read, for ``theme`` (default: the defaults).

    Colours map onto the page's roles (user bubbles and buttons take the accent, assistant
    bubbles and tool cards the surface, and so on); sizes are in ``px``, integers printed
    without a fraction; ``system`` becomes :data:`SYSTEM_FONT_STACK`, and a family name is
    quoted with that stack as its fallback.

    >>> theme_css_variables()["--ak-spacing-md"]
    '12px'
    """
    t = DEFAULT_CHAT_THEME if theme is None else theme
    c = t.colors
    return {
        "--ak-color-bg": c.background,
        "--ak-color-surface": c.surface,
        "--ak-color-border": c.border,
        "--ak-color-text": c.text,
        "--ak-color-text-muted": c.muted,
        "--ak-color-bubble-user": c.accent,
        "--ak-color-bubble-user-text": c.on_accent,
        "--ak-color-bubble-assistant": c.surface,
        "--ak-color-bubble-assistant-text": c.text,
        "--ak-color-input-bg": c.background,
        "--ak-color-input-border": c.border,
        "--ak-color-input-focus": c.accent,
        "--ak-color-button": c.accent,
        "--ak-color-button-text": c.on_accent,
        "--ak-color-tool-bg": c.surface,
        "--ak-color-tool-border": c.border,
        "--ak-app-color-danger": c.danger,
        "--ak-font-family": _font_stack(t.font_family),
        "--ak-radius": _px(t.radius.medium),
        "--ak-radius-lg": _px(t.radius.large),
        "--ak-spacing-sm": _px(t.spacing.small),
        "--ak-spacing-md": _px(t.spacing.medium),
        "--ak-spacing-lg": _px(t.spacing.large),
    }


def theme_css(theme: ChatTheme | Mapping[str, Any] | None = None, selector: str = ":root") -> str:
    """A CSS rule that sets the theme's custom properties on ``selector``.

    ``theme`` may also be a partial theme, resolved with :func:`resolve_chat_theme`. Every
    value has been validated, so the rule cannot be escaped through a token.

    Raises:
        pydantic.ValidationError: ``theme`` is not a valid partial theme.
        ValueError: ``selector`` is blank, longer than 1,024 characters, or holds a brace,
            semicolon, ``@``, backslash, quote, ``<``, comment marker or control
            character.

    >>> print(theme_css(selector=".dark").splitlines()[1])
      --ak-color-bg: #ffffff;
    """
    if (
        not selector.strip()
        or len(selector) > _MAX_SELECTOR_CHARS
        or _UNSAFE_SELECTOR.search(selector) is not None
    ):
        raise ValueError("selector is not a plain CSS selector")
    resolved = resolve_chat_theme(theme)
    body = "".join(f"  {name}: {value};\n" for name, value in theme_css_variables(resolved).items())
    return f"{selector} {{\n{body}}}\n"
