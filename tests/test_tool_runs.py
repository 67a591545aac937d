"""How the template's tests run every tool on a user's model (tests/tool_runs.py): the project's
suite first, then only the tools whose tests in it did not pass, for their own words."""

from __future__ import annotations

import ast
import json
import shutil

import pytest
from tool_runs import TOOL_TESTS, run_tools


def defined_tests(project, path: str) -> set[str]:
    """The test functions one generated test file defines."""
    tree = ast.parse((project / path).read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("workload", ["forward", "decode"])
def test_each_tools_tests_are_tests_of_the_generated_suite(baked, workload):
    """Every test TOOL_TESTS reads a tool's verdict from is defined in its workload's generated
    suite: a renamed test would make every run repeat that tool."""
    project = baked(workload=workload)
    tools = TOOL_TESTS if workload == "decode" else {k: v for k, v in TOOL_TESTS.items() if k != "generate"}
    missing = [
        node
        for tests in tools.values()
        for node in tests
        if node.partition("::")[2] not in defined_tests(project, node.partition("::")[0])
    ]
    assert missing == []


@pytest.mark.slow
@pytest.mark.full
def test_a_tool_whose_test_fails_is_run_for_its_own_words_and_only_it(baked, tmp_path):
    """With check's test made to fail, the suite fails, the other tools count as passed, and
    check alone runs again and says what it says (ready: exit 0)."""
    bake = baked()
    project = shutil.copytree(bake, tmp_path / bake.name)
    test_check = project / "tests" / "test_check.py"
    test_check.write_text(test_check.read_text() + "    assert False, 'planted'\n")

    ran = run_tools(project, suite_first=True)
    assert ran.suite_code == 1, ran.output[-3000:]
    assert ran.passed == {"mre", "bench", "doctor", "export"}
    assert list(ran.results) == ["check"]
    code, printed, told = ran.results["check"]
    assert (code, json.loads(printed)["verdict"]) == (0, 0), told
