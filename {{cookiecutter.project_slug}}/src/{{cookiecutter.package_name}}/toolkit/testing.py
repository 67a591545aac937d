"""The fixtures your tests share, as a pytest plugin: tests/conftest.py names it (pytest_plugins).

- mre_run: the MRE run once for the whole suite, as `python -m <package>.mre` runs it (one rank,
  with tensor parallelism): its output, its report and the graphs it compiled. It runs before the
  tests that need it, and they reuse its compile (capture.recorder_for()): check, bench and
  profile on your model compile nothing more. mre_failure says once why it failed.
- eager_output: the MRE's step run without graph mode (on one device, unsharded).
- exported: export's verdict on the file `export --target portable` writes, run in a process of
  its own, started before collection so that it runs while the other tests do.
- two_ranks (tensor parallelism): one torchrun of two ranks (toolkit/two_ranks.py), started before
  the first test, whose results every two-rank test reads; two_ranks_failure says once why it
  failed.
- Tests marked `npu` skip where no NPU can run npugraph_ex, with the reason.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from . import export, project

EXPORT_TIMEOUT = 600
"""Seconds before export's run of the file, if it hangs, fails its test."""
FILE_RUN = pytest.StashKey["export.FileRun | str"]()
"""Export's run of the file, started by pytest_configure(), or why export cannot bundle the MRE."""
BACKGROUND = {"exported", "two_ranks_attempt"}
"""The fixtures that wait for a run in the background: the tests that ask for one run last."""


def your_model() -> Any:
    """The model.py of the project these tests are of."""
    return importlib.import_module(f"{project.PACKAGE}.model")


def bundled() -> str | export.BundleError:
    """`export --target portable`'s file for your MRE, or why export cannot bundle it."""
    try:
        return export.export("portable")
    except export.BundleError as error:
        return error


def file_run() -> export.FileRun | str:
    """The file run in a fresh process, in an empty folder, with this project unimportable, as
    export runs it; or why export cannot bundle your MRE."""
    bundle = bundled()
    if isinstance(bundle, export.BundleError):
        return f"export: cannot bundle the MRE: {bundle}"
    return export.FileRun(bundle, "mre_export.py")


def stop_file_run(config: pytest.Config) -> None:
    if isinstance(run := config.stash.get(FILE_RUN, None), export.FileRun):
        run.close()


def pytest_configure(config: pytest.Config) -> None:
    """Start export's run of the file before collection: it runs meanwhile. Not with `-x`: a
    run that stops at its first failure starts it when its test asks for it."""
    if config.option.maxfail != 1 and not config.option.collectonly:
        config.stash[FILE_RUN] = file_run()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that wait for a background run go last; those marked `npu` skip, with the
    reason, unless an NPU can run npugraph_ex here."""
    items.sort(key=lambda item: bool(BACKGROUND & set(item.fixturenames)))
    from .backend import npu_status

    npu_ok, why = npu_status()
    if npu_ok:
        return
    skip = pytest.mark.skip(reason=f"needs an Ascend NPU: {why}")
    for item in items:
        if item.get_closest_marker("npu"):
            item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Stop export's run of the file if no selected test reads it (`-k`, a test file named)."""
    if not any("exported" in item.fixturenames for item in session.items):
        stop_file_run(session.config)


def pytest_unconfigure(config: pytest.Config) -> None:
    stop_file_run(config)


@pytest.fixture(scope="session", autouse=True)
def no_guard_latency_profiling() -> Iterator[None]:
    """Dynamo times the guards of each new graph once, for its logs alone, and first flushes the
    CPU cache to do so: about 20 ms a compile."""
    from torch._dynamo import guards

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(guards, "profile_guard_manager", lambda *arguments: 0.0)
        yield


class MreRun(NamedTuple):
    output: Any
    report: str
    graphs: int
    """How many graphs Dynamo captured while the MRE ran."""


class MreFailure(NamedTuple):
    error: BaseException
    """What infer_one_step() raised: a graph break, a contract error, ..."""


