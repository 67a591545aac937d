"""Benchmark eager against graph mode: the same model, weights and input, timed call by call.

Run it with

    python -m <package> bench [--json] [--iters N] [--warmup N] [--backend B]

and, with tensor parallelism, also under torchrun:

    torchrun --nproc-per-node N -m <package> bench [...]

It runs build_model() on example_inputs(), as the MRE does. With tensor parallelism the model is
sharded by parallel_plan(), as the MRE shards it: plain python runs one rank, torchrun N ranks;
eager is the sharded model run eagerly, so both sides run the collectives.

In a forward project, bench first checks that graph mode computes what eager computes, and times
the first graph call (Dynamo, AOT and capture) on its own. Then it warms both up and times
`--iters` iterations of one eager and one graph call each. It prints per-call p50, p95 and mean
latency, the speedup (the median of the per-iteration eager/graph ratios, with its interquartile
range), and a warning if anything recompiled or recaptured while it timed.

In a decode project, bench times the decode step at every capture size in CAPTURE_SIZES, as
generate runs it. First it captures every size (warm-up, timed on its own) and checks that, at
every size, graph mode computes what eager computes and leaves the KV cache as eager leaves it.
Then, at each size, a batch of that many sequences (the prompt's rows in turn) is prefilled
eagerly, timed apart (prefill gives the first token); then one eager and one graph decode step are
timed, the graph step through the capture size's graph. Every timed call starts from a state put
back first: prefill from the state before it, each step from the state prefill left, so no call
sees another's cache writes, and the step's position stays the prompt's length, inside
MAX_SEQ_LEN, however many iterations run. Per size it prints the p50, p95 and mean latency of
prefill and of one step (one token per sequence), tokens per second (the batch over the mean
step), the speedup (the median of the per-iteration eager/graph ratios, with its interquartile
range), and a warning if anything recompiled or recaptured.

Off NPU, graph mode runs the stand-in backend, whose numbers say nothing about NPU speed.

With tensor parallelism, every rank times its own calls in lockstep. Rank 0 alone prints: the
figures of the slowest rank (the highest graph p50, in a decode project summed over the capture
sizes: a step is as slow as its slowest rank), and which rank that was.

Exit status: 0 after a run, 1 if graph mode and eager disagree or graph mode fails (a graph break:
one line with your line and the fix; nothing is timed), 2 if the backend cannot run here or
model.py breaks its contract: the model fails eagerly, or keeps state that the tools cannot save
and put back (rehearsal.py). With tensor parallelism every rank exits with the same status.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch._dynamo.utils import counters

from . import project
from .backend import BACKEND_ENV, Backend, check_forced, npu_status, select_backend
from .contract import ContractError, clone, describe_tree, input_mismatches, mismatches, to_device
from .rehearsal import GraphFailure, built, finished, graph_failures, rehearse
from .report import synchronize
from .state import restore, save, state_mismatches

# What only some projects have (the template leaves the rest out: decode.py and generation.py in a
# forward project, parallel.py and model.py's parallel_plan() without tensor parallelism) is
# imported in the functions that call it, when the project has it.
if TYPE_CHECKING:
    from .decode import DecodeGraphs, Warmup
    from .parallel import Ranks
    from .state import State

Call = Callable[..., Any]

STAND_IN_NOTE = (
    "{backend} stands in for npugraph_ex: these numbers compare eager with the stand-in "
    "and do not predict NPU speed"
)


@dataclass
class Run:
    """What a timed loop saw: per-call times in ms by call, and the Dynamo counters either side."""

    counters_before: dict[str, int]
    counters_after: dict[str, int] = field(default_factory=dict)
    host_ms: dict[str, list[float]] = field(default_factory=lambda: {"eager": [], "graph": []})
    device_ms: dict[str, list[float]] = field(default_factory=lambda: {"eager": [], "graph": []})
    """Stays empty off NPU: only torch.npu.Event measures device-side time here."""


@dataclass
class SizeRun:
    """What was timed at one capture size of a decode step: eager prefill on its own, then the
    decode step."""

    size: int
    dummy_input: tuple[Any, ...]
    """The step's (tokens, input_pos), as prefill left them."""
    prefill: Run
    step: Run


