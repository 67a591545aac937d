"""A team presets answers in each tool's own form: cookiecutter's user config (default_context),
copier's settings file (defaults) and data file (--data-file)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

from conftest import bake, copier_bake, package_of
from copier import Settings


def test_preset_choice_and_text_answers_are_used(tmp_path):
    """default_context in the user config sets choices (mode) and free text (author) alike."""
    project = bake(tmp_path, preset={"mode": "cache_compile", "author_name": "Inference Team"})
    assert (project / "src" / package_of(project) / "toolkit" / "compile_cache.py").is_file()
    authors = tomllib.loads((project / "pyproject.toml").read_text())["project"]["authors"]
    assert authors[0]["name"] == "Inference Team"


def test_explicit_answer_beats_the_preset(tmp_path):
    """An answer given for this bake wins over the team preset."""
    project = bake(tmp_path, preset={"mode": "cache_compile"}, mode="npugraph_ex")
    assert not (project / "src" / package_of(project) / "toolkit" / "compile_cache.py").exists()


TEAM = {"mode": "cache_compile", "author_name": "Inference Team"}


def test_copier_settings_defaults_are_the_questions_defaults(copier_template, tmp_path):
    """`defaults:` in copier's settings file are the defaults its questions offer (and take)."""
    project = copier_bake(copier_template, tmp_path / "project", settings=Settings(defaults=TEAM))
    assert (project / "src" / package_of(project) / "toolkit" / "compile_cache.py").is_file()
    authors = tomllib.loads((project / "pyproject.toml").read_text())["project"]["authors"]
    assert authors[0]["name"] == "Inference Team"


def test_copier_data_file_answers_and_data_overrides_it(copier_template, tmp_path):
    """`copier copy --data-file` takes a team's answers file, and `--data` overrides one of them."""
    answers = tmp_path / "team-answers.yml"
    answers.write_text("".join(f"{name}: {value}\n" for name, value in TEAM.items()))
    settings = tmp_path / "settings.yml"
    settings.write_text("{}\n")
    project = tmp_path / "project"
    command = [sys.executable, "-m", "copier", "copy", "--trust", "--defaults", "--quiet"]
    command += ["--data-file", str(answers), "--data", "author_name=Someone Else"]
    subprocess.run(
        [*command, str(copier_template), str(project)],
        check=True, capture_output=True, env={**os.environ, "COPIER_SETTINGS_PATH": str(settings)},
    )  # fmt: skip
    assert (project / "src" / package_of(project) / "toolkit" / "compile_cache.py").is_file()
    authors = tomllib.loads((project / "pyproject.toml").read_text())["project"]["authors"]
    assert authors[0]["name"] == "Someone Else"
