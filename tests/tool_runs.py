"""Every tool on a baked project's model, in one process: one import of torch and of the model's
libraries for the MRE, `check`, `bench`, the doctor, `export` (and `generate`, `profile`, ...),
and the project's own test suite, as a user runs them after replacing model.py.

The suite runs each of those tools on the model and asserts the verdict a user wants from it
(TOOL_TESTS), so `suite_first` runs it alone and then only the tools whose tests did not pass:
their own words say why, and a model every tool passes costs one run of each, not two."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import package_of, run_in

# Each tool's exit code, stdout and stderr. A tool that raises is recorded, not fatal: its exit
# code is None and its stderr holds the traceback, so that the tools after it still run.
PROGRAM = """\
import contextlib, io, json, runpy, sys, time, traceback, pytest, torch
{before}
from {package}.__main__ import main

results, seconds = {{}}, {{}}


def run(name, call):
    torch._dynamo.reset()
    printed, told = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
        try:
            code = call()
        except Exception:
            code = None
            traceback.print_exc()
    results[name] = [code, printed.getvalue(), told.getvalue()]
    seconds[name] = time.perf_counter() - started


def mre():
    runpy.run_module("{package}.mre", run_name="__main__")["infer_one_step"]()
    return 0


def tools(chosen):
    if "mre" in chosen:
        run("mre", mre)
    commands = {{
        **{extra},
        "check": ["check", "--json"],
        "bench": ["bench", "--iters", "3", "--warmup", "1", "--json"],
        "doctor": ["doctor", *{doctor}],
        # Off an NPU, the npu target proves its file by running its portable rendering, the file
        # `--target portable` writes: that target, run too, would run the same text once more.
        "export": ["export", "-o", "exported_npu.py", "--target", "npu"],
    }}
    for name, command in commands.items():
        if name in chosen:
            run(name, lambda: main(command))
    print("RESULTS " + json.dumps(results))


class Outcomes:  # the tests whose every phase passed
    def __init__(self):
        self.passed, self.spoiled = set(), set()

    def pytest_runtest_logreport(self, report):
        if report.passed and report.when == "call":
            self.passed.add(report.nodeid)
        elif not report.passed:
            self.spoiled.add(report.nodeid)


def suite():
    outcomes = Outcomes()
    started = time.perf_counter()
    code = pytest.main(["-q", "-p", "no:cacheprovider"], plugins=[outcomes])
    seconds["suite"] = time.perf_counter() - started
    passed = outcomes.passed - outcomes.spoiled
    return code, [name for name, tests in {tool_tests}.items() if set(tests) <= passed]


chosen = ["mre", *{extra}, "check", "bench", "doctor", "export"]
if {suite_first}:
    code, passed = suite()
    print("PASSED " + json.dumps(passed))
    tools([name for name in chosen if name not in passed])
else:
    tools(chosen)
    code = suite()[0] if {suite} else 0
print("SECONDS " + json.dumps(seconds))
sys.exit(code)
"""

# The tests of the generated suite that run each tool on the model and assert the verdict a user
# wants from it (tests/test_tool_runs.py keeps these names those of the generated tests).
TOOL_TESTS = {
    "mre": (
        "tests/test_mre.py::test_mre_runs_in_graph_mode",
        "tests/test_mre.py::test_mre_output_equals_eager",
        "tests/test_mre.py::test_mre_report_names_backend_reason_inputs_and_output",
        "tests/test_graph.py::test_mre_compiles_the_model_as_one_graph",
    ),
    "check": ("tests/test_check.py::test_the_model_is_ready",),
    "bench": ("tests/test_bench.py::test_bench_times_your_model_and_graph_mode_matches_eager",),
    "doctor": ("tests/test_doctor.py::test_the_doctor_finds_nothing_wrong_with_your_model",),
    "export": ("tests/test_export.py::test_export_runs_your_mre_as_one_file",),
    "generate": (
        "tests/test_generate.py::test_generate_on_your_model_exits_0_graph_mode_choosing_eagers_tokens",
    ),
}


class ToolRun:
    """What one run of the program said: each tool's outcome, the suite's, and the time each took."""

    def __init__(self, ran) -> None:
        def line(prefix: str) -> dict | list:
            """The program's own line, printed after the suite's output (the last such line)."""
            found = [text for text in ran.stdout.splitlines() if text.startswith(prefix)]
            return json.loads(found[-1].removeprefix(prefix)) if found else {}

        self.results: dict[str, tuple[int | None, str, str]] = {
            name: tuple(outcome) for name, outcome in line("RESULTS ").items()
        }
        self.passed: set[str] = set(line("PASSED ") or ())
        """The tools whose tests in the suite passed (suite_first): each is run, and in results,
        only if its tests did not pass."""
        self.seconds: dict[str, float] = line("SECONDS ")
        self.suite_code: int = ran.returncode
        self.output: str = ran.stdout + ran.stderr
        """Everything the process printed: the suite's report, or why the program died."""


def run_tools(
    project: Path,
    before: str = "",
    extra: dict[str, list[str]] | None = None,
    suite: bool = True,
    suite_first: bool = False,
    **answers: str,
) -> ToolRun:
    """Run the MRE and each tool on `project`'s model (after the code `before`, in the same
    process; the `extra` commands first), then, if `suite`, the project's own tests; or, if
    `suite_first`, the tests, then the tools whose tests in it did not pass."""
    doctor = ["--nproc-per-node", "2"] if answers.get("parallel") == "tensor_parallel" else []
    program = PROGRAM.format(
        package=package_of(project),
        doctor=doctor,
        before=before,
        extra=json.dumps(extra or {}),
        suite=suite,
        suite_first=suite_first,
        tool_tests=json.dumps(TOOL_TESTS),
    )
    return ToolRun(run_in(project, "-c", program))


def assert_runs_here(results: dict[str, tuple[int | None, str, str]]) -> None:
    """The MRE, check, bench and the doctor: one graph, ready, same output, no FAIL."""
    assert "backend     aot_eager" in results["mre"][1], results["mre"][2]
    assert "1 graph" in results["mre"][1]
    check_code, check_json, _ = results["check"]
    assert check_code == 0, check_json
    assert json.loads(check_json)["verdict"] == 0
    bench_code, bench_json, _ = results["bench"]
    assert bench_code == 0
    assert json.loads(bench_json)["outputs_match"] is True
    doctor_code, doctor_report, _ = results["doctor"]
    assert doctor_code == 1, doctor_report  # off an NPU graph mode falls back, nothing fails
    assert not re.search(r"^FAIL", doctor_report, re.MULTILINE), doctor_report
