"""Profile where a step's time goes, eager against graph mode, in the viewers NPU engineers use.

    python -m <package> profile [--steps N] [--out DIR] [--plot FILE.png] [--json]
    torchrun --nproc-per-node N -m <package> profile [...]    # with tensor parallelism

It runs the MRE's workload (workload()): build_model() on example_inputs() (with tensor
parallelism, sharded by parallel_plan()), built twice from the same seed, one model for eager and
one for graph mode, so that neither run's state (a KV cache, a step counter) leaks into the other.
Both are warmed up first (graph mode compiles and captures there). Then the profiler records one
warm-up step and N steps of each mode, eager first: each step inside a record_function range,
`eager step` or `graph step`, with prof.step() after it.

On an NPU the profiler is torch_npu.profiler (CPU and NPU activities, Level0, text export): its
folder DIR/*_ascend_pt/ opens in MindStudio Insight and TensorBoard, and its
ASCEND_PROFILER_OUTPUT/trace_view.json in Perfetto. Elsewhere it is torch.profiler with the CPU
activity, writing a Chrome trace (DIR/*.pt.trace.json) for Perfetto or chrome://tracing; the
stand-in backend's trace shows the CPU path only.

Then it prints, for each mode, per step: host time, device time (NPU), operators and kernels
launched, compiled regions, graph replays, captures and eager fallbacks (npugraph_ex's
acl_graph_* ranges, NPU), the top operators by self time, and where the trace is.
With tensor parallelism every rank writes its own trace (worker rank<RANK>); rank 0 prints the
slowest rank's figures (the highest graph host time per step) and every rank's trace.

Exit status: 0 after a run, 1 if graph mode fails (a graph break: one line with your line and the
fix), 2 if the backend cannot run here, --out or --plot cannot be written, --plot lacks
matplotlib, or the model cannot be profiled: it fails eagerly, or keeps state that the tools
cannot save and put back (rehearsal.py), so its graph steps would not be what one step is.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import json
import os
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.profiler import record_function

from . import project
from .backend import Backend, select_backend
from .bench import at_least, graph_of, seeded_model
from .contract import ContractError, describe_tree
from .rehearsal import GraphFailure, graph_failures
from .report import synchronize

if TYPE_CHECKING:
    # parallel.py is only in tensor-parallel projects: its run-time imports are in the branches
    # that need them.
    from .parallel import Ranks

Step = Callable[[], Any]
"""One step of a workload, as it runs in one mode: the profiler records one per prof.step()."""

MODES = ("eager", "graph")
RANGES = {"eager": "eager step", "graph": "graph step"}
"""The record_function range around each step, by mode."""
WARM_UP = "profiler warm-up"
"""The range of the step the profiler's own warm-up records and then discards."""
# npugraph_ex's own ranges (torch_npu 2.13 dynamo/npugraph_ex/_acl_concrete_graph/acl_graph.py:
# record_function("acl_graph_replay") L939, "acl_graph_capture" L1272, "fx_run_eagerly" L932, the
# FX graph run without its aclgraph).
MARKERS = {
    "replays": "acl_graph_replay",
    "captures": "acl_graph_capture",
    "eager_fallbacks": "fx_run_eagerly",
}
COMPILED_REGION = "Torch-Compiled Region"
"""The range Dynamo puts around each call of compiled code (torch/_dynamo/eval_frame.py)."""
TOP = 5
DEFAULT_OUT = "prof"
PLOT_INSTALL = "pip install -e '.[plot]' (or pip install matplotlib)"
PERFETTO = "Perfetto (https://ui.perfetto.dev) or chrome://tracing"


@dataclass
class Workload:
    """What one step is, in each mode, and the inputs it runs on (for the report)."""

    steps: dict[str, Step]
    """An eager and a graph step: "eager" and "graph", in that order."""
    inputs: str


