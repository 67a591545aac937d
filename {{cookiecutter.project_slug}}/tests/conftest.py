{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""Shared test setup: the `npu` marker, and the MRE run once for the whole suite."""

# Before torch: the package switches off torch's device-backend autoload (see its __init__.py),
# which would otherwise make `import torch` fail where torch_npu is installed but CANN is not.
import {{ cookiecutter.package_name }}{{ "" if tp else "  # noqa: F401" }}

# isort: split
import contextlib
import gc
import io
{%- if tp %}
import os
import subprocess
{%- endif %}
import sys
{%- if tp %}
from pathlib import Path
{%- endif %}
from typing import Any, NamedTuple

import pytest
import torch
from torch._dynamo.utils import counters

from {{ cookiecutter.package_name }}.model import build_model, example_inputs
from {{ cookiecutter.package_name }}.mre import infer_one_step
from {{ cookiecutter.package_name }}.toolkit.backend import npu_status, select_backend
from {{ cookiecutter.package_name }}.toolkit.check import error_frame
from {{ cookiecutter.package_name }}.toolkit.contract import to_device

# Hide what is imported so far (torch's large object graph) from the garbage collector: every full
# collection, and pytest runs several, would walk it again, for over half a second in all.
gc.freeze()


class MreRun(NamedTuple):
    output: Any
    report: str
    graphs: int
    """How many graphs Dynamo captured while the MRE ran."""


class MreFailure(NamedTuple):
    error: BaseException
    """What infer_one_step() raised: a graph break, a contract error, ..."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip tests marked `npu` unless an NPU can run npugraph_ex here, and say why not."""
    npu_ok, why = npu_status()
    if npu_ok:
        return
    skip = pytest.mark.skip(reason=f"needs an Ascend NPU: {why}")
    for item in items:
        if item.get_closest_marker("npu"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def mre_attempt(tmp_path_factory: pytest.TempPathFactory) -> MreRun | MreFailure:
    """The MRE run once, in an empty folder (so a cache_compile cache is always built afresh).

    A failure is kept, not raised: test_mre.py reports it once, and the tests that need the
    MRE's output skip instead of erroring one by one.
    """
    torch._dynamo.reset()  # a fresh compile, whatever ran before
    printed = io.StringIO()
    graphs_before = counters["stats"]["unique_graphs"]
    with contextlib.chdir(tmp_path_factory.mktemp("mre")), contextlib.redirect_stdout(printed):
        try:
            output = infer_one_step()
        except Exception as error:  # noqa: BLE001  (reported by test_mre_runs_in_graph_mode)
            return MreFailure(error)
    return MreRun(output, printed.getvalue(), counters["stats"]["unique_graphs"] - graphs_before)


@pytest.fixture
def mre_run(mre_attempt: MreRun | MreFailure) -> MreRun:
    """The MRE's output, report and graph count; skips if the MRE failed (reported once)."""
    if isinstance(mre_attempt, MreFailure):
        pytest.skip("the MRE failed: see test_mre_runs_in_graph_mode")
    return mre_attempt


def eager_output() -> Any:
    """The model run without graph mode{{ " on one device, unsharded" if tp else "" }}, on the MRE's seeded weights and inputs."""
    torch.manual_seed(0)
    device = select_backend().device
    model = build_model().to(device).eval()
    dummy_input = to_device(example_inputs(), device)
    with torch.no_grad():
        return model(*dummy_input)


def forget_torch_npu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next `import torch_npu` load afresh, and take what it loads away afterwards."""
    # setitem remembers that there was no entry; undoing it removes the stand-in the test loaded.
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    del sys.modules["torch_npu"]


def short_error(error: BaseException) -> str:
    """An exception in a few lines: its type and message, and where in your code it arose."""
    where = error_frame(error)
    message = "\n".join(str(error).strip().splitlines()[:12])
    return f"{type(error).__name__}: {message}" + (f"\n  at {where}" if where else "")
{%- if tp %}


RANKS = 2
"""The ranks of the tensor-parallel tests: gloo on the CPU, or two NPUs."""
RANKS_TIMEOUT = 600
"""Seconds before a torchrun that hangs fails its test (two CPU ranks take about 15 s)."""
WORKER = Path(__file__).with_name("two_ranks.py")


Process = subprocess.CompletedProcess[str]


class RanksRun(NamedTuple):
    process: Process
    results: dict[int, dict[str, Any]]
    """What each rank saved (two_ranks.py): its output and the graphs it compiled."""


def needs_ranks() -> str | None:
    """Why RANKS ranks cannot run here, or None: on an NPU machine, each rank needs its NPU."""
    npu_ok, _ = npu_status()
    if npu_ok and torch.npu.device_count() < RANKS:
        return f"needs {RANKS} NPUs for {RANKS} ranks, and {torch.npu.device_count()} is visible"
    return None


SOURCE = str(Path({{ cookiecutter.package_name }}.__file__).parents[1])
"""The folder this project's package is imported from: the ranks import the same code."""


def torchrun(folder: Path, *arguments: str, pythonpath: str = SOURCE) -> Process:
    """`torchrun --standalone --nproc-per-node RANKS <arguments>` in `folder`, with a timeout."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += [f"--nproc-per-node={RANKS}", *arguments]
    # One thread per rank: the ranks share this machine's cores.
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath}
    return subprocess.run(
        command,
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=RANKS_TIMEOUT,
        check=False,
    )


def run_ranks(folder: Path, *arguments: str, pythonpath: str = SOURCE) -> RanksRun:
    """two_ranks.py on RANKS ranks under torchrun, in `folder`, with a timeout."""
    process = torchrun(folder, str(WORKER), str(folder), *arguments, pythonpath=pythonpath)
    saved = {rank: folder / f"rank{rank}.pt" for rank in range(RANKS)}
    results = {
        rank: torch.load(path, weights_only=False) for rank, path in saved.items() if path.exists()
    }
    return RanksRun(process, results)


def ranks_failure(process: Process) -> str:
    """What a failed torchrun printed last: the failing rank's error and torchrun's summary."""
    return "\n".join(process.stderr.strip().splitlines()[-30:])
{%- endif %}