@dataclass
class Outcome:
    """What bench found on every rank (one, without tensor parallelism), in rank order."""

    dummy_input: tuple[Any, ...]
    """What the result describes: the inputs, or in a decode project (prompt,)."""
    mismatches: list[str | None]
    """How graph mode differed from eager on each rank; None where it did not."""
    results: list[dict[str, Any]] = field(default_factory=list)
    """Each rank's summary; none if graph mode differed anywhere, for then nothing is timed."""

    @property
    def matched(self) -> bool:
        return all(mismatch is None for mismatch in self.mismatches)


class Progress:
    """One status line on stderr, rewritten in place; silent unless stderr is a terminal."""

    def __init__(self, quiet: bool = False) -> None:
        # Piped or captured output (CI logs, `--json | jq`) must not fill up with status lines.
        # quiet: a rank other than 0, whose line would overwrite rank 0's.
        self.live = sys.stderr.isatty() and not quiet

    def show(self, text: str) -> None:
        if self.live:
            # Carriage return and erase-line: rewrite the line instead of scrolling.
            sys.stderr.write(f"\r\x1b[K{text}")
            sys.stderr.flush()

    def clear(self) -> None:
        self.show("")


def at_least(minimum: int) -> Callable[[str], int]:
    """argparse type: an integer no smaller than `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
        return value

    return parse


def parse_args(argv: Sequence[str] | None, prog: str | None) -> argparse.Namespace:
    """The command line; the module docstring explains it."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Time eager against graph mode on the same model and input.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object, not a table")
    parser.add_argument(
        "--iters", type=at_least(1), default=50, help="timed iterations (default: 50)"
    )
    parser.add_argument(
        "--warmup", type=at_least(0), default=5, help="warm-up calls of each (default: 5)"
    )
    parser.add_argument(
        "--backend",
        help=f"torch.compile backend to time, via ${BACKEND_ENV} (default: what the MRE uses)",
    )
    return parser.parse_args(argv)


def seeded_model(where: Backend | Ranks) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """build_model() and its inputs on `where`'s device, seeded as in the MRE.

    `where` is the backend; with tensor parallelism it is this process's rank, and the model is
    sharded by parallel_plan(). In a decode project the inputs are those of the first decode step,
    after an eager prefill of the prompt: the decode step is what runs.
    """
    torch.manual_seed(0)
    model = built(project.from_model("build_model")).to(where.device).eval()
    if project.TENSOR_PARALLEL:
        model = where.shard(model, project.from_model("parallel_plan")(where.size))
    dummy_input = to_device(project.from_model("example_inputs")(), where.device)
    # Before anything compiles: refuse a model that fails eagerly, or keeps state out of sight.
    rehearse(model, dummy_input)
    if project.DECODE:
        from .decode import first_step

        (prompt,) = dummy_input
        with torch.no_grad():
            dummy_input = first_step(model, prompt)
    return model, dummy_input


def graph_of(model: torch.nn.Module, backend: Backend, ranks: Ranks | None = None) -> Call:
    """`model` in graph mode, compiled as the MRE compiles it.

    With tensor parallelism, `ranks` is this process's rank: in cache_compile mode each rank writes
    and loads its own cache.
    """
    if project.CACHE_COMPILE:
        from .compile_cache import CachedModel

        return CachedModel(model, **({} if ranks is None else ranks.cache_keywords()))
    return torch.compile(
        model,
        backend=backend.name,
        fullgraph=True,
        dynamic=False,
        options=backend.options,
    )


def build(backend: Backend, ranks: Ranks | None = None) -> tuple[torch.nn.Module, Call, Any]:
    """What bench times: the model run eagerly, graph mode, and what they run on, seeded (and with
    tensor parallelism, `ranks`, sharded) as in the MRE.

    In a decode project: the model, its decode step in graph mode at every capture size, and the
    prompt; the model and its graphs are generate's own (generation.build), so bench times what
    generate runs. Elsewhere: the model, its graph and its inputs.
    """
    if not project.DECODE:
        model, dummy_input = seeded_model(backend if ranks is None else ranks)
        return model, graph_of(model, backend, ranks), dummy_input
    from .generation import build as build_decode

    model, graphs = build_decode(backend, ranks)
    (prompt,) = to_device(project.from_model("example_inputs")(), graphs.device)
    graphs.limits.check_prompt(prompt.shape[1])
    return model, graphs, prompt


def time_first_call(graph: Call, dummy_input: tuple[Any, ...], device: str) -> float:
    """Seconds for the first graph call: Dynamo, AOT autograd and, on an NPU, the capture."""
    started = time.perf_counter()
    graph(*dummy_input)
    synchronize(device)
    return time.perf_counter() - started


