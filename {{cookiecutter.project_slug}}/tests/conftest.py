{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
"""Shared fixtures: the `npu` marker, the MRE run once for the whole suite{{ ", the two-rank run" if tp else "" }}.

The tests ask for what they need by name (pytest fixtures); nothing here is imported.
"""

import gc

# No garbage collection while torch and the project import (the imports below follow this on
# purpose): they allocate millions of objects that all stay alive, and the collections those
# allocations trigger would walk them again and again, for about half a second. gc.freeze() below
# hides them from every later collection instead.
gc.disable()

# Before torch: the package switches off torch's device-backend autoload (see its __init__.py),
# which would otherwise make `import torch` fail where torch_npu is installed but CANN is not.
import {{ cookiecutter.package_name }}

# isort: split
import contextlib
import io
{%- if tp %}
import itertools
{%- endif %}
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch
from torch._dynamo import guards
from torch._dynamo.utils import counters

from {{ cookiecutter.package_name }}.model import build_model, example_inputs
from {{ cookiecutter.package_name }}.mre import infer_one_step
{%- if tp %}
from {{ cookiecutter.package_name }}.toolkit import export
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.backend import npu_status, select_backend
from {{ cookiecutter.package_name }}.toolkit.check import error_frame
from {{ cookiecutter.package_name }}.toolkit.contract import to_device
{%- if decode %}
from {{ cookiecutter.package_name }}.toolkit.decode import first_step
{%- endif %}

# Hide what is imported so far (torch's large object graph) from the garbage collector: every full
# collection, and pytest runs several, would walk it again.
gc.freeze()
gc.enable()


class MreRun(NamedTuple):
    output: Any
    report: str
    graphs: int
    """How many graphs Dynamo captured while the MRE ran."""


class MreFailure(NamedTuple):
    error: BaseException
    """What infer_one_step() raised: a graph break, a contract error, ..."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that wait for a background run last; skip tests marked `npu` unless an NPU can run
    npugraph_ex here, and say why not."""
    # The tests that read a background run go last: it runs meanwhile, until they need it.
    items.sort(key=lambda item: bool(BACKGROUND.keys() & set(item.fixturenames)))
    npu_ok, why = npu_status()
    if npu_ok:
        return
    skip = pytest.mark.skip(reason=f"needs an Ascend NPU: {why}")
    for item in items:
        if item.get_closest_marker("npu"):
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def no_guard_latency_profiling() -> Iterator[None]:
    """Dynamo times the guards of each new graph once, for its logs alone, and first flushes the
    CPU cache to do so: about 20 ms a compile, and the suite compiles dozens of graphs."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(guards, "profile_guard_manager", lambda *arguments: 0.0)
        yield


@pytest.fixture(scope="session")
def mre_attempt(tmp_path_factory: pytest.TempPathFactory) -> MreRun | MreFailure:
    """The MRE run once, in an empty folder{{ " (so a cache_compile cache is always built afresh)" if cache else "" }}.

    A failure is kept, not raised: test_mre.py reports it once (mre_failure), and the tests that
    need the MRE's output skip instead of erroring one by one (mre_run).
    """
    torch._dynamo.reset()  # a fresh compile, whatever ran before
    printed = io.StringIO()
    graphs_before = counters["stats"]["unique_graphs"]
    with contextlib.chdir(tmp_path_factory.mktemp("mre")), contextlib.redirect_stdout(printed):
        try:
            output = infer_one_step()
        except Exception as error:  # noqa: BLE001  (reported by test_mre_runs_in_graph_mode)
            return MreFailure(error)
    gc.freeze()  # and what the first compile imported, as above
    return MreRun(output, printed.getvalue(), counters["stats"]["unique_graphs"] - graphs_before)


@pytest.fixture(scope="session")
def mre_failure(mre_attempt: MreRun | MreFailure) -> str | None:
    """Why the MRE failed, in a few lines: the error's type and message, and where in your code it
    arose; None if the MRE ran."""
    if not isinstance(mre_attempt, MreFailure):
        return None
    error = mre_attempt.error
    where = error_frame(error)
    message = "\n".join(str(error).strip().splitlines()[:12])
    return f"{type(error).__name__}: {message}" + (f"\n  at {where}" if where else "")


@pytest.fixture(scope="session")
def mre_run(mre_attempt: MreRun | MreFailure) -> MreRun:
    """The MRE's output, report and graph count; skips if the MRE failed (reported once)."""
    if isinstance(mre_attempt, MreFailure):
        pytest.skip("the MRE failed: see test_mre_runs_in_graph_mode")
    return mre_attempt


class EagerStep(NamedTuple):
    dummy_input: tuple[Any, ...]
    output: Any


@pytest.fixture(scope="session")
def eager_step() -> EagerStep:
    """The MRE's step run without graph mode{{ " on one device, unsharded" if tp else "" }}, on its seeded weights and inputs{{ " (after the same eager prefill)" if decode else "" }}."""
    torch.manual_seed(0)
    device = select_backend().device
    model = build_model().to(device).eval()
    with torch.no_grad():
{%- if decode %}
        dummy_input = first_step(model, *to_device(example_inputs(), device))
{%- else %}
        dummy_input = to_device(example_inputs(), device)
{%- endif %}
        return EagerStep(dummy_input, model(*dummy_input))


@pytest.fixture(scope="session")
def eager_output(eager_step: EagerStep) -> Any:
    """The output of eager_step: what graph mode must compute."""
    return eager_step.output


SOURCE = str(Path({{ cookiecutter.package_name }}.__file__).parents[1])
"""The folder this project's package is imported from: processes started here import the same code."""
EXPORT_TIMEOUT = 600
"""Seconds before an export that hangs fails its tests (it takes about 10 s on a CPU)."""


class Launch(NamedTuple):
    process: subprocess.Popen[bytes]
    folder: Path
    """Where it runs and writes; its stdout and stderr go there too."""


class Written(NamedTuple):
    code: int
    message: str
    """What export printed (stderr)."""
    path: Path


def stop(process: subprocess.Popen[bytes]) -> None:
    """End a background process and the processes it started (a session of their own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def launch(command: list[str], folder: Path, **environment: str) -> subprocess.Popen[bytes]:
    """`command` started in the background in `folder`, importing this project's code."""
    environment = {**os.environ, "PYTHONPATH": SOURCE, **environment}
    with (folder / "stdout").open("wb") as stdout, (folder / "stderr").open("wb") as stderr:
        return subprocess.Popen(
            command,
            cwd=folder,
            env=environment,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # stop() ends it and what it started together
        )


@pytest.fixture(scope="session")
def export_launch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launch]:
    """`python -m {{ cookiecutter.package_name }} export --target portable`, started in the background: export
    runs the file it writes in a process of its own, and the other tests run meanwhile."""
    folder = tmp_path_factory.mktemp("export")
    path = folder / "mre_export.py"
    command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "export", "-o", str(path)]
    process = launch([*command, "--target", "portable"], folder)
    yield Launch(process, folder)
    if process.poll() is None:  # no test waited for it (a selection), or one gave up on it
        stop(process)


