"""The ``relay`` parser names every subcommand itself and lets the command's module fill
in only the one a line names (so a command imports only its own layers): each name must
still get its arguments and something to run, and a line must parse as one parser would."""

from __future__ import annotations

import argparse

import pytest

from relay_engine.cli.main import COMMANDS, build_parser, parse_args


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_gets_its_arguments_and_what_runs_it(name: str) -> None:
    command = _subcommands(build_parser(name))[name]
    nested = _subcommands(command)
    if command.get_default("func") is None:  # `relay db`: each of its subcommands runs
        assert nested and all(p.get_default("func") for p in nested.values()), name
    assert command.add_help, f"`relay {name} --help` would not print its help"


def test_a_line_parses_with_the_command_it_names() -> None:
    args = parse_args(["--workspace", "/w", "status", "--json", "job-a"])
    assert (args.workspace, args.command, args.job, args.json) == ("/w", "status", "job-a", True)
    assert args.func.__module__ == "relay_engine.cli.status"
    nested = parse_args(["agents", "reset", "claude"])
    assert (nested.agents_command, nested.agent) == ("reset", "claude")


def test_a_bad_line_is_refused_by_the_command_it_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(["status", "--nope"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --nope" in capsys.readouterr().err


def test_relay_help_lists_every_command_with_its_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    listed = capsys.readouterr().out
    for name, (_module, helptext) in COMMANDS.items():
        assert f"    {name}" in listed and helptext in " ".join(listed.split()), name