def compare_outputs(
    eager: torch.nn.Module, graph: Call, dummy_input: tuple[Any, ...]
) -> str | None:
    """None if graph mode computes what eager computes on this input and leaves the model's state
    (a KV cache) as eager leaves it, else why not. Both start from the state the model holds now,
    and it holds that state again afterwards, for the timed calls."""
    start, rng = save(eager), torch.get_rng_state()
    # Each side on its own copy of the inputs, which forward may write in place, and from the
    # same random number generator's state, as forward may draw random numbers.
    given, eager_given = clone(dummy_input), clone(dummy_input)
    # This graph call is a replay, like every timed one. clone(): the next replay of a captured
    # graph overwrites its output in place.
    output = clone(graph(*given))
    graph_state = save(eager)
    restore(eager, start)
    torch.set_rng_state(rng)
    expected = eager(*eager_given)
    if project.DECODE:
        from .decode import logits_of

        # The graph side hands back the logits alone, as generate reads them.
        expected = logits_of(expected)
    eager_state = save(eager)
    restore(eager, start)
    found = mismatches(output, expected) + state_mismatches(graph_state, eager_state)
    found += input_mismatches(given, eager_given)
    return "\n".join(map(str, found)) or None


def rows_of(prompt: torch.Tensor, batch: int) -> torch.Tensor:
    """`batch` sequences: the prompt's rows in turn, as `generate --batch` takes them."""
    return prompt[torch.arange(batch, device=prompt.device) % prompt.shape[0]]


def check_sizes(model: torch.nn.Module, graphs: DecodeGraphs, prompt: torch.Tensor) -> str | None:
    """None if, at every capture size, graph mode's decode step after the same eager prefill
    computes what eager computes and leaves the state eager leaves; else how the first size that
    differs differs. The model holds its starting state again afterwards."""
    from .decode import first_step

    start = save(model)
    differ = {}
    for size in graphs.limits.capture_sizes:
        restore(model, start)
        if mismatch := compare_outputs(model, graphs, first_step(model, rows_of(prompt, size))):
            differ[size] = mismatch
    restore(model, start)
    if not differ:
        return None
    first, *others = differ
    also = f" (batch {', '.join(map(str, others))} too)" if others else ""
    return f"at batch {first}{also}:\n{differ[first]}"


def counter_snapshot() -> dict[str, int]:
    """The Dynamo counters that move when graph mode recompiles or npugraph_ex recaptures."""
    snapshot = {"stats.unique_graphs": counters["stats"]["unique_graphs"]}
    # .get(): indexing the defaultdict would add an empty "npugraph_ex" entry off NPU.
    for name, value in counters.get("npugraph_ex", {}).items():
        snapshot[f"npugraph_ex.{name}"] = value
    return snapshot


def device_events(device: str) -> tuple[Any, Any] | None:
    """A start and end timing Event on an NPU, to read device-side time; None elsewhere."""
    if device != "npu":
        return None
    return torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)


def call_through(fn: Call, dummy_input: tuple[Any, ...]) -> None:
    """Call `fn` on `dummy_input` until it is done on the host. With tensor parallelism that
    includes its collectives (finished()): a sharded layer run eagerly hands back its all-reduce
    still in flight, which a call nobody reads would otherwise leave out."""
    finished(fn(*dummy_input))


def time_call(fn: Call, dummy_input: tuple[Any, ...], device: str) -> tuple[float, float | None]:
    """One call's wall-clock ms until the device is done, and its device ms on an NPU."""
    events = device_events(device)
    started = time.perf_counter()
    if events:
        events[0].record()
    call_through(fn, dummy_input)
    if events:
        events[1].record()
    synchronize(device)
    host_ms = (time.perf_counter() - started) * 1e3
    return host_ms, events[0].elapsed_time(events[1]) if events else None


