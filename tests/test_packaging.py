"""A baked project installs into a fresh virtual environment and passes its tests there."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from conftest import PIP_WITHOUT_BYTECODE, bake, package_of


def readme_commands(project: Path) -> list[str]:
    """The commands of the README's "Two commands" block, as written, comments left out."""
    section = project.joinpath("README.md").read_text().partition("\n## Two commands\n")[2]
    block = section.partition("```bash\n")[2].partition("```")[0]
    return [line.partition("  #")[0].strip() for line in block.splitlines() if line.strip()]


def activated(environment: Path) -> dict[str, str]:
    """The environment variables of a shell in which `environment` is activated, as its
    activate script sets them: its bin first on PATH, and nothing of this test run's own."""
    inherited = {
        name: value
        for name, value in os.environ.items()
        if name not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"} and not name.startswith("PYTEST")
    }
    bin_folder = environment / ("Scripts" if os.name == "nt" else "bin")
    return {
        **inherited,
        **PIP_WITHOUT_BYTECODE,
        "VIRTUAL_ENV": str(environment),
        "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}",
    }


def in_shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.slow
@pytest.mark.full
def test_the_readme_commands_pass_in_a_fresh_virtual_environment(tmp_path):
    """A baked project's two commands, exactly as its README writes them, pass in a fresh virtual
    environment, whose pip may predate dependency groups, run in the freshly baked folder."""
    project = bake(tmp_path)
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    commands = readme_commands(project)
    assert len(commands) == 2
    # The project's suite with a temp root of its own, as run_in gives each run (conftest.py).
    shell = {**activated(environment), "PYTEST_ADDOPTS": f"--basetemp={tmp_path / 'pytest'}"}
    results = [in_shell(command, project, shell) for command in commands]
    for command, result in zip(commands, results, strict=True):
        assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    assert "backend     aot_eager" in results[0].stdout
    # Installed, not merely on a path: the MRE runs from any folder.
    mre = in_shell(f"python -m {package_of(project)}.mre", tmp_path, shell)
    assert mre.stdout.startswith("backend     aot_eager"), mre.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.full
def test_nox_runs_the_mre_and_the_default_sessions_in_a_fresh_bake(tmp_path):
    """`nox -s mre` and `nox` (lint and tests), which the README offers, pass in a freshly baked
    project, which is no git repository yet."""
    project = bake(tmp_path)
    # This machine reaches PyPI but not PyTorch's own index: the README's TORCH_INDEX_URL="".
    shell = {**activated(Path(sys.prefix)), "TORCH_INDEX_URL": ""}
    for command in ("nox -s mre", "nox"):
        result = in_shell(f"{sys.executable} -m {command}", project, shell)
        assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
