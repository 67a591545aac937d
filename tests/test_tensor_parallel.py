"""parallel=tensor_parallel: the MRE runs under torchrun as a user launches it, and fails cleanly."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import TP_VARIANTS, again_if_torch_crashed, package_of, run_in, variant_id

# torchrun as a user launches it: the full tier (the default tier's tensor-parallel variants run
# two ranks in their own suites).
pytestmark = pytest.mark.full

# A hung collective must fail its test, not the whole CI job: two CPU ranks take about 15 s.
TIMEOUT = 600
FAILING_RANK = """

_build_model = build_model


def build_model():
    if os.environ.get("RANK") == "1":
        raise RuntimeError("rank 1 cannot build its model")
    return _build_model()
"""


# Linear, GELU, Linear: its output is the row-parallel layer's own, which an eager call hands back
# with the all-reduce still in flight (the sample adds a residual to it, which waits for it).
ROW_PARALLEL_OUTPUT = """

def build_model():
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))


def parallel_plan(world_size):
    return {"0": ColwiseParallel(), "2": RowwiseParallel()}
"""
UNWAITED = "unwaited collective calls"
"""torch's warning at a rank's exit (ProcessGroup.cpp) for a collective nobody waited for."""


BANNER = ("*****", "Setting OMP_NUM_THREADS")
"""torchrun's notice before any rank starts, when OMP_NUM_THREADS is unset: not an error."""


def swap_styles(model: Path) -> None:
    """The sample's plan with ColwiseParallel and RowwiseParallel swapped: every rank fails."""
    text = model.read_text()
    head, plan = text.split("    return {\n", 1)
    swapped = plan.replace("ColwiseParallel()", "Swap").replace("RowwiseParallel()", "ColwiseParallel()")
    model.write_text(head + "    return {\n" + swapped.replace("Swap", "RowwiseParallel()"))


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith(BANNER)]


