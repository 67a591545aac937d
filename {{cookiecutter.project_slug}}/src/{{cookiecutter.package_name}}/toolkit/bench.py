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
{%- endif %}
{%- if decode %}

It times the decode step at every capture size in CAPTURE_SIZES, as generate runs it. First it
captures every size (warm-up, timed on its own) and checks that, at every size, graph mode
computes what eager computes and leaves the KV cache as eager leaves it. Then, at each size, a
batch of that many sequences (the prompt's rows in turn) is prefilled eagerly, timed apart
(prefill gives the first token); then one eager and one graph decode step are timed, the graph
step through the capture size's graph. Every timed call starts from a state put back first:
prefill from the state before it, each step from the state prefill left, so no call sees
another's cache writes, and the step's position stays the prompt's length, inside MAX_SEQ_LEN,
however many iterations run. Per size it prints the p50, p95 and mean latency of prefill and of
one step (one token per sequence), tokens per second (the batch over the mean step), the
speedup (the median of the per-iteration eager/graph ratios, with its interquartile range), and
a warning if anything recompiled or recaptured. Off NPU, graph mode runs the stand-in backend,
whose numbers say nothing about NPU speed.
{%- else %} First it checks that graph mode
computes what eager computes, and times the first graph call
(Dynamo, AOT and capture) on its own. Then it warms both up and times `--iters` iterations of
one eager and one graph call each. It prints per-call p50, p95 and mean latency, the speedup
(the median of the per-iteration eager/graph ratios, with its interquartile range), and a
warning if anything recompiled or recaptured while it timed. Off NPU, graph mode runs the
stand-in backend, whose numbers say nothing about NPU speed.
{%- endif %}
{%- if tp %}

Every rank times its own calls in lockstep. Rank 0 alone prints: the figures of the slowest rank
(the highest graph p50{{ ", summed over the capture sizes" if decode else "" }}: a step is as slow as its slowest rank), and which rank that was.
{%- endif %}

Exit status: 0 after a run, 1 if graph mode and eager disagree (nothing is timed), 2 if the
backend cannot run here or model.py breaks its contract.{{ " Every rank exits with the same status." if tp else "" }}
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

{% if decode -%}
from .. import generate
{% endif -%}
from ..model import build_model, example_inputs{{ ", parallel_plan" if tp else "" }}
from .backend import BACKEND_ENV, Backend, select_backend
{%- if cache %}
from .compile_cache import CachedModel
{%- endif %}
from .contract import ContractError, clone, describe_tree, mismatches, to_device
{%- if decode %}
from .decode import DecodeGraphs, Warmup, first_step, logits_of, prefill
{%- endif %}
{%- if tp %}
from .parallel import Ranks, tensor_parallel, wait_collectives
{%- endif %}
from .report import synchronize
from .state import {{ "State, " if decode else "" }}restore, save, state_mismatches

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
{%- if decode %}


@dataclass
class SizeRun:
    """What was timed at one capture size: eager prefill on its own, then the decode step."""

    size: int
    dummy_input: tuple[Any, ...]
    """The step's (tokens, input_pos), as prefill left them."""
    prefill: Run
    step: Run
{%- endif %}


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
def seeded_model(ranks: Ranks) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """build_model(), sharded by parallel_plan(), and its inputs, seeded as in the MRE."""
    torch.manual_seed(0)
    model = ranks.shard(build_model().to(ranks.device).eval(), parallel_plan(ranks.size))
{%- if decode %}
    (prompt,) = to_device(example_inputs(), ranks.device)
    with torch.no_grad():
        return model, first_step(model, prompt)  # prefill, eagerly: the decode step is what runs
{%- else %}
    return model, to_device(example_inputs(), ranks.device)
{%- endif %}


def graph_of(model: torch.nn.Module, backend: Backend, ranks: Ranks) -> Call:
    """`model` in graph mode, compiled as the MRE compiles it."""
{%- else -%}
def seeded_model(backend: Backend) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """build_model() and its inputs on the backend's device, seeded as in the MRE."""
    torch.manual_seed(0)
    model = build_model().to(backend.device).eval()
{%- if decode %}
    (prompt,) = to_device(example_inputs(), backend.device)
    with torch.no_grad():
        return model, first_step(model, prompt)  # prefill, eagerly: the decode step is what runs
{%- else %}
    return model, to_device(example_inputs(), backend.device)
{%- endif %}


def graph_of(model: torch.nn.Module, backend: Backend) -> Call:
    """`model` in graph mode, compiled as the MRE compiles it."""
{%- endif %}
{%- if cache %}
    return CachedModel(model{{ ", **ranks.cache_keywords()" if tp else "" }})
{%- else %}
    return torch.compile(
        model,
        backend=backend.name,
        fullgraph=True,
        dynamic=False,
        options=backend.options,
    )
{%- endif %}


{% if decode -%}
{% if tp -%}
def build(backend: Backend, ranks: Ranks) -> tuple[torch.nn.Module, DecodeGraphs, torch.Tensor]:
    """The sharded model run eagerly, its decode step in graph mode at every capture size, and
    the prompt: generate's own (generate.build), so bench times what generate runs."""
    model, graphs = generate.build(backend, ranks)
{%- else -%}
def build(backend: Backend) -> tuple[torch.nn.Module, DecodeGraphs, torch.Tensor]:
    """The model, its decode step in graph mode at every capture size, and the prompt:
    generate's own (generate.build), so bench times what generate runs."""
    model, graphs = generate.build(backend)
{%- endif %}
    (prompt,) = to_device(example_inputs(), graphs.device)
    if prompt.shape[1] >= graphs.limits.max_seq_len:
        raise ContractError(
            f"example_inputs()'s prompt has {prompt.shape[1]} tokens: the decode step after it "
            f"writes position {prompt.shape[1]}, beyond MAX_SEQ_LEN = {graphs.limits.max_seq_len}; "
            "shorten the prompt or raise MAX_SEQ_LEN in model.py"
        )
    return model, graphs, prompt
{%- elif tp -%}
def build(backend: Backend, ranks: Ranks) -> tuple[torch.nn.Module, Call, tuple[Any, ...]]:
    """The sharded model run eagerly, its graph, and the inputs, seeded and sharded as in the MRE."""
    model, dummy_input = seeded_model(ranks)
    return model, graph_of(model, backend, ranks), dummy_input
{%- else -%}
def build(backend: Backend) -> tuple[torch.nn.Module, Call, tuple[Any, ...]]:
    """The eager callable, the graph callable and the inputs, seeded as in the MRE."""
    model, dummy_input = seeded_model(backend)
    return model, graph_of(model, backend), dummy_input
{%- endif %}


{% if not decode -%}
def time_first_call(graph: Call, dummy_input: tuple[Any, ...], device: str) -> float:
    """Seconds for the first graph call: Dynamo, AOT autograd and, on an NPU, the capture."""
    started = time.perf_counter()
    graph(*dummy_input)
    synchronize(device)
    return time.perf_counter() - started


{% endif -%}
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
{%- if decode %}
    # The graph side hands back the logits alone, as generate reads them.
    expected = logits_of(eager(*dummy_input))
{%- else %}
    expected = eager(*dummy_input)
{%- endif %}
    eager_state = save(eager)
    restore(eager, start)
    found = mismatches(output, expected) + state_mismatches(graph_state, eager_state)
    return "\n".join(map(str, found)) or None
{%- if decode %}


def rows_of(prompt: torch.Tensor, batch: int) -> torch.Tensor:
    """`batch` sequences: the prompt's rows in turn, as `generate --batch` takes them."""
    return prompt[torch.arange(batch, device=prompt.device) % prompt.shape[0]]


def check_sizes(model: torch.nn.Module, graphs: DecodeGraphs, prompt: torch.Tensor) -> str | None:
    """None if, at every capture size, graph mode's decode step after the same eager prefill
    computes what eager computes and leaves the state eager leaves; else how the first size that
    differs differs. The model holds its starting state again afterwards."""
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
{%- endif %}


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
    calls: dict[str, Call],
    dummy_input: tuple[Any, ...],
    device: str,
    warmup: int,
    iters: int,
    progress: Progress,
{%- if decode %}
    before: Callable[[], None],
    what: str,
{%- endif %}
) -> Run:
{%- if decode %}
    """Warm each call up, then time `iters` iterations of one call of each.

    `before()` runs, untimed, before every call: it puts back the state each call starts from.
    `what` names the loop in the progress line.
    """
{%- else %}
    """Warm each call up, then time `iters` iterations of one call of each."""
{%- endif %}
    pair = list(calls.items())
    for step in range(warmup):
        progress.show(f"bench: {{ "{what}: " if decode else "" }}warming up {step + 1}/{warmup}")
        for _, fn in pair:
{%- if decode %}
            before()
{%- endif %}
{%- if tp %}
            wait_collectives(fn(*dummy_input))
{%- else %}
            fn(*dummy_input)
{%- endif %}
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
            progress.show(f"bench: {{ "{what}: " if decode else "" }}timing {step + 1}/{iters}")
            # Alternate which goes first, so neither always runs on the other's warm caches.
            for name, fn in pair if step % 2 == 0 else reversed(pair):
{%- if decode %}
                before()
{%- endif %}
                host_ms, device_ms = time_call(fn, dummy_input, device)
                run.host_ms[name].append(host_ms)
                if device_ms is not None:
                    run.device_ms[name].append(device_ms)
    finally:
        if gc_was_enabled:
            gc.enable()
    run.counters_after = counter_snapshot()
    return run
{%- if decode %}


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
{%- endif %}


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