def workload(backend: Backend, ranks: Ranks | None = None) -> Workload:
    """The MRE's step: one forward of build_model() on example_inputs(); with tensor parallelism,
    sharded over `ranks`.

    Each mode gets a model of its own, built from the same seed: a forward that updates a buffer
    would otherwise hand eager's state to graph mode. With tensor parallelism a step waits for its
    collectives.
    """
    if project.TENSOR_PARALLEL:
        from .parallel import wait_collectives

        eager, dummy_input = seeded_model(ranks)
        graph = graph_of(seeded_model(ranks)[0], backend, ranks)
        steps = {
            "eager": lambda: wait_collectives(eager(*dummy_input)),
            "graph": lambda: wait_collectives(graph(*dummy_input)),
        }
    else:
        eager, dummy_input = seeded_model(backend)
        graph = graph_of(seeded_model(backend)[0], backend)
        steps = {"eager": lambda: eager(*dummy_input), "graph": lambda: graph(*dummy_input)}
    return Workload(steps, describe_tree(dummy_input))


def npu_profiler(out: Path, worker: str | None, active: int) -> Any:
    """torch_npu's profiler as Ascend's guide uses it, over `active` steps after one warm-up step.

    The API and defaults: torch_npu 2.13 profiler/profiler.py (profile(*, activities, schedule,
    on_trace_ready, experimental_config, ...)) and experimental_config.py; the usage: Ascend/pytorch
    docs/en/developer_notes/ascend_pytorch_profiler_user_guide.md. tensorboard_trace_handler
    analyses when the last active step ends, into DIR/{worker}_{pid}_{time}_ascend_pt/
    (profiler/_profiler_path_creator.py).
    """
    import torch_npu

    profiler = torch_npu.profiler
    return profiler.profile(
        activities=[profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.NPU],
        # warmup=1: torch_npu warns that a schedule without one "can skew profiler results"
        # (profiler/scheduler.py).
        schedule=profiler.schedule(wait=0, warmup=1, active=active, repeat=1),
        on_trace_ready=profiler.tensorboard_trace_handler(str(out), worker_name=worker),
        experimental_config=profiler._ExperimentalConfig(
            export_type=profiler.ExportType.Text,
            profiler_level=profiler.ProfilerLevel.Level0,
            aic_metrics=profiler.AiCMetrics.AiCoreNone,
        ),
    )


def cpu_profiler(out: Path, worker: str | None, active: int) -> Any:
    """torch.profiler over the CPU, the same schedule: a Chrome trace, DIR/{worker}.*.pt.trace.json."""
    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=active, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(out), worker_name=worker),
    )


@dataclass(frozen=True)
class Tracer:
    """A profiler, and where its trace lands under the output folder."""

    name: str
    open: Callable[[Path, str | None, int], Any]
    pattern: str
    """The trace file, a glob under the output folder; {worker} is the worker name or *."""


NPU_TRACER = Tracer(
    "torch_npu.profiler",
    npu_profiler,
    "{worker}_*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",
)
CPU_TRACER = Tracer("torch.profiler", cpu_profiler, "{worker}.*.pt.trace.json")


def record(prof: Any, steps: dict[str, Step], count: int, wait: Callable[[], None]) -> None:
    """Run one warm-up step, then `count` steps of each mode in order, each in its range, with
    prof.step() after each; `wait` waits for the device, outside the ranges, so that a range holds
    the host's time and no step's device work spills into the next."""
    with prof:
        with record_function(WARM_UP):
            for step in steps.values():
                step()
        wait()
        prof.step()
        for mode, step in steps.items():
            for _ in range(count):
                with record_function(RANGES[mode]):
                    step()
                wait()
                prof.step()


