"""Tasks for the template repository: `nox -s demo`, `nox -s tests`, `nox -s lint`, `nox -s speed`,
`nox -s copier_yml`, `nox -s readme`, `nox -s works_with`, `nox -s mutations`, `nox -s mutation_score`."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).parent / "tests"))
from hook_repositories import revisions, unreachable

nox.needs_version = ">=2025.2.9"  # nox.project.dependency_groups
nox.options.sessions = ["lint", "tests"]
# torch is large: reuse each session's environment instead of reinstalling it on every run.
nox.options.reuse_venv = "yes"

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
TEST_DEPENDENCIES = nox.project.dependency_groups(PYPROJECT, "test")
FULL_DEPENDENCIES = nox.project.dependency_groups(PYPROJECT, "full")
MUTATION_DEPENDENCIES = nox.project.dependency_groups(PYPROJECT, "mutation")
COOKIECUTTER = next(dependency for dependency in TEST_DEPENDENCIES if dependency.startswith("cookiecutter"))
COG = next(dependency for dependency in TEST_DEPENDENCIES if dependency.startswith("cogapp"))
TRANSFORMERS = next(dependency for dependency in FULL_DEPENDENCIES if dependency.startswith("transformers"))
PRE_COMMIT_CONFIG = ROOT / ".pre-commit-config.yaml"
RUFF_HOOKS = "https://github.com/astral-sh/ruff-pre-commit"


@nox.session
def tests(session: nox.Session) -> None:
    """Bake every combination of answers, lint each project and run representative projects' own
    tests; `nox -s tests -- --full` runs every variant's suite, the real models and torchrun too."""
    full = "--full" in session.posargs
    session.install(*(FULL_DEPENDENCIES if full else TEST_DEPENDENCIES))
    session.run("pytest", *session.posargs)


@nox.session
def demo(session: nox.Session) -> None:
    """Bake the default project into build/demo and run its MRE, as a new user would.

    It installs what a user would: cookiecutter, then the baked project (which pins torch).
    """
    session.install(COOKIECUTTER)
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
    """The pre-commit hooks over the template's own code; baked projects are linted by the tests."""
    missing = unreachable(PRE_COMMIT_CONFIG)
    if not missing:
        session.install("pre-commit>=4")
        session.run("pre-commit", "run", "--all-files", "--show-diff-on-failure", *session.posargs)
        return
    # pre-commit clones every hook repository before running any hook, so one it cannot reach
    # stops them all. Ruff, at the hook's version, still needs no more than PyPI; the tests run
    # codespell, validate-pyproject and the whitespace and YAML checks on baked projects.
    session.warn(f"pre-commit cannot fetch {', '.join(missing)}: running ruff only")
    session.install(f"ruff=={revisions(PRE_COMMIT_CONFIG)[RUFF_HOOKS].removeprefix('v')}")
    session.run("ruff", "check", *session.posargs)
    session.run("ruff", "format", "--check")


@nox.session
def speed(session: nox.Session) -> None:
    """Time the things users wait for: a bake, a generated project's tests, `import torch`, and
    every tool on a 12-layer transformers Llama, where compiling dominates (`-- --llama`: that
    case alone)."""
    session.install(*TEST_DEPENDENCIES, TRANSFORMERS)
    session.run("python", "benchmarks/speed.py", *session.posargs)


@nox.session
def copier_yml(session: nox.Session) -> None:
    """Write copier.yml's questions from cookiecutter.json again (cog), after a change to either."""
    session.install(COG, "jinja2")  # copier_support/hook_rules.py, which the questions call, imports it
    session.run("cog", "-r", "-I", "copier_support", "copier.yml")


@nox.session
def readme(session: nox.Session) -> None:
    """Write the READMEs' blocks from the code again (cog, readme_support/), after a change to
    what they state (toolkit/socs.py, toolkit/commands.py, the
    post-gen hook's REMOVE_WHEN)."""
    session.install(COG)
    session.run("cog", "-r", "-I", "readme_support", "README.md", "{{cookiecutter.project_slug}}/README.md")


@nox.session
def works_with(session: nox.Session) -> None:
    """Run each model of tests/works_with.py through every tool in a fresh bake, and write the
    results (tests/works_with.json) and the generated README's "Models it works with" table
    anew. `nox -s works_with -- GPT-2` runs one model again; `-- --workers 1` on fewer cores."""
    session.install(*FULL_DEPENDENCIES)
    session.run("python", "tests/works_with.py", *session.posargs)


@nox.session
def mutations(session: nox.Session) -> None:
    """Plant each bug of tests/mutations.py in a scratch copy and check that its tests catch it."""
    session.install(*FULL_DEPENDENCIES)
    session.run("python", "tests/mutations.py", *session.posargs)


@nox.session
def toolkit_projects(session: nox.Session) -> None:
    """Write tests/toolkit/projects/ anew from fresh bakes: the projects whose package files the
    toolkit's tests import, after a change to the template's files."""
    session.install(*TEST_DEPENDENCIES)
    session.run("python", "tests/toolkit/projects.py")


@nox.session
def mutation_score(session: nox.Session) -> None:
    """Mutation testing (mutmut) of the toolkit, CLI and op files in baked projects and of the hooks:
    a table per module, survivors in tests/mutation_survivors.md. On demand; cached in build/mutation.
    `nox -s mutation_score -- hooks` runs one target, `-- --again` those not killed yet only,
    `-- --workers 1` on fewer cores."""
    session.install(*TEST_DEPENDENCIES, *MUTATION_DEPENDENCIES)
    session.run("python", "tests/mutation_score.py", *session.posargs)