{% if decode -%}
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


def summarize(
    backend: Backend,
    prompt: torch.Tensor,
    warmup: int,
    capture: Warmup,
    runs: list[SizeRun],
    recompiles: list[str],
) -> dict[str, Any]:
    """The result as one JSON-ready dict; the table is rendered from it too."""
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
        "note": None if backend.is_npugraph_ex else STAND_IN_NOTE.format(backend=backend.name),
    }
{%- else -%}
def summarize(
    backend: Backend, dummy_input: tuple[Any, ...], warmup: int, compile_s: float, run: Run
) -> dict[str, Any]:
    """The result as one JSON-ready dict; the table is rendered from it too."""
    return {
        **header(backend, dummy_input),
        "iters": len(run.host_ms["graph"]),
        "warmup": warmup,
        "compile_s": compile_s,
        **timing(run),
        "recompiled": changed(run),
        "outputs_match": True,
        "note": None if backend.is_npugraph_ex else STAND_IN_NOTE.format(backend=backend.name),
    }
{%- endif %}


{% if tp -%}
def group_of(ranks: Ranks) -> dict[str, Any]:
    """The job's world size and process-group backend, as plain values every rank can send."""
    return {"size": ranks.size, "backend": ranks.backend}


def slowness(result: dict[str, Any]) -> float:
    """How slow a rank's graph mode was: its graph p50{{ ", summed over the capture sizes" if decode else "" }}."""
{%- if decode %}
    return sum(size["graph"]["p50_ms"] for size in result["sizes"])
{%- else %}
    return result["graph"]["p50_ms"]
{%- endif %}


