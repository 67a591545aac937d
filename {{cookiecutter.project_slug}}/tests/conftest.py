{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
"""Shared fixtures: the `npu` marker, the MRE run once for the whole suite, export's run of it
as one file{{ ", the two-rank run" if tp else "" }}.

The tests ask for what they need by name (pytest fixtures); nothing here is imported.

Nothing here imports torch at import time: pytest_configure() starts export's run of your MRE as one
file first, in a process of its own, and it runs while collection imports torch here (3 s). The
fixtures import what they use.
"""

import gc

# No garbage collection while the test modules import torch and the project: they allocate
# millions of objects that all stay alive, and the collections those allocations trigger would walk
# them again and again, for about half a second. Once collected, gc.freeze() hides them from every
# later collection instead (pytest_collection_modifyitems).
gc.disable()

import contextlib
import io
{%- if tp %}
import itertools
import os
{%- endif %}
import re
{%- if tp %}
import signal
{%- endif %}
import subprocess
{%- if tp %}
import sys
{%- endif %}
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

# The package before torch: it switches off torch's device-backend autoload (see its __init__.py),
# which would otherwise make `import torch` fail where torch_npu is installed but CANN is not.
from {{ cookiecutter.package_name }}.toolkit import export  # it reads your source: no torch


class MreRun(NamedTuple):
    output: Any
    report: str
    graphs: int
    """How many graphs Dynamo captured while the MRE ran."""


class MreFailure(NamedTuple):
    error: BaseException
    """What infer_one_step() raised: a graph break, a contract error, ..."""


EXPORT_TIMEOUT = 600
"""Seconds before export's run of the file, if it hangs, fails its test (it takes about 5 s on a
CPU)."""
BUNDLE = pytest.StashKey["str | export.BundleError"]()
"""Your MRE bundled as export's portable file, once for the run, or why it cannot be."""
FILE_RUN = pytest.StashKey["export.FileRun | str"]()
"""Where pytest_configure() keeps export's run of the file, or why export cannot bundle your MRE."""


def bundle_of(config: pytest.Config) -> str | export.BundleError:
    """`export --target portable`'s file for your MRE, bundled the first time it is asked for; or
    why export cannot bundle it."""
    if BUNDLE not in config.stash:
        try:
            config.stash[BUNDLE] = export.export("portable")
        except export.BundleError as error:
            config.stash[BUNDLE] = error
    return config.stash[BUNDLE]


def export_file_run(config: pytest.Config) -> export.FileRun | str:
    """The file run in a fresh process, in an empty folder, with this project unimportable, as
    export runs it; or why export cannot bundle your MRE."""
    bundle = bundle_of(config)
    if isinstance(bundle, export.BundleError):
        return f"export: cannot bundle the MRE: {bundle}"
    return export.FileRun(bundle, "mre_export.py")


def stop_file_run(config: pytest.Config) -> None:
    """Stop export's run of the file if it is still going, and remove its folder."""
    if isinstance(run := config.stash.get(FILE_RUN, None), export.FileRun):
        run.close()


def pytest_configure(config: pytest.Config) -> None:
    """Start export's run of the file before collection: it runs meanwhile, until its test needs
    it. Not with `-x`: a run that stops at the first failure starts it when its test asks, so a
    failure before then costs no background run (a mutation tester runs each mutant this way)."""
    if config.option.maxfail != 1 and not config.option.collectonly:
        config.stash[FILE_RUN] = export_file_run(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that wait for a background run last; skip tests marked `npu` unless an NPU can run
    npugraph_ex here, and say why not."""
    # Hide what collection imported (torch's large object graph) from the garbage collector: every
    # full collection, and pytest runs several, would walk it again.
    gc.freeze()
    gc.enable()
    # The tests that read a background run go last: it runs meanwhile, until they need it.
    items.sort(key=lambda item: bool(BACKGROUND & set(item.fixturenames)))
    from {{ cookiecutter.package_name }}.toolkit.backend import npu_status

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
    """Stop export's run of the file if no test waited for it (a selection, a test that gave up)."""
    stop_file_run(config)


@pytest.fixture(scope="session", autouse=True)
def no_guard_latency_profiling() -> Iterator[None]:
    """Dynamo times the guards of each new graph once, for its logs alone, and first flushes the
    CPU cache to do so: about 20 ms a compile, and the suite compiles dozens of graphs."""
    from torch._dynamo import guards

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(guards, "profile_guard_manager", lambda *arguments: 0.0)
        yield


@pytest.fixture(scope="session")
def mre_attempt(tmp_path_factory: pytest.TempPathFactory) -> MreRun | MreFailure:
    """The MRE run once, in an empty folder{{ " (so a cache_compile cache is always built afresh)" if cache else "" }}.

    A failure is kept, not raised: test_mre.py reports it once (mre_failure), and the tests that
    need the MRE's output skip instead of erroring one by one (mre_run).
    """
    import torch
    from torch._dynamo.utils import counters

    from {{ cookiecutter.package_name }}.model import example_inputs
    from {{ cookiecutter.package_name }}.mre import infer_one_step
{%- if tp %}
    from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
    from {{ cookiecutter.package_name }}.toolkit.parallel import tensor_parallel
{%- endif %}
    from {{ cookiecutter.package_name }}.toolkit.report import report

    torch._dynamo.reset()  # a fresh compile, whatever ran before
    printed = io.StringIO()
    graphs_before = counters["stats"]["unique_graphs"]
    with contextlib.chdir(tmp_path_factory.mktemp("mre")), contextlib.redirect_stdout(printed):
        try:
{%- if tp %}
            # As `python -m {{ cookiecutter.package_name }}.mre` runs it: one rank without torchrun.
            with tensor_parallel(select_backend().device) as ranks:
                output = report(infer_one_step, example_inputs, ranks)
{%- else %}
            # As `python -m {{ cookiecutter.package_name }}.mre` runs it.
            output = report(infer_one_step, example_inputs)
{%- endif %}
        except Exception as error:  # noqa: BLE001  (reported by test_mre_runs_in_graph_mode)
            return MreFailure(error)
    gc.freeze()  # and what the first compile imported, as above
    return MreRun(output, printed.getvalue(), counters["stats"]["unique_graphs"] - graphs_before)


@pytest.fixture(scope="session")
def mre_failure(mre_attempt: MreRun | MreFailure) -> str | None:
    """Why the MRE failed, in a few lines: the error's type and message, and where in your code it
    arose; None if the MRE ran."""
    from {{ cookiecutter.package_name }}.toolkit.check import error_frame

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
    import torch

    from {{ cookiecutter.package_name }}.model import build_model, example_inputs
    from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
    from {{ cookiecutter.package_name }}.toolkit.contract import to_device
{%- if decode %}
    from {{ cookiecutter.package_name }}.toolkit.decode import first_step
{%- endif %}

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


@pytest.fixture(scope="session")
def export_refusal(request: pytest.FixtureRequest) -> str:
    """Why export refuses to bundle this project when that is the data files your modules read
    (they are there, beside them: one file cannot carry them), else "". The tests of the file
    export writes skip with it."""
    error = bundle_of(request.config)
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
    """export's verdict on the file `export --target portable` writes, as export judges it before
    it writes: the file's run (started by pytest_configure, or now) against the MRE's run here.
    Skips if the MRE failed (reported once)."""
    if export_refusal:
        pytest.skip(export_refusal)
    run = request.config.stash.get(FILE_RUN, None) or export_file_run(request.config)
    if isinstance(run, str):
        return Exported(1, run)
    with contextlib.closing(run):
        try:
            file = run.result(EXPORT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the file's run did not end within {EXPORT_TIMEOUT} s", pytrace=False)
    return Exported(*export.judge(file, export.Run(export.leaves(mre_run.output)), "the file"))
{%- if tp %}


SOURCE = str(Path(export.__file__).parents[2])  # src/<package>/toolkit/export.py
"""The folder this project's package is imported from: processes started here import the same code."""


class Launch(NamedTuple):
    process: subprocess.Popen[bytes]
    folder: Path
    """Where it runs and writes; its stdout and stderr go there too."""


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


def waited(run: Launch, timeout: float) -> int | None:
    """A background run's exit status once it has ended; None if it hung, and then it is stopped."""
    try:
        return run.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(run.process)
        return None


def tail(folder: Path) -> str:
    """What a background run printed last on stderr: the error that ended it."""
    stderr = (folder / "stderr").read_text(errors="replace")
    return "\n".join(stderr.strip().splitlines()[-30:])


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
    import torch

    from {{ cookiecutter.package_name }}.toolkit.backend import npu_status

    npu_ok, _ = npu_status()
    if npu_ok and torch.npu.device_count() < RANKS:
        return f"needs {RANKS} NPUs for {RANKS} ranks, and {torch.npu.device_count()} is visible"
    return None


@pytest.fixture(scope="session")
def two_ranks_launch(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, export_refusal: str
) -> Iterator[Launch | str]:
    """two_ranks.py on RANKS ranks under torchrun, started in the background (the other tests run
    meanwhile), or why it cannot run here. The ranks run the portable export written here (none
    when export refuses your model's data files)."""
    if reason := needs_ranks():
        yield reason
        return
    folder = tmp_path_factory.mktemp("ranks")
    portable = folder / "portable.py"
    # Written without export's own run of it: the ranks run it (exported runs it alone).
    if not export_refusal:
        bundle = bundle_of(request.config)
        if isinstance(bundle, export.BundleError):
            raise bundle
        portable.write_text(bundle)
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
    import torch

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


BACKGROUND = {"exported"{{ ', "two_ranks_attempt"' if tp else "" }}}
"""The fixtures that wait for a run in the background: the tests that ask for one run last."""
{%- if tp %}


@pytest.fixture(scope="session", autouse=True)
def start_two_ranks(request: pytest.FixtureRequest) -> None:
    """Start the two-rank run before the first test, if a selected test needs it. Not with `-x`,
    as pytest_configure() says."""
    if request.config.option.maxfail == 1:
        return
    if any("two_ranks_attempt" in item.fixturenames for item in request.session.items):
        request.getfixturevalue("two_ranks_launch")
{%- endif %}
