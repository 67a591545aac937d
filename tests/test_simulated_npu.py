"""Baked projects on simulated Ascend machines: stand-in torch_npu packages copied from the real one.

The stand-ins are data in tests/simulated_torch_npu/; each file cites the torch_npu source it
copies, so that a new torch_npu release can be checked against it.
- half_sourced: `import torch_npu` raises the bare Exception of a half-sourced CANN.
- healthy: imports, makes itself torch.npu, and reports one NPU named $SIMULATED_NPU_SOC; it also
  has the npugraph_ex module whose warning every frozen_parameter compile emits, a
  torch_npu.profiler that records how it is called and writes its output layout (profile's NPU
  path), the switches that send operators to aclop (torch.npu.set_compile_mode,
  torch.npu.config, read through torch_npu._C's options), and torch_npu.utils.get_cann_version()
  ($SIMULATED_CANN_VERSION).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import bake, package_of, run_in

STAND_INS = Path(__file__).resolve().parent / "simulated_torch_npu"
HALF_SOURCED = STAND_INS / "half_sourced"
HEALTHY = STAND_INS / "healthy"
# The tests that read one module-scoped run share an xdist group: the run is made once, on one
# worker, instead of once on each worker that gets one of its tests.


def run_tool(project: Path, tool: str, *arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the MRE (`python -m <package>.mre`) or a command (`python -m <package> doctor`) as its user would."""
    package = package_of(project)
    command = [f"{package}.mre"] if tool == "mre" else [package, tool]
    return run_in(project, "-m", *command, *arguments, **env)


def with_stand_in(project: Path, stand_in: Path) -> str:
    """A PYTHONPATH with the project's sources and a stand-in torch_npu "installed"."""
    return os.pathsep.join([str(project / "src"), str(stand_in)])


# A half-sourced CANN: (folders that exist in the CANN root, or None for no root at all; whether
# ASCEND_OPP_PATH is set to <root>/opp; what the reason says).
CANN_STATES = {
    "home-missing": (None, True, "ASCEND_HOME_PATH={root} does not exist"),
    "opp-unset": ((), False, "ASCEND_OPP_PATH is not set"),
    "opp-missing": ((), True, "ASCEND_OPP_PATH={root}/opp does not exist"),
    "no-runtime": (("opp", "compiler"), True, "ASCEND_HOME_PATH has no runtime/"),
    "no-compiler": (("opp", "runtime"), True, "ASCEND_HOME_PATH has no compiler/"),
}


# Every state in one process (one torch import): the stand-in is imported afresh for each.
CANN_BATCH = """\
import contextlib, io, json, os, sys
from {package}.model import example_inputs
from {package}.mre import infer_one_step
from {package}.toolkit import backend, doctor
from {package}.toolkit.report import report as reported

results = {{}}
for name, env in json.loads(sys.argv[1]).items():
    for variable in ("ASCEND_HOME_PATH", "ASCEND_OPP_PATH"):
        os.environ.pop(variable, None)
    os.environ.update(env)
    for module in [m for m in sys.modules if m.split(".")[0] == "torch_npu"]:
        del sys.modules[module]
    backend.npu_status.cache_clear()
    mre = io.StringIO()
    with contextlib.redirect_stdout(mre):
        reported(infer_one_step, example_inputs)
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        code = doctor.main(["--json"])
    results[name] = {{"mre": mre.getvalue(), "doctor": [code, report.getvalue()]}}
print("RESULTS " + json.dumps(results))
"""


