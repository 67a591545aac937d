"""Tasks for the template repository: `nox -s demo`, `nox -s tests`, `nox -s lint`, `nox -s speed`."""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.needs_version = ">=2025.2.9"  # nox.project.dependency_groups
nox.options.sessions = ["lint", "tests"]
# torch is large: reuse each session's environment instead of reinstalling it on every run.
nox.options.reuse_venv = "yes"

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
TEST_DEPENDENCIES = nox.project.dependency_groups(PYPROJECT, "test")


@nox.session
def tests(session: nox.Session) -> None:
    """Bake every combination of answers, lint each project and run its own tests."""
    session.install(*TEST_DEPENDENCIES)
    session.run("pytest", *session.posargs)


@nox.session
def demo(session: nox.Session) -> None:
    """Bake the default project into build/demo and run its MRE, as a new user would."""
    session.install(*TEST_DEPENDENCIES)
    output = ROOT / "build" / "demo"
    shutil.rmtree(output, ignore_errors=True)
    session.run("cookiecutter", "--no-input", "--output-dir", str(output), str(ROOT))
    (project,) = output.iterdir()
    (package,) = (project / "src").iterdir()
    session.install("-e", str(project))
    session.chdir(project)
    session.run("python", "-m", f"{package.name}.mre")


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff over the template's own code (hooks, tests, noxfile); baked projects are linted by tests."""
    session.install("ruff>=0.8")
    session.run("ruff", "check", *session.posargs)
    session.run("ruff", "format", "--check")


@nox.session
def speed(session: nox.Session) -> None:
    """Time the things users wait for: a bake, a generated project's tests, `import torch`."""
    session.install(*TEST_DEPENDENCIES)
    session.run("python", "benchmarks/speed.py", *session.posargs)