def slowest_rank(results: list[dict[str, Any]], group: dict[str, Any]) -> dict[str, Any]:
    """The result of the rank whose graph mode was slowest, naming that rank under "ranks".

    A step is as slow as its slowest rank. `recompiled` lists what moved on any rank.
    """
    slowest = max(range(len(results)), key=lambda rank: slowness(results[rank]))
    merged = {"recompiled": sorted({name for result in results for name in result["recompiled"]})}
{%- if decode %}
    merged["recompiles"] = [reason for result in results for reason in result["recompiles"]]
{%- endif %}
    return {**results[slowest], **merged, "ranks": {**group, "slowest": slowest}}


def ranks_text(ranks: dict[str, Any]) -> str:
    """The table's ranks row: the world size, the backend, and whose figures these are."""
    whose = "the slowest" if ranks["size"] > 1 else "the only one"
    return f"{ranks['size']} ({ranks['backend']}), figures from rank {ranks['slowest']}, {whose}"


{% endif -%}
def ratio_text(speedup: dict[str, float]) -> str:
    return (
        f"{speedup['median']:.2f}x eager/graph, median per iteration "
        f"(IQR {speedup['p25']:.2f}x to {speedup['p75']:.2f}x)"
    )


def recompiles_text(result: dict[str, Any]) -> str:
    """The recompiles row: none, or what moved while timing{{ " and what compiled after warm-up" if decode else "" }}."""
{%- if decode %}
    warnings = list(result["recompiles"])
    if result["recompiled"]:
        warnings.insert(0, f"{', '.join(result['recompiled'])} changed while timing")
    if warnings:
        return f"WARNING: {'; '.join(warnings)}"
    return "none while timing (no recompile, no recapture after warm-up)"
{%- else %}
    if result["recompiled"]:
        return f"WARNING: {', '.join(result['recompiled'])} changed while timing"
    return "none while timing (no recompile, no recapture)"
{%- endif %}


