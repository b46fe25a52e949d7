"""Every command's help shows its options' texts whole: they name spec tables (`[lab] offload`)
and patterns (`[a-z0-9]{1,10}`), which Rich markup used to swallow as style tags."""

from __future__ import annotations

import re
from typing import Any

import typer.main
from typer.testing import CliRunner

from protolab.cli import app


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, group)]
    if isinstance(getattr(group, "commands", None), dict):  # a group (Typer vendors its click)
        for name, command in sorted(group.commands.items()):
            found += _commands(command, (*path, name))
    return found


def test_every_help_keeps_the_bracketed_words_of_its_options() -> None:
    runner = CliRunner()
    commands = _commands(typer.main.get_command(app))
    assert len(commands) > 30
    checked = 0
    for path, command in commands:
        bracketed = {word for param in command.params for word in re.findall(r"\[[a-z][^\]\s]*\]", getattr(param, "help", None) or "")}
        if not bracketed:
            continue
        result = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (path, result.output)
        text = " ".join(result.output.split())
        missing = sorted(word for word in bracketed if word not in text)
        assert not missing, (" ".join(path), missing)
        checked += 1
    assert checked >= 2  # at least `run --offload` and `validate-emulator --lab`