def torchrun(project: Path, ranks: int, module: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`torchrun --standalone --nproc-per-node <ranks> -m <module> <arguments>` in the project."""
    launch = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    return again_if_torch_crashed(lambda: run_in(project, *launch, "-m", module, *arguments, timeout=TIMEOUT))


def one_line(report: str, row: str) -> list[str]:
    return [line for line in report.splitlines() if line.startswith(f"{row:<11} ")]


# One rank (torchrun's rendezvous with a world of one) in each mode without a custom op, two with
# one. Each variant's own suite also runs two ranks, its export and its bench under torchrun.
RUNS = [
    pytest.param(answers, ranks, id=f"{variant_id(answers)}-{ranks}", marks=pytest.mark.slow)
    for answers in TP_VARIANTS
    for ranks in ((1,) if answers["custom_op"] == "none" else (2,))
]


@pytest.mark.parametrize(("answers", "ranks"), RUNS)
def test_mre_runs_under_torchrun(baked, answers, ranks):
    """Every rank runs the MRE; rank 0 alone reports, naming the world size and gloo."""
    result = torchrun(baked(**answers), ranks, f"{package_of(baked(**answers))}.mre")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(one_line(result.stdout, "backend")) == 1
    (row,) = one_line(result.stdout, "ranks")
    assert row.startswith(f"ranks       {ranks} (gloo), slowest first call ")
    assert row.endswith("1 graph on each rank")


@pytest.mark.slow
def test_a_failing_rank_stops_the_job_with_its_error(baked, tmp_path):
    """When one rank raises, torchrun stops the others (no hang) and shows that rank's error."""
    project = tmp_path / "project"
    shutil.copytree(baked(**TP_VARIANTS[0]), project)
    model = project / "src" / package_of(project) / "model.py"
    model.write_text("import os\n" + model.read_text() + FAILING_RANK)
    result = torchrun(project, 2, f"{package_of(project)}.mre")
    assert result.returncode != 0
    assert error_lines(result.stderr)[0] == "[rank1]: RuntimeError: rank 1 cannot build its model"
    assert result.stderr.count("rank 1 cannot build its model") == 1, result.stderr
    # torchrun's summary names the first rank that failed, from the error file it recorded.
    assert "rank      : 1" in result.stderr
    assert "To enable traceback" not in result.stderr  # the rank recorded its error for torchrun


@pytest.mark.slow
def test_bench_leaves_no_collective_unwaited(baked, tmp_path):
    """bench on two ranks of a model whose output is a row-parallel layer's own exits 0, and no
    rank warns at exit of a collective left unwaited."""
    project = tmp_path / "project"
    shutil.copytree(baked(**TP_VARIANTS[0]), project)
    model = project / "src" / package_of(project) / "model.py"
    model.write_text(model.read_text() + ROW_PARALLEL_OUTPUT)
    result = torchrun(project, 2, package_of(project), "bench", "--iters", "3", "--warmup", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    (row,) = one_line(result.stdout, "ranks")
    assert row.startswith("ranks       2 (gloo), ")
    # Each rank writes to torchrun's own stdout and stderr.
    assert UNWAITED not in result.stdout + result.stderr, result.stderr[-3000:]


@pytest.mark.slow
def test_a_plan_that_shards_no_cache_passes_the_projects_two_rank_tests(baked, tmp_path):
    """A decode plan that shards nothing, the README's for a StaticCache, passes the project's
    two-rank state tests: each rank's state equals one device's, and the test of each rank's
    share of the cache skips, saying why."""
    project = tmp_path / "project"
    shutil.copytree(baked(workload="decode", parallel="tensor_parallel"), project)
    model = project / "src" / package_of(project) / "model.py"
    model.write_text(model.read_text() + "\n\ndef parallel_plan(world_size: int) -> dict:\n    return {}\n")
    suite = again_if_torch_crashed(
        lambda: run_in(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "-k", "share_of")
    )
    assert suite.returncode == 0, suite.stdout[-3000:]
    assert "1 passed, 1 skipped" in suite.stdout, suite.stdout[-3000:]
    assert "parallel_plan() shards no KV cache, so each rank holds every head" in suite.stdout


@pytest.mark.slow
def test_a_failing_rank_fails_the_projects_suite_once(baked, tmp_path):
    """When a rank fails, the project's suite fails one test, showing the rank's own error first and
    torchrun's summary once (on CI too, where pytest would repeat a whole message in its summary),
    and the tests that need the ranks' results skip pointing at it (not the same summary under
    each)."""
    project = tmp_path / "project"
    shutil.copytree(baked(**TP_VARIANTS[0]), project)
    model = project / "src" / package_of(project) / "model.py"
    model.write_text("import os\n" + model.read_text() + FAILING_RANK)
    suite = again_if_torch_crashed(
        lambda: run_in(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", CI="true", COLUMNS="200")
    )
    assert suite.returncode == 1
    summary = suite.stdout.strip().splitlines()[-1]
    assert re.match(r"1 failed, \d+ passed, \d+ skipped", summary), suite.stdout
    assert suite.stdout.count("Root Cause (first observed failure)") == 1, suite.stdout
    failures, _, summary_info = suite.stdout.partition(" short test summary info ")
    failure = failures.split("test_two_ranks_run_under_torchrun _", 1)[1].split("\n", 1)[1]
    root_cause = "[rank1]: RuntimeError: rank 1 cannot build its model"
    assert failure.splitlines()[0] == root_cause, suite.stdout
    assert failure.count("rank 1 cannot build its model") == 1, suite.stdout
    failed = "FAILED tests/test_tensor_parallel.py::test_two_ranks_run_under_torchrun"
    assert f"{failed} - Failed: {root_cause}\n" in summary_info, suite.stdout
    assert "the two-rank run failed: see test_two_ranks_run_under_torchrun" in suite.stdout


@pytest.mark.slow
def test_a_failing_rank_shows_its_root_cause_first_and_once(baked, tmp_path):
    """Swapped styles fail on every rank: the sharding error, with its shapes, is the first error
    line and appears once; the rest is torchrun's short summary, pointing at it."""
    project = tmp_path / "project"
    shutil.copytree(baked(**TP_VARIANTS[0]), project)
    swap_styles(project / "src" / package_of(project) / "model.py")
    result = torchrun(project, 2, f"{package_of(project)}.mre")
    assert result.returncode != 0
    lines = error_lines(result.stderr)
    assert re.match(r"\[rank[01]\]: RuntimeError: .*Sharding propagation failed for aten\.mm", lines[0])
    assert result.stderr.count("Sharding propagation failed") == 1, result.stderr
    assert "hint: a sharded layer met inputs its plan entry does not fit" in result.stderr
    assert "printed first on rank" in result.stderr  # torchrun's summary points at it
    assert len(lines) < 80, result.stderr


def summary(signal: str) -> str:
    """torchrun's summary of a launch whose rank 1 died of `signal` (as torch 2.13 prints it)."""
    return (
        "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n"
        f"  exitcode  : -6 (pid: 8593)\n  error_file: <N/A>\n  traceback : {signal} received by PID 8593\n"
    )


@pytest.mark.parametrize(
    ("stderr", "runs"),
    [
        (summary("Signal 6 (SIGABRT)"), 2),
        (summary("Signal 11 (SIGSEGV)"), 2),
        (summary("Signal 15 (SIGTERM)"), 1),
        ("AssertionError: the ranks differ", 1),
    ],
    ids=["abort", "segfault", "terminated", "python error"],
)
def test_a_launch_is_run_again_only_when_torch_crashed_a_rank(stderr, runs):
    """A launch failing because torch crashed a rank natively runs once more, and only once; a
    rank stopped by torchrun or failing in Python is not run again."""
    calls = []

    def launch() -> subprocess.CompletedProcess[str]:
        calls.append(1)
        return subprocess.CompletedProcess([], 1, "", stderr)

    assert again_if_torch_crashed(launch).returncode == 1
    assert len(calls) == runs
