"""The short report the MRE prints: what ran, where, why, and what the first call compiled."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch._dynamo
from torch._dynamo.utils import counters

from . import project
from .backend import Backend, select_backend
from .capture import Refusal, recorder_for
from .contract import constant_inputs, constant_note, describe_tree

if TYPE_CHECKING:
    # parallel.py is only in tensor-parallel projects.
    from .parallel import Ranks


class NoGraphError(RuntimeError):
    """The first call compiled no graph: graph mode did not run, so the MRE must not pass."""


@dataclass
class FirstCall:
    """What the MRE's first call cost and compiled; filled in when the call returns."""

    seconds: float = 0.0
    graphs: int = 0


def synchronize(device: str) -> None:
    """Wait for queued device work, so that wall-clock time covers it."""
    if device == "npu":
        torch.npu.synchronize()


FAILED_FIRST_CALL: list[BaseException] = []
"""The last error the MRE's first call raised, which point_to_check's hook names if it ends the run."""


def point_to_check(error: BaseException) -> None:
    """Make `error`, if it ends the process (the MRE run as a script), end with one line after
    its traceback: what failed, and the command that names the cause at your line. The traceback
    stays: it is what a support team reads. Not in an exported file, which has no project to
    check, nor under torchrun, where a failing rank has a report of its own (rank_failure.py)."""
    if not __package__ or os.environ.get("TORCHELASTIC_ERROR_FILE"):
        return
    FAILED_FIRST_CALL[:] = [error]
    if getattr(sys.excepthook, "points_to_check", False):
        return  # installed by an earlier failure in this process

    previous = sys.excepthook

    def excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        previous(kind, value, tb)
        if FAILED_FIRST_CALL and value is FAILED_FIRST_CALL[0]:
            first = (str(value).strip().splitlines() or [""])[0]
            print(
                f"mre: graph mode failed on the first call ({kind.__name__}: {first}); "
                f"`python -m {project.PACKAGE} check` names the cause in one line, at your line",
                file=sys.stderr,
            )

    excepthook.points_to_check = True  # type: ignore[attr-defined]
    sys.excepthook = excepthook


@contextmanager
def first_call(backend: Backend) -> Iterator[FirstCall]:
    """Time the block and count the graphs Dynamo compiles in it; raise NoGraphError if none.

    In cache_compile mode, on an NPU, a run that loads the cache compiles no graph: that is fine.
    An error in the block ends a run of the MRE with a pointer to check (point_to_check()).
    """
    call = FirstCall()
    # A true first call: graphs that an earlier run in this process left behind would be reused,
    # and nothing would tell a reused graph from a model that ran eagerly.
    torch._dynamo.reset()
    graphs_before = counters["stats"]["unique_graphs"]
    started = time.perf_counter()
    try:
        yield call
    except Exception as error:
        point_to_check(error)
        raise
    synchronize(backend.device)
    call.seconds = time.perf_counter() - started
    call.graphs = counters["stats"]["unique_graphs"] - graphs_before
    loaded_from_cache = project.CACHE_COMPILE and backend.is_npugraph_ex
    if call.graphs == 0 and not loaded_from_cache:
        raise NoGraphError(
            f"the first call compiled no graph with {backend.name}: the model ran eagerly, "
            "so this run says nothing about graph mode"
        )


def report(
    infer_one_step: Callable[[], Any],
    example_inputs: Callable[[], tuple[Any, ...]],
    ranks: Ranks | None = None,
) -> Any:
    """Run the MRE's infer_one_step() and print what ran, where, why and what it compiled, and
    what aclgraph capture would refuse in its graph, if anything, in one line. Its output.

    A tensor-parallel MRE passes its ranks: then rank 0 alone prints, after every rank has sent
    its run, and the report gains a `ranks` row.
    """
    backend = select_backend()
    # The MRE names its backend by its name: Dynamo looks it up as torch.compile() is called.
    recorder = recorder_for(backend, cache_compile=project.CACHE_COMPILE)
    already = len(recorder.found)
    with first_call(backend) as call:
        output = infer_one_step()
    # As infer_one_step() moves them: example_inputs() are on the CPU.
    dummy_input = tuple(
        value.to(backend.device) if torch.is_tensor(value) else value for value in example_inputs()
    )
    ranks_line = None
    if ranks is not None:
        # A step is as slow as its slowest rank; every rank must take part in the gather.
        calls = [FirstCall(*each) for each in ranks.gather((call.seconds, call.graphs))]
        if not ranks.is_first:
            return output
        ranks_line = ranks_row(ranks, calls)
    print_report(backend, dummy_input, output, call, recorder.found[already:], ranks_line)
    return output


def print_report(
    backend: Backend,
    dummy_input: tuple[Any, ...],
    output: Any,
    call: FirstCall,
    refused: list[Refusal] = (),
    ranks_line: str | None = None,
) -> None:
    """Print the report's rows: the backend and why, its options, the input and the output, the
    first call's time and graphs; each constant input, the ranks, and what capture refuses."""
    compiled = f"{call.graphs} graph{'s' * (call.graphs != 1)}"
    if project.CACHE_COMPILE and call.graphs == 0:
        compiled = "no graph: loaded from the cache_compile cache"
    rows = [
        ("backend", f"{backend.name} ({backend.reason})"),
        ("options", backend.options or "none (only npugraph_ex takes options)"),
        ("input", describe_tree(dummy_input)),
        *constant_rows(dummy_input),
        ("output", describe_tree(output)),
        ("first call", f"{call.seconds:.2f} s, {compiled} (compile and capture included)"),
    ]
    if ranks_line is not None:
        rows.append(("ranks", ranks_line))
    if problems := [each for each in refused if each.severity == "problem"]:
        rows.append(("capture", capture_row(problems)))
    for name, value in rows:
        print(f"{name:<11} {value}")


def capture_row(refused: list[Refusal]) -> str:
    """One line: the NPU will not capture this graph, what and where, and where to read more."""
    first = refused[0]
    more = f" and {len(refused) - 1} more" if len(refused) > 1 else ""
    return (
        f"an NPU will not capture this graph: {first.code} {first.what} at {first.where}{more}; "
        f"`python -m {project.PACKAGE} check` names each with its fix"
    )


def constant_rows(dummy_input: tuple[Any, ...]) -> list[tuple[str, str]]:
    """A `constant` row for each non-tensor input: what graph mode does with it, and the fix."""
    rows = []
    for path, value in constant_inputs(dummy_input):
        what, fix = constant_note(path, value)
        rows.append(("constant", f"{what}; {fix}"))
    return rows


def ranks_row(ranks: Ranks, calls: list[FirstCall]) -> str:
    """World size and process-group backend, the slowest first call, and each rank's graphs."""
    slowest = max(range(ranks.size), key=lambda rank: calls[rank].seconds)
    graphs = sorted({each.graphs for each in calls})
    per_rank = (
        f"{graphs[0]} graph{'s' * (graphs[0] != 1)} on each rank"
        if len(graphs) == 1
        else "graphs per rank " + ", ".join(str(each.graphs) for each in calls)
    )
    return (
        f"{ranks.size} ({ranks.backend}), slowest first call {calls[slowest].seconds:.2f} s "
        f"on rank {slowest}, {per_rank}"
    )
