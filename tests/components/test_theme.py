"""The semantic theme: defaults, strict partial merge, every bound, the CSS variable mapping."""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agentskit_chat.components import (
    DARK_CHAT_THEME,
    DEFAULT_CHAT_THEME,
    SYSTEM_FONT_STACK,
    ChatTheme,
    resolve_chat_theme,
    theme_css,
    theme_css_variables,
)
from tests._strategies import MARKER, json_values

DEFAULT_WIRE: dict[str, Any] = {
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
COLOR_TOKENS = list(DEFAULT_WIRE["colors"])
SIZE_TOKENS = [("spacing", k) for k in DEFAULT_WIRE["spacing"]] + [
    ("radius", k) for k in DEFAULT_WIRE["radius"]
]

# The DOM mapping: each CSS variable and the token it takes.
DOM_MAPPING: dict[str, tuple[str, str]] = {
    "--ak-color-bg": ("colors", "background"),
    "--ak-color-surface": ("colors", "surface"),
    "--ak-color-border": ("colors", "border"),
    "--ak-color-text": ("colors", "text"),
    "--ak-color-text-muted": ("colors", "muted"),
    "--ak-color-bubble-user": ("colors", "accent"),
    "--ak-color-bubble-user-text": ("colors", "onAccent"),
    "--ak-color-bubble-assistant": ("colors", "surface"),
    "--ak-color-bubble-assistant-text": ("colors", "text"),
    "--ak-color-input-bg": ("colors", "background"),
    "--ak-color-input-border": ("colors", "border"),
    "--ak-color-input-focus": ("colors", "accent"),
    "--ak-color-button": ("colors", "accent"),
    "--ak-color-button-text": ("colors", "onAccent"),
    "--ak-color-tool-bg": ("colors", "surface"),
    "--ak-color-tool-border": ("colors", "border"),
    "--ak-app-color-danger": ("colors", "danger"),
    "--ak-radius": ("radius", "medium"),
    "--ak-radius-lg": ("radius", "large"),
    "--ak-spacing-sm": ("spacing", "small"),
    "--ak-spacing-md": ("spacing", "medium"),
    "--ak-spacing-lg": ("spacing", "large"),
}


def accepts(value: Any) -> bool:
    try:
        resolve_chat_theme(value)
    except ValidationError:
        return False
    return True


# --- defaults and the merge ------------------------------------------------------------------


def test_defaults() -> None:
    assert DEFAULT_CHAT_THEME.to_wire() == DEFAULT_WIRE
    assert resolve_chat_theme() == DEFAULT_CHAT_THEME
    assert resolve_chat_theme({}) == DEFAULT_CHAT_THEME
    assert resolve_chat_theme({"colors": {}, "spacing": {}, "radius": {}}) == DEFAULT_CHAT_THEME


def test_merge_vector() -> None:
    theme = resolve_chat_theme({"colors": {"accent": "#123456"}, "spacing": {"medium": 20}})
    assert theme.colors.accent == "#123456"
    assert theme.colors.background == "#ffffff"
    assert (theme.spacing.small, theme.spacing.medium, theme.spacing.large) == (8, 20, 16)
    assert theme.font_family == "system"
    expected = {**DEFAULT_WIRE, "colors": {**DEFAULT_WIRE["colors"], "accent": "#123456"}}
    expected["spacing"] = {"small": 8, "medium": 20, "large": 16}
    assert theme.to_wire() == expected


@pytest.mark.parametrize("token", COLOR_TOKENS)
def test_each_colour_merges_alone(token: str) -> None:
    wire = resolve_chat_theme({"colors": {token: "#abc"}}).to_wire()
    assert wire["colors"] == {**DEFAULT_WIRE["colors"], token: "#abc"}
    assert {k: v for k, v in wire.items() if k != "colors"} == {
        k: v for k, v in DEFAULT_WIRE.items() if k != "colors"
    }


@pytest.mark.parametrize(("group", "token"), SIZE_TOKENS)
def test_each_size_merges_alone(group: str, token: str) -> None:
    wire = resolve_chat_theme({group: {token: 2.5}}).to_wire()
    assert wire[group] == {**DEFAULT_WIRE[group], token: 2.5}


def test_a_complete_theme_and_a_read_only_mapping() -> None:
    assert resolve_chat_theme(DARK_CHAT_THEME) is DARK_CHAT_THEME
    assert resolve_chat_theme(DARK_CHAT_THEME.to_wire()) == DARK_CHAT_THEME
    frozen = MappingProxyType({"colors": MappingProxyType({"accent": "#000"})})
    assert resolve_chat_theme(frozen).colors.accent == "#000"


def test_the_theme_is_frozen() -> None:
    with pytest.raises(ValidationError):
        DEFAULT_CHAT_THEME.colors.accent = "#000"  # type: ignore[misc]
    assert DEFAULT_CHAT_THEME.colors.accent == "#2563eb"


def test_dark_theme_differs_only_in_colours() -> None:
    wire = DARK_CHAT_THEME.to_wire()
    assert {k: v for k, v in wire.items() if k != "colors"} == {
        k: v for k, v in DEFAULT_WIRE.items() if k != "colors"
    }
    assert set(wire["colors"]) == set(COLOR_TOKENS)
    assert wire["colors"]["background"] != DEFAULT_WIRE["colors"]["background"]


def _luminance(hex_color: str) -> float:
    channels = [int(hex_color[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("theme", [DEFAULT_CHAT_THEME, DARK_CHAT_THEME])
@pytest.mark.parametrize(
    ("fg", "bg"),
    [("text", "background"), ("text", "surface"), ("muted", "background"), ("onAccent", "accent")],
)
def test_palettes_keep_aa_contrast(theme: ChatTheme, fg: str, bg: str) -> None:
    colors = theme.colors.to_wire()
    assert _contrast(colors[fg], colors[bg]) >= 4.5


# --- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"colors": {"accent": ""}},
        {"colors": {"accent": "var(--brand)"}},
        {"fontFamily": "Inter, sans-serif"},
        {"shadow": "none"},
        {"colors": {"accentColor": "#fff"}},
        {"spacing": {"tiny": 1}},
        {"radius": {"small": 1}},
        {"colors": {"on_accent": "#fff"}},
        {"font_family": "system"},
        {"colors": None},
        {"spacing": None},
        {"radius": None},
        {"fontFamily": None},
        {"colors": {"accent": None}},
        {"colors": []},
        {"colors": "#fff"},
        [],
        "system",
        0,
        True,
    ],
)
def test_refused(value: Any) -> None:
    assert not accepts(value)


def test_errors_name_the_token_and_never_echo_it() -> None:
    with pytest.raises(ValidationError) as info:
        resolve_chat_theme({"colors": {"accent": f"url({MARKER})"}})
    assert [e["loc"] for e in info.value.errors()] == [("colors", "accent")]
    assert MARKER not in str(info.value)


# --- bounds: at the limit and one past -------------------------------------------------------


@pytest.mark.parametrize(("group", "token"), SIZE_TOKENS)
@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (0, True),
        (0.0, True),
        (1000, True),
        (1000.0, True),
        (999.5, True),
        (1000.0001, False),
        (1001, False),
        (-1, False),
        (-0.0001, False),
        (True, False),
        (False, False),
        (float("nan"), False),
        (float("inf"), False),
        (float("-inf"), False),
        (10**400, False),
        ("8", False),
        ("8px", False),
    ],
)
def test_size_bounds(group: str, token: str, value: Any, ok: bool) -> None:
    assert accepts({group: {token: value}}) is ok


