"""Commands and package names a page mentions in inline code.

A mention is either a **command** (an inline code span whose first word is a well-known tool,
followed by at least one argument) or a **package** (an inline code span that is a scoped npm
name such as ``@scope/name``, or a name that an inline install command installs). The lines of
shell code blocks are not mentions: each already has a command entry of its own. Only short,
literal texts count: anything over :data:`MENTION_UNITS` UTF-16 code units or holding a
placeholder (``<name>``, ``{name}``, ``[options]``, ``...``) is not a mention, because nobody
asks for it verbatim. Everything here is pure text work.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from agentskit_chat.protocol._text import js_trim, utf16_len

__all__ = [
    "MENTION_UNITS",
    "TOOLS",
    "Mention",
    "MentionKind",
    "code_span_mentions",
    "installed_packages",
]

MentionKind = Literal["command", "package"]

#: The longest mention, in UTF-16 code units once trimmed.
MENTION_UNITS: Final = 80

#: First words that make an inline code span a command.
TOOLS: Final = frozenset(
    {
        "apt",
        "apt-get",
        "brew",
        "bun",
        "bunx",
        "cargo",
        "conda",
        "corepack",
        "deno",
        "docker",
        "git",
        "go",
        "hatch",
        "helm",
        "kubectl",
        "make",
        "node",
        "npm",
        "npx",
        "pdm",
        "pip",
        "pip3",
        "pipx",
        "pnpm",
        "poetry",
        "pytest",
        "python",
        "python3",
        "tox",
        "uv",
        "uvx",
        "yarn",
    }
)

# (tool, subcommand) pairs whose remaining words are the packages installed.
_INSTALLS: Final = frozenset(
    {
        ("pip", "install"),
        ("pip3", "install"),
        ("pipx", "install"),
        ("uv", "add"),
        ("poetry", "add"),
        ("pdm", "add"),
        ("npm", "install"),
        ("npm", "i"),
        ("npm", "add"),
        ("pnpm", "add"),
        ("pnpm", "install"),
        ("pnpm", "i"),
        ("yarn", "add"),
        ("bun", "add"),
        ("cargo", "add"),
        ("cargo", "install"),
        ("brew", "install"),
    }
)
# Options of those commands that take a value: the value is never a package.
_VALUED_OPTIONS: Final = frozenset(
    {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-e",
        "--editable",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-t",
        "--target",
        "--filter",
        "-C",
        "--dir",
        "--prefix",
        "--registry",
        "--python",
    }
)
_SHELL_OPERATORS: Final = frozenset({"&&", "||", ";", "|", "&"})
_PLACEHOLDER: Final = re.compile(r"<[^<>]+>|\{[^{}]*\}|(?<![./])\.\.\.|…|(?:^|\s)\[")
_SCOPED: Final = re.compile(r"@[a-z0-9][a-z0-9._~-]*/[a-z0-9][a-z0-9._~-]*(?:/[a-z0-9][\w.~-]*)*")
_PLAIN: Final = re.compile(r"[A-Za-z0-9][\w.-]*(?:\[[\w,.-]+\])?")
# What may follow a package name inside one argument: a version or version range.
_VERSION_TAIL: Final = re.compile(r"(?:@|==|>=|<=|~=|!=|>|<|=)\S*")
_FILE_SUFFIXES: Final = (".whl", ".gz", ".tgz", ".zip", ".txt", ".toml", ".cfg", ".json", ".lock")


@dataclass(frozen=True, slots=True)
class Mention:
    """A command or package name a page mentions, as written, and its 1-based line."""

    text: str
    kind: MentionKind
    line: int


def _literal(text: str) -> bool:
    return 0 < utf16_len(text) <= MENTION_UNITS and _PLACEHOLDER.search(text) is None


def _package_name(word: str) -> str | None:
    """The package an install argument names, without its version; ``None`` if it names none."""
    word = word.strip("'\"")
    name = (_SCOPED if word.startswith("@") else _PLAIN).match(word)
    if name is None:
        return None
    rest = word[name.end() :]
    if rest and _VERSION_TAIL.fullmatch(rest) is None:
        return None
    found = name.group()
    return None if found.lower().endswith(_FILE_SUFFIXES) else found


def installed_packages(command: str) -> list[str]:
    """The package names an install command installs, in order (empty for any other command).

    Example:
        >>> installed_packages("npm install --save-dev @scope/cli@1.2 react")
        ['@scope/cli', 'react']
    """
    words = command.split()
    if words[:3] in (["python", "-m", "pip"], ["python3", "-m", "pip"]) or words[:2] == [
        "uv",
        "pip",
    ]:
        words = ["pip", *words[words.index("pip") + 1 :]]
    if len(words) < 3 or (words[0], words[1]) not in _INSTALLS:
        return []
    packages: list[str] = []
    skip = False
    for word in words[2:]:
        if skip:
            skip = False
        elif word in _SHELL_OPERATORS:
            break
        elif word.startswith("-"):
            skip = word in _VALUED_OPTIONS
        else:
            name = _package_name(word)
            if name is not None and _literal(name):
                packages.append(name)
    return packages


def code_span_mentions(span: str) -> Iterator[tuple[str, MentionKind]]:
    """The mentions one inline code span makes: itself, then the packages it installs."""
    text = js_trim(span)
    if not _literal(text):
        return
    words = text.split()
    if len(words) >= 2 and words[0] in TOOLS:
        yield text, "command"
        for package in installed_packages(text):
            yield package, "package"
    elif len(words) == 1 and _SCOPED.fullmatch(text) is not None:
        yield text, "package"
