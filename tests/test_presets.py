"""A team presets answers in a cookiecutter user config; --no-input bakes take them."""

from __future__ import annotations

import tomllib

from conftest import bake, package_of


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
