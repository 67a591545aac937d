"""Every tool on a baked project's model, in one process: one import of torch and of the model's
libraries for the MRE, `check`, `bench`, the doctor, `export` (and `generate`, `profile`, ...),
then the project's own test suite, as a user runs them after replacing model.py."""

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
    run(name, lambda: main(command))
print("RESULTS " + json.dumps(results))
if {suite}:
    started = time.perf_counter()
    code = pytest.main(["-q", "-p", "no:cacheprovider"])
    seconds["suite"] = time.perf_counter() - started
else:
    code = 0
print("SECONDS " + json.dumps(seconds))
sys.exit(code)
"""


class ToolRun:
    """What one run of the program said: each tool's outcome, the suite's, and the time each took."""

    def __init__(self, ran) -> None:
        def line(prefix: str) -> dict:
            found = [text for text in ran.stdout.splitlines() if text.startswith(prefix)]
            return json.loads(found[0].removeprefix(prefix)) if found else {}

        self.results: dict[str, tuple[int | None, str, str]] = {
            name: tuple(outcome) for name, outcome in line("RESULTS ").items()
        }
        self.seconds: dict[str, float] = line("SECONDS ")
        self.suite_code: int = ran.returncode
        self.output: str = ran.stdout + ran.stderr
        """Everything the process printed: the suite's report, or why the program died."""


def run_tools(
    project: Path,
    before: str = "",
    extra: dict[str, list[str]] | None = None,
    suite: bool = True,
    **answers: str,
) -> ToolRun:
    """Run the MRE and each tool on `project`'s model (after the code `before`, in the same
    process; the `extra` commands first), then, if `suite`, the project's own tests."""
    doctor = ["--nproc-per-node", "2"] if answers.get("parallel") == "tensor_parallel" else []
    program = PROGRAM.format(
        package=package_of(project),
        doctor=doctor,
        before=before,
        extra=json.dumps(extra or {}),
        suite=suite,
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
