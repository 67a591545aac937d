"""parallel=tensor_parallel: the MRE runs under torchrun as a user launches it, and fails cleanly."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import TP_VARIANTS, package_of, run_in, variant_id

# torchrun as a user launches it: the full tier (the default tier's tensor-parallel variants run
# two ranks in their own suites).
pytestmark = pytest.mark.full

# A hung collective must fail its test, not the whole CI job: two CPU ranks take about 15 s.
TIMEOUT = 600
FAILING_RANK = """

_build_model = build_model


def build_model():
    if os.environ["RANK"] == "1":
        raise RuntimeError("rank 1 cannot build its model")
    return _build_model()
"""


def torchrun(project: Path, ranks: int, module: str) -> subprocess.CompletedProcess[str]:
    """`torchrun --standalone --nproc-per-node <ranks> -m <module>` in the project."""
    launch = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    return run_in(project, *launch, "-m", module, timeout=TIMEOUT)


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
    assert "RuntimeError: rank 1 cannot build its model" in result.stderr
    # torchrun's summary names the first rank that failed, from the error file it recorded.
    assert "rank      : 1" in result.stderr
    assert "To enable traceback" not in result.stderr  # the rank recorded its error for torchrun
