{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""profile: eager against graph mode under the profiler, a trace, and a summary that agrees with it."""

import contextlib
import csv
import importlib.util
import io
import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch

from {{ cookiecutter.package_name }}.toolkit import bench, profile
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
{%- if tp %}
from {{ cookiecutter.package_name }}.toolkit.parallel import tensor_parallel
{%- endif %}

STEPS = 2
"""Profiled steps of each mode: enough to average, few enough to stay quick."""
{%- if cookiecutter.mode == "cache_compile" %}
GRAPH_MARKERS = (profile.COMPILED_REGION, "cache_compiler inference")
"""What only compiled code puts in a trace: Dynamo's range, or a loaded cache_compile graph's."""
{%- else %}
GRAPH_MARKERS = (profile.COMPILED_REGION,)
"""What only compiled code puts in a trace: Dynamo's range around it."""
{%- endif %}


class Profiled(NamedTuple):
    result: dict[str, Any]
    """What `profile --json` printed."""
    out: Path
    """--out: where the trace must be."""
    plot: Path | None
    """--plot's file, if matplotlib is installed here."""


# One run serves every test that reads it: each run compiles your model again. It asks for mre_run
# only to skip if the MRE failed: test_mre.py reports that once.
@pytest.fixture(scope="module")
def profiled(mre_run, tmp_path_factory) -> Profiled:
    folder = tmp_path_factory.mktemp("profile")
    arguments = ["--steps", str(STEPS), "--out", str(folder / "prof"), "--json"]
    plot = folder / "profile.png" if importlib.util.find_spec("matplotlib") else None
    if plot:
        arguments += ["--plot", str(plot)]
    torch._dynamo.reset()
    printed, errors = io.StringIO(), io.StringIO()
    with (
        contextlib.chdir(folder),
        contextlib.redirect_stdout(printed),
        contextlib.redirect_stderr(errors),
    ):
        code = profile.main(arguments)
    assert code == 0, errors.getvalue()
    return Profiled(json.loads(printed.getvalue()), folder / "prof", plot)


def events_of(trace: Path) -> list[dict[str, Any]]:
    """The complete ("X") events of a Chrome trace file, read here without the tool's reader."""
    data = json.loads(trace.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [event for event in events if event.get("ph") == "X"]


def inside(events: list[dict[str, Any]], outer: dict[str, Any]) -> list[dict[str, Any]]:
    """The events on `outer`'s thread that start and end within it."""
    start, end = float(outer["ts"]), float(outer["ts"]) + float(outer["dur"])
    return [
        event
        for event in events
        if event is not outer
        and (event["pid"], event["tid"]) == (outer["pid"], outer["tid"])
        and start <= float(event["ts"])
        and float(event["ts"]) + float(event["dur"]) <= end
    ]


def step_ranges(events: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    return [event for event in events if event["name"] == f"{mode} step"]


def test_trace_is_chrome_json_in_the_output_folder(profiled):
    """The trace is a file under --out that parses as Chrome trace JSON: named, timed events."""
    trace = Path(profiled.result["trace"])
    assert profiled.out.resolve() in trace.parents
    events = events_of(trace)
    assert events
    assert all({"name", "ts", "dur", "pid", "tid"} <= event.keys() for event in events)


def test_trace_holds_every_step_in_its_range_eager_first(profiled):
    """The trace holds STEPS `eager step` and STEPS `graph step` ranges, every eager one first."""
    events = events_of(Path(profiled.result["trace"]))
    eager, graph = (step_ranges(events, mode) for mode in ("eager", "graph"))
    assert (len(eager), len(graph)) == (STEPS, STEPS)
    assert max(float(each["ts"]) for each in eager) < min(float(each["ts"]) for each in graph)


def test_each_step_is_a_profiler_step_of_its_own(profiled):
    """Each step range lies in its own ProfilerStep#N, numbered on from the warm-up's: the step a
    kernel ran in (kernel_details.csv's Step Id on an NPU) tells the modes apart."""
    events = events_of(Path(profiled.result["trace"]))
    steps = [event for event in events if event["name"].startswith("ProfilerStep#")]
    owners = [
        [step["name"] for step in steps if each in inside(events, step)]
        for mode in ("eager", "graph")
        for each in step_ranges(events, mode)
    ]
    assert owners == [[f"ProfilerStep#{number}"] for number in range(1, 2 * STEPS + 1)]


def test_graph_steps_run_compiled_code_and_eager_steps_do_not(profiled):
    """Each `graph step` range holds compiled code and no `eager step` range does: the steps are
    in their own ranges."""
    events = events_of(Path(profiled.result["trace"]))

    def compiled(outer: dict[str, Any]) -> bool:
        return any(event["name"].startswith(GRAPH_MARKERS) for event in inside(events, outer))

    assert all(compiled(each) for each in step_ranges(events, "graph"))
    assert not any(compiled(each) for each in step_ranges(events, "eager"))


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_summary_per_step_agrees_with_the_trace(profiled, mode):
    """Host time, operators and compiled regions per step are what the trace's events say."""
    events = events_of(Path(profiled.result["trace"]))
    ranges = step_ranges(events, mode)
    nested = [event for each in ranges for event in inside(events, each)]
    operators = [event for event in nested if "::" in event["name"]]
    regions = [event for event in nested if event["name"].startswith(profile.COMPILED_REGION)]
    summary = profiled.result[mode]
    assert summary["steps"] == STEPS
    host_ms = sum(float(each["dur"]) for each in ranges) / 1e3 / STEPS
    assert summary["host_ms"] == pytest.approx(host_ms)
    assert summary["operators"] == len(operators) / STEPS > 0
    assert summary["compiled_regions"] == len(regions) / STEPS


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_top_operators_are_the_modes_own_by_self_time(profiled, mode):
    """Each mode's top operators ran in its ranges, slowest first, and their self time fits in
    its host time."""
    events = events_of(Path(profiled.result["trace"]))
    ran = {event["name"] for each in step_ranges(events, mode) for event in inside(events, each)}
    top = profiled.result[mode]["top_operators"]
    assert 0 < len(top) <= profile.TOP
    assert {operator["name"] for operator in top} <= ran
    self_ms = [operator["self_ms"] for operator in top]
    assert self_ms == sorted(self_ms, reverse=True)
    assert sum(self_ms) <= profiled.result[mode]["host_ms"]


def test_summary_ends_with_each_trace_and_its_viewer(profiled):
    """The table's last line is a trace to open, and names the viewer that opens it."""
    last = profile.render(profiled.result).splitlines()[-1]
    assert last.startswith("trace")
    assert profiled.result["trace"] in profile.render(profiled.result)
    assert "Perfetto" in last


def test_off_npu_the_summary_says_the_trace_shows_the_cpu_path_only(profiled):
    """Unless npugraph_ex ran, the note says the trace shows the CPU path only."""
    if select_backend().is_npugraph_ex:
        assert profiled.result["note"] is None
    else:
        assert "CPU path only" in profiled.result["note"]
        assert "CPU path only" in profile.render(profiled.result)


def test_plot_writes_a_png(profiled):
    """--plot FILE.png writes a PNG image."""
    pytest.importorskip(
        "matplotlib", reason="needs matplotlib, the plot extra: pip install -e '.[plot]'"
    )
    assert profiled.plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_plot_without_matplotlib_exits_2_and_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    """Without matplotlib, --plot stops before anything runs, exit 2, naming the install command."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # not importable, installed or not
    out = tmp_path / "prof"
    assert profile.main(["--plot", str(tmp_path / "p.png"), "--out", str(out)]) == 2
    assert "pip install -e '.[plot]'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("arguments", "names"),
    [
        (["--out", "a_file"], "--out"),
        (["--plot", "profile.txt"], ".png"),
        (["--plot", "missing/profile.png"], "does not exist"),
    ],
)
def test_an_unwritable_output_exits_2_before_anything_runs(
    arguments, names, monkeypatch, tmp_path, capsys
):
    """--out naming a file, or --plot naming another format or a missing folder, exits 2 with
    the fix before any profiling."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("")
    assert profile.main(arguments) == 2
    assert names in capsys.readouterr().err
    assert not (tmp_path / profile.DEFAULT_OUT).exists()


class Counts(torch.nn.Module):
    """A model with state: each call counts itself in a buffer and scales its input by the count."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return x * self.calls


def test_each_mode_runs_a_model_of_its_own(monkeypatch):
    """Graph mode's first step starts from a fresh model, whatever eager's steps left behind."""
    monkeypatch.setattr(bench, "build_model", Counts)
    monkeypatch.setattr(bench, "example_inputs", lambda: (torch.ones(3),))
{%- if cookiecutter.workload == "decode" %}
    # A one-step model: its input is the step, with no prefill.
    monkeypatch.setattr(bench, "first_step", lambda model, *inputs: inputs)
{%- endif %}
{%- if tp %}
    monkeypatch.setattr(bench, "parallel_plan", lambda world_size: {})
{%- endif %}
    torch._dynamo.reset()
    backend = select_backend()
{%- if tp %}
    with torch.no_grad(), tensor_parallel(backend.device) as ranks:
        job = profile.workload(backend, ranks)
{%- else %}
    with torch.no_grad():
        job = profile.workload(backend)
{%- endif %}
        eager = [job.steps["eager"]().clone() for _ in range(3)]
        graph = job.steps["graph"]().clone()
    assert eager[-1].tolist() == [3.0] * 3
    assert graph.tolist() == eager[0].tolist()


# kernel_details.csv's columns: "Step Id", then the kernel view's (torch_npu 2.13
# profiler/analysis/prof_view/_kernel_view_parser.py, prof_common_func/_csv_headers.py).
KERNEL_HEADERS = ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)"]
KERNEL_HEADERS += ["Duration(us)", "Wait Time(us)", "Block Num"]


def write_npu_profile(folder: Path) -> Path:
    """A trace_view.json and kernel_details.csv as torch_npu writes them (a bare event list,
    "ts" as a string, every range "cpu_op"): two eager steps, then two graph steps that each
    replay their aclgraph; each step launches one kernel per operator."""
    output = folder / "host_1_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    output.mkdir(parents=True)
    events, kernels = [], []

    def add(name: str, start: float, duration: float) -> None:
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": 1,
                "tid": 1,
                "ts": f"{start:.3f}",
                "dur": duration,
            }
        )

    for step, mode in enumerate(["eager", "eager", "graph", "graph"], start=1):
        start = step * 1000.0
        add(f"ProfilerStep#{step}", start, 900.0)
        add(f"{mode} step", start + 10, 800.0)
        if mode == "eager":
            add("aten::linear", start + 20, 300.0)
            add("aten::mm", start + 30, 200.0)
            add("aten::relu", start + 400, 100.0)
            names = ["mm", "relu"]
        else:
            add("Torch-Compiled Region: 0/0", start + 20, 100.0)
            add("acl_graph_replay", start + 30, 50.0)
            names = ["mm", "relu", "add"]
        kernels += [[step, 0, name, name, "AI_CORE", start, 5.0, 0, 1] for name in names]
    (output / "trace_view.json").write_text(json.dumps(events))
    with (output / "kernel_details.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(KERNEL_HEADERS)
        writer.writerows(kernels)
    return output / "trace_view.json"


def test_an_npu_profile_counts_replays_and_each_steps_kernels(tmp_path):
    """From torch_npu's files: replays per graph step, and each mode's kernels and device time from
    kernel_details.csv, matched to its steps by their Step Id."""
    summary = profile.summarize_trace(write_npu_profile(tmp_path))
    eager, graph = summary["eager"], summary["graph"]
    assert (eager["replays"], graph["replays"], graph["captures"]) == (0, 1, 0)
    assert (eager["operators"], graph["operators"]) == (3, 0)
    assert (eager["kernels"], graph["kernels"]) == (2, 3)
    assert (eager["device_ms"], graph["device_ms"]) == (pytest.approx(0.010), pytest.approx(0.015))
    assert eager["top_operators"][0] == {"name": "aten::mm", "self_ms": 0.2, "calls": 1}
    assert eager["top_operators"][1]["name"] == "aten::linear"
    assert eager["top_operators"][1]["self_ms"] == pytest.approx(0.1)  # 300 less mm's 200 us
{%- if tp %}


def test_slowest_rank_is_the_one_with_the_highest_graph_host_time():
    """The summary's figures are the slowest rank's, named under "ranks", with every rank's trace."""
    results = [
        {
            "graph": {"host_ms": ms},
            "trace": f"rank{rank}.json",
            "open": [(f"rank{rank}.json", "Perfetto")],
        }
        for rank, ms in enumerate([1.0, 3.0, 2.0])
    ]

    class Group:
        size, backend = 3, "gloo"

    result = profile.slowest_rank(results, Group)
    assert result["graph"]["host_ms"] == 3.0
    assert result["ranks"] == {"size": 3, "backend": "gloo", "slowest": 1}
    assert result["traces"] == ["rank0.json", "rank1.json", "rank2.json"]
    opened = [path for path, _ in result["open"]]
    assert opened == [f"rank{rank}.json (rank {rank})" for rank in range(3)]


def test_torchrun_ranks_each_write_a_trace_and_rank_0_prints_once(two_ranks):
    """Under torchrun every rank profiles and exits 0, each into its own trace, and rank 0 alone
    prints one summary naming the slowest rank.

    (two_ranks.py runs `profile --steps 2 --json` on each rank.)
    """
    steps = [two_ranks.results[rank]["profile"] for rank in range(two_ranks.size)]
    assert [step["value"] for step in steps] == [0] * two_ranks.size
    (printed,) = "".join(step["printed"] for step in steps).splitlines()
    assert steps[0]["printed"] == f"{printed}\n"
    result = json.loads(printed)
    assert result["ranks"]["size"] == two_ranks.size
    assert result["ranks"]["slowest"] in range(two_ranks.size)
    traces = [Path(trace) for trace in result["traces"]]
    # The worker name leads the file's name (torch.profiler) or its profile folder's (torch_npu).
    owners = [
        {part.partition(".")[0].partition("_")[0] for part in trace.parts} for trace in traces
    ]
    assert [f"rank{rank}" in owner for rank, owner in enumerate(owners)] == [True] * two_ranks.size
    for trace in traces:
        events = events_of(trace)
        for mode in ("eager", "graph"):
            assert len(step_ranges(events, mode)) == STEPS
{%- endif %}