@pytest.fixture(scope="module")
def half_sourced_runs(baked, tmp_path_factory) -> dict[str, tuple[str, str, int, dict]]:
    """For each half-sourced CANN state: what its reason must say, the MRE's report, the doctor's
    exit code and JSON report, from one process that runs them all."""
    states, expected = {}, {}
    for name, (folders, opp_set, state) in CANN_STATES.items():
        root = tmp_path_factory.mktemp(name) / "Ascend" / "cann"
        for folder in folders or ():
            (root / folder).mkdir(parents=True)
        if folders is not None:
            root.mkdir(parents=True, exist_ok=True)
        states[name] = {"ASCEND_HOME_PATH": str(root)}
        if opp_set:
            states[name]["ASCEND_OPP_PATH"] = str(root / "opp")
        expected[name] = state.format(root=root)
    project = baked()
    script = CANN_BATCH.format(package=package_of(project))
    result = run_in(
        project, "-c", script, json.dumps(states), PYTHONPATH=with_stand_in(project, HALF_SOURCED)
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULTS ")]
    runs = json.loads(line.removeprefix("RESULTS "))
    return {
        name: (expected[name], run["mre"], run["doctor"][0], json.loads(run["doctor"][1]))
        for name, run in runs.items()
    }


@pytest.mark.xdist_group("half_sourced_runs")
@pytest.mark.parametrize("state", CANN_STATES)
def test_half_sourced_cann_mre_falls_back_with_the_reason(half_sourced_runs, state):
    """The MRE runs on the stand-in and its reason names the CANN variable and the fix."""
    reason, report, _, _ = half_sourced_runs[state]
    (backend_line,) = (line for line in report.splitlines() if line.startswith("backend"))
    assert "aot_eager" in backend_line
    assert f"CANN is half-sourced: {reason}" in backend_line
    assert "set_env.sh" in backend_line


@pytest.mark.xdist_group("half_sourced_runs")
@pytest.mark.parametrize("state", CANN_STATES)
def test_half_sourced_cann_doctor_fails_with_the_fix(half_sourced_runs, state):
    """The doctor's torch_npu check FAILs naming the CANN state, with a fix; exit 1."""
    reason, _, code, report = half_sourced_runs[state]
    assert (code, report["verdict"]) == (1, 1)
    (check,) = (check for check in report["checks"] if check["name"] == "torch_npu")
    assert check["status"] == "FAIL"
    assert f"CANN is half-sourced: {reason}" in check["detail"]
    assert "set_env.sh" in check["fix"]


# SoC names as torch.npu.get_device_name(0) returns them (torch_npu's NpuVariables.cpp).
CAPTURING_SOCS = [
    "Ascend910B1", "Ascend910B2", "Ascend910B2C", "Ascend910B3", "Ascend910B4", "Ascend910B4-1",
    "Ascend910_9391", "Ascend910_9392", "Ascend910_9381", "Ascend910_9382", "Ascend910_9372",
    "Ascend910_9362", "Ascend950PR_9599", "Ascend910_9579",
]  # fmt: skip
REFUSED_SOCS = [
    "Ascend910A", "Ascend910ProA", "Ascend910PremiumA", "Ascend910ProB", "Ascend910B",
    "Ascend310P1", "Ascend310P3", "Ascend310P5", "Ascend310P7", "Ascend310B1", "Ascend310B4",
    "Ascend910B9", "SomeFutureSoC",
]  # fmt: skip

# One process for every name: swap the stand-in's SoC, forget the cached probe, choose again.
SOC_VERDICTS = """\
import json, sys
from {package}.toolkit import backend
import torch_npu.npu
verdicts = {{}}
for soc in sys.argv[1:]:
    torch_npu.npu.SOC = soc
    backend.npu_status.cache_clear()
    chosen = backend.select_backend()
    verdicts[soc] = [chosen.name, chosen.device, chosen.reason]
print(json.dumps(verdicts))
"""


@pytest.fixture(scope="module")
def soc_verdicts(baked) -> dict[str, list[str]]:
    """select_backend()'s (name, device, reason) on a healthy torch_npu, for each SoC name."""
    project = baked()
    script = SOC_VERDICTS.format(package=package_of(project))
    names = [*CAPTURING_SOCS, *REFUSED_SOCS]
    result = run_in(project, "-c", script, *names, PYTHONPATH=with_stand_in(project, HEALTHY))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.xdist_group("soc_verdicts")
@pytest.mark.parametrize("soc", CAPTURING_SOCS)
def test_capturing_soc_chooses_npugraph_ex(soc_verdicts, soc):
    """Atlas A2 (Ascend910B1..B4 and variants), A3 and Ascend 950 get npugraph_ex on the NPU."""
    name, device, reason = soc_verdicts[soc]
    assert (name, device) == ("npugraph_ex", "npu")
    assert soc in reason


@pytest.mark.xdist_group("soc_verdicts")
@pytest.mark.parametrize("soc", REFUSED_SOCS)
def test_other_soc_falls_back_naming_it(soc_verdicts, soc):
    """First-generation 910 (exact Ascend910B too), 310P, 310B and unknown SoCs get the stand-in."""
    name, device, reason = soc_verdicts[soc]
    assert (name, device) == ("aot_eager", "cpu")
    assert re.search(rf"\({soc}\b", reason), reason


def test_refused_soc_mre_runs_on_cpu(baked):
    """On an Ascend910B (first generation) the MRE runs the stand-in on the CPU and says why."""
    project = baked()
    env = {"PYTHONPATH": with_stand_in(project, HEALTHY), "SIMULATED_NPU_SOC": "Ascend910B"}
    result = run_tool(project, "mre", **env)
    assert result.returncode == 0, result.stderr
    assert "Ascend910B cannot capture aclgraphs" in result.stdout
    assert re.search(r"^input .* on cpu$", result.stdout, re.MULTILINE)


def test_capturing_soc_doctor_chooses_graph_mode_with_the_aclop_hint(baked):
    """On an Ascend910B2C every line of the doctor on this machine passes, it chooses npugraph_ex,
    and its npu line carries torch_npu's aclop advice. Only its model line fails: the doctor runs
    the model where the MRE would, on the NPU, and the stand-in's NPU runs nothing."""
    project = baked()
    env = {"PYTHONPATH": with_stand_in(project, HEALTHY), "SIMULATED_NPU_SOC": "Ascend910B2C"}
    result = run_tool(project, "doctor", "--json", **env)
    report = json.loads(result.stdout)
    machine = {check["name"]: check["status"] for check in report["checks"]}
    assert machine.pop("model") == "FAIL"
    assert "FAIL" not in machine.values(), result.stdout
    assert machine["mre-backend"] == "OK"
    assert (result.returncode, report["summary"]) == (2, "the MRE cannot run here: fix model first")
    (check,) = (check for check in report["checks"] if check["name"] == "npu")
    assert check["status"] == "OK"
    assert "allow_internal_format = False" in check["detail"]


# One process on the healthy stand-in: the switches that send operators to aclop, as the NPU
# starts, after each is turned on with torch_npu's own calls, and on a SoC npugraph_ex does not
# run on; each seen by the preflight (aclop_switches(), as switch codes) and by the doctor.
ACLOP_SWITCHES_RUN = """\
import json
from {package}.toolkit import backend, doctor

def seen():
    on = backend.aclop_switches()
    return {{
        "preflight": [s.code for s in backend.ACLOP_SWITCHES if (s.on, s.fix) in on],
        "doctor": {{check.name: check.status for check in doctor.check_aclop_switches()}},
    }}

results = {{"as the NPU starts": seen(), "versions": backend.npu_versions()}}
import torch
torch.npu.set_compile_mode(jit_compile=True)
results["jit_compile=True"] = seen()
torch.npu.set_compile_mode(jit_compile=False)
torch.npu.config.allow_internal_format = True
results["allow_internal_format = True"] = seen()
import torch_npu.npu
torch_npu.npu.SOC = "Ascend310P3"
backend.npu_status.cache_clear()
results["on a 310P"] = seen()
print("RESULTS " + json.dumps(results))
"""


@pytest.fixture(scope="module")
def aclop_switch_runs(baked) -> dict:
    """What the preflight and the doctor see of the aclop switches in each state of one run."""
    project = baked()
    script = ACLOP_SWITCHES_RUN.format(package=package_of(project))
    env = {"PYTHONPATH": with_stand_in(project, HEALTHY), "SIMULATED_CANN_VERSION": "9.1.0"}
    result = run_in(project, "-c", script, **env)
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULTS ")]
    return json.loads(line.removeprefix("RESULTS "))


SWITCH_STATES = {
    "as the NPU starts": [],
    "jit_compile=True": ["jit-compile"],
    "allow_internal_format = True": ["internal-format"],
}


@pytest.mark.xdist_group("aclop_switch_runs")
@pytest.mark.parametrize("state", SWITCH_STATES)
def test_the_preflight_and_the_doctor_see_each_aclop_switch_turned_on(aclop_switch_runs, state):
    """On an Atlas A2, the switches as the NPU starts are off; each turned on with torch_npu's
    own call (torch.npu.set_compile_mode, torch.npu.config.allow_internal_format) is reported by
    the preflight and FAILs the doctor's line of that code, the other line OK."""
    seen = aclop_switch_runs[state]
    assert seen["preflight"] == SWITCH_STATES[state]
    failed = [name for name, status in seen["doctor"].items() if status == "FAIL"]
    assert failed == SWITCH_STATES[state]
    assert set(seen["doctor"]) == {"jit-compile", "internal-format"}


@pytest.mark.xdist_group("aclop_switch_runs")
def test_where_npugraph_ex_does_not_run_no_aclop_switch_is_reported(aclop_switch_runs):
    """On a 310P, torch_npu loaded and internal formats still on: the preflight reports nothing,
    and the doctor's lines are OK (they could not run)."""
    seen = aclop_switch_runs["on a 310P"]
    assert seen == {"preflight": [], "doctor": {"jit-compile": "OK", "internal-format": "OK"}}


@pytest.mark.xdist_group("aclop_switch_runs")
def test_the_cache_key_reads_torch_npu_s_and_cann_s_releases(aclop_switch_runs):
    """The compile cache's key reads the releases from torch_npu itself: its __version__, and
    torch_npu.utils.get_cann_version()."""
    assert aclop_switch_runs["versions"] == "torch_npu 2.13.0, CANN 9.1.0"


FROZEN_PARAMETER_WARNING = "When enable frozen_parameter, Parameters and input tensors"
# Dropped into a baked project: the same warning text, once from npugraph_ex's module (the
# stand-in's copy) and once from the project's own code, each inside a compile as on an NPU.
WARNING_TESTS = f'''\
"""One warning from npugraph_ex and one from this project, each raised inside a compile."""

import warnings

import torch
from torch._dynamo.backends.registry import lookup_backend
from torch_npu.dynamo.npugraph_ex._acl_concrete_graph import fx2acl_converter


def compile_and_run(warn):
    def backend(graph, example_inputs):
        warn()
        return lookup_backend("aot_eager")(graph, example_inputs)

    torch._dynamo.reset()
    compiled = torch.compile(lambda x: x.sin() + 1, backend=backend, fullgraph=True, dynamic=False)
    return compiled(torch.ones(3))


def test_upstream_warning():
    compile_and_run(lambda: fx2acl_converter.normalize_config({{"frozen_parameter": True}}))


def test_project_warning():
    compile_and_run(lambda: warnings.warn("{FROZEN_PARAMETER_WARNING} ...", stacklevel=1))
'''


@pytest.fixture(scope="module")
def warning_run(tmp_path_factory) -> str:
    """The baked project's pytest (its own config) run on WARNING_TESTS: its verbose output."""
    project = bake(tmp_path_factory.mktemp("warnings"))  # its own bake: a file is added to it
    (project / "tests" / "test_simulated_warnings.py").write_text(WARNING_TESTS)
    # A 310P: torch_npu and npugraph_ex import, but the suite's MRE falls back to the CPU.
    env = {"PYTHONPATH": with_stand_in(project, HEALTHY), "SIMULATED_NPU_SOC": "Ascend310P3"}
    command = ["-m", "pytest", "-v", "-p", "no:cacheprovider", "tests/test_simulated_warnings.py"]
    result = run_in(project, *command, **env)
    assert result.returncode in {0, 1}, result.stdout + result.stderr  # tests ran, none crashed
    return result.stdout


@pytest.mark.xdist_group("warning_run")
def test_npugraph_ex_warning_inside_a_compile_passes_and_is_shown(warning_run):
    """The frozen_parameter warning from npugraph_ex's module passes, shown in the summary."""
    assert re.search(r"::test_upstream_warning PASSED", warning_run), warning_run
    summary = warning_run.split("warnings summary")[1]
    assert "fx2acl_converter.py" in summary
    assert FROZEN_PARAMETER_WARNING in summary


@pytest.mark.xdist_group("warning_run")
def test_project_warning_inside_a_compile_still_fails(warning_run):
    """The same text warned from the project's own code is an error: the compile fails."""
    assert re.search(r"::test_project_warning FAILED", warning_run), warning_run
    assert "BackendCompilerFailed" in warning_run


# The profile tool's NPU path, on the stand-in torch_npu.profiler: the model runs on the CPU (the
# stand-in cannot run one on an NPU), through profile_steps() with the NPU tracer.
PROFILE_STEPS = 2
PROFILE_NPU = """\
import json, sys
from pathlib import Path
import torch
import torch_npu
from {package}.toolkit import profile
from {package}.toolkit.backend import Backend

with torch.no_grad():
    job = profile.workload(Backend("aot_eager", "cpu", "the stand-in torch_npu runs nothing on an NPU"))
    for step in job.steps.values():
        step()
    trace = profile.profile_steps(profile.NPU_TRACER, job.steps, {steps}, Path(sys.argv[1]))
summary = profile.summarize_trace(trace)
print("RESULT " + json.dumps({{"trace": str(trace), "calls": torch_npu.profiler.CALLS, "summary": summary}}))
"""


@pytest.fixture(scope="module")
def npu_profile(baked, tmp_path_factory) -> tuple[Path, dict]:
    """The output folder, and the trace path, stand-in calls and summary of one NPU-path profile."""
    project = baked()
    out = tmp_path_factory.mktemp("npu_profile") / "prof"
    script = PROFILE_NPU.format(package=package_of(project), steps=PROFILE_STEPS)
    result = run_in(project, "-c", script, str(out), PYTHONPATH=with_stand_in(project, HEALTHY))
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    return out, json.loads(line.removeprefix("RESULT "))


@pytest.mark.xdist_group("npu_profile")
def test_npu_profile_passes_the_guide_keywords(npu_profile):
    """torch_npu.profiler.profile gets CPU and NPU activities, a schedule, a trace handler and a
    Level0 text-export _ExperimentalConfig, as Ascend's profiler guide uses it."""
    _, run = npu_profile
    (call,) = (call for call in run["calls"] if call["call"] == "profile")
    assert call["keywords"] == ["activities", "experimental_config", "on_trace_ready", "schedule"]
    assert call["activities"] == ["CPU", "NPU"]
    assert call["experimental_config"]["profiler_level"] == "Level0"
    assert call["experimental_config"]["export_type"] == "text"


@pytest.mark.xdist_group("npu_profile")
def test_npu_profile_schedule_covers_every_step_after_one_warm_up(npu_profile):
    """The schedule waits for nothing, warms up one step, records both modes' steps, once."""
    _, run = npu_profile
    (call,) = (call for call in run["calls"] if call["call"] == "schedule")
    assert (call["wait"], call["warmup"], call["skip_first"]) == (0, 1, 0)
    assert (call["active"], call["repeat"]) == (2 * PROFILE_STEPS, 1)


@pytest.mark.xdist_group("npu_profile")
def test_npu_profile_steps_the_profiler_after_every_step(npu_profile):
    """start, one prof.step() per step (the warm-up and each mode's), the trace handed over on the
    last, then stop."""
    _, run = npu_profile
    order = [
        call["call"] for call in run["calls"] if call["call"] in {"start", "step", "stop", "on_trace_ready"}
    ]
    steps = 1 + 2 * PROFILE_STEPS
    assert order == ["start"] + ["step"] * steps + ["on_trace_ready", "stop"]


@pytest.mark.xdist_group("npu_profile")
def test_npu_profile_writes_into_the_output_folder(npu_profile):
    """The handler gets the output folder as a str (torch_npu resets anything else to the working
    directory), and the trace read is that profile's ASCEND_PROFILER_OUTPUT/trace_view.json."""
    out, run = npu_profile
    (handler,) = (call for call in run["calls"] if call["call"] == "tensorboard_trace_handler")
    assert handler["dir_name"] == str(out)
    (ready,) = (call for call in run["calls"] if call["call"] == "on_trace_ready")
    assert Path(ready["folder"]).parent == out
    assert Path(run["trace"]) == Path(ready["folder"]) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"


@pytest.mark.xdist_group("npu_profile")
def test_npu_profile_summary_reads_the_kernels_of_each_mode(npu_profile):
    """The summary counts each mode's steps from trace_view.json and its kernels from
    kernel_details.csv."""
    _, run = npu_profile
    for mode in ("eager", "graph"):
        figures = run["summary"][mode]
        assert figures["steps"] == PROFILE_STEPS
        assert figures["kernels"] > 0
        assert figures["device_ms"] > 0