@pytest.fixture(scope="session")
def mre_attempt(tmp_path_factory: pytest.TempPathFactory) -> MreRun | MreFailure:
    """The MRE run once, in an empty folder (a cache_compile cache is built afresh), as its
    `__main__` guard runs it. A failure is kept, not raised: mre_failure reports it once, and the
    tests that need the MRE's output skip (mre_run)."""
    import torch
    from torch._dynamo.utils import counters

    from .backend import select_backend
    from .report import report

    torch._dynamo.reset()  # a fresh compile, whatever ran before
    printed, graphs = io.StringIO(), counters["stats"]["unique_graphs"]
    mre = importlib.import_module(f"{project.PACKAGE}.mre")
    run = (mre.infer_one_step, your_model().example_inputs)
    with contextlib.chdir(tmp_path_factory.mktemp("mre")), contextlib.redirect_stdout(printed):
        try:
            if project.TENSOR_PARALLEL:
                from .parallel import tensor_parallel

                with tensor_parallel(select_backend().device) as ranks:  # one rank, no torchrun
                    output = report(*run, ranks)
            else:
                output = report(*run)
        except Exception as error:  # noqa: BLE001  (reported by mre_failure's test)
            return MreFailure(error)
    return MreRun(output, printed.getvalue(), counters["stats"]["unique_graphs"] - graphs)


@pytest.fixture(scope="session")
def mre_failure(mre_attempt: MreRun | MreFailure) -> str | None:
    """Why the MRE failed, in a few lines, at your line; None if it ran."""
    from .frames import error_frame

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


@pytest.fixture(scope="session")
def eager_output() -> Any:
    """The MRE's step run without graph mode, on one device, unsharded, on its seeded weights
    and inputs (after the same eager prefill, in a decode project): what graph mode computes."""
    import torch

    from .backend import select_backend
    from .contract import to_device

    torch.manual_seed(0)
    device = select_backend().device
    model = your_model().build_model().to(device).eval()
    with torch.no_grad():
        dummy_input = to_device(your_model().example_inputs(), device)
        if project.DECODE:
            from .decode import first_step

            dummy_input = first_step(model, *dummy_input)
        return model(*dummy_input)


@pytest.fixture(scope="session")
def export_refusal() -> str:
    """Why export refuses to bundle this project when that is the data files your modules read
    (they are there, beside them: one file cannot carry them), else "": the tests of the file
    export writes skip with it."""
    error = bundled()
    if isinstance(error, export.BundleError):
        found = re.search(r"data files your modules read: (.+?) \(in (.+?), found at", str(error))
        if found and all((Path(found[2]) / name).is_file() for name in found[1].split(", ")):
            return f"export refuses this model, as it should: {error}"
    return ""


class Exported(NamedTuple):
    code: int
    """export's exit status: 0 the file ran and matched, 1 it failed or differed, 2 it failed as
    the MRE fails here."""
    verdict: str
    """Why, the root cause first."""


