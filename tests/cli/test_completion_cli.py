"""``agentskit-chat completion``: each shell's script, and the completions it asks for.

The scripts are Typer's: each asks the installed ``agentskit-chat`` for completions through
``_AGENTSKIT_CHAT_COMPLETE``, so they complete every command, option and choice as the command
line defines it. Bash is driven for real (the script sourced, its function called); zsh and
fish are not installed here, so their requests are replayed exactly as their scripts make them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli._scaffold_support import invoke

CLI = Path(sys.executable).with_name("agentskit-chat")
COMMANDS = ["add", "artifact", "ask", "chat", "completion", "components", "init", "serve"]


def _environment(**extra: str) -> dict[str, str]:
    environment = {**os.environ, "PATH": f"{CLI.parent}{os.pathsep}{os.environ['PATH']}"}
    environment.update(extra)
    return environment


def _words(output: str) -> list[str]:
    return [line.split("\t")[0].split(":")[0] for line in output.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("shell", "registration"),
    [
        ("bash", "complete -o default -F _agentskit_chat_completion agentskit-chat"),
        ("zsh", "compdef _agentskit_chat_completion agentskit-chat"),
        ("fish", "complete --command agentskit-chat"),
    ],
)
def test_each_shell_gets_a_script_for_the_console_script(shell: str, registration: str) -> None:
    result = invoke("completion", shell)
    assert result.exit_code == 0, result.output
    assert registration in result.stdout
    assert f"_AGENTSKIT_CHAT_COMPLETE=complete_{shell}" in result.stdout


def test_an_unknown_shell_is_a_usage_error() -> None:
    result = invoke("completion", "powershell")
    assert result.exit_code == 2


#: What is typed (the last word is being completed), and what bash must offer.
BASH_CASES: list[tuple[tuple[str, ...], list[str]]] = [
    (("in",), ["init"]),
    (("add", ""), ["component"]),
    (("init", "my-chat", "--template", ""), ["fastapi", "terminal", "web"]),
    (("completion", ""), ["bash", "fish", "zsh"]),
]


@pytest.fixture(scope="module")
def bash_completions() -> list[list[str]]:
    """Source ``completion bash`` in a real bash once, then complete every case (and ``""``)."""
    bash = shutil.which("bash")
    assert bash is not None
    lines = [
        "source <(agentskit-chat completion bash)",
        "complete_words() {",
        '  COMP_WORDS=(agentskit-chat "$@"); COMP_CWORD=$#',
        "  _agentskit_chat_completion agentskit-chat",
        "  printf '%s\\n' \"${COMPREPLY[@]}\" '--end--'",
        "}",
        "complete_words ''",
    ]
    lines += ["complete_words " + " ".join(f"'{w}'" for w in words) for words, _ in BASH_CASES]
    result = subprocess.run(
        [bash, "-c", "\n".join(lines)],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=120,
        check=True,
    )
    blocks = result.stdout.split("--end--\n")
    return [sorted(line for line in block.splitlines() if line) for block in blocks[:-1]]


def test_bash_completes_the_commands(bash_completions: list[list[str]]) -> None:
    assert len(bash_completions) == len(BASH_CASES) + 1
    assert set(COMMANDS) <= set(bash_completions[0])


@pytest.mark.parametrize("case", range(len(BASH_CASES)))
def test_bash_completes_sub_commands_and_choices(
    bash_completions: list[list[str]], case: int
) -> None:
    assert bash_completions[case + 1] == BASH_CASES[case][1]


@pytest.mark.parametrize(
    ("shell", "extra"),
    [
        ("zsh", {}),
        ("fish", {"_TYPER_COMPLETE_FISH_ACTION": "get-args"}),
    ],
)
def test_zsh_and_fish_requests_list_the_commands(shell: str, extra: dict[str, str]) -> None:
    script = invoke("completion", shell).stdout
    assert "_TYPER_COMPLETE_ARGS" in script
    environment = _environment(
        _AGENTSKIT_CHAT_COMPLETE=f"complete_{shell}",
        _TYPER_COMPLETE_ARGS="agentskit-chat ",
        **extra,
    )
    result = subprocess.run(
        [CLI], capture_output=True, text=True, env=environment, timeout=60, check=True
    )
    output = result.stdout
    if shell == "zsh":
        assert output.startswith("_arguments")
        for command in COMMANDS:
            assert f'"{command}":' in output
    else:
        assert set(COMMANDS) <= set(_words(output))
