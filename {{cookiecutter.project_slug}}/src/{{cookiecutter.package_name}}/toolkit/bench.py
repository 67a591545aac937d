{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
"""Benchmark eager against graph mode: the same model, weights and input, timed call by call.

Run it with

    python -m {{ cookiecutter.package_name }} bench [--json] [--iters N] [--warmup N] [--backend B]
{%- if tp %}
    torchrun --nproc-per-node N -m {{ cookiecutter.package_name }} bench [...]

It runs build_model() on example_inputs(), sharded by parallel_plan() as the MRE does: plain
python runs one rank, torchrun N ranks; eager is the sharded model run eagerly, so both sides
run the collectives.
{%- else %}

It runs build_model() on example_inputs(), as the MRE does.
{%- endif %} First it checks that graph mode
computes what eager computes, and times the first graph call
(Dynamo, AOT and capture) on its own. Then it warms both up and times `--iters` iterations of
one eager and one graph call each. It prints per-call p50, p95 and mean latency, the speedup
(the median of the per-iteration eager/graph ratios, with its interquartile range), and a
warning if anything recompiled or recaptured while it timed. Off NPU, graph mode runs the
stand-in backend, whose numbers say nothing about NPU speed.
{%- if tp %}

Every rank times its own calls in lockstep. Rank 0 alone prints: the figures of the slowest rank
(the highest graph p50: a step is as slow as its slowest rank), and which rank that was.
{%- endif %}

Exit status: 0 after a run, 1 if graph mode and eager disagree (nothing is timed), 2 if the
backend cannot run here.{{ " Every rank exits with the same status." if tp else "" }}
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._dynamo.utils import counters

from ..model import build_model, example_inputs{{ ", parallel_plan" if tp else "" }}
from .backend import BACKEND_ENV, Backend, select_backend
{%- if cache %}
from .compile_cache import CachedModel
{%- endif %}
from .contract import clone, describe_tree, mismatches, to_device
{%- if decode %}
from .decode import first_step
{%- endif %}
{%- if tp %}
from .parallel import Ranks, tensor_parallel, wait_collectives
{%- endif %}
from .report import synchronize
from .state import restore, save, state_mismatches

Call = Callable[..., Any]

STAND_IN_NOTE = (
    "{backend} stands in for npugraph_ex: these numbers compare eager with the stand-in "
    "and do not predict NPU speed"
)


@dataclass
class Run:
    """What the timed loop saw: per-call times in ms, and the Dynamo counters either side of it."""

    counters_before: dict[str, int]
    counters_after: dict[str, int] = field(default_factory=dict)
    host_ms: dict[str, list[float]] = field(default_factory=lambda: {"eager": [], "graph": []})
    device_ms: dict[str, list[float]] = field(default_factory=lambda: {"eager": [], "graph": []})
    """Stays empty off NPU: only torch.npu.Event measures device-side time here."""


class Progress:
    """One status line on stderr, rewritten in place; silent unless stderr is a terminal."""

    def __init__(self{{ ", quiet: bool = False" if tp else "" }}) -> None:
        # Piped or captured output (CI logs, `--json | jq`) must not fill up with status lines.
{%- if tp %}
        # quiet: a rank other than 0, whose line would overwrite rank 0's.
        self.live = sys.stderr.isatty() and not quiet
{%- else %}
        self.live = sys.stderr.isatty()
{%- endif %}

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


{% if tp -%}
def build(backend: Backend, ranks: Ranks) -> tuple[torch.nn.Module, Call, tuple[Any, ...]]:
    """The sharded model run eagerly, its graph, and the inputs, seeded and sharded as in the MRE."""
    torch.manual_seed(0)
    model = ranks.shard(build_model().to(ranks.device).eval(), parallel_plan(ranks.size))
{%- if decode %}
    (prompt,) = to_device(example_inputs(), ranks.device)
    with torch.no_grad():
        dummy_input = first_step(model, prompt)  # prefill, eagerly: then the decode step is timed
{%- else %}
    dummy_input = to_device(example_inputs(), ranks.device)
{%- endif %}
{%- else -%}
def build(backend: Backend) -> tuple[torch.nn.Module, Call, tuple[Any, ...]]:
    """The eager callable, the graph callable and the inputs, seeded as in the MRE."""
    torch.manual_seed(0)
    model = build_model().to(backend.device).eval()
{%- if decode %}
    (prompt,) = to_device(example_inputs(), backend.device)
    with torch.no_grad():
        dummy_input = first_step(model, prompt)  # prefill, eagerly: then the decode step is timed
{%- else %}
    dummy_input = to_device(example_inputs(), backend.device)
{%- endif %}
{%- endif %}
{%- if cache %}
    return model, CachedModel(model{{ ", **ranks.cache_keywords()" if tp else "" }}), dummy_input
{%- else %}
    graph = torch.compile(
        model,
        backend=backend.name,
        fullgraph=True,
        dynamic=False,
        options=backend.options,
    )
    return model, graph, dummy_input
{%- endif %}


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
    start = save(eager)
    # This graph call is a replay, like every timed one. clone(): the next replay of a captured
    # graph overwrites its output in place.
    output = clone(graph(*dummy_input))
    graph_state = save(eager)
    restore(eager, start)
    expected = eager(*dummy_input)
    eager_state = save(eager)
    restore(eager, start)
    found = mismatches(output, expected) + state_mismatches(graph_state, eager_state)
    return "\n".join(map(str, found)) or None


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


def time_call(fn: Call, dummy_input: tuple[Any, ...], device: str) -> tuple[float, float | None]:
    """One call's wall-clock ms until the device is done, and its device ms on an NPU."""
    events = device_events(device)
    started = time.perf_counter()
    if events:
        events[0].record()
{%- if tp %}
    wait_collectives(fn(*dummy_input))
{%- else %}
    fn(*dummy_input)
{%- endif %}
    if events:
        events[1].record()
    synchronize(device)
    host_ms = (time.perf_counter() - started) * 1e3
    return host_ms, events[0].elapsed_time(events[1]) if events else None


def measure(
    eager: Call,
    graph: Call,
    dummy_input: tuple[Any, ...],
    device: str,
    warmup: int,
    iters: int,
    progress: Progress,
) -> Run:
    """Warm both up, then time `iters` iterations of one eager and one graph call each."""
    pair = (("eager", eager), ("graph", graph))
    for step in range(warmup):
        progress.show(f"bench: warming up {step + 1}/{warmup}")
        for _, fn in pair:
{%- if tp %}
            wait_collectives(fn(*dummy_input))
{%- else %}
            fn(*dummy_input)
{%- endif %}
    synchronize(device)
    run = Run(counters_before=counter_snapshot())
    # As timeit does: a garbage collection would land on whichever call happened to trigger it.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for step in range(iters):
            progress.show(f"bench: timing {step + 1}/{iters}")
            # Alternate which goes first, so neither always runs on the other's warm caches.
            for name, fn in pair if step % 2 == 0 else reversed(pair):
                host_ms, device_ms = time_call(fn, dummy_input, device)
                run.host_ms[name].append(host_ms)
                if device_ms is not None:
                    run.device_ms[name].append(device_ms)
    finally:
        if gc_was_enabled:
            gc.enable()
    run.counters_after = counter_snapshot()
    return run


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


def summarize(
    backend: Backend, dummy_input: tuple[Any, ...], warmup: int, compile_s: float, run: Run
) -> dict[str, Any]:
    """The result as one JSON-ready dict; the table is rendered from it too."""
    eager_ms, graph_ms = run.host_ms["eager"], run.host_ms["graph"]
    # Per-iteration ratios of neighbouring calls: drift in machine speed cancels out.
    ratios = [e / g for e, g in zip(eager_ms, graph_ms, strict=True)]
    keys = sorted(run.counters_before.keys() | run.counters_after.keys())
    recompiled = [k for k in keys if run.counters_before.get(k) != run.counters_after.get(k)]
    return {
        **header(backend, dummy_input),
        "iters": len(ratios),
        "warmup": warmup,
        "compile_s": compile_s,
        "eager": latency(eager_ms, run.device_ms["eager"]),
        "graph": latency(graph_ms, run.device_ms["graph"]),
        "speedup": {
            "median": statistics.median(ratios),
            "p25": quantile(ratios, 0.25),
            "p75": quantile(ratios, 0.75),
        },
        "recompiled": recompiled,
        "outputs_match": True,
        "note": None if backend.is_npugraph_ex else STAND_IN_NOTE.format(backend=backend.name),
    }


{% if tp -%}
def group_of(ranks: Ranks) -> dict[str, Any]:
    """The job's world size and process-group backend, as plain values every rank can send."""
    return {"size": ranks.size, "backend": ranks.backend}


def slowest_rank(results: list[dict[str, Any]], group: dict[str, Any]) -> dict[str, Any]:
    """The result of the rank with the highest graph p50, naming that rank under "ranks".

    A step is as slow as its slowest rank. `recompiled` lists what moved on any rank.
    """
    slowest = max(range(len(results)), key=lambda rank: results[rank]["graph"]["p50_ms"])
    recompiled = sorted({name for result in results for name in result["recompiled"]})
    return {**results[slowest], "recompiled": recompiled, "ranks": {**group, "slowest": slowest}}


def ranks_text(ranks: dict[str, Any]) -> str:
    """The table's ranks row: the world size, the backend, and whose figures these are."""
    whose = "the slowest" if ranks["size"] > 1 else "the only one"
    return f"{ranks['size']} ({ranks['backend']}), figures from rank {ranks['slowest']}, {whose}"


{% endif -%}
def render_table(result: dict[str, Any]) -> str:
    """The result as aligned rows, for a terminal or a bug report."""
    on_device = result["graph"]["device_mean_ms"] is not None
    columns = ["p50_ms", "p95_ms", "mean_ms"] + (["device_mean_ms"] if on_device else [])
    titles = ["p50 ms", "p95 ms", "mean ms", "device ms"][: len(columns)]
    speedup = result["speedup"]
    iterations = (
        f"{result['iters']} timed, each one eager and one graph call; "
        f"warm-up: {result['warmup']} of each"
    )
    ratio = (
        f"{speedup['median']:.2f}x eager/graph, median per iteration "
        f"(IQR {speedup['p25']:.2f}x to {speedup['p75']:.2f}x)"
    )
    recompiles = "none while timing (no recompile, no recapture)"
    if result["recompiled"]:
        recompiles = f"WARNING: {', '.join(result['recompiled'])} changed while timing"
    rows = [
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
        ("speedup", ratio),
        ("recompiles", recompiles),
    ]
{%- if tp %}
    if "ranks" in result:
        rows.insert(2, ("ranks", ranks_text(result["ranks"])))
{%- endif %}
    if result["note"]:
        rows.append(("note", result["note"]))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}".rstrip() for label, value in rows)