@pytest.fixture(scope="session")
def exported(request: pytest.FixtureRequest, export_refusal: str, mre_run: MreRun) -> Exported:
    """export's verdict on the file `export --target portable` writes, as export judges it: the
    file's run against the MRE's run here. Skips if the MRE failed (reported once)."""
    if export_refusal:
        pytest.skip(export_refusal)
    run = request.config.stash.get(FILE_RUN, None) or file_run()
    if isinstance(run, str):
        return Exported(1, run)
    with contextlib.closing(run):
        try:
            file = run.result(EXPORT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the file's run did not end within {EXPORT_TIMEOUT} s", pytrace=False)
    return Exported(*export.judge(file, export.Run(export.leaves(mre_run.output)), "the file"))


# Tensor parallelism: one torchrun of RANKS ranks, in the background.

RANKS = 2
"""The ranks of the two-rank run: gloo on the CPU, or two NPUs."""
RANKS_TIMEOUT = 600
"""Seconds before a torchrun that hangs fails its tests."""


class Launch(NamedTuple):
    process: subprocess.Popen[bytes]
    folder: Path
    """Where it runs and writes; its stdout and stderr go there too."""


class TwoRanks(NamedTuple):
    size: int
    """RANKS: the world size of the run."""
    results: dict[int, dict[str, dict[str, Any]]]
    """What each rank saved (two_ranks.py), by rank then step."""


class RanksFailure(NamedTuple):
    summary: str
    """How torchrun ended: the failing rank's own error, then torchrun's summary."""


def stop(process: subprocess.Popen[bytes]) -> None:
    """End a background process and the processes it started (a session of their own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def needs_ranks() -> str | None:
    """Why RANKS ranks cannot run here, or None: on an NPU machine, each rank needs its NPU."""
    import torch

    from .backend import npu_status

    if npu_status()[0] and torch.npu.device_count() < RANKS:
        return f"needs {RANKS} NPUs for {RANKS} ranks, and {torch.npu.device_count()} is visible"
    return None


@pytest.fixture(scope="session")
def two_ranks_launch(
    tmp_path_factory: pytest.TempPathFactory, export_refusal: str
) -> Iterator[Launch | str]:
    """two_ranks.py on RANKS ranks under torchrun, started in the background, or why it cannot
    run here. The ranks run the portable export written here (none when export refuses your
    model's data files)."""
    if reason := needs_ranks():
        yield reason
        return
    folder = tmp_path_factory.mktemp("ranks")
    portable = folder / "portable.py"
    if not export_refusal:  # written without export's own run of it: the ranks run it
        bundle = bundled()
        if isinstance(bundle, export.BundleError):
            raise bundle
        portable.write_text(bundle)
    # By its path: the ranks' portable step runs before anything of the package is imported.
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += [f"--nproc-per-node={RANKS}", str(Path(__file__).with_name("two_ranks.py"))]
    command += [str(folder), str(portable), project.PACKAGE]
    source = str(Path(__file__).parents[2])  # src/<package>/toolkit/testing.py
    # One thread per rank: the ranks share this machine's cores, with this process too.
    environment = {**os.environ, "PYTHONPATH": source, "OMP_NUM_THREADS": "1"}
    with (folder / "stdout").open("wb") as stdout, (folder / "stderr").open("wb") as stderr:
        process = subprocess.Popen(
            command,
            cwd=folder,
            env=environment,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # stop() ends it and what it started together
        )
    yield Launch(process, folder)
    if process.poll() is None:  # no test waited for it (a selection), or one gave up on it
        stop(process)


@pytest.fixture(scope="session")
def two_ranks_attempt(two_ranks_launch: Launch | str) -> TwoRanks | RanksFailure | str:
    """The two-rank run once it has ended, or why it cannot run here. A failure is kept:
    two_ranks_failure's test reports it once, and the tests that need the results skip."""
    if isinstance(two_ranks_launch, str):
        return two_ranks_launch
    try:
        code = two_ranks_launch.process.wait(timeout=RANKS_TIMEOUT)
    except subprocess.TimeoutExpired:
        stop(two_ranks_launch.process)
        code = None
    if code != 0:
        ended = f"did not end within {RANKS_TIMEOUT} s" if code is None else f"exited {code}"
        return RanksFailure(rank_error(two_ranks_launch.folder, f"torchrun {ended}"))
    import torch

    saved = {rank: two_ranks_launch.folder / f"rank{rank}.pt" for rank in range(RANKS)}
    results = {
        rank: torch.load(path, weights_only=False) for rank, path in saved.items() if path.exists()
    }
    return TwoRanks(RANKS, results)


def rank_error(folder: Path, ended: str) -> str:
    """The error the first failing rank printed ([rank<N>]: lines), then how torchrun ended and its
    summary; or, where the ranks printed no such error (a rank killed by a signal, a hang), how
    torchrun ended and the last lines. The root cause comes first."""
    skipped = "the tests that need the ranks' results are skipped"
    lines = (folder / "stderr").read_text(errors="replace").strip().splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith("[rank")), None)
    box = next((n for n, line in enumerate(lines) if line == "=" * 60), None)
    if start is None or box is None:
        return f"{ended} ({skipped}); its last lines:\n" + "\n".join(lines[-30:])
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


@pytest.fixture(scope="session", autouse=True)
def start_two_ranks(request: pytest.FixtureRequest) -> None:
    """Start the two-rank run before the first test, if a selected test needs it; not with `-x`,
    as pytest_configure() says."""
    if request.config.option.maxfail == 1 or not project.TENSOR_PARALLEL:
        return
    if any("two_ranks_attempt" in item.fixturenames for item in request.session.items):
        request.getfixturevalue("two_ranks_launch")
