"""A baked project installs into a fresh virtual environment and passes its tests there."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import pytest
from conftest import PIP_WITHOUT_BYTECODE, bake, package_of

# pip learned `--group` (PEP 735 dependency groups) in 25.1.
PIP_WITH_GROUPS = (25, 1)


def run(python: Path, *command: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    environment = {**os.environ, **(env or {})}
    result = subprocess.run(
        [str(python), *command], cwd=cwd, env=environment, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def pip_version(python: Path, cwd: Path) -> tuple[int, ...]:
    version = run(python, "-c", "import pip; print(pip.__version__)", cwd=cwd)
    return tuple(int(part) for part in version.strip().split(".")[:2])


@pytest.mark.slow
@pytest.mark.full
def test_pip_install_editable_with_test_group_then_tests_and_mre_pass(tmp_path):
    """`pip install -e . --group test` resolves the pinned torch, the package and pytest; its tests
    and MRE then run."""
    project = bake(tmp_path)
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = environment / ("Scripts" if os.name == "nt" else "bin") / "python"
    # ensurepip's pip may predate --group: take a newer one from the package index then.
    if pip_version(python, tmp_path) < PIP_WITH_GROUPS:
        run(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip>=25.1", cwd=tmp_path)
    assert pip_version(python, tmp_path) >= PIP_WITH_GROUPS

    install = ["-m", "pip", "install", "--quiet", "-e", ".", "--group", "test"]
    run(python, *install, cwd=project, env=PIP_WITHOUT_BYTECODE)
    # Its own temp root, as run_in gives each run in a bake (conftest.py says why).
    suite = ["-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'pytest'}"]
    run(python, *suite, cwd=project)
    # Installed, not merely on a path: the MRE runs from any folder.
    report = run(python, "-m", f"{package_of(project)}.mre", cwd=tmp_path)
    assert report.startswith("backend     aot_eager")