def waited(run: Launch, timeout: float) -> int | None:
    """A background run's exit status once it has ended; None if it hung, and then it is stopped."""
    try:
        return run.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(run.process)
        return None


def finished(run: Launch, timeout: float, what: str) -> int:
    """A background run's exit status once it has ended; one that hangs is stopped and fails."""
    if (code := waited(run, timeout)) is None:
        pytest.fail(f"{what} did not end within {timeout} s:\n{tail(run.folder)}", pytrace=False)
    return code


def tail(folder: Path) -> str:
    """What a background run printed last on stderr: the error that ended it."""
    stderr = (folder / "stderr").read_text(errors="replace")
    return "\n".join(stderr.strip().splitlines()[-30:])


@pytest.fixture(scope="session")
def export_refusal() -> str:
    """Why export refuses to bundle this project when that is the data files your modules read
    (they are there, beside them: one file cannot carry them), else "". The tests of the file
    export writes skip with it."""
    from {{ cookiecutter.package_name }}.toolkit import export

    try:
        export.export("portable")
    except export.BundleError as error:
        found = re.search(r"data files your modules read: (.+?) \(in (.+?), found at", str(error))
        if found and all((Path(found[2]) / name).is_file() for name in found[1].split(", ")):
            return f"export refuses this model, as it should: {error}"
    return ""


@pytest.fixture(scope="session")
def written(export_launch: Launch, export_refusal: str) -> Written:
    """`export --target portable`, once it has ended: it runs the file before it writes it."""
    if export_refusal:
        pytest.skip(export_refusal)
    code = finished(export_launch, EXPORT_TIMEOUT, "export")
    message = (export_launch.folder / "stderr").read_text(errors="replace")
    return Written(code, message, export_launch.folder / "mre_export.py")
{%- if tp %}


RANKS = 2
"""The ranks of the two-rank run: gloo on the CPU, or two NPUs."""
RANKS_TIMEOUT = 600
"""Seconds before a torchrun that hangs fails its tests (two CPU ranks take about 15 s)."""
WORKER = Path(__file__).with_name("two_ranks.py")


class TwoRanks(NamedTuple):
    size: int
    """RANKS: the world size of the run."""
    results: dict[int, dict[str, dict[str, Any]]]
    """What each rank saved (two_ranks.py), by rank then step: portable, mre, bench, profile{{ ", generate" if decode else "" }}."""


def needs_ranks() -> str | None:
    """Why RANKS ranks cannot run here, or None: on an NPU machine, each rank needs its NPU."""
    npu_ok, _ = npu_status()
    if npu_ok and torch.npu.device_count() < RANKS:
        return f"needs {RANKS} NPUs for {RANKS} ranks, and {torch.npu.device_count()} is visible"
    return None


