"""Generated projects take template improvements with cruft, keeping their own edits."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import cruft
from conftest import TEMPLATE


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
