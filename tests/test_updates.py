"""Generated projects take template improvements with cruft or copier, keeping their own edits."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import cruft
import yaml
from conftest import TEMPLATE, copier_bake, template_copy
from copier import Settings, run_update


def git(folder: Path, *arguments: str) -> str:
    identity = ["-c", "user.name=Template Tests", "-c", "user.email=tests@example.com"]
    result = subprocess.run(
        ["git", *identity, *arguments], cwd=folder, capture_output=True, text=True, check=True
    )
    return result.stdout


def template_repository(folder: Path) -> Path:
    """A git repository holding this template's tracked files, as cruft clones templates."""
    for name in git(TEMPLATE, "ls-files").splitlines():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(TEMPLATE / name, folder / name)
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "template v1")
    return folder


def test_cruft_update_brings_template_changes_and_keeps_project_edits(tmp_path):
    """cruft create records the answers; after a template change cruft update applies it."""
    template = template_repository(tmp_path / "template")
    project = cruft.create(
        str(template), output_dir=tmp_path / "projects", no_input=True, default_config=True,
        extra_context={"mode": "cache_compile"},
    )  # fmt: skip
    answers = json.loads((project / ".cruft.json").read_text())["context"]["cookiecutter"]
    assert answers["mode"] == "cache_compile"  # the answers are recorded for later updates
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "baked")

    readme = project / "README.md"
    readme.write_text(readme.read_text() + "\nOur team runs this on Atlas A2 boxes.\n")
    git(project, "commit", "-q", "-am", "our edit")

    report = (
        template
        / "{{cookiecutter.project_slug}}"
        / "src"
        / "{{cookiecutter.package_name}}"
        / "toolkit"
        / "report.py"
    )
    report.write_text(report.read_text().replace("import time\n", "import time  # wall clock\n"))
    git(template, "commit", "-q", "-am", "template v2")

    assert not cruft.check(project)
    assert cruft.update(project, skip_apply_ask=True)
    assert "Our team runs this on Atlas A2 boxes." in readme.read_text()
    package = answers["package_name"]
    assert "import time  # wall clock" in (project / "src" / package / "toolkit" / "report.py").read_text()
    assert cruft.check(project)


# The last template release before the toolkit became one plain library (settings.py, a toolkit
# copied without rendering): projects baked from it must update to the new layout.
BEFORE_THE_PLAIN_TOOLKIT = "3dce249"


def template_at(commit: str, folder: Path) -> Path:
    """A git repository holding this template's tracked files as they were at `commit`."""
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=TEMPLATE, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x"], cwd=folder, input=archive, check=True)
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", f"template at {commit}")
    return folder


def commit_the_template_as_it_is(template: Path, message: str) -> None:
    """The next commit of `template` (a repository from template_at()): this template's files as
    they are now, uncommitted changes included."""
    for name in git(template, "ls-files").splitlines():
        (template / name).unlink()
    for name in git(TEMPLATE, "ls-files", "--cached", "--others", "--exclude-standard").splitlines():
        if (TEMPLATE / name).is_file():
            (template / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(TEMPLATE / name, template / name)
    git(template, "add", "-A")
    git(template, "commit", "-q", "-m", message)


def test_a_project_from_before_the_plain_toolkit_updates_to_it_keeping_its_model(tmp_path):
    """A decode project baked before the toolkit became a plain library, with the user's own
    edit to model.py, takes cruft update: the toolkit and settings arrive as the template has
    them, the edit stays, and nothing conflicts where the user did not edit."""
    template = template_at(BEFORE_THE_PLAIN_TOOLKIT, tmp_path / "template")
    project = cruft.create(
        str(template), output_dir=tmp_path / "projects", no_input=True, default_config=True,
        extra_context={"workload": "decode", "mode": "cache_compile"},
    )  # fmt: skip
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "baked")
    package = json.loads((project / ".cruft.json").read_text())["context"]["cookiecutter"]["package_name"]
    model = project / "src" / package / "model.py"
    model.write_text(model.read_text().replace("LAYERS = 2\n", "LAYERS = 4  # our model is deeper\n"))
    git(project, "commit", "-q", "-am", "our model")

    commit_the_template_as_it_is(template, "the plain toolkit")

    assert cruft.update(project, skip_apply_ask=True)
    assert "LAYERS = 4  # our model is deeper\n" in model.read_text()
    new_toolkit = (
        TEMPLATE / "{{cookiecutter.project_slug}}" / "src" / "{{cookiecutter.package_name}}" / "toolkit"
    )
    toolkit = project / "src" / package / "toolkit"
    assert {path.name: path.read_bytes() for path in toolkit.glob("*.py")} == {
        path.name: path.read_bytes() for path in new_toolkit.glob("*.py") if (toolkit / path.name).exists()
    }
    assert (project / "src" / package / "settings.py").read_text().count('MODE = "cache_compile"') == 1
    leftovers = [path.name for path in project.rglob("*.rej")]
    leftovers += [path.name for path in project.rglob("*.py") if "<<<<<<<" in path.read_text()]
    assert leftovers == []


