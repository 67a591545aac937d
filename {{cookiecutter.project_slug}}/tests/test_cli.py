"""`python -m {{ cookiecutter.package_name }}`: one command line for every tool."""

import pytest

from {{ cookiecutter.package_name }}.__main__ import COMMANDS, main


def test_help_lists_every_command(capsys):
    """--help names each command with what it answers, and the MRE's own entry point."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    listing = {line.split()[0]: line for line in shown.splitlines() if line.startswith("  ")}
    for command, (_, about) in COMMANDS.items():
        assert about in listing[command]
    assert "python -m {{ cookiecutter.package_name }}.mre" in shown


def test_an_unknown_command_is_a_usage_error(capsys):
    """A misspelt command exits 2 and lists the valid ones."""
    with pytest.raises(SystemExit) as exit_info:
        main(["doctr"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'doctr'" in capsys.readouterr().err


def test_a_command_gets_its_own_arguments(capsys):
    """Arguments after the command go to the tool: `doctor --json` prints JSON."""
    code = main(["doctor", "--json"])
    assert code in (0, 1)
    assert capsys.readouterr().out.lstrip().startswith("{")
