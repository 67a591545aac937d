"""A baked project's command line, `python -m <package>`: one entry for every tool, as typed."""

from __future__ import annotations

import json
import re

import pytest
from conftest import package_of, run_in

VARIANTS = {
    "forward": {},
    "decode, op-plugin op": {"workload": "decode", "custom_op": "in_place", "op_registration": "op_plugin"},
}


@pytest.fixture(params=VARIANTS.values(), ids=VARIANTS.keys(), scope="module")
def project(request, baked):
    return baked(**request.param)


def command_line(project, *arguments: str):
    return run_in(project, "-m", package_of(project), *arguments, timeout=600)


def commands_of(project) -> dict[str, str]:
    """The commands __main__.py offers, with what each answers, read from its table."""
    source = (project / "src" / package_of(project) / "__main__.py").read_text()
    table = source[source.index("COMMANDS = {") : source.index("\n}\n")]
    return dict(re.findall(r'"([\w-]+)": \(\s*"[\w.]+",\s*"([^"]+)",?\s*\)', table))


def test_help_lists_every_command_with_what_it_answers(project):
    """--help shows the usage as typed, names each command with what it answers, and the MRE's
    own entry point."""
    result = command_line(project, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: python -m {package_of(project)} ")
    listing = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith("  ")}
    commands = commands_of(project)
    assert {"check", "doctor", "bench", "profile", "export"} <= commands.keys()
    for command, about in commands.items():
        assert about in " ".join(result.stdout.split()), command
        assert command in listing or command in result.stdout
    assert f"python -m {package_of(project)}.mre" in result.stdout


def test_an_unknown_command_is_a_usage_error_naming_it_and_the_valid_ones(project):
    """A misspelt command exits 2, naming the value and the valid commands."""
    result = command_line(project, "doctr")
    assert result.returncode == 2
    assert "invalid choice: 'doctr'" in result.stderr
    assert all(repr(command) in result.stderr for command in commands_of(project))


def test_a_commands_help_names_it_as_typed(project):
    """`doctor --help` shows the tool's usage as a user types it: python -m <package> doctor."""
    result = command_line(project, "doctor", "--help")
    assert (result.returncode, result.stdout.split()[:4]) == (
        0,
        ["usage:", "python", "-m", f"{package_of(project)}"],
    )
    assert result.stdout.split()[4] == "doctor"


def test_a_command_gets_its_own_arguments(project):
    """Arguments after the command go to the tool: `doctor --json` prints JSON, whose verdict is
    the exit status."""
    result = command_line(project, "doctor", "--json")
    assert json.loads(result.stdout)["verdict"] == result.returncode