def measure(
    calls: dict[str, Call],
    dummy_input: tuple[Any, ...],
    device: str,
    warmup: int,
    iters: int,
    progress: Progress,
    before: Callable[[], None] | None = None,
    what: str | None = None,
) -> Run:
    """Warm each call up, then time `iters` iterations of one call of each.

    `before()`, if given, runs untimed before every call: it puts back the state each call starts
    from (a decode step's). `what`, if given, names the loop in the progress line.
    """
    pair = list(calls.items())
    status = f"bench: {what}: " if what else "bench: "
    for step in range(warmup):
        progress.show(f"{status}warming up {step + 1}/{warmup}")
        for _, fn in pair:
            if before is not None:
                before()
            call_through(fn, dummy_input)
    synchronize(device)
    run = Run(
        counters_before=counter_snapshot(),
        host_ms={name: [] for name in calls},
        device_ms={name: [] for name in calls},
    )
    # As timeit does: a garbage collection would land on whichever call happened to trigger it.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for step in range(iters):
            progress.show(f"{status}timing {step + 1}/{iters}")
            # Alternate which goes first, so neither always runs on the other's warm caches.
            for name, fn in pair if step % 2 == 0 else reversed(pair):
                if before is not None:
                    before()
                host_ms, device_ms = time_call(fn, dummy_input, device)
                run.host_ms[name].append(host_ms)
                if device_ms is not None:
                    run.device_ms[name].append(device_ms)
    finally:
        if gc_was_enabled:
            gc.enable()
    run.counters_after = counter_snapshot()
    return run


def put_back(model: torch.nn.Module, state: State, device: str) -> Callable[[], None]:
    """A call that restores `state` and waits for the copy, so that no timed call pays for it."""

    def restore_state() -> None:
        restore(model, state)
        synchronize(device)

    return restore_state


def measure_sizes(
    model: torch.nn.Module,
    graphs: DecodeGraphs,
    prompt: torch.Tensor,
    device: str,
    warmup: int,
    iters: int,
    progress: Progress,
) -> list[SizeRun]:
    """At each capture size, in turn: eager prefill of that many sequences, timed on its own, from
    the state before it; then one eager and one graph decode step, each from the state prefill
    left. So every step writes the same position, the prompt's length, and no call sees another's
    cache writes. The model holds its starting state again afterwards."""
    from .decode import first_step, prefill

    start = save(model)
    runs = []
    for size in graphs.limits.capture_sizes:
        batch = rows_of(prompt, size)
        prefill_run = measure(
            {"prefill": lambda tokens: prefill(model, tokens)},
            (batch,),
            device,
            warmup,
            iters,
            progress,
            before=put_back(model, start, device),
            what=f"batch {size} prefill",
        )
        restore(model, start)
        dummy_input = first_step(model, batch)
        step_run = measure(
            {"eager": model, "graph": graphs},
            dummy_input,
            device,
            warmup,
            iters,
            progress,
            before=put_back(model, save(model), device),
            what=f"batch {size} decode step",
        )
        runs.append(SizeRun(size, dummy_input, prefill_run, step_run))
    restore(model, start)
    return runs


def quantile(values: list[float], q: float) -> float:
    """The q-quantile (0 < q < 1), interpolated linearly as numpy does by default."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def latency(host_ms: list[float], device_ms: list[float]) -> dict[str, float | None]:
    """p50, p95 and mean of per-call wall-clock times, and the mean device time if measured."""
    return {
        "p50_ms": statistics.median(host_ms),
        "p95_ms": quantile(host_ms, 0.95),
        "mean_ms": statistics.fmean(host_ms),
        "device_mean_ms": statistics.fmean(device_ms) if device_ms else None,
    }


def header(backend: Backend, dummy_input: tuple[Any, ...]) -> dict[str, Any]:
    """What ran, where, why and on which inputs: the first keys of every result."""
    return {
        "backend": backend.name,
        "reason": backend.reason,
        "device": backend.device,
        "inputs": describe_tree(dummy_input),
    }


def timing(run: Run) -> dict[str, Any]:
    """Eager's and graph mode's latency, and the speedup: the median per-iteration ratio."""
    eager_ms, graph_ms = run.host_ms["eager"], run.host_ms["graph"]
    # Per-iteration ratios of neighbouring calls: drift in machine speed cancels out.
    ratios = [e / g for e, g in zip(eager_ms, graph_ms, strict=True)]
    return {
        "eager": latency(eager_ms, run.device_ms["eager"]),
        "graph": latency(graph_ms, run.device_ms["graph"]),
        "speedup": {
            "median": statistics.median(ratios),
            "p25": quantile(ratios, 0.25),
            "p75": quantile(ratios, 0.75),
        },
    }


def changed(run: Run) -> list[str]:
    """The counters that moved while `run` timed: a recompile or a recapture."""
    keys = sorted(run.counters_before.keys() | run.counters_after.keys())
    return [k for k in keys if run.counters_before.get(k) != run.counters_after.get(k)]


def note(backend: Backend) -> str | None:
    """The result's note: None when npugraph_ex ran, else that a stand-in's numbers mean little."""
    return None if backend.is_npugraph_ex else STAND_IN_NOTE.format(backend=backend.name)


def summarize(
    backend: Backend, dummy_input: tuple[Any, ...], warmup: int, compile_s: float, run: Run
) -> dict[str, Any]:
    """A forward project's result as one JSON-ready dict; the table is rendered from it too."""
    return {
        **header(backend, dummy_input),
        "iters": len(run.host_ms["graph"]),
        "warmup": warmup,
        "compile_s": compile_s,
        **timing(run),
        "recompiled": changed(run),
        "outputs_match": True,
        "note": note(backend),
    }