def profile_steps(
    tracer: Tracer,
    steps: dict[str, Step],
    count: int,
    out: Path,
    worker: str | None = None,
    wait: Callable[[], None] = lambda: None,
) -> Path:
    """Profile the steps with `tracer` into `out`, and return the trace file it wrote."""
    out = out.resolve()  # the summary names the trace by a path that works from anywhere
    out.mkdir(parents=True, exist_ok=True)
    pattern = tracer.pattern.format(worker=worker or "*")
    before = set(out.glob(pattern))
    record(tracer.open(out, worker, count * len(steps)), steps, count, wait)
    written = sorted(set(out.glob(pattern)) - before, key=lambda path: path.stat().st_mtime)
    if not written:
        raise RuntimeError(f"{tracer.name} wrote no trace matching {out / pattern}")
    return written[-1]


# Reading a trace: Chrome trace events, as torch.profiler writes them ({"traceEvents": [...]}) and
# torch_npu writes trace_view.json (a bare list; "ts" as a string of microseconds).


@dataclass(frozen=True)
class Event:
    name: str
    thread: tuple[Any, Any]
    start: float
    """Microseconds."""
    duration: float


def load_events(trace: Path) -> list[Event]:
    """The complete ("X") host events of a Chrome trace: operators and record_function ranges."""
    data = json.loads(trace.read_text())
    raw = data["traceEvents"] if isinstance(data, dict) else data
    return [
        Event(event["name"], (event["pid"], event["tid"]), float(event["ts"]), float(event["dur"]))
        for event in raw
        if event.get("ph") == "X" and event.get("cat") in {"cpu_op", "user_annotation"}
    ]


def within(outer: Event, inner: Event) -> bool:
    return (
        inner is not outer
        and inner.thread == outer.thread
        and outer.start <= inner.start
        and inner.start + inner.duration <= outer.start + outer.duration
    )


def is_operator(event: Event) -> bool:
    """A dispatcher operator (aten::mm, npu::..., your_namespace::op), not a named range."""
    return "::" in event.name and not event.name.startswith("ProfilerStep")


def self_times(events: list[Event]) -> dict[int, float]:
    """Each event's self time: its duration less that of the events directly inside it."""
    own = {id(event): event.duration for event in events}
    by_thread: dict[tuple[Any, Any], list[Event]] = defaultdict(list)
    for event in events:
        by_thread[event.thread].append(event)
    for thread_events in by_thread.values():
        open_events: list[Event] = []
        # Outer before inner: by start, then the longer first.
        for event in sorted(thread_events, key=lambda e: (e.start, -e.duration)):
            while open_events and not within(open_events[-1], event):
                open_events.pop()
            if open_events:
                own[id(open_events[-1])] -= event.duration
            open_events.append(event)
    return own


def step_ids(events: list[Event], ranges: list[Event]) -> list[int]:
    """The profiler step number (ProfilerStep#N) each range ran in: kernel_details.csv's Step Id."""
    steps = [event for event in events if event.name.startswith("ProfilerStep#")]
    return [
        int(step.name.partition("#")[2]) for each in ranges for step in steps if within(step, each)
    ]


def read_kernels(trace: Path) -> list[dict[str, str]] | None:
    """kernel_details.csv beside torch_npu's trace_view.json (one row per device kernel, with the
    profiler step it ran in); None where there is none: off NPU."""
    path = trace.with_name("kernel_details.csv")
    if not path.exists():
        return None
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def summarize_mode(
    events: list[Event],
    own: dict[int, float],
    range_name: str,
    kernels: list[dict[str, str]] | None,
) -> dict[str, Any]:
    """Per-step figures of the steps in `range_name` ranges."""
    ranges = [event for event in events if event.name == range_name]
    count = len(ranges)
    inside = [event for each in ranges for event in events if within(each, event)]
    operators = [event for event in inside if is_operator(event)]
    self_ms: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for event in operators:
        self_ms[event.name] += own[id(event)] / 1e3
        calls[event.name] += 1
    summary: dict[str, Any] = {
        "steps": count,
        "host_ms": statistics.fmean(each.duration for each in ranges) / 1e3 if count else 0.0,
        "operators": len(operators) / count if count else 0.0,
        "compiled_regions": sum(e.name.startswith(COMPILED_REGION) for e in inside) / max(count, 1),
        **{
            key: sum(e.name == name for e in inside) / max(count, 1)
            for key, name in MARKERS.items()
        },
        "top_operators": [
            {"name": name, "self_ms": total / count, "calls": calls[name] / count}
            for name, total in self_ms.most_common(TOP)
        ],
        "device_ms": None,
        "kernels": None,
        "top_kernels": None,
    }
    if kernels is not None and count:
        ids = {str(each) for each in step_ids(events, ranges)}
        mine = [row for row in kernels if row.get("Step Id") in ids]
        device: Counter[str] = Counter()
        for row in mine:
            device[row["Name"]] += float(row["Duration(us)"]) / 1e3
        summary["device_ms"] = sum(device.values()) / count
        summary["kernels"] = len(mine) / count
        summary["top_kernels"] = [
            {"name": name, "device_ms": total / count} for name, total in device.most_common(TOP)
        ]
    return summary


