"""The READMEs state what the code holds: the blocks cog writes (readme_support/) are current."""

from __future__ import annotations

import subprocess
import sys

from conftest import TEMPLATE

READMES = ["README.md", "{{cookiecutter.project_slug}}/README.md"]


def test_each_readme_block_is_what_cog_writes_from_the_code():
    """A hand edit of a block between cog's marks, or a change to its source (toolkit/socs.py,
    toolkit/commands.py, the post-gen hook's REMOVE_WHEN) without `nox -s readme`, fails here."""
    command = [sys.executable, "-m", "cogapp", "--check", "-I", "readme_support", *READMES]
    check = subprocess.run(command, cwd=TEMPLATE, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_projects_readme_holds_the_text_and_no_cog_marks(baked):
    """cog's marks sit in Jinja comments in the template: a baked README holds the text alone."""
    readme = (baked() / "README.md").read_text()
    assert "[[[" not in readme
    assert "npugraph_ex runs on Atlas A2" in readme