def render_table(result: dict[str, Any]) -> str:
    """The result as aligned rows, for a terminal or a bug report."""
{%- if decode %}
    on_device = result["sizes"][0]["graph"]["device_mean_ms"] is not None
{%- else %}
    on_device = result["graph"]["device_mean_ms"] is not None
{%- endif %}
    columns = ["p50_ms", "p95_ms", "mean_ms"] + (["device_mean_ms"] if on_device else [])
    titles = ["p50 ms", "p95 ms", "mean ms", "device ms"][: len(columns)]
{%- if decode %}
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
    rows = [
        ("backend", f"{result['backend']} ({result['reason']})"),
        ("device", result["device"]),
        ("prompt", result["inputs"]),
        ("iterations", iterations),
        ("warm-up", result["capture"]),
        ("", "".join(f"{title:>10}" for title in titles)),
        *figures,
        ("recompiles", recompiles_text(result)),
    ]
{%- else %}
    iterations = (
        f"{result['iters']} timed, each one eager and one graph call; "
        f"warm-up: {result['warmup']} of each"
    )
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
        ("speedup", ratio_text(result["speedup"])),
        ("recompiles", recompiles_text(result)),
    ]
{%- endif %}
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
{%- if decode %}
            model, graphs, prompt = build(backend, ranks)
            progress.show(f"bench: warm-up: {backend.name} captures every capture size")
            capture = graphs.warm_up()
            progress.show("bench: comparing outputs at every capture size")
            # Decided jointly: a rank that stopped here would leave the others in a collective.
            mismatches = ranks.gather(check_sizes(model, graphs, prompt))
            if all(mismatch is None for mismatch in mismatches):
                # Every rank makes the same calls in the same order, so the collectives pair up.
                runs = measure_sizes(
                    model, graphs, prompt, backend.device, args.warmup, args.iters, progress
                )
                summary = summarize(backend, prompt, args.warmup, capture, runs, graphs.recompiles)
                results = ranks.gather(summary)
{%- else %}
            eager, graph, dummy_input = build(backend, ranks)
            progress.show(f"bench: first {backend.name} call (compile and capture)")
            compile_s = time_first_call(graph, dummy_input, backend.device)
            progress.show("bench: comparing outputs")
            # Decided jointly: a rank that stopped here would leave the others in a collective.
            mismatches = ranks.gather(compare_outputs(eager, graph, dummy_input))
            if all(mismatch is None for mismatch in mismatches):
                # Every rank makes the same calls in the same order, so the collectives pair up.
                run = measure(
                    {"eager": eager, "graph": graph},
                    dummy_input,
                    backend.device,
                    args.warmup,
                    args.iters,
                    progress,
                )
                summary = summarize(backend, dummy_input, args.warmup, compile_s, run)
                results = ranks.gather(summary)
{%- endif %}
        except ContractError as error:
            # Every rank reads the same model.py: each refuses it alike.
            progress.clear()
            if ranks.is_first:
                print(f"bench: {error}", file=sys.stderr)
            return 2
        finally:
            progress.clear()
    if any(mismatch is not None for mismatch in mismatches):
        if ranks.is_first:
            report_mismatch(backend, {{ "(prompt,)" if decode else "dummy_input" }}, mismatches, group, args.json)
        return 1
    if not ranks.is_first:
        return 0
    result = slowest_rank(results, group)
{%- else %}
    progress = Progress()
    try:
        with torch.no_grad():
{%- if decode %}
            model, graphs, prompt = build(backend)
            progress.show(f"bench: warm-up: {backend.name} captures every capture size")
            capture = graphs.warm_up()
            progress.show("bench: comparing outputs at every capture size")
            mismatch = check_sizes(model, graphs, prompt)
            if mismatch is None:
                runs = measure_sizes(
                    model, graphs, prompt, backend.device, args.warmup, args.iters, progress
                )
{%- else %}
            eager, graph, dummy_input = build(backend)
            progress.show(f"bench: first {backend.name} call (compile and capture)")
            compile_s = time_first_call(graph, dummy_input, backend.device)
            progress.show("bench: comparing outputs")
            mismatch = compare_outputs(eager, graph, dummy_input)
            if mismatch is None:
                run = measure(
                    {"eager": eager, "graph": graph},
                    dummy_input,
                    backend.device,
                    args.warmup,
                    args.iters,
                    progress,
                )
{%- endif %}
    except ContractError as error:
        progress.clear()
        print(f"bench: {error}", file=sys.stderr)
        return 2
    finally:
        progress.clear()
    if mismatch is not None:
        report_mismatch(backend, {{ "(prompt,)" if decode else "dummy_input" }}, mismatch, args.json)
        return 1
{%- if decode %}
    result = summarize(backend, prompt, args.warmup, capture, runs, graphs.recompiles)
{%- else %}
    result = summarize(backend, dummy_input, args.warmup, compile_s, run)
{%- endif %}
{%- endif %}
    print(json.dumps(result) if args.json else render_table(result))
    if result["recompiled"]:
        print(
            f"bench: warning: {', '.join(result['recompiled'])} changed while timing: graph mode"
            " recompiled or recaptured, so its times include that work (changing shapes or"
            " input addresses?)",
            file=sys.stderr,
        )
{%- if decode %}
    for reason in result["recompiles"]:
        # Warm-up captured every size: a later compile means a size or a position it missed.
        print(f"bench: warning: after warm-up, {reason}", file=sys.stderr)
{%- endif %}
    return 0


if __name__ == "__main__":
    sys.exit(main())
