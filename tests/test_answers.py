"""Whatever a user types becomes data: fuzzed free text bakes a valid project or is refused cleanly."""

from __future__ import annotations

import ast
import tempfile
import tomllib
from pathlib import Path

import pytest
from conftest import bake, isolated_config
from cookiecutter import prompt
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Quotes, backslashes, braces, newlines, tabs, non-ASCII and astral characters, and the
# sequences each target format treats specially.
NASTY = st.sampled_from(['"', "'", "\\", "\n", "\t", "{", "}", "#", "`", "$", "<", ">", "é", "汉", "😀"])
FREE_TEXT = st.lists(st.one_of(NASTY, st.characters(codec="utf-8")), max_size=30).map("".join)
# cookiecutter renders --no-input answers as Jinja itself (documented behaviour), so `{{`/`{%`
# there are cookiecutter's business; typed answers are checked for that below.
NO_JINJA = FREE_TEXT.filter(lambda text: "{{" not in text and "{%" not in text and "{#" not in text)


def outcome(workdir: Path, **answers: str) -> Path | None:
    """The baked project, or None when the pre-generation hook refused the answers."""
    try:
        return bake(workdir, **answers)
    except FailedHookException:
        return None


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=NO_JINJA, description=NO_JINJA, author=NO_JINJA)
def test_fuzzed_free_text_is_refused_or_round_trips(name, description, author):
    """Any text bakes a project whose metadata reads back exactly, or is refused leaving nothing."""
    with tempfile.TemporaryDirectory() as workdir:
        answers = {"project_name": name, "description": description, "author_name": author}
        answers["package_name"] = "fuzzed"  # a name slugify empties falls back to a valid slug
        project = outcome(Path(workdir), **answers)
        if project is None:
            assert not any((Path(workdir) / "out").iterdir())
            # Refused only for a reason the hook states: an empty name or a non-printable character.
            assert not name.strip() or not all(text.isprintable() for text in answers.values())
            return
        metadata = tomllib.loads((project / "pyproject.toml").read_text())["project"]
        assert metadata["description"] == description
        assert metadata["authors"][0]["name"] == author
        assert name in (project / "README.md").read_text()
        for path in project.rglob("*.py"):
            ast.parse(path.read_text())


def test_printable_text_is_accepted_and_control_characters_refused(tmp_path):
    """One line of printable text is fine; a newline gets an ERROR naming the variable."""
    assert outcome(tmp_path / "a", description='Say "hi" \\ to 汉字 😀') is not None
    with pytest.raises(FailedHookException):
        bake(tmp_path / "b", description="two\nlines")


def test_typed_jinja_is_kept_literally(tmp_path, monkeypatch):
    """`{{ ... }}` typed at a prompt reaches the files as text, never evaluated."""
    typed = {"project_name": "Demo {{ 7 * 7 }}", "description": "{% raw %}{{ cookiecutter }}"}
    original = prompt.read_user_variable

    def answer(name, default, *args, **kwargs):
        return typed.get(name, default if not isinstance(default, dict) else original(name, default))

    monkeypatch.setattr(prompt, "read_user_variable", answer)
    monkeypatch.setattr(prompt, "read_user_choice", lambda name, options, *args, **kwargs: options[0])
    monkeypatch.setattr(prompt, "read_user_yes_no", lambda *args, **kwargs: True)
    (tmp_path / "out").mkdir()
    project = Path(
        cookiecutter(
            str(Path(__file__).resolve().parents[1]),
            output_dir=str(tmp_path / "out"),
            config_file=str(isolated_config(tmp_path)),
        )
    )
    readme = (project / "README.md").read_text()
    assert "# Demo {{ 7 * 7 }}" in readme
    assert "{% raw %}{{ cookiecutter }}" in readme


def test_replay_bakes_the_same_project_again(tmp_path):
    """`cookiecutter --replay` re-creates a project from the answers it recorded."""
    first = bake(tmp_path / "first", mode="cache_compile", custom_op="in_place")
    replayed = cookiecutter(
        str(Path(__file__).resolve().parents[1]),
        replay=True,
        output_dir=str(tmp_path / "again"),
        config_file=str(isolated_config(tmp_path / "first")),
    )
    first_files = {path.relative_to(first) for path in first.rglob("*") if path.is_file()}
    replayed_files = {path.relative_to(replayed) for path in Path(replayed).rglob("*") if path.is_file()}
    assert replayed_files == first_files  # nothing missing, nothing extra
    for relative in first_files:
        assert (Path(replayed) / relative).read_text() == (first / relative).read_text()