def summarize_trace(trace: Path) -> dict[str, dict[str, Any]]:
    """Eager's and graph mode's per-step figures, read from the trace file (and on an NPU the
    kernel_details.csv beside it)."""
    events = load_events(trace)
    own = self_times(events)
    kernels = read_kernels(trace)
    return {mode: summarize_mode(events, own, RANGES[mode], kernels) for mode in MODES}


# The terminal and --plot.


def figure(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits else f"{value:g}"


def viewers(trace: Path, tracer: str) -> list[tuple[str, str]]:
    """What to open, and with what: the trace file, and on an NPU its whole profile folder."""
    if tracer == NPU_TRACER.name:
        folder = trace.parents[1]
        return [
            (str(trace), PERFETTO),
            (str(folder), "MindStudio Insight, or TensorBoard with torch-tb-profiler-ascend"),
        ]
    return [(str(trace), PERFETTO)]


def render(result: dict[str, Any]) -> str:
    """The summary as aligned rows: what ran, the per-step figures, the top operators, the traces."""
    rows = [
        ("profiler", f"{result['tracer']}, {result['steps']} steps of each mode after 1 warm-up"),
        ("backend", f"{result['backend']} ({result['reason']})"),
        ("device", result["device"]),
        ("inputs", result["inputs"]),
    ]
    if project.TENSOR_PARALLEL:
        ranks = result["ranks"]
        whose = "the slowest" if ranks["size"] > 1 else "the only one"
        group = f"{ranks['size']} ({ranks['backend']}), figures from rank {ranks['slowest']}"
        rows.append(("ranks", f"{group}, {whose}"))
    eager, graph = result["eager"], result["graph"]
    per_step = [
        ("host ms", "host_ms", 3),
        ("device ms", "device_ms", 3),
        ("operators", "operators", 0),
        ("kernels", "kernels", 0),
        ("compiled regions", "compiled_regions", 0),
        ("graph replays", "replays", 0),
        ("graph captures", "captures", 0),
        ("eager fallbacks", "eager_fallbacks", 0),
    ]
    on_npu = result["tracer"] == NPU_TRACER.name
    rows.append(("per step", f"{'eager':>12}{'graph':>12}"))
    for label, key, digits in per_step:
        if not on_npu and key in {"device_ms", "kernels", *MARKERS}:
            continue  # nothing measures them off NPU: no row of dashes
        rows.append(
            (f"  {label}", f"{figure(eager[key], digits):>12}{figure(graph[key], digits):>12}")
        )
    for mode in MODES:
        rows.append((f"{mode} top {TOP}", "self ms per step, calls per step"))
        for operator in result[mode]["top_operators"]:
            rows.append(
                ("", f"{operator['self_ms']:>9.3f}  {operator['calls']:>5g}  {operator['name']}")
            )
        for kernel in result[mode]["top_kernels"] or ():
            rows.append(("", f"{kernel['device_ms']:>9.3f}  device  {kernel['name']}"))
    if result["note"]:
        rows.append(("note", result["note"]))
    for path, viewer in result["open"]:
        rows.append(("trace", f"{path}: open in {viewer}"))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}".rstrip() for label, value in rows)


