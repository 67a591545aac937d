"""`python -m {{ cookiecutter.package_name }}`: one command line for every tool."""

import json

import pytest

from {{ cookiecutter.package_name }}.__main__ import COMMANDS, main

PROG = "python -m {{ cookiecutter.package_name }}"
"""How a user calls the command line, and what its usage and errors call it."""


def test_help_lists_every_command(capsys):
    """--help names each command with what it answers, and the MRE's own entry point."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    listing = {line.split()[0]: line for line in shown.splitlines() if line.startswith("  ")}
    for command, (_, about) in COMMANDS.items():
        assert about in listing[command]
    assert f"{PROG}.mre" in shown


def test_help_shows_the_usage_as_typed_and_what_each_argument_is(capsys):
    """--help's usage line is the command a user types, and each argument says what it takes."""
    with pytest.raises(SystemExit):
        main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"usage: {PROG} [-h] command ..."
    assert "  command     one of the above" in lines
    assert "  arguments   the command's own (--help)" in lines


def test_an_unknown_command_is_a_usage_error(capsys):
    """A misspelt command exits 2, with the usage as typed, the value and the valid commands."""
    with pytest.raises(SystemExit) as exit_info:
        main(["doctr"])
    assert exit_info.value.code == 2
    usage, error = capsys.readouterr().err.splitlines()
    assert usage == f"usage: {PROG} [-h] command ..."
    assert error.startswith(f"{PROG}: error: argument command: invalid choice: 'doctr'")
    assert all(repr(command) in error for command in COMMANDS)


def test_a_command_s_help_names_it_as_typed(capsys):
    """`doctor --help` shows the tool's usage as a user types it: python -m <package> doctor."""
    with pytest.raises(SystemExit) as exit_info:
        main(["doctor", "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {PROG} doctor [-h]")


def test_a_command_gets_its_own_arguments(capsys):
    """Arguments after the command go to the tool: `doctor --json` prints JSON, whose verdict is
    the exit status (whatever this machine and your model make it)."""
    code = main(["doctor", "--json"])
    assert json.loads(capsys.readouterr().out)["verdict"] == code
