"""The targets of `nox -s mutation_score` stay real: cheap checks on what they name."""

from __future__ import annotations

import fnmatch
import json

import pytest
from conftest import CHOICES, TEMPLATE, package_of
from mutation_score import (
    PACKAGE,
    TARGETS,
    TOOLKIT,
    TOOLKIT_PROJECTS,
    first_copies,
    function_of,
    module_of,
    read_results,
    skip_copies_killed_elsewhere,
)

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
    (template,) = [target for target in TARGETS if target.answers is None and target is not TOOLKIT]
    for glob in template.mutate:
        assert list(TEMPLATE.glob(glob)), glob


def test_the_toolkit_target_mutates_every_toolkit_file_in_the_projects_it_tests(tmp_path):
    """Every module of the template's toolkit is mutated in some project of tests/toolkit."""
    from toolkit.projects import build_projects

    build_projects(tmp_path)
    (glob,) = TOOLKIT.mutate
    mutated = {path.name for path in tmp_path.glob(glob)}
    toolkit = TEMPLATE / "{{cookiecutter.project_slug}}" / "src" / "{{cookiecutter.package_name}}" / "toolkit"
    assert mutated == {path.name for path in toolkit.glob("*.py")}


def test_a_toolkit_mutant_counts_once_by_the_best_copy(tmp_path):
    """The same mutant in two projects' toolkits is one mutant, killed if either copy's tests kill it."""
    meta = tmp_path / "toolkit" / "mutants" / "src" / "bench.py.meta"
    meta.parent.mkdir(parents=True)
    codes = {
        "forward_project.toolkit.bench.x_run__mutmut_1": 0,
        "decode_project.toolkit.bench.x_run__mutmut_1": 1,
        "forward_project.toolkit.bench.x_run__mutmut_2": 33,
        "decode_project.toolkit.bench.x_run__mutmut_2": 0,
    }
    meta.write_text(json.dumps({"exit_code_by_key": codes}))
    results = read_results(tmp_path / "toolkit")
    assert sorted(results.values()) == [0, 1]
    assert {module_of(name) for name in results} == {"toolkit/bench.py"}


def test_a_mutant_is_named_by_its_file_and_function():
    """The table's module and the survivors' function: stable names, not mutmut's mangled ones."""
    method = f"{PACKAGE}.toolkit.export.xǁBundlerǁwhole__mutmut_3"
    assert (module_of(method), function_of(method)) == ("toolkit/export.py", "export.Bundler.whole")
    hook = "hooks.pre_gen_project.x_check_slug__mutmut_12"
    assert (module_of(hook), function_of(hook)) == ("hooks/pre_gen_project.py", "pre_gen_project.check_slug")


def test_a_toolkit_mutant_killed_in_one_copy_is_skipped_in_the_others(tmp_path):
    """An untested copy of a mutant killed in another project is left untested; one whose other
    copy survived, or that is new, is still tested."""
    meta = tmp_path / "mutants" / "src" / "bench.py.meta"
    meta.parent.mkdir(parents=True)
    codes = {
        "forward_project.toolkit.bench.x_run__mutmut_1": 1,
        "decode_project.toolkit.bench.x_run__mutmut_1": None,
        "forward_project.toolkit.bench.x_run__mutmut_2": 0,
        "decode_project.toolkit.bench.x_run__mutmut_2": None,
        "decode_project.toolkit.bench.x_run__mutmut_3": None,
    }
    meta.write_text(json.dumps({"exit_code_by_key": codes, "durations_by_key": {}}))
    skip_copies_killed_elsewhere(tmp_path)
    written = json.loads(meta.read_text())
    assert written["exit_code_by_key"] == {**codes, "decode_project.toolkit.bench.x_run__mutmut_1": 34}
    assert written["durations_by_key"] == {}


def test_a_fresh_toolkit_run_tests_each_module_in_its_first_project_first(tmp_path):
    """The first pass names each module once, in the first project of PROJECTS that holds it."""
    for project, modules in {
        "forward_project": ("bench", "report"),
        "decode_project": ("bench", "decode"),
    }.items():
        folder = tmp_path / TOOLKIT_PROJECTS / project / "toolkit"
        folder.mkdir(parents=True)
        for module in modules:
            (folder / f"{module}.py").touch()
    assert first_copies(tmp_path) == [
        "forward_project.toolkit.bench.*",
        "decode_project.toolkit.decode.*",
        "forward_project.toolkit.report.*",
    ]