def copier_template_repository(folder: Path) -> Path:
    """A git repository holding this template's files as they are now: today's main."""
    template_copy(folder)
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "template v1")
    return folder


def committed_copier_project(template: Path, folder: Path) -> Path:
    """A default project baked by copier from `template`, committed as its team would keep it."""
    project = copier_bake(template, folder)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "baked")
    return project


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def copier_update(project: Path) -> None:
    """`copier update --trust --defaults` to the template's newest commit, conflicts inline."""
    run_update(
        project, defaults=True, overwrite=True, unsafe=True, quiet=True, conflict="inline",
        settings=Settings(),
    )  # fmt: skip


MODEL = "src/npu_graph_demo/model.py"
MRE = "src/npu_graph_demo/mre.py"
REPORT = "src/npu_graph_demo/toolkit/report.py"
TEMPLATE_PACKAGE = Path("{{cookiecutter.project_slug}}", "src", "{{cookiecutter.package_name}}")
# A line of model.py's docstring and of the toolkit that a newer template changes.
DOCSTRING, NEW_DOCSTRING = (
    "'Your own model'). The sample is a small pre-norm transformer block.",
    "'Your own model'). The sample is a small pre-norm transformer block, two layers deep.",
)


def newer_template(template: Path) -> None:
    """The template's next commit: a toolkit change and a change to model.py's docstring."""
    edit(
        template / TEMPLATE_PACKAGE / "toolkit" / "report.py", "import time\n", "import time  # wall clock\n"
    )
    edit(template / TEMPLATE_PACKAGE / "model.py", DOCSTRING, NEW_DOCSTRING)
    git(template, "commit", "-q", "-am", "template v2")


def conflicted(project: Path) -> list[str]:
    """The project's files holding conflict markers or rejected hunks."""
    marked = [
        path.relative_to(project).as_posix()
        for path in project.rglob("*")
        if path.is_file() and ".git" not in path.parts and "<<<<<<<" in path.read_text()
    ]
    return marked + [path.relative_to(project).as_posix() for path in project.rglob("*.rej")]


def test_copier_update_brings_the_template_forward_and_keeps_the_users_edits(tmp_path):
    """A project copier made from today's main, with the user's edit to model.py, takes copier
    update to a newer template: the toolkit and model.py's docstring move forward, the user's line
    stays, nothing conflicts, and the answers file names the new commit."""
    template = copier_template_repository(tmp_path / "template")
    project = committed_copier_project(template, tmp_path / "project")
    edit(project / MODEL, "HEADS = 8\n", "HEADS = 4  # our model has fewer heads\n")
    git(project, "commit", "-q", "-am", "our model")
    newer_template(template)

    copier_update(project)
    model = (project / MODEL).read_text()
    assert "HEADS = 4  # our model has fewer heads\n" in model
    assert NEW_DOCSTRING in model
    assert "import time  # wall clock\n" in (project / REPORT).read_text()
    assert conflicted(project) == []
    newest = git(template, "rev-parse", "--short", "HEAD").strip()
    # Parsed, not searched: YAML quotes a hash of digits only ('4808070').
    assert yaml.safe_load((project / ".copier-answers.yml").read_text())["_commit"] == newest


def test_copier_update_conflicts_only_where_both_changed_the_same_lines(tmp_path):
    """When the user rewrote the docstring line that the template changes too, that line is a
    conflict, marked inline in model.py alone; the toolkit change still arrives."""
    template = copier_template_repository(tmp_path / "template")
    project = committed_copier_project(template, tmp_path / "project")
    edit(project / MODEL, DOCSTRING, "'Your own model'). Our model replaces the sample.")
    git(project, "commit", "-q", "-am", "our model")
    newer_template(template)

    copier_update(project)
    assert conflicted(project) == [MODEL]
    model = (project / MODEL).read_text()
    assert "Our model replaces the sample." in model
    assert NEW_DOCSTRING in model
    assert "import time  # wall clock\n" in (project / REPORT).read_text()


