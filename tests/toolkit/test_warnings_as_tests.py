"""The warnings a tool raises as errors are those the project's tests raise as errors, and a
warning so raised comes with the filter that lets it through."""

import warnings

import pytest

from forward_project.toolkit.warnings_as_tests import as_the_tests_do, filter_for, filters_of_the_tests

PYPROJECT = """\
[tool.pytest.ini_options]
filterwarnings = [
  "error",
  'default:::quiet_library(\\.|$)',
  "ignore:a harmless notice:UserWarning",
]
"""


@pytest.fixture
def pyproject(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT)
    return path


def test_the_filters_are_read_from_the_projects_pytest_configuration(pyproject):
    """filterwarnings is read in the order pytest applies it."""
    assert filters_of_the_tests(pyproject) == [
        "error",
        r"default:::quiet_library(\.|$)",
        "ignore:a harmless notice:UserWarning",
    ]


def test_a_warning_the_tests_raise_is_raised_and_one_they_ignore_is_not(pyproject):
    """Under the tests' filters an unnamed warning is an error, and one they ignore passes."""
    with as_the_tests_do(pyproject):
        warnings.warn("a harmless notice, again", UserWarning, stacklevel=1)
        with pytest.raises(UserWarning):
            warnings.warn("something else", UserWarning, stacklevel=1)


def test_no_configuration_leaves_the_filters_as_they_are(tmp_path):
    """A package installed without its pyproject.toml keeps the process's own filters."""
    assert filters_of_the_tests(tmp_path / "pyproject.toml") == []


def test_the_filter_offered_for_a_warning_lets_it_through():
    """The entry offered for a warning, added to filterwarnings, ignores that warning: its
    message up to what varies, as a regular expression."""
    raised = UserWarning("Dynamo detected a call to a `functools.lru_cache`-wrapped function at 'a.py:3'")
    entry = filter_for(raised)
    assert (
        entry == r"ignore:Dynamo detected a call to a `functools\.lru_cache`-wrapped function at:UserWarning"
    )
    action, message, _ = entry.split(":")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings(action, message, UserWarning)
        warnings.warn(str(raised), UserWarning, stacklevel=1)
