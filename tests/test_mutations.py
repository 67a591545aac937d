"""The mutation list of `nox -s mutations` stays plantable: cheap checks, no baking."""

from __future__ import annotations

import shlex

import pytest
from conftest import CHOICES, TEMPLATE
from mutations import MUTATIONS, Mutation, occurrences, planted, problems_with, union


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[mutation.name for mutation in MUTATIONS])
def test_pattern_occurs_exactly_once(mutation):
    """Each mutation's pattern is in its function (or its file) exactly once, so it plants one known bug."""
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


SOURCE = """\
def first(value):
    if value:
        return value + 1
    return None


class Second:
    def method(self, value):
        if value:
            return value + 1
{%- if cookiecutter.workload == "decode" %}
        return value
{%- endif %}


def third():
    return 1
"""


def test_a_pattern_is_planted_in_its_function_only():
    """A pattern that also occurs in another function is planted in the one the mutation names."""
    mutation = Mutation("x", "f.py", "return value + 1", "return value - 1", "t.py -k x", within="method")
    assert occurrences(SOURCE, mutation) == 1
    assert planted(SOURCE, mutation) == SOURCE.replace(
        "            return value + 1", "            return value - 1"
    )


def test_a_function_ends_where_the_next_definition_starts():
    """A function's body runs past a Jinja tag at the margin and ends at the next line indented no deeper."""
    assert occurrences(SOURCE, Mutation("x", "f.py", "return value\n", "", "t", within="method")) == 1
    assert occurrences(SOURCE, Mutation("x", "f.py", "return 1", "", "t", within="method")) == 0


def test_a_function_defined_twice_or_never_plants_nothing():
    """A mutation whose function is not defined exactly once is reported, not planted at random."""
    twice = SOURCE + "\n\ndef first():\n    return 2\n"
    assert occurrences(twice, Mutation("x", "f.py", "return None", "", "t", within="first")) == 0
    assert occurrences(SOURCE, Mutation("x", "f.py", "return None", "", "t", within="fourth")) == 0