def plot(result: dict[str, Any], path: Path) -> None:
    """Eager beside graph mode: host (and device) ms per step, and the top operators of both."""
    from matplotlib.figure import Figure

    canvas = Figure(figsize=(12, 5), layout="constrained")
    timing, operators = canvas.subplots(1, 2, width_ratios=[1, 3])
    measures = [("host", "host_ms")]
    if result["eager"]["device_ms"] is not None:
        measures.append(("device", "device_ms"))
    width = 0.8 / len(measures)
    for offset, (label, key) in enumerate(measures):
        positions = [index + (offset - (len(measures) - 1) / 2) * width for index in range(2)]
        timing.bar(positions, [result[mode][key] for mode in MODES], width=width, label=label)
    timing.set_xticks(range(len(MODES)), MODES)
    timing.set_ylabel("ms per step")
    timing.set_title("time per step")
    timing.legend()
    # Every operator in either top list, each with its eager and its graph bar.
    tops = [op["name"] for mode in MODES for op in result[mode]["top_operators"]]
    names = list(dict.fromkeys(tops))
    for offset, mode in enumerate(MODES):
        own = {op["name"]: op["self_ms"] for op in result[mode]["top_operators"]}
        positions = [index + (offset - 0.5) * 0.4 for index in range(len(names))]
        operators.barh(positions, [own.get(name, 0.0) for name in names], height=0.4, label=mode)
    operators.set_yticks(range(len(names)), names)
    operators.invert_yaxis()  # the slowest on top
    operators.set_xlabel("self ms per step")
    operators.set_title(f"top {TOP} operators by self time, each mode")
    operators.legend()
    canvas.suptitle(f"eager against graph mode: {result['backend']} on {result['device']}")
    canvas.savefig(path)


STAND_IN_NOTE = (
    "{backend} stands in for npugraph_ex and torch.profiler for torch_npu's: this trace shows the "
    "CPU path only (no device time, no kernels, no aclgraph replay)"
)
NOT_NPUGRAPH_EX_NOTE = "{backend} ran instead of npugraph_ex ({reason}): no aclgraph to replay"
PLOT_FORMATS = (".png", ".svg", ".pdf")


def tracer_for(backend: Backend) -> Tracer:
    return NPU_TRACER if backend.device == "npu" else CPU_TRACER


def run(backend: Backend, count: int, out: Path, ranks: Ranks | None = None) -> dict[str, Any]:
    """Warm up, profile and summarize this process's run: with tensor parallelism, one rank's,
    under torchrun."""
    tracer = tracer_for(backend)
    job = workload(backend, ranks)
    for step in job.steps.values():
        step()  # graph mode compiles and captures here, outside the profile
        step()
    synchronize(backend.device)
    trace = profile_steps(
        tracer,
        job.steps,
        count,
        out,
        worker=f"rank{ranks.rank}" if project.TENSOR_PARALLEL else None,
        wait=lambda: synchronize(backend.device),
    )
    return result_of(backend, tracer, job.inputs, count, trace)


def result_of(
    backend: Backend, tracer: Tracer, inputs: str, count: int, trace: Path
) -> dict[str, Any]:
    """A run's result: what ran, the per-step figures its trace holds, and what opens the trace."""
    return {
        "tracer": tracer.name,
        "backend": backend.name,
        "reason": backend.reason,
        "device": backend.device,
        "inputs": inputs,
        "steps": count,
        **summarize_trace(trace),
        "trace": str(trace),
        "open": viewers(trace, tracer.name),
        "note": note(backend),
    }


