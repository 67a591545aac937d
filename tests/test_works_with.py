"""The generated README's "Models it works with" table: each model still gives the verdicts the
last run recorded (full tier), and the table is that run's, never edited by hand."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from tool_runs import ToolRun
from works_with import (
    CASES,
    COMMAND,
    NOT_RUN,
    PASSES,
    README,
    RESULTS,
    TOOLS,
    readme_table,
    recorded,
    render,
    run_case,
    verdicts,
)

WRITE_AGAIN = f"`{COMMAND}` runs every model and writes {RESULTS.name} and the README's table anew"


@pytest.mark.slow
@pytest.mark.full
@pytest.mark.parametrize("name", CASES)
def test_each_model_gives_the_verdicts_recorded(name, baked, tmp_path):
    """The model, dropped into a copy of its workload's bake as model.py, gets from each tool
    the verdict tests/works_with.json records; on the README's worked example and the models the
    template always ran, every tool passes (one graph, eager's output and tokens, the suite)."""
    case = CASES[name]
    bake = baked(workload=case.workload)
    project = shutil.copytree(bake, tmp_path / bake.name)

    found, run = run_case(case, project)
    if case.must_pass:
        failing = {tool: verdict for tool, verdict in found.items() if verdict not in (PASSES, NOT_RUN)}
        assert not failing, f"{name}: {failing}\n{run.output[-6000:]}"
    before = recorded()["models"].get(name, {})
    changed = [
        f"{name}, {TOOLS[tool]}: recorded {before.get(tool, 'nothing')!r}, now {verdict!r}"
        for tool, verdict in found.items()
        if before.get(tool) != verdict
    ]
    if changed:
        pytest.fail("\n".join([*changed, f"if that is right, {WRITE_AGAIN}"]), pytrace=False)


def test_a_tool_whose_test_did_not_pass_is_judged_in_its_own_words():
    """Where the suite's test of a tool passed, its cell says ok; where it did not, the tool ran
    again and its cell is the tool's own first line; the suite's cell names the failing test."""
    check = {
        "verdict": 1,
        "summary": "not ready",
        "findings": [{"severity": "problem", "what": "graph break", "reason": "print() at model.py:12"}],
    }
    printed = [
        "FAILED tests/test_check.py::test_the_model_is_ready - check exits 1 on your model:",
        "PASSED " + json.dumps(["mre", "bench", "doctor", "export"]),
        "RESULTS " + json.dumps({"check": [1, json.dumps(check), ""]}),
    ]
    run = ToolRun(subprocess.CompletedProcess([], 1, "\n".join(printed) + "\n", ""))
    assert verdicts(run, "forward") == {
        "mre": PASSES,
        "check": "fails: graph break: print() at model.py:12",
        "bench": PASSES,
        "doctor": PASSES,
        "export": PASSES,
        "generate": NOT_RUN,
        "suite": "fails: test_the_model_is_ready: check exits 1 on your model:",
    }


def test_a_run_that_died_before_a_tool_fails_that_tool_in_its_last_words():
    """A process that died (here after the suite passed the MRE's tests) leaves every tool it
    never reached failing with the last thing it said, not a KeyError."""
    printed = "PASSED " + json.dumps(["mre"]) + "\n"
    run = ToolRun(subprocess.CompletedProcess([], -11, printed, "Fatal Python error: Segmentation fault\n"))
    died = "fails: Fatal Python error: Segmentation fault"
    assert verdicts(run, "decode") == {
        "mre": PASSES,
        **dict.fromkeys(("check", "bench", "doctor", "export", "generate", "suite"), died),
    }


def test_every_model_has_a_verdict_for_every_tool():
    """The results file holds a verdict of each tool for each model of the cases, and no other."""
    models = recorded()["models"]
    assert {name: sorted(row) for name, row in models.items()} == {name: sorted(TOOLS) for name in CASES}, (
        WRITE_AGAIN
    )


def test_the_readme_table_is_the_last_runs():
    """The template README's table is what tests/works_with.json renders to, character for character."""
    assert readme_table(README.read_text()) == render(recorded()), WRITE_AGAIN


@pytest.mark.parametrize("workload", ["forward", "decode"])
def test_the_generated_readme_shows_the_table(baked, workload):
    """Every generated README holds the table as written, under its heading."""
    readme = (baked(workload=workload) / "README.md").read_text()
    section = readme[readme.index("\n### Models it works with\n") :]
    assert render(recorded()) in section
