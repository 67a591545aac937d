"""A baked project's command line, `python -m <package>`: one entry for every tool, as typed."""

from __future__ import annotations

import json

import pytest
from conftest import package_of, run_in

VARIANTS = {
    "forward": {},
    "decode, op-plugin op": {"workload": "decode", "custom_op": "in_place", "op_registration": "op_plugin"},
}
OFFERED = {
    "forward": ["check", "doctor", "bench", "profile", "export"],
    "decode, op-plugin op": [
        "check", "doctor", "generate", "bench", "profile", "export", "export-hf", "vllm-check", "opschema"
    ],
}  # fmt: skip
"""The commands each variant offers: those whose module the bake keeps."""


@pytest.fixture(params=VARIANTS.values(), ids=VARIANTS.keys(), scope="module")
def project(request, baked):
    return baked(**request.param)


def command_line(project, *arguments: str):
    return run_in(project, "-m", package_of(project), *arguments, timeout=600)


def commands_of(project) -> dict[str, str]:
    """The commands the project offers, with what each answers (toolkit/commands.py)."""
    package = package_of(project)
    listed = f"import json; from {package}.toolkit.commands import offered; "
    listed += f"print(json.dumps({{name: c.answers for name, c in offered({package!r}).items()}}))"
    result = run_in(project, "-c", listed, timeout=600)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_help_lists_every_command_with_what_it_answers(project):
    """--help shows the usage as typed, names each command with what it answers, and the MRE's
    own entry point."""
    result = command_line(project, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: python -m {package_of(project)} ")
    listing = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith("  ")}
    for command, about in commands_of(project).items():
        assert about in " ".join(result.stdout.split()), command
        assert command in listing or command in result.stdout
    assert f"python -m {package_of(project)}.mre" in result.stdout


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_command_is_offered_where_its_module_is_kept(baked, variant):
    """A forward project offers no generate, export-hf, vllm-check or opschema: the bake left
    their modules out; a decode project with an op-plugin op offers every command."""
    assert list(commands_of(baked(**VARIANTS[variant]))) == OFFERED[variant]


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