{% if tp -%}
def report_mismatch(
    backend: Backend,
    dummy_input: tuple[Any, ...],
    mismatches: list[str | None],
    group: dict[str, Any],
    as_json: bool,
) -> None:
    """Say on stderr which ranks' graph mode differs from eager, and how on the first of them.

    With --json, also print a failed result.
    """
    failed = [rank for rank, mismatch in enumerate(mismatches) if mismatch is not None]
    where = f"rank{'s' * (len(failed) > 1)} {', '.join(map(str, failed))}"
    print(
        f"bench: {backend.name} does not match eager on {where}, so nothing was timed:",
        file=sys.stderr,
    )
    print(f"rank {failed[0]}: {mismatches[failed[0]]}", file=sys.stderr)
    if as_json:
        # The same leading keys as a full result, so a script can tell what failed where.
        ranks = {**group, "mismatched": failed}
        print(json.dumps({**header(backend, dummy_input), "outputs_match": False, "ranks": ranks}))
{%- else -%}
def report_mismatch(
    backend: Backend, dummy_input: tuple[Any, ...], mismatch: str, as_json: bool
) -> None:
    """Say on stderr how graph mode and eager differ; with --json, also print a failed result."""
    print(f"bench: {backend.name} does not match eager, so nothing was timed:", file=sys.stderr)
    print(mismatch, file=sys.stderr)
    if as_json:
        # The same leading keys as a full result, so a script can tell what failed where.
        print(json.dumps({**header(backend, dummy_input), "outputs_match": False}))
{%- endif %}


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Run the benchmark and print the result; return the exit status."""
    args = parse_args(argv, prog)
    if args.backend:
        # Before anything is built: select_backend() reads it
{%- if cache %}, and so does CachedModel's cache_compile{% endif %}.
        os.environ[BACKEND_ENV] = args.backend
    try:
        backend = select_backend()
    except (RuntimeError, ValueError) as error:
        print(f"bench: {error}", file=sys.stderr)
        return 2
{%- if tp %}
    with torch.no_grad(), tensor_parallel(backend.device) as ranks:
        group = group_of(ranks)
        progress = Progress(quiet=not ranks.is_first)
        try:
            eager, graph, dummy_input = build(backend, ranks)
            progress.show(f"bench: first {backend.name} call (compile and capture)")
            compile_s = time_first_call(graph, dummy_input, backend.device)
            progress.show("bench: comparing outputs")
            # Decided jointly: a rank that stopped here would leave the others in a collective.
            mismatches = ranks.gather(compare_outputs(eager, graph, dummy_input))
            if all(mismatch is None for mismatch in mismatches):
                # Every rank makes the same calls in the same order, so the collectives pair up.
                run = measure(
                    eager, graph, dummy_input, backend.device, args.warmup, args.iters, progress
                )
                summary = summarize(backend, dummy_input, args.warmup, compile_s, run)
                results = ranks.gather(summary)
        finally:
            progress.clear()
    if any(mismatch is not None for mismatch in mismatches):
        if ranks.is_first:
            report_mismatch(backend, dummy_input, mismatches, group, args.json)
        return 1
    if not ranks.is_first:
        return 0
    result = slowest_rank(results, group)
{%- else %}
    progress = Progress()
    try:
        with torch.no_grad():
            eager, graph, dummy_input = build(backend)
            progress.show(f"bench: first {backend.name} call (compile and capture)")
            compile_s = time_first_call(graph, dummy_input, backend.device)
            progress.show("bench: comparing outputs")
            mismatch = compare_outputs(eager, graph, dummy_input)
            if mismatch is None:
                run = measure(
                    eager, graph, dummy_input, backend.device, args.warmup, args.iters, progress
                )
    finally:
        progress.clear()
    if mismatch is not None:
        report_mismatch(backend, dummy_input, mismatch, args.json)
        return 1
    result = summarize(backend, dummy_input, args.warmup, compile_s, run)
{%- endif %}
    print(json.dumps(result) if args.json else render_table(result))
    if result["recompiled"]:
        print(
            f"bench: warning: {', '.join(result['recompiled'])} changed while timing: graph mode"
            " recompiled or recaptured, so its times include that work (changing shapes or"
            " input addresses?)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
