"""The targets of `nox -s mutation_score` stay real: cheap checks on what they name."""

from __future__ import annotations

import fnmatch

import pytest
from conftest import CHOICES, TEMPLATE, package_of
from mutation_score import PACKAGE, TARGETS, function_of, module_of

BAKES = [target for target in TARGETS if target.answers is not None]


@pytest.mark.parametrize("target", BAKES, ids=[target.name for target in BAKES])
def test_each_bake_holds_the_files_it_mutates(baked, target):
    """A bake's answers are choices, and each of its globs names files of that bake's package."""
    for question, answer in target.answers.items():
        assert answer in CHOICES[question]
    project = baked(**target.answers)
    assert package_of(project) == PACKAGE
    package = project / "src" / PACKAGE
    files = [path.relative_to(package).as_posix() for path in package.rglob("*.py")]
    for glob in target.mutate:
        assert fnmatch.filter(files, glob), glob


def test_the_template_target_mutates_the_hooks():
    """The template's own target mutates files that exist: the hooks."""
    (template,) = [target for target in TARGETS if target.answers is None]
    for glob in template.mutate:
        assert list(TEMPLATE.glob(glob)), glob


def test_a_mutant_is_named_by_its_file_and_function():
    """The table's module and the survivors' function: stable names, not mutmut's mangled ones."""
    method = f"{PACKAGE}.toolkit.export.xǁBundlerǁwhole__mutmut_3"
    assert (module_of(method), function_of(method)) == ("toolkit/export.py", "export.Bundler.whole")
    hook = "hooks.pre_gen_project.x_check_slug__mutmut_12"
    assert (module_of(hook), function_of(hook)) == ("hooks/pre_gen_project.py", "pre_gen_project.check_slug")