@pytest.fixture(scope="session")
def two_ranks_launch(
    tmp_path_factory: pytest.TempPathFactory, export_refusal: str
) -> Iterator[Launch | str]:
    """two_ranks.py on RANKS ranks under torchrun, started in the background (the other tests run
    meanwhile), or why it cannot run here. The ranks run the portable export written here (none
    when export refuses your model's data files)."""
    if reason := needs_ranks():
        yield reason
        return
    folder = tmp_path_factory.mktemp("ranks")
    portable = folder / "portable.py"
    # Written without export's own run of it: the ranks run it (test_export.py runs export whole).
    if not export_refusal:
        portable.write_text(export.export("portable"))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += [f"--nproc-per-node={RANKS}", str(WORKER), str(folder), str(portable)]
    # One thread per rank: the ranks share this machine's cores, with this process too.
    process = launch(command, folder, OMP_NUM_THREADS="1")
    yield Launch(process, folder)
    if process.poll() is None:  # no test waited for it (a selection), or one gave up on it
        stop(process)


class RanksFailure(NamedTuple):
    summary: str
    """How torchrun ended: the failing rank's own error, then torchrun's summary."""


@pytest.fixture(scope="session")
def two_ranks_attempt(two_ranks_launch: Launch | str) -> TwoRanks | RanksFailure | str:
    """The two-rank run once it has ended, or why it cannot run here.

    A failure is kept, not raised: test_tensor_parallel.py reports it once (two_ranks_failure),
    and the tests that need the ranks' results skip instead of failing one by one (two_ranks).
    """
    if isinstance(two_ranks_launch, str):
        return two_ranks_launch
    code = waited(two_ranks_launch, RANKS_TIMEOUT)
    if code != 0:
        ended = f"did not end within {RANKS_TIMEOUT} s" if code is None else f"exited {code}"
        return RanksFailure(rank_error(two_ranks_launch.folder, f"torchrun {ended}"))
    saved = {rank: two_ranks_launch.folder / f"rank{rank}.pt" for rank in range(RANKS)}
    results = {
        rank: torch.load(path, weights_only=False) for rank, path in saved.items() if path.exists()
    }
    return TwoRanks(RANKS, results)


def rank_error(folder: Path, ended: str) -> str:
    """The error the first failing rank printed ([rank<N>]: lines), then how torchrun ended and its
    summary; or, where the ranks printed no such error (a rank killed by a signal, a hang), how
    torchrun ended and the last lines. The root cause comes first: pytest's one-line summary of
    the failure shows the first line."""
    skipped = "the tests that need the ranks' results are skipped"
    lines = (folder / "stderr").read_text(errors="replace").strip().splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith("[rank")), None)
    box = next((n for n, line in enumerate(lines) if line == "=" * 60), None)
    if start is None or box is None:
        return f"{ended} ({skipped}); its last lines:\n{tail(folder)}"
    prefix = lines[start].partition(":")[0] + ":"
    error = itertools.takewhile(lambda line: line.startswith(prefix), lines[start:])
    return "\n".join([*error, f"{ended} ({skipped}):", *lines[box:]])


@pytest.fixture(scope="session")
def two_ranks_failure(two_ranks_attempt: TwoRanks | RanksFailure | str) -> str | None:
    """How the two-rank run failed; None if it ran. Skips where it cannot run here."""
    if isinstance(two_ranks_attempt, str):
        pytest.skip(two_ranks_attempt)
    return two_ranks_attempt.summary if isinstance(two_ranks_attempt, RanksFailure) else None


@pytest.fixture(scope="session")
def two_ranks(two_ranks_attempt: TwoRanks | RanksFailure | str) -> TwoRanks:
    """The ranks' results; skips if the run cannot run here, or failed (reported once)."""
    if isinstance(two_ranks_attempt, str):
        pytest.skip(two_ranks_attempt)
    if isinstance(two_ranks_attempt, RanksFailure):
        pytest.skip("the two-rank run failed: see test_two_ranks_run_under_torchrun")
    return two_ranks_attempt
{%- endif %}


BACKGROUND = {"written": "export_launch"{{ ', "two_ranks_attempt": "two_ranks_launch"' if tp else "" }}}
"""Each fixture that waits for a background run, with the fixture that starts that run."""


@pytest.fixture(scope="session", autouse=True)
def start_background_runs(request: pytest.FixtureRequest) -> None:
    """Start each background run before the first test, if a selected test needs it. Not with
    `-x`: a run that stops at the first failure starts each when a test first waits for it, so a
    failure before then costs no background run (a mutation tester runs each mutant this way)."""
    if request.config.option.maxfail == 1:
        return
    needed = {name for item in request.session.items for name in item.fixturenames}
    for waiter, starter in BACKGROUND.items():
        if waiter in needed:
            request.getfixturevalue(starter)
