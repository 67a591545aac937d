"""A baked project follows modern Python conventions from its first commit: pre-commit hooks it
already passes, PEP 735 dependency groups, nox on uv, Dependabot for its GitHub Actions."""

from __future__ import annotations

import ast
import json
import logging
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import CODE_VARIANTS, TEMPLATE, variant_id
from hook_repositories import revisions, unreachable
from identify.identify import tags_from_path
from pre_commit.clientlib import CONFIG_HOOK_DICT, load_config

# What a generated project's hooks must cover: each repository with the hook ids it must run.
REQUIRED_HOOKS = {
    "https://github.com/pre-commit/pre-commit-hooks": {
        "check-yaml",
        "end-of-file-fixer",
        "trailing-whitespace",
    },
    "https://github.com/astral-sh/ruff-pre-commit": {"ruff-check", "ruff-format"},
    "https://github.com/abravalheri/validate-pyproject": {"validate-pyproject"},
    "https://github.com/codespell-project/codespell": {"codespell"},
}
# The hooks that need no hook repository: the same tools from their Python packages, run with
# `python -m`, on the files pre-commit would give them (an identify tag, or a file name).
# (ruff-check and ruff-format: test_bake.py runs ruff on every combination.)
OFFLINE_HOOKS = {
    "check-yaml": ("pre_commit_hooks.check_yaml", "yaml"),
    "end-of-file-fixer": ("pre_commit_hooks.end_of_file_fixer", "text"),
    "trailing-whitespace": ("pre_commit_hooks.trailing_whitespace_fixer", "text"),
    "codespell": ("codespell_lib", "text"),
    "validate-pyproject": ("validate_pyproject", "pyproject.toml"),
}
CONFIG = ".pre-commit-config.yaml"
HOOK_KEYS = {item.key for item in CONFIG_HOOK_DICT.items if hasattr(item, "key")}
GROUP_OPTION = re.compile(r"--group[ =]([\w-]+)")

every_code_variant = pytest.mark.parametrize("answers", CODE_VARIANTS, ids=variant_id)


def hooks(config: Path) -> dict[str, dict[str, dict]]:
    """Each repository of a pre-commit config with its hooks by id."""
    repos = yaml.safe_load(config.read_text())["repos"]
    return {repo["repo"]: {hook["id"]: hook for hook in repo["hooks"]} for repo in repos}


def copy_of(project: Path, workdir: Path) -> Path:
    """A copy of a baked project to run fixers in: the baked one is shared with other tests."""
    return Path(shutil.copytree(project, workdir / project.name))


def codespell_settings(project: Path) -> dict:
    return tomllib.loads((project / "pyproject.toml").read_text())["tool"]["codespell"]


def python(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *command], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


def resolve(groups: dict[str, list], name: str) -> set[str]:
    """The requirements of a PEP 735 group, its included groups' expanded."""
    found = set()
    for entry in groups[name]:
        found |= resolve(groups, entry["include-group"]) if isinstance(entry, dict) else {entry}
    return found