def note(backend: Backend) -> str | None:
    """What the trace cannot show, unless npugraph_ex ran on an NPU."""
    if backend.is_npugraph_ex:
        return None
    if backend.device != "npu":
        return STAND_IN_NOTE.format(backend=backend.name)
    return NOT_NPUGRAPH_EX_NOTE.format(backend=backend.name, reason=backend.reason)


def slowest_rank(results: list[dict[str, Any]], ranks: Ranks) -> dict[str, Any]:
    """The result of the rank with the highest graph host time per step, naming it under "ranks",
    with every rank's trace to open."""
    slowest = max(range(len(results)), key=lambda rank: results[rank]["graph"]["host_ms"])
    every = [
        (f"{path} (rank {rank})", viewer)
        for rank, result in enumerate(results)
        for path, viewer in result["open"]
    ]
    group = {"size": ranks.size, "backend": ranks.backend, "slowest": slowest}
    traces = [result["trace"] for result in results]
    return {**results[slowest], "ranks": group, "traces": traces, "open": every}


def parse_args(argv: Sequence[str] | None, prog: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=at_least(1), default=5, help="profiled steps of each mode (default: 5)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(DEFAULT_OUT),
        help=f"folder the traces go to (default: ./{DEFAULT_OUT})",
    )
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="also draw the summary")
    parser.add_argument("--json", action="store_true", help="print one JSON object, not a table")
    return parser.parse_args(argv)


def bad_paths(out: Path, plot: Path | None) -> str | None:
    """Why --out or --plot cannot be written, before anything runs; None if they can."""
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file: pass a folder (it is created if missing)"
    if plot is None:
        return None
    if plot.suffix.lower() not in PLOT_FORMATS:
        return f"--plot {plot}: name a {', '.join(PLOT_FORMATS)} file, e.g. profile.png"
    if not plot.parent.is_dir():
        return f"--plot {plot}: the folder {plot.parent} does not exist; create it first"
    return None


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Profile, print the summary, draw it if asked; return the exit status."""
    args = parse_args(argv, prog)
    if problem := bad_paths(args.out, args.plot):
        print(f"profile: {problem}", file=sys.stderr)
        return 2
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        print(
            f"profile: --plot needs matplotlib, which is not installed: {PLOT_INSTALL}",
            file=sys.stderr,
        )
        return 2
    try:
        backend = select_backend()
    except (RuntimeError, ValueError) as error:
        print(f"profile: {error}", file=sys.stderr)
        return 2
    try:
        with graph_failures():
            result = profiled(backend, args)
    except (ContractError, GraphFailure) as error:
        # Every rank reads the same model.py: each refuses it, or fails on it, alike.
        if os.environ.get("RANK", "0") == "0":
            print(f"profile: {error}", file=sys.stderr)
        return 1 if isinstance(error, GraphFailure) else 2
    if result is None:
        return 0  # a rank other than 0: rank 0 prints
    print(json.dumps(result) if args.json else render(result))
    if args.plot:
        plot(result, args.plot)
        print(f"profile: plot written to {args.plot}", file=sys.stderr)
    return 0


def profiled(backend: Backend, args: argparse.Namespace) -> dict[str, Any] | None:
    """Profile this process's run (with tensor parallelism, this rank's under torchrun): the result
    to print, or None on a rank other than 0."""
    # torch_npu's profiler prints its progress on stdout (print_info_msg, profiler/analysis/
    # prof_common_func/_constant.py), and so may your model: it would spoil the table and JSON.
    if project.TENSOR_PARALLEL:
        from .parallel import tensor_parallel

        with (
            contextlib.redirect_stdout(sys.stderr),
            torch.no_grad(),
            tensor_parallel(backend.device) as ranks,
        ):
            results = ranks.gather(run(backend, args.steps, args.out, ranks))
        return slowest_rank(results, ranks) if ranks.is_first else None
    with contextlib.redirect_stdout(sys.stderr), torch.no_grad():
        return run(backend, args.steps, args.out)


if __name__ == "__main__":
    sys.exit(main())
