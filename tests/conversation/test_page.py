"""ChatPage: every text bound at its limit and one past it, the logo rules, the theme check, and
the words it gives the rendered page (escaped)."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentskit_chat.components import (
    DEFAULT_CHAT_THEME,
    STANDARD_COMPONENT_MANIFEST,
    resolve_chat_theme,
)
from agentskit_chat.conversation import (
    LOGO_MEDIA_TYPES,
    MAX_PAGE_SUGGESTIONS,
    ChatPage,
)
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.server._web_page import render_page_bundle


def page_with(**fields: Any) -> ChatPage:
    """A page from fields of any type (the checks are what is tested)."""
    return ChatPage(**fields)


#: Each text field and the most characters it takes.
LIMITS = [
    ("title", 80),
    ("subtitle", 200),
    ("welcome_title", 120),
    ("welcome", 1000),
    ("placeholder", 120),
]


@pytest.mark.parametrize(("name", "limit"), LIMITS)
def test_each_text_is_accepted_at_its_limit_and_refused_one_past_it(name: str, limit: int) -> None:
    at_limit = page_with(**{name: "x" * limit})
    assert getattr(at_limit, name) == "x" * limit
    with pytest.raises(ConfigurationError, match=f"ChatPage.{name} must be at most {limit}"):
        page_with(**{name: "x" * (limit + 1)})


@pytest.mark.parametrize(("name", "limit"), LIMITS)
@pytest.mark.parametrize("blank", ["", " ", "\n\t", "\u3000"])
def test_a_blank_text_is_refused(name: str, limit: int, blank: str) -> None:
    with pytest.raises(ConfigurationError, match=f"ChatPage.{name} must be a non-blank string"):
        page_with(**{name: blank})


@pytest.mark.parametrize("name", ["title", "welcome_title", "placeholder"])
def test_a_required_text_cannot_be_none(name: str) -> None:
    with pytest.raises(ConfigurationError, match=f"ChatPage.{name} must be a non-blank string"):
        page_with(**{name: None})


@pytest.mark.parametrize("name", ["subtitle", "welcome"])
def test_an_optional_text_may_be_none(name: str) -> None:
    assert getattr(page_with(**{name: None}), name) is None


@pytest.mark.parametrize(("name", "limit"), LIMITS)
def test_a_text_that_is_not_a_string_is_refused(name: str, limit: int) -> None:
    with pytest.raises(ConfigurationError, match=f"ChatPage.{name} must be a non-blank string"):
        page_with(**{name: 42})


def test_eight_suggestions_are_accepted_and_nine_refused() -> None:
    assert MAX_PAGE_SUGGESTIONS == 8
    eight = [f"Question {n}" for n in range(8)]
    page = ChatPage(suggestions=eight)  # type: ignore[arg-type]
    # A list is kept as a tuple: the page is frozen all the way down.
    assert page.suggestions == tuple(eight)
    with pytest.raises(ConfigurationError, match="at most 8 suggestions"):
        ChatPage(suggestions=(*eight, "one more"))


def test_a_suggestion_is_accepted_at_200_characters_and_refused_at_201() -> None:
    assert ChatPage(suggestions=("x" * 200,)).suggestions == ("x" * 200,)
    with pytest.raises(ConfigurationError, match="at most 200 characters"):
        ChatPage(suggestions=("x" * 201,))


@pytest.mark.parametrize("bad", ["", "   ", None, 7])
def test_a_blank_or_non_string_suggestion_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="Every ChatPage suggestion must be a non-blank"):
        ChatPage(suggestions=("fine", bad))


def test_suggestions_given_as_one_string_are_refused() -> None:
    # A string is a sequence of characters: it would become one suggestion per letter.
    with pytest.raises(ConfigurationError, match="suggestions must be a sequence of strings"):
        ChatPage(suggestions="What are your hours?")  # type: ignore[arg-type]


@pytest.mark.parametrize("mark", ["◆", "AC", "ABCD", "🙂🙂🙂🙂"])
def test_a_text_mark_of_up_to_four_characters_is_the_logo(mark: str) -> None:
    page = ChatPage(logo=mark)
    assert page.logo_mark == mark
    assert page.logo_file is None


@pytest.mark.parametrize("mark", ["ABCDE", "", "  ", "     "])
def test_a_text_mark_of_five_characters_or_blank_is_refused(mark: str) -> None:
    with pytest.raises(ConfigurationError, match="text mark of 1 to 4 characters"):
        ChatPage(logo=mark)


def test_no_logo_has_neither_mark_nor_file() -> None:
    page = ChatPage(logo=None)
    assert page.logo_mark is None
    assert page.logo_file is None


@pytest.mark.parametrize("suffix", sorted({*LOGO_MEDIA_TYPES, ".PNG", ".Svg", ".JPEG"}))
@pytest.mark.parametrize("as_path", [False, True])
def test_an_image_file_name_is_the_logo_by_its_suffix(suffix: str, *, as_path: bool) -> None:
    assert len(LOGO_MEDIA_TYPES) == 5
    name = f"brand/logo{suffix}"
    page = ChatPage(logo=Path(name) if as_path else name)
    assert page.logo_file == Path(name)
    assert page.logo_mark is None


def test_a_short_file_name_with_an_image_suffix_is_a_file_not_a_mark() -> None:
    # "a.png" is five characters, yet a file: the suffix decides, not the length.
    assert ChatPage(logo="a.png").logo_file == Path("a.png")


@pytest.mark.parametrize("name", ["brand/logo.gif", "brand/logo", "brand/logo.png.txt", "x/y.ico"])
def test_a_file_that_is_not_a_served_image_kind_is_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match=r"ChatPage.logo must be one of \.jpeg"):
        ChatPage(logo=name)
    with pytest.raises(ConfigurationError, match=r"ChatPage.logo must be one of"):
        ChatPage(logo=Path(name))


def test_a_logo_that_is_neither_text_nor_path_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"ChatPage\.logo must be a string or a path"):
        ChatPage(logo=b"logo.png")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["theme", "dark_theme"])
def test_a_theme_must_be_a_chat_theme(name: str) -> None:
    custom = resolve_chat_theme({"colors": {"accent": "#123456"}})
    assert getattr(page_with(**{name: custom}), name) is custom
    with pytest.raises(ConfigurationError, match=f"ChatPage.{name} must be a ChatTheme"):
        page_with(**{name: {"colors": {"accent": "#123456"}}})
    with pytest.raises(ConfigurationError, match=f"ChatPage.{name} must be a ChatTheme"):
        page_with(**{name: "dark"})


def test_the_page_is_frozen_and_its_themes_do_not_take_part_in_equality() -> None:
    page = ChatPage(title="Support")
    with pytest.raises(AttributeError):
        page.title = "Other"  # type: ignore[misc]
    assert ChatPage(title="Support", theme=DEFAULT_CHAT_THEME) == page


# --- the rendered page ---------------------------------------------------------------------------

_TITLE = re.compile(r"<title>(.*)</title>", re.DOTALL)
_HEADING = re.compile(r"<h1>(.*)</h1>", re.DOTALL)

titles = st.text(min_size=1, max_size=80).filter(lambda text: bool(text.strip()))


def rendered(page: ChatPage) -> str:
    return render_page_bundle(page, STANDARD_COMPONENT_MANIFEST).html.decode()


@given(title=titles)
@example(title="<script>alert(1)</script>")
@example(title='"><img src=x onerror=alert(1)>')
@example(title="Tom & Jerry's <b>")
@example(title="{{subtitle}}")
@example(title="{{placeholder}} {{logo}}")
def test_any_valid_title_reaches_the_page_escaped(title: str) -> None:
    page = ChatPage(title=title, subtitle="Sub", placeholder="Type here")
    text = rendered(page)
    baseline = rendered(ChatPage(title="Plain", subtitle="Sub", placeholder="Type here"))
    for pattern in (_TITLE, _HEADING):
        found = pattern.search(text)
        assert found is not None
        assert found.group(1) == html.escape(title)
        assert html.unescape(found.group(1)) == title
    # The title adds no markup: the page has exactly the tags of a page with a plain title.
    assert text.count("<") == baseline.count("<")
    assert text.count(">") == baseline.count(">")
    # And it is not read as a placeholder of the template.
    assert text.count('<p class="tagline">Sub</p>') == 1
    assert text.count('placeholder="Type here"') == 1


@given(suggestion=st.text(min_size=1, max_size=200).filter(lambda text: bool(text.strip())))
@example(suggestion='"><script>alert(1)</script>')
@example(suggestion="{{placeholder}}")
def test_any_valid_suggestion_reaches_the_page_escaped_in_its_button(suggestion: str) -> None:
    text = rendered(ChatPage(suggestions=(suggestion,), placeholder="Type here"))
    escaped = html.escape(suggestion)
    button = f'<button type="button" class="suggestion" data-ask="{escaped}">{escaped}</button>'
    assert text.count(button) == 1
    assert text.count('placeholder="Type here"') == 1