@pytest.mark.parametrize("token", COLOR_TOKENS)
@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("#abc", True),
        ("#ABCD", True),
        ("#a1b2c3", True),
        ("#a1b2c3d4", True),
        ("#ab", False),
        ("#abcde", False),
        ("#abcdef0", False),
        ("#abcdef012", False),
        ("#", False),
        ("abc", False),
        ("#ggg", False),
        ("#abc\n", False),
        (" #abc", False),
        ("#abc;", False),
        ("#\uff10\uff10\uff10", False),
        ("red", False),
        (0xABCDEF, False),
    ],
)
def test_colour_forms(token: str, value: Any, ok: bool) -> None:
    assert accepts({"colors": {token: value}}) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("system", True),
        ("Inter", True),
        ("Source Sans 3", True),
        ("IBM_Plex-Sans", True),
        ("9", True),
        ("A" * 128, True),
        ("A" * 129, False),
        ("", False),
        (" Inter", False),
        ("-Inter", False),
        ("_Inter", False),
        ('"Inter"', False),
        ("Inter;", False),
        ("Inter\n", False),
        ("Inter, sans-serif", False),
        ("Ïnter", False),
        ("System\u00a0UI", False),
        (1, False),
    ],
)
def test_font_family_forms(value: Any, ok: bool) -> None:
    assert accepts({"fontFamily": value}) is ok


@given(json_values)
def test_resolve_raises_only_validation_errors(value: Any) -> None:
    try:
        theme = resolve_chat_theme(value)
    except ValidationError as error:
        # An unknown key is named in its error's location; values are never shown.
        text = str(error)
        for detail in error.errors():
            for part in detail["loc"]:
                text = text.replace(str(part), "")
        assert MARKER not in text
    else:
        assert isinstance(theme, ChatTheme)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "colors": st.fixed_dictionaries(
                {}, optional={k: st.from_regex(r"\A#[0-9a-fA-F]{6}\Z") for k in COLOR_TOKENS}
            ),
            "spacing": st.fixed_dictionaries(
                {}, optional={k: st.floats(0, 1000) for k in DEFAULT_WIRE["spacing"]}
            ),
            "fontFamily": st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9 _-]{0,127}\Z"),
        },
    )
)
def test_every_valid_partial_merges_over_the_defaults(partial: dict[str, Any]) -> None:
    wire = resolve_chat_theme(partial).to_wire()
    for group in ("colors", "spacing", "radius"):
        assert wire[group] == {**DEFAULT_WIRE[group], **partial.get(group, {})}
    assert wire["fontFamily"] == partial.get("fontFamily", "system")