def per_size(run: SizeRun) -> dict[str, Any]:
    """One capture size's figures: prefill apart, then the decode step, one token per sequence."""
    step = timing(run.step)
    prefill_ms = run.prefill.host_ms["prefill"]
    return {
        "batch": run.size,
        "inputs": describe_tree(run.dummy_input),
        "prefill": latency(prefill_ms, run.prefill.device_ms["prefill"]),
        **step,
        # A step gives every sequence of the batch one token.
        "tokens_per_s": {
            mode: run.size * 1e3 / step[mode]["mean_ms"] for mode in ("eager", "graph")
        },
        "recompiled": changed(run.step),
    }


def summarize_sizes(
    backend: Backend,
    prompt: torch.Tensor,
    warmup: int,
    capture: Warmup,
    runs: list[SizeRun],
    recompiles: list[str],
) -> dict[str, Any]:
    """A decode project's result as one JSON-ready dict; the table is rendered from it too."""
    sizes = [per_size(run) for run in runs]
    return {
        **header(backend, (prompt,)),
        "iters": len(runs[0].step.host_ms["graph"]),
        "warmup": warmup,
        "compile_s": capture.seconds,
        "graphs": capture.graphs,
        "capture": str(capture),
        "sizes": sizes,
        "recompiled": sorted({name for size in sizes for name in size["recompiled"]}),
        "recompiles": recompiles,
        "outputs_match": True,
        "note": note(backend),
    }


def group_of(ranks: Ranks) -> dict[str, Any]:
    """The job's world size and process-group backend, as plain values every rank can send."""
    return {"size": ranks.size, "backend": ranks.backend}


def slowness(result: dict[str, Any]) -> float:
    """How slow a rank's graph mode was: its graph p50, in a decode project summed over the
    capture sizes."""
    if project.DECODE:
        return sum(size["graph"]["p50_ms"] for size in result["sizes"])
    return result["graph"]["p50_ms"]


def slowest_rank(results: list[dict[str, Any]], group: dict[str, Any]) -> dict[str, Any]:
    """The result of the rank whose graph mode was slowest, naming that rank under "ranks".

    A step is as slow as its slowest rank. `recompiled` lists what moved on any rank, and in a
    decode project `recompiles` what compiled after warm-up on any rank.
    """
    slowest = max(range(len(results)), key=lambda rank: slowness(results[rank]))
    merged = {"recompiled": sorted({name for result in results for name in result["recompiled"]})}
    if project.DECODE:
        merged["recompiles"] = [reason for result in results for reason in result["recompiles"]]
    return {**results[slowest], **merged, "ranks": {**group, "slowest": slowest}}


def ranks_text(ranks: dict[str, Any]) -> str:
    """The table's ranks row: the world size, the backend, and whose figures these are."""
    whose = "the slowest" if ranks["size"] > 1 else "the only one"
    return f"{ranks['size']} ({ranks['backend']}), figures from rank {ranks['slowest']}, {whose}"


def ratio_text(speedup: dict[str, float]) -> str:
    return (
        f"{speedup['median']:.2f}x eager/graph, median per iteration "
        f"(IQR {speedup['p25']:.2f}x to {speedup['p75']:.2f}x)"
    )


def recompiles_text(result: dict[str, Any]) -> str:
    """The recompiles row: none, or what moved while timing (and in a decode project, what
    compiled after warm-up)."""
    if not project.DECODE:
        if result["recompiled"]:
            return f"WARNING: {', '.join(result['recompiled'])} changed while timing"
        return "none while timing (no recompile, no recapture)"
    warnings = list(result["recompiles"])
    if result["recompiled"]:
        warnings.insert(0, f"{', '.join(result['recompiled'])} changed while timing")
    if warnings:
        return f"WARNING: {'; '.join(warnings)}"
    return "none while timing (no recompile, no recapture after warm-up)"