def distribution(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def function(source: str, name: str) -> ast.FunctionDef:
    (found,) = (node for node in ast.walk(ast.parse(source)) if getattr(node, "name", None) == name)
    return found


def calls(node: ast.AST) -> list[tuple]:
    """Every call below node, in source order, as (dotted name, its string arguments)."""
    found = []
    nodes = sorted((child for child in ast.walk(node) if isinstance(child, ast.Call)), key=lambda c: c.lineno)
    for call in nodes:
        strings = tuple(arg.value for arg in call.args if isinstance(arg, ast.Constant))
        found.append((ast.unparse(call.func), strings))
    return found


# pre-commit


@pytest.mark.parametrize("where", ["generated", "template"])
def test_pre_commit_config_passes_pre_commit_schema(baked, caplog, where):
    """pre-commit loads the config without an error or a warning, and every hook key is one it knows."""
    config = baked() / CONFIG if where == "generated" else TEMPLATE / CONFIG
    with caplog.at_level(logging.WARNING, logger="pre_commit"):
        load_config(str(config))  # raises InvalidConfigError
    assert [record.getMessage() for record in caplog.records] == []
    unknown = {key for repo in hooks(config).values() for hook in repo.values() for key in hook} - HOOK_KEYS
    assert unknown == set()


def test_pre_commit_config_runs_the_required_hooks(baked):
    """ruff (check with --fix, and format), validate-pyproject, codespell, check-yaml and the
    end-of-file and trailing-whitespace fixers."""
    found = hooks(baked() / CONFIG)
    assert {repo: set(ids) & REQUIRED_HOOKS.get(repo, set()) for repo, ids in found.items()} == REQUIRED_HOOKS
    assert "--fix" in found["https://github.com/astral-sh/ruff-pre-commit"]["ruff-check"]["args"]


def test_hook_revisions_are_release_tags(baked):
    """Every hook repository is pinned to a release tag (vX.Y or vX.Y.Z), never a branch."""
    pinned = revisions(baked() / CONFIG)
    assert set(pinned) == {repo["repo"] for repo in yaml.safe_load((baked() / CONFIG).read_text())["repos"]}
    assert {url: rev for url, rev in pinned.items() if not re.fullmatch(r"v\d+(\.\d+){1,2}", rev)} == {}


def test_template_repository_runs_the_same_hooks_at_the_same_revisions(baked):
    """The template's own config pins what it generates: one `pre-commit autoupdate` story."""
    generated, template = baked() / CONFIG, TEMPLATE / CONFIG
    assert revisions(template) == revisions(generated)
    assert {url: set(ids) for url, ids in hooks(template).items()} == {
        url: set(ids) for url, ids in hooks(generated).items()
    }


@pytest.mark.parametrize("hook", OFFLINE_HOOKS)
def test_offline_hooks_pass_on_every_baked_file(baked, tmp_path, hook):
    """The hooks that run without fetching anything pass on the files pre-commit gives them, in
    every code variant, so `pre-commit run --all-files` passes on the first commit. One run of
    each hook takes every variant's files (a copy: the fixers among them write)."""
    module, selector = OFFLINE_HOOKS[hook]
    files: dict[Path, list[str]] = {}
    for answers in CODE_VARIANTS:
        project = copy_of(baked(**answers), tmp_path / variant_id(answers))
        files[project] = sorted(
            path.relative_to(project).as_posix()
            for path in project.rglob("*")
            if path.is_file() and (selector in tags_from_path(str(path)) or path.name == selector)
        )
    assert all(files.values())  # the hook has something to check in every variant
    settings = []
    # codespell reads its settings from a pyproject.toml: every variant has the same ones, so one
    # run takes them from the first.
    if hook == "codespell":
        tables = {json.dumps(codespell_settings(project)) for project in files}
        assert len(tables) == 1, f"the variants set codespell apart: {tables}"
        settings = ["--toml", str(next(iter(files)) / "pyproject.toml")]
    every = [str(project / name) for project, names in files.items() for name in names]
    result = python("-m", module, *settings, *every, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@every_code_variant
def test_pre_commit_run_passes_on_a_baked_project(baked, tmp_path, answers):
    """Where the hook repositories can be fetched, `pre-commit run --all-files` passes on a fresh
    commit of the project; elsewhere this skips, naming what it could not reach."""
    project = copy_of(baked(**answers), tmp_path)
    missing = unreachable(project / CONFIG)
    if missing:
        pytest.skip(f"cannot reach {', '.join(missing)}; the schema and offline-hook tests stand in")
    for command in (["init", "--quiet"], ["add", "--all"]):
        subprocess.run(["git", *command], cwd=project, check=True, capture_output=True)
    result = python("-m", "pre_commit", "run", "--all-files", "--show-diff-on-failure", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr


def test_nox_lint_and_ci_lint_run_pre_commit_on_every_file(baked):
    """`nox -s lint` and CI's lint job both run `pre-commit run --all-files`: one source of lint."""
    project = baked()
    lint = function((project / "noxfile.py").read_text(), "lint")
    strings = [
        tuple(element.value for element in node.elts)
        for node in ast.walk(lint)
        if isinstance(node, ast.Tuple) and all(isinstance(element, ast.Constant) for element in node.elts)
    ]
    assert ("pre-commit", "run", "--all-files", "--show-diff-on-failure") in strings
    # What runs last: what comes before it is the fallback to ruff where GitHub cannot be reached.
    assert calls(lint)[-1][0] == "session.run"
    workflow = yaml.safe_load((project / ".github" / "workflows" / "ci.yml").read_text())
    commands = [step.get("run", "") for step in workflow["jobs"]["lint"]["steps"]]
    assert any(command.startswith("pre-commit run --all-files") for command in commands)


def test_nox_lint_passes_on_a_fresh_bake_that_is_no_git_repository(baked, tmp_path):
    """pre-commit lints a git repository's files: `nox -s lint` lints a fresh bake, which is
    none yet, through a repository of its own, and leaves the folder no repository."""
    project = copy_of(baked(), tmp_path)
    if missing := unreachable(project / ".pre-commit-config.yaml"):
        pytest.skip(f"cannot reach {', '.join(missing)}; nox -s lint then runs ruff alone")
    result = python("-m", "nox", "-s", "lint", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (project / ".git").exists()


def test_ci_runs_the_readme_commands_as_written():
    """.ci/run runs the template README's commands, as written and in its order: the main job,
    the default tier, then the full tier."""
    readme = (TEMPLATE / "README.md").read_text()
    block = readme.partition("\n## Two commands\n")[2].partition("```bash\n")[2].partition("```")[0]
    commands = [line.partition("#")[0].strip() for line in block.splitlines()]
    full = re.search(r"`(nox -s tests -- --full)`\s+is\s+the\s+full\s+tier\s+that\s+CI\s+runs", readme)[1]
    ci = [line.removeprefix("python3 -m ") for line in (TEMPLATE / ".ci" / "run").read_text().splitlines()]
    assert [line for line in ci if line.startswith("nox ")] == [*commands, full]


# Dependency groups


def test_test_and_dev_are_dependency_groups_and_npu_and_plot_stay_extras(baked):
    """pyproject's optional dependencies hold `npu` and `plot` (features of the installed package:
    torch_npu, and matplotlib for `profile --plot`); `test` and `dev` are PEP 735 groups."""
    pyproject = tomllib.loads((baked() / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert set(extras) == {"npu", "plot"}
    assert extras["plot"] == ["matplotlib"]
    assert set(pyproject["dependency-groups"]) == {"test", "dev"}


def test_dev_group_holds_the_test_group_and_the_tools(baked):
    """`--group dev` installs everything `--group test` does, plus nox, pre-commit and ruff."""
    groups = tomllib.loads((baked() / "pyproject.toml").read_text())["dependency-groups"]
    test, dev = (
        {distribution(requirement) for requirement in resolve(groups, name)} for name in ("test", "dev")
    )
    assert "pytest" in test
    assert dev >= test | {"nox", "pre-commit", "ruff"}


def test_every_group_the_project_installs_exists(baked):
    """The README and CI install groups with `--group`, never `.[test]`-style extras, and only
    groups that pyproject defines."""
    project = baked()
    groups = set(tomllib.loads((project / "pyproject.toml").read_text())["dependency-groups"])
    texts = [(project / name).read_text() for name in ("README.md", ".github/workflows/ci.yml")]
    named = {group for text in texts for group in GROUP_OPTION.findall(text)}
    assert "test" in named
    assert named <= groups
    assert [text for text in texts if re.search(r"\[[\w,]*\b(test|dev)\b[\w,]*\]", text)] == []


def test_nox_tests_session_installs_the_test_group(baked):
    """The generated noxfile installs the `test` group for `nox -s tests`."""
    assert ("install", ("test",)) in calls(function((baked() / "noxfile.py").read_text(), "tests"))


# nox on uv


def test_nox_builds_environments_with_uv_where_installed(baked):
    """The generated noxfile prefers uv and falls back to virtualenv."""
    tree = ast.parse((baked() / "noxfile.py").read_text())
    backends = [
        node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "nox.options.default_venv_backend"
    ]
    assert backends == ["uv|virtualenv"]


def test_nox_installs_cpu_torch_alone_before_the_project(baked):
    """torch comes first and alone, from TORCH_INDEX_URL as the only index (so no fallback to
    PyPI's CUDA build), then the project and its groups."""
    installs = [
        call
        for call in calls(function((baked() / "noxfile.py").read_text(), "install"))
        if call[0] == "session.install"
    ]
    source = ast.unparse(function((baked() / "noxfile.py").read_text(), "install"))
    assert installs == [("session.install", ("--index-url",)), ("session.install", ("-e", "."))]
    assert "session.install(TORCH, '--index-url', TORCH_INDEX_URL)" in source


# Dependabot


def test_dependabot_updates_github_actions_weekly_in_one_group(baked):
    """Dependabot opens one grouped pull request a week for the workflow's actions."""
    config = yaml.safe_load((baked() / ".github" / "dependabot.yml").read_text())
    assert config["version"] == 2
    (update,) = config["updates"]
    assert update["package-ecosystem"] == "github-actions"
    assert update["directory"] == "/"
    assert update["schedule"]["interval"] == "weekly"
    assert [group["patterns"] for group in update["groups"].values()] == [["*"]]
