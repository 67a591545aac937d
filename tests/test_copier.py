"""copier bakes the project cookiecutter bakes, asks only what matters and refuses as it is typed."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from conftest import (
    CODE_VARIANTS,
    DEFAULT_CHOICES,
    REPRESENTATIVE_VARIANTS,
    TEMPLATE,
    copier_bake,
    variant_id,
)
from copier_prompts import answer_questions
from test_hooks import BAD_ANSWERS, BAD_OP_ANSWERS, DEFAULTS, EDGE_ANSWERS, IRRELEVANT, REFUSALS, rules

ANSWERS_FILES = {".copier-answers.yml"}


def tree(project: Path) -> dict[str, tuple[bytes, bool] | None]:
    """Every path under `project` but the answers file: a file's bytes and executable bit, None
    for a folder."""
    return {
        path.relative_to(project).as_posix(): (
            (path.read_bytes(), bool(path.stat().st_mode & stat.S_IXUSR)) if path.is_file() else None
        )
        for path in project.rglob("*")
        if path.relative_to(project).as_posix() not in ANSWERS_FILES
    }


# The representative variants hold every answer's value, so every pruning rule; the full tier
# compares every code variant's tree.
@pytest.mark.parametrize(
    "answers",
    [
        pytest.param(
            answers,
            id=variant_id(answers),
            marks=[] if answers in REPRESENTATIVE_VARIANTS else [pytest.mark.full],
        )
        for answers in CODE_VARIANTS
    ],
)
def test_copier_bakes_the_tree_cookiecutter_bakes(baked, copier_template, tmp_path, answers):
    """For the same answers, copier writes every file cookiecutter writes, byte for byte, and
    nothing more (the post-generation hook's pruning included), but for its answers file."""
    by_cookiecutter = tree(baked(**answers))
    by_copier = tree(copier_bake(copier_template, tmp_path / "project", **answers))
    assert sorted(by_copier) == sorted(by_cookiecutter)
    assert [name for name in by_copier if by_copier[name] != by_cookiecutter[name]] == []


def test_copier_records_its_answers_for_updates(copier_template, tmp_path):
    """The project holds .copier-answers.yml, which copier update reads: the template's source and
    the answers to the questions asked, not those hidden (the commit: tests/test_updates.py)."""
    project = copier_bake(copier_template, tmp_path / "project", mode="cache_compile")
    recorded = (project / ".copier-answers.yml").read_text()
    assert f"_src_path: {copier_template}" in recorded
    assert "mode: cache_compile\n" in recorded
    assert "cache_dir: .torchair_cache\n" in recorded
    assert "op_name:" not in recorded  # no custom op: not asked, so not recorded


def asked_for(copier_template, monkeypatch, **answers: str) -> list[str]:
    return answer_questions(copier_template, answers, monkeypatch).asked


PROMPTS = [name for name in json.loads((TEMPLATE / "cookiecutter.json").read_text()) if name[0] != "_"]


@pytest.mark.parametrize(("answers", "hidden"), IRRELEVANT.values(), ids=IRRELEVANT.keys())
def test_a_question_is_asked_only_when_it_matters(copier_template, monkeypatch, answers, hidden):
    """cache_dir only in cache_compile mode; the op's registration and name only with a custom op,
    its namespace only with a torch.library one; every other question always, in
    cookiecutter.json's order."""
    assert asked_for(copier_template, monkeypatch, **answers) == [
        name for name in PROMPTS if name not in hidden
    ]


def test_the_default_and_the_fullest_path_prompt_counts_are_the_readmes(copier_template, monkeypatch):
    """The README quotes how many questions copier asks on the default path and on the fullest one,
    against cookiecutter's fixed count."""
    default = len(asked_for(copier_template, monkeypatch))
    fullest = len(asked_for(copier_template, monkeypatch, **IRRELEVANT["the fullest path"][0]))
    readme = " ".join((TEMPLATE / "README.md").read_text().split())
    assert (default, fullest) == (13, len(PROMPTS))
    assert f"copier asks {default} questions on the default path and {fullest} on the fullest" in readme
    assert f"cookiecutter asks all {len(PROMPTS)}" in readme


def test_a_hidden_question_keeps_its_default(copier_template, monkeypatch):
    """A question not asked still has its default, as cookiecutter's does: the namespace a custom
    op would get is the package's."""
    session = answer_questions(copier_template, {}, monkeypatch)
    assert session.answers["cache_dir"] == ".torchair_cache"
    assert session.answers["op_namespace"] == session.answers["package_name"] == "npu_graph_demo"


def test_a_default_the_hook_would_refuse_is_not_offered(copier_template, monkeypatch):
    """A project named Test makes the package name `test`, which shadows a module: copier offers no
    default there (it would stop on it), so the user types a name, refused in the hook's words if it
    is that one again."""
    typed = {"project_name": "Test", "package_name": ["test", "my_test"]}
    session = answer_questions(copier_template, typed, monkeypatch)
    assert session.answers["project_slug"] == "test"
    assert session.refused == {
        "package_name": [rules.refusal("package_name", {**DEFAULTS, "package_name": "test"})]
    }
    assert session.answers["package_name"] == "my_test"


# The hook's own cases, as answers over its defaults: bad answers, bad combinations, the full
# refusals, the answers at each rule's edge, and several bad answers at once.
HOOK_CASES = {
    **{name: {variable: value} for name, (variable, value, _) in BAD_ANSWERS.items()},
    **{name: {**answers, variable: value} for name, (answers, variable, value, _) in BAD_OP_ANSWERS.items()},
    **{name: answers for name, (answers, _) in REFUSALS.items()},
    **{f"edge {index}": answers for index, answers in enumerate(EDGE_ANSWERS)},
    "several at once": {
        "package_name": "class",
        "model_class": "1x",
        "input_shape": "0",
        "cache_dir": "/abs",
    },
    "the defaults": {},
}


def typed_answers(answers: dict[str, str]) -> dict[str, list[str]]:
    """What a user types: each answer, then the hook's default for it if that one is refused."""
    return {name: [value, DEFAULTS.get(name, DEFAULT_CHOICES.get(name))] for name, value in answers.items()}


@pytest.mark.parametrize("answers", HOOK_CASES.values(), ids=HOOK_CASES.keys())
def test_copier_refuses_as_typed_what_the_hook_refuses(copier_template, monkeypatch, answers):
    """Each answer cookiecutter refuses is refused where it is typed, in the same words,
    and asked again; each answer it accepts is accepted. An answer to a question not asked counts
    when given as --data, and is checked there."""
    complete = {**DEFAULT_CHOICES, **DEFAULTS, **answers}
    expected = {name: rules.refusal(name, complete) for name in complete}
    session = answer_questions(copier_template, typed_answers(complete), monkeypatch)
    refused = {name: "\n".join(messages) for name, messages in session.refused.items()}
    assert refused == {name: expected[name] for name in session.asked if expected[name]}
    for name in set(answers) - set(session.asked):
        if name in DEFAULT_CHOICES:
            continue  # a choice, not a free answer: copier offers only valid ones
        given = {name: answers[name]}
        if expected[name]:
            with pytest.raises(ValueError, match=re.escape(expected[name])):
                answer_questions(copier_template, typed_answers(complete), monkeypatch, data=given)
        else:
            answer_questions(copier_template, typed_answers(complete), monkeypatch, data=given)


def test_copier_questions_are_cookiecutter_json_written_out():
    """copier.yml's questions are what cog writes from cookiecutter.json: a hand edit, or a change
    to cookiecutter.json without `nox -s copier_yml`, fails here."""
    check = subprocess.run(
        [sys.executable, "-m", "cogapp", "--check", "-I", "copier_support", "copier.yml"],
        cwd=TEMPLATE,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_copier_is_pinned_where_the_tests_run_it():
    """The test group pins copier and the template extensions, and these tests run those releases."""
    group = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())["dependency-groups"]["test"]
    pins = dict(entry.split("==") for entry in group if "==" in entry)
    assert pins["copier"] == version("copier")
    assert pins["copier-template-extensions"] == version("copier-template-extensions")