def render_table(result: dict[str, Any]) -> str:
    """The result as aligned rows, for a terminal or a bug report."""
    rows = size_rows(result) if project.DECODE else forward_rows(result)
    # Only a tensor-parallel result names its ranks.
    if "ranks" in result:
        rows.insert(2, ("ranks", ranks_text(result["ranks"])))
    if result["note"]:
        rows.append(("note", result["note"]))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}".rstrip() for label, value in rows)


def columns_of(figures: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The table's figure columns and their titles; device ms only if the device was timed."""
    on_device = figures["graph"]["device_mean_ms"] is not None
    columns = ["p50_ms", "p95_ms", "mean_ms"] + (["device_mean_ms"] if on_device else [])
    titles = ["p50 ms", "p95 ms", "mean ms", "device ms"][: len(columns)]
    return columns, titles


def forward_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """A forward project's table rows, before the ranks row and the note."""
    columns, titles = columns_of(result)
    iterations = (
        f"{result['iters']} timed, each one eager and one graph call; "
        f"warm-up: {result['warmup']} of each"
    )
    return [
        ("backend", f"{result['backend']} ({result['reason']})"),
        ("device", result["device"]),
        ("inputs", result["inputs"]),
        ("iterations", iterations),
        ("compile", f"{result['compile_s']:.3f} s (first graph call: Dynamo, AOT, capture)"),
        ("", "".join(f"{title:>10}" for title in titles)),
        *(
            (mode, "".join(f"{result[mode][column]:>10.3f}" for column in columns))
            for mode in ("eager", "graph")
        ),
        ("speedup", ratio_text(result["speedup"])),
        ("recompiles", recompiles_text(result)),
    ]


def size_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """A decode project's table rows, each capture size's figures in turn, before the ranks row
    and the note."""
    columns, titles = columns_of(result["sizes"][0])
    titles.append("tokens/s")
    iterations = (
        f"{result['iters']} timed at each capture size, each one prefill, then one eager and one "
        f"graph decode step from the state prefill left; warm-up: {result['warmup']} of each"
    )
    figures = []
    for size in result["sizes"]:
        figures.append((f"batch {size['batch']}", f"decode step on {size['inputs']}"))
        for mode in ("prefill", "eager", "graph"):
            values = "".join(f"{size[mode][column]:>10.3f}" for column in columns)
            # Prefill gives the first token apart: the rate is the decode steps'.
            rate = f"{size['tokens_per_s'][mode]:>10.1f}" if mode != "prefill" else ""
            figures.append((f"  {mode}", values + rate))
        figures.append(("  speedup", ratio_text(size["speedup"])))
    return [
        ("backend", f"{result['backend']} ({result['reason']})"),
        ("device", result["device"]),
        ("prompt", result["inputs"]),
        ("iterations", iterations),
        ("warm-up", result["capture"]),
        ("", "".join(f"{title:>10}" for title in titles)),
        *figures,
        ("recompiles", recompiles_text(result)),
    ]


def report_mismatch(
    backend: Backend,
    dummy_input: tuple[Any, ...],
    mismatches: list[str | None],
    group: dict[str, Any] | None,
    as_json: bool,
) -> None:
    """Say on stderr how graph mode differs from eager; with --json, also print a failed result.

    `mismatches` holds each rank's (one, without tensor parallelism). With tensor parallelism
    `group` is the job's (group_of()), and the report says which ranks differ, and how on the
    first of them.
    """
    if group is None:
        (mismatch,) = mismatches
        print(f"bench: {backend.name} does not match eager, so nothing was timed:", file=sys.stderr)
        print(mismatch, file=sys.stderr)
        ranks = {}
    else:
        failed = [rank for rank, mismatch in enumerate(mismatches) if mismatch is not None]
        where = f"rank{'s' * (len(failed) > 1)} {', '.join(map(str, failed))}"
        print(
            f"bench: {backend.name} does not match eager on {where}, so nothing was timed:",
            file=sys.stderr,
        )
        print(f"rank {failed[0]}: {mismatches[failed[0]]}", file=sys.stderr)
        ranks = {"ranks": {**group, "mismatched": failed}}
    if as_json:
        # The same leading keys as a full result, so a script can tell what failed where.
        print(json.dumps({**header(backend, dummy_input), "outputs_match": False, **ranks}))


def joined(backend: Backend) -> contextlib.AbstractContextManager[Ranks | None]:
    """With tensor parallelism, this process's rank in the job while bench runs (plain python: a
    job of one rank); elsewhere None."""
    if project.TENSOR_PARALLEL:
        from .parallel import tensor_parallel

        return tensor_parallel(backend.device)
    return contextlib.nullcontext()


def alone(value: Any) -> list[Any]:
    """`value` gathered from every rank, when this process is the only one."""
    return [value]


def benchmark(
    backend: Backend, args: argparse.Namespace, progress: Progress, ranks: Ranks | None
) -> Outcome:
    """Build, check that graph mode computes what eager computes, and if it does, time both.

    With tensor parallelism every rank makes the same calls in the same order, so the collectives
    pair up, and the ranks decide jointly whether to time: a rank that stopped alone would leave
    the others in a collective.
    """
    gather = alone if ranks is None else ranks.gather
    if project.DECODE:
        model, graphs, prompt = build(backend, ranks)
        progress.show(f"bench: warm-up: {backend.name} captures every capture size")
        capture = graphs.warm_up()
        progress.show("bench: comparing outputs at every capture size")
        outcome = Outcome((prompt,), gather(check_sizes(model, graphs, prompt)))
        if outcome.matched:
            runs = measure_sizes(
                model, graphs, prompt, backend.device, args.warmup, args.iters, progress
            )
            summary = summarize_sizes(
                backend, prompt, args.warmup, capture, runs, graphs.recompiles
            )
            outcome.results = gather(summary)
        return outcome
    eager, graph, dummy_input = build(backend, ranks)
    progress.show(f"bench: first {backend.name} call (compile and capture)")
    compile_s = time_first_call(graph, dummy_input, backend.device)
    progress.show("bench: comparing outputs")
    outcome = Outcome(dummy_input, gather(compare_outputs(eager, graph, dummy_input)))
    if outcome.matched:
        run = measure(
            {"eager": eager, "graph": graph},
            dummy_input,
            backend.device,
            args.warmup,
            args.iters,
            progress,
        )
        outcome.results = gather(summarize(backend, dummy_input, args.warmup, compile_s, run))
    return outcome


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Run the benchmark and print the result; return the exit status."""
    args = parse_args(argv, prog)
    try:
        if args.backend:
            check_forced(args.backend, *npu_status(), given="--backend")
            # Before anything is built: select_backend() reads it, and so does cache_compile in
            # cache_compile mode (CachedModel).
            os.environ[BACKEND_ENV] = args.backend
        backend = select_backend()
    except (RuntimeError, ValueError) as error:
        print(f"bench: {error}", file=sys.stderr)
        return 2
    # What your model prints goes to stderr: stdout holds the table (or the JSON) alone.
    with contextlib.redirect_stdout(sys.stderr), torch.no_grad(), joined(backend) as ranks:
        # Rank 0 alone prints; without tensor parallelism this process is the only rank.
        first = ranks is None or ranks.is_first
        group = None if ranks is None else group_of(ranks)
        progress = Progress(quiet=not first)
        try:
            with graph_failures():
                outcome = benchmark(backend, args, progress, ranks)
        except (ContractError, GraphFailure) as error:
            # Every rank reads the same model.py: each refuses it, or fails on it, alike.
            progress.clear()
            if first:
                print(f"bench: {error}", file=sys.stderr)
            return 1 if isinstance(error, GraphFailure) else 2
        finally:
            progress.clear()
    if not outcome.matched:
        if first:
            report_mismatch(backend, outcome.dummy_input, outcome.mismatches, group, args.json)
        return 1
    if not first:
        return 0
    result = outcome.results[0] if group is None else slowest_rank(outcome.results, group)
    print(json.dumps(result) if args.json else render_table(result))
    if result["recompiled"]:
        print(
            f"bench: warning: {', '.join(result['recompiled'])} changed while timing: graph mode"
            " recompiled or recaptured, so its times include that work (changing shapes or"
            " input addresses?)",
            file=sys.stderr,
        )
    if project.DECODE:
        for reason in result["recompiles"]:
            # Warm-up captured every size: a later compile means a size or a position it missed.
            print(f"bench: warning: after warm-up, {reason}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
