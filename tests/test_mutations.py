"""The mutation list of `nox -s mutations` stays plantable: cheap checks, no baking."""

from __future__ import annotations

import shlex

import pytest
from conftest import CHOICES, TEMPLATE
from mutations import MUTATIONS, problems_with, union


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[mutation.name for mutation in MUTATIONS])
def test_old_text_occurs_exactly_once(mutation):
    """Each mutation's old text is in its file exactly once, so it plants one known bug."""
    assert problems_with([mutation]) == []


def test_names_are_unique():
    """Each mutation has its own name: the table's rows and the command-line filter tell them apart."""
    names = [mutation.name for mutation in MUTATIONS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[mutation.name for mutation in MUTATIONS])
def test_tests_name_existing_files_and_valid_answers(mutation):
    """Each mutation's test files exist (in the generated project or the template) and its answers are choices."""
    root = TEMPLATE if mutation.bake is None else TEMPLATE / "{{cookiecutter.project_slug}}"
    arguments = shlex.split(mutation.tests)
    assert "-k" in arguments, "a -k expression keeps the run short"
    for argument in arguments[: arguments.index("-k")]:
        assert (root / argument).is_file(), argument
    for question, answer in (mutation.bake or {}).items():
        assert answer in CHOICES[question]


def test_union_selects_every_selection():
    """The baseline run's selection covers each mutation's files and -k expressions."""
    assert union(["tests/a.py -k x", "tests/b.py tests/a.py -k 'y and z'"]) == (
        "tests/a.py tests/b.py -k '(x) or (y and z)'"
    )


def test_union_keeps_each_folders_files_together():
    """The baseline run's files come folder by folder: pytest loses a folder's conftest fixtures
    for a file named after another folder's."""
    selections = ["tests/toolkit/a.py -k x", "tests/b.py -k y", "tests/toolkit/c.py -k z"]
    assert union(selections).split(" -k ")[0] == "tests/b.py tests/toolkit/a.py tests/toolkit/c.py"
