"""The targets of `nox -s mutation_score` stay real: cheap checks on what they name."""

from __future__ import annotations

import fnmatch
import shutil

import mutation_score
import pytest
from conftest import CHOICES, TEMPLATE, package_of
from mutation_score import (
    PACKAGE,
    SHARED_TOOLKIT,
    TARGETS,
    TOOLKIT,
    TOOLKIT_SOURCE,
    function_of,
    link_toolkits,
    module_of,
)
from mutation_tracing import shared_name
from toolkit.projects import PROJECTS, install

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


def test_every_projects_toolkit_module_is_a_link_to_the_shared_copy(tmp_path):
    """Each project of tests/toolkit gets every module of the template's toolkit as a link to the
    one copy mutmut mutates, so a mutant is one mutant whichever project's tests kill it."""
    projects = install(tmp_path, toolkit=None)
    shutil.copytree(TOOLKIT_SOURCE, projects / SHARED_TOOLKIT)
    link_toolkits(projects)
    modules = sorted(path.name for path in TOOLKIT_SOURCE.glob("*.py"))
    for name in PROJECTS:
        toolkit = projects / name / "toolkit"
        assert sorted(path.name for path in toolkit.iterdir()) == modules
        for module in modules:
            assert (toolkit / module).is_symlink()
            assert (toolkit / module).read_bytes() == (TOOLKIT_SOURCE / module).read_bytes()


def test_a_projects_toolkit_module_answers_to_the_shared_copys_name():
    """mutmut's trampolines in `<project>.toolkit.<module>` run the shared copy's mutants; no
    other module is renamed."""
    assert shared_name("decode_project.toolkit.report", "shared_toolkit") == "shared_toolkit.report"
    assert shared_name("decode_project.model", "shared_toolkit") == "decode_project.model"
    assert shared_name("decode_project.toolkit", "shared_toolkit") == "decode_project.toolkit"
    assert shared_name("hooks.answer_rules", "shared_toolkit") == "hooks.answer_rules"


def test_a_mutant_is_named_by_its_file_and_function():
    """The table's module and the survivors' function: stable names, not mutmut's mangled ones."""
    method = f"{PACKAGE}.toolkit.bundle.xǁBundlerǁwhole__mutmut_3"
    assert (module_of(method), function_of(method)) == ("toolkit/bundle.py", "bundle.Bundler.whole")
    shared = f"{SHARED_TOOLKIT}.report.x_first_call__mutmut_3"
    assert (module_of(shared), function_of(shared)) == ("toolkit/report.py", "report.first_call")
    hook = "hooks.answer_rules.x_check_slug__mutmut_12"
    assert (module_of(hook), function_of(hook)) == ("hooks/answer_rules.py", "answer_rules.check_slug")


def test_a_run_rewrites_only_the_rows_of_the_functions_it_tested(tmp_path, monkeypatch):
    """A survivor's row, verdict and all, stays until a run tests its function's mutants again:
    a run of one module keeps the other modules' rows."""
    monkeypatch.setattr(mutation_score, "SURVIVORS", tmp_path / "survivors.md")
    report = f"{SHARED_TOOLKIT}.report.x_first_call__mutmut_3"
    bench = f"{SHARED_TOOLKIT}.bench.x_run__mutmut_1"
    survivors = [("toolkit", module_of(name), name, "-a ⏎ +b") for name in (report, bench)]
    everything = {("toolkit", function_of(name)) for name in (report, bench)}
    assert mutation_score.write_survivors(survivors, everything) == 2
    marked = mutation_score.SURVIVORS.read_text().replace("| unexplained |", "| equivalent: why |")
    mutation_score.SURVIVORS.write_text(marked)

    assert mutation_score.write_survivors([], {("toolkit", function_of(report))}) == 0
    rows = [line for line in mutation_score.SURVIVORS.read_text().splitlines() if "toolkit |" in line]
    assert rows == ["| toolkit | bench.run | `` -a ⏎ +b `` | equivalent: why |"]


def test_a_function_is_tested_once_its_every_mutant_ran():
    """A run stopped midway tests a function only if it ran all of its mutants: the rows of the
    others stay. A function whose every mutant was skipped was not tested."""
    results = {
        f"{SHARED_TOOLKIT}.contract.x_whole__mutmut_1": 1,
        f"{SHARED_TOOLKIT}.contract.x_whole__mutmut_2": 0,
        f"{SHARED_TOOLKIT}.contract.x_half__mutmut_1": 1,
        f"{SHARED_TOOLKIT}.contract.x_half__mutmut_2": None,
        f"{SHARED_TOOLKIT}.contract.x_skipped__mutmut_1": 34,
    }
    assert mutation_score.fully_tested("toolkit", results) == {("toolkit", "contract.whole")}


def test_again_tests_only_the_mutants_not_killed_yet_of_the_modules_given(tmp_path, monkeypatch):
    """--again hands mutmut the mutants that survived or have not run, of the modules asked for,
    and no others."""
    survived, new, killed, other = (
        f"{SHARED_TOOLKIT}.{name}__mutmut_1" for name in ("check.x_a", "check.x_b", "check.x_c", "doctor.x_d")
    )
    results = {survived: 0, new: None, killed: 1, other: 0}
    monkeypatch.setattr(mutation_score, "read_results", lambda work: results)
    runs = []
    monkeypatch.setattr(mutation_score, "mutmut", lambda work, *arguments: runs.append(arguments))
    mutation_score.run_mutmut(TOOLKIT, tmp_path, 2, ["toolkit/check.py"], again=True)
    assert runs == [("run", "--max-children", "2", survived, new)]