# --- CSS variables ---------------------------------------------------------------------------


def test_css_variables_cover_the_dom_mapping() -> None:
    variables = theme_css_variables(DEFAULT_CHAT_THEME)
    assert DOM_MAPPING
    assert set(variables) == {*DOM_MAPPING, "--ak-font-family"}
    assert variables["--ak-font-family"] == SYSTEM_FONT_STACK
    assert theme_css_variables() == variables


@pytest.mark.parametrize("theme", [DEFAULT_CHAT_THEME, DARK_CHAT_THEME])
def test_each_variable_takes_its_token(theme: ChatTheme) -> None:
    variables = theme_css_variables(theme)
    wire = theme.to_wire()
    assert DOM_MAPPING
    for name, (group, token) in DOM_MAPPING.items():
        value = wire[group][token]
        assert variables[name] == (value if group == "colors" else f"{value}px"), name


def test_each_colour_reaches_a_distinct_variable() -> None:
    # Every colour token, changed alone, changes exactly the variables the mapping gives it.
    base = theme_css_variables()
    assert COLOR_TOKENS
    for token in COLOR_TOKENS:
        changed = theme_css_variables(resolve_chat_theme({"colors": {token: "#010203"}}))
        moved = {name for name in base if base[name] != changed[name]}
        assert moved == {n for n, (g, t) in DOM_MAPPING.items() if (g, t) == ("colors", token)}
        assert moved


@pytest.mark.parametrize(
    ("value", "text"),
    [(8, "8px"), (8.0, "8px"), (0, "0px"), (2.5, "2.5px"), (1000, "1000px"), (0.1, "0.1px")],
)
def test_sizes_print_as_javascript_numbers(value: float, text: str) -> None:
    theme = resolve_chat_theme({"spacing": {"small": value}, "radius": {"large": value}})
    variables = theme_css_variables(theme)
    assert variables["--ak-spacing-sm"] == text
    assert variables["--ak-radius-lg"] == text


def test_a_named_family_is_quoted_before_the_system_stack() -> None:
    variables = theme_css_variables(resolve_chat_theme({"fontFamily": "Source Sans 3"}))
    assert variables["--ak-font-family"] == f'"Source Sans 3", {SYSTEM_FONT_STACK}'


# --- the CSS rule ----------------------------------------------------------------------------

_DECLARATION = re.compile(r"  (--ak-[a-z-]+): ([^;{}\n]+);")


def _declarations(css: str) -> dict[str, str]:
    lines = css.splitlines()
    assert lines[0].endswith(" {")
    assert lines[-1] == "}"
    found: dict[str, str] = {}
    for line in lines[1:-1]:
        match = _DECLARATION.fullmatch(line)
        assert match is not None, line
        found[match.group(1)] = match.group(2)
    return found


def test_theme_css_is_one_rule_with_every_variable() -> None:
    css = theme_css(DARK_CHAT_THEME, ".ak-dark")
    assert css.startswith(".ak-dark {\n")
    assert css.endswith("}\n")
    assert _declarations(css) == theme_css_variables(DARK_CHAT_THEME)
    assert theme_css().startswith(":root {\n")
    assert _declarations(theme_css()) == theme_css_variables()


def test_theme_css_resolves_a_partial_and_refuses_an_invalid_one() -> None:
    css = theme_css({"colors": {"accent": "#123"}})
    assert _declarations(css)["--ak-color-button"] == "#123"
    with pytest.raises(ValidationError):
        theme_css({"colors": {"accent": "red;} body {display:none"}})


@pytest.mark.parametrize(
    "selector",
    [":root", ".ak-dark", "[data-theme=dark] .chat", "html:is(.dark)", "#app > main"],
)
def test_plain_selectors(selector: str) -> None:
    assert theme_css(selector=selector).startswith(f"{selector} {{\n")


@pytest.mark.parametrize(
    "selector",
    [
        "",
        "   ",
        "a {}",
        "a}",
        "a;",
        "@media print",
        "a/*",
        "a*/",
        "</style>",
        'a[x="y"]',
        "a\\7b",
        "a\nb",
        "a" * 1025,
    ],
)
def test_unsafe_selectors(selector: str) -> None:
    with pytest.raises(ValueError, match="selector"):
        theme_css(selector=selector)


@given(json_values)
def test_no_accepted_theme_escapes_its_rule(value: Any) -> None:
    try:
        theme = resolve_chat_theme(value)
    except ValidationError:
        return
    declarations = _declarations(theme_css(theme))
    assert len(declarations) == len(DOM_MAPPING) + 1