# The last template release before the MRE became literal and the toolkit a library handed its
# project: mre.py rewritten, tests/conftest.py a plugin line, test_cli.py and test_readme.py gone.
BEFORE_THE_LITERAL_MRE = "40a2cf7"
SEED = ("    torch.manual_seed(0)\n", "    torch.manual_seed(1234)  # our seed\n")
"""A user's edit of a line of mre.py that the literal MRE keeps as it was."""
FIRST_CALL = (
    "    with torch.no_grad(), first_call(backend) as call:\n",
    "    with torch.no_grad(), first_call(backend) as call:  # our first call\n",
)
"""A user's edit of a line of mre.py that the literal MRE rewrites."""


def users_edits(project: Path, *mre_edits: tuple[str, str]) -> None:
    """A team's commits on a baked project: fewer heads in model.py, and `mre_edits` to mre.py."""
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "baked")
    package = project / "src" / "npu_graph_demo"
    edit(package / "model.py", "HEADS = 8\n", "HEADS = 4  # our model has fewer heads\n")
    for old, new in mre_edits:
        edit(package / "mre.py", old, new)
    git(project, "commit", "-q", "-am", "our model")


def assert_the_new_layout(project: Path) -> None:
    """The project holds the literal MRE's layout: the toolkit as the template has it, the plugin
    conftest, no test of the CLI or the README; the user's model.py edit stays."""
    package = project / "src" / "npu_graph_demo"
    toolkit = TEMPLATE / TEMPLATE_PACKAGE / "toolkit"
    kept = {path.name: path.read_bytes() for path in (package / "toolkit").glob("*.py")}
    assert kept == {path.name: path.read_bytes() for path in toolkit.glob("*.py") if path.name in kept}
    assert {"capture.py", "project.py", "testing.py"} <= set(kept)
    assert "HEADS = 4  # our model has fewer heads\n" in (package / "model.py").read_text()
    assert "first_call" not in (package / "mre.py").read_text().replace(FIRST_CALL[1], "")
    assert "pytest_plugins" in (project / "tests" / "conftest.py").read_text()
    assert not (project / "tests" / "test_cli.py").exists()
    assert not (project / "tests" / "test_readme.py").exists()


def test_cruft_update_from_before_the_literal_mre_reaches_it_keeping_the_users_edits(tmp_path):
    """A project cruft made before the literal MRE, with the user's edits to model.py and to an
    mre.py line the MRE keeps, takes cruft update: the new layout arrives, both edits stay,
    nothing conflicts, and the MRE runs."""
    template = template_at(BEFORE_THE_LITERAL_MRE, tmp_path / "template")
    project = cruft.create(
        str(template), output_dir=tmp_path / "projects", no_input=True, default_config=True
    )  # fmt: skip
    users_edits(project, SEED)
    commit_the_template_as_it_is(template, "the literal MRE")

    assert cruft.update(project, skip_apply_ask=True)
    assert_the_new_layout(project)
    assert SEED[1] in (project / "src" / "npu_graph_demo" / "mre.py").read_text()
    assert conflicted(project) == []
    environment = {**os.environ, "PYTHONPATH": str(project / "src"), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    run = subprocess.run(
        [sys.executable, "-m", "npu_graph_demo.mre"], cwd=project, env=environment,
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]


def test_copier_update_from_before_the_literal_mre_conflicts_only_at_the_users_line(tmp_path):
    """A project copier made before the literal MRE, whose user edited an mre.py line the MRE
    rewrites, takes copier update: the new layout arrives, and the one conflict is that line, in
    mre.py alone."""
    template = template_at(BEFORE_THE_LITERAL_MRE, tmp_path / "template")
    project = copier_bake(template, tmp_path / "project")
    users_edits(project, FIRST_CALL)
    commit_the_template_as_it_is(template, "the literal MRE")

    copier_update(project)
    assert_the_new_layout(project)
    assert conflicted(project) == [MRE]
    mre = (project / MRE).read_text()
    (conflict,) = re.findall(r"<<<<<<< .*?>>>>>>> [^\n]*\n", mre, flags=re.DOTALL)
    assert FIRST_CALL[1] in conflict
