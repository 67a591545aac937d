"""profile: eager against graph mode under the profiler, a trace, and a summary that agrees with it."""

import contextlib
import csv
import enum
import importlib
import importlib.util
import io
import json
import os
import struct
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple, Self

import pytest
import torch
from torch.profiler import ProfilerAction

from forward_project import model
from forward_project.toolkit import profile
from forward_project.toolkit.backend import BACKEND_ENV, Backend, select_backend
from forward_project.toolkit.contract import describe_tree, to_device

STEPS = 2
"""Profiled steps of each mode: enough to average, few enough to stay quick."""
GRAPH_MARKERS = {
    "forward_project": (profile.COMPILED_REGION,),
    "cache_project": (profile.COMPILED_REGION, "cache_compiler inference"),
}
"""What only compiled code puts in a trace, by project: Dynamo's range around it, or in
cache_compile mode a loaded graph's."""


@pytest.fixture(autouse=True)
def default_backend(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)


class Profiled(NamedTuple):
    result: dict[str, Any]
    """What `profile --json` printed."""
    out: Path
    """--out: where the trace must be."""
    plot: Path | None
    """--plot's file, if matplotlib is installed here."""
    waits: list[str]
    """The device of each wait for the device (synchronize()), in order."""


def profile_run(project: str, folder: Path) -> Profiled:
    """`profile --steps STEPS --json` (and --plot if matplotlib is here) on the project's sample
    model, in `folder`, noting each wait for the device."""
    tool = importlib.import_module(f"{project}.toolkit.profile")
    arguments = ["--steps", str(STEPS), "--out", str(folder / "prof"), "--json"]
    plot = folder / "profile.png" if importlib.util.find_spec("matplotlib") else None
    if plot:
        arguments += ["--plot", str(plot)]
    torch._dynamo.reset()
    printed, errors = io.StringIO(), io.StringIO()
    waits: list[str] = []
    synchronize = tool.synchronize

    def noted(device: str) -> None:
        waits.append(device)
        synchronize(device)

    with (
        pytest.MonkeyPatch.context() as monkeypatch,
        contextlib.chdir(folder),  # a cache_compile cache is built afresh, in here
        contextlib.redirect_stdout(printed),
        contextlib.redirect_stderr(errors),
    ):
        monkeypatch.delenv(BACKEND_ENV, raising=False)
        monkeypatch.setattr(tool, "synchronize", noted)
        code = tool.main(arguments)
    assert code == 0, errors.getvalue()
    return Profiled(json.loads(printed.getvalue()), folder / "prof", plot, waits)


@pytest.fixture(scope="module")
def profiled_project(tmp_path_factory) -> Iterator[Any]:
    """profiled_project(project): profile_run() of that project, run once for the module."""
    runs: dict[str, Profiled] = {}

    def of(project: str) -> Profiled:
        if project not in runs:
            runs[project] = profile_run(project, tmp_path_factory.mktemp(project))
        return runs[project]

    return of


@pytest.fixture(scope="module")
def profiled(profiled_project) -> Profiled:
    """The default project's sample model profiled: the run most tests here read."""
    return profiled_project("forward_project")


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


@pytest.mark.parametrize("project", list(GRAPH_MARKERS))
def test_graph_steps_run_compiled_code_and_eager_steps_do_not(profiled_project, project):
    """Each `graph step` range holds compiled code and no `eager step` range does, in either
    mode of compiling: the steps are in their own ranges."""
    events = events_of(Path(profiled_project(project).result["trace"]))

    def compiled(outer: dict[str, Any]) -> bool:
        markers = GRAPH_MARKERS[project]
        return any(event["name"].startswith(markers) for event in inside(events, outer))

    assert all(compiled(each) for each in step_ranges(events, "graph"))
    assert not any(compiled(each) for each in step_ranges(events, "eager"))


def test_the_result_names_the_inputs_and_the_steps_it_profiled(profiled):
    """--json names the inputs profile ran on, example_inputs() on the backend's device, and the
    number of steps asked for."""
    inputs = to_device(model.example_inputs(), select_backend().device)
    assert profiled.result["inputs"] == describe_tree(inputs)
    assert profiled.result["steps"] == STEPS


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


def test_profile_waits_for_the_device_after_warming_up_and_after_every_step(profiled):
    """profile waits for the backend's device after the warm-up calls and after each profiled
    step (the profiler's warm-up step, then STEPS of each mode): no step's device work spills
    into the next one's range."""
    assert profiled.waits == [profiled.result["device"]] * (2 + 2 * STEPS)


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
    pytest.importorskip("matplotlib", reason="needs matplotlib, the plot extra: pip install -e '.[plot]'")
    assert profiled.plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_plot_without_matplotlib_exits_2_and_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    """Without matplotlib, --plot stops before anything runs, exit 2, naming the install command."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # not importable, installed or not
    out = tmp_path / "prof"
    assert profile.main(["--plot", str(tmp_path / "p.png"), "--out", str(out)]) == 2
    assert "pip install -e '.[plot]'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        (["--out", "a_file"], "--out a_file is a file: pass a folder (it is created if missing)"),
        (
            ["--plot", "profile.txt"],
            "--plot profile.txt: name a .png, .svg, .pdf file, e.g. profile.png",
        ),
        (
            ["--plot", "missing/profile.png"],
            "--plot missing/profile.png: the folder missing does not exist; create it first",
        ),
    ],
)
def test_an_unwritable_output_exits_2_before_anything_runs(arguments, refusal, monkeypatch, tmp_path, capsys):
    """--out naming a file, or --plot naming another format or a missing folder, exits 2 with
    the fix before any profiling."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("")
    assert profile.main(arguments) == 2
    assert capsys.readouterr().err == f"profile: {refusal}\n"
    assert not (tmp_path / profile.DEFAULT_OUT).exists()


class Counts(torch.nn.Module):
    """A model with state: each call counts itself in a buffer and scales its input by the count."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return x * self.calls


def counting_model(project: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The project's profile runs the Counts model on one input, torch.ones(3): as the step, with
    no prefill, in a decode project; unsharded, with tensor parallelism."""
    model = importlib.import_module(f"{project}.model")
    settings = importlib.import_module(f"{project}.toolkit.project")
    monkeypatch.setattr(model, "build_model", Counts)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.ones(3),))
    if settings.DECODE:
        decode = importlib.import_module(f"{project}.toolkit.decode")
        monkeypatch.setattr(decode, "first_step", lambda model, *inputs: inputs)
    if settings.TENSOR_PARALLEL:
        model_py = importlib.import_module(f"{project}.model")
        monkeypatch.setattr(model_py, "parallel_plan", lambda world_size: {})


@pytest.fixture(params=["forward_project", "decode_project", "parallel_project"])
def counting_workload(request, monkeypatch) -> Iterator[profile.Workload]:
    """profile's workload of the Counts model (counting_model()) in each kind of project, each
    mode's step not run yet."""
    project = request.param
    counting_model(project, monkeypatch)
    tool = importlib.import_module(f"{project}.toolkit.profile")
    backend = importlib.import_module(f"{project}.toolkit.backend").select_backend()
    torch._dynamo.reset()
    with torch.no_grad():
        if importlib.import_module(f"{project}.toolkit.project").TENSOR_PARALLEL:
            parallel = importlib.import_module(f"{project}.toolkit.parallel")
            with parallel.tensor_parallel(backend.device) as ranks:
                yield tool.workload(backend, ranks)
        else:
            yield tool.workload(backend)


def test_each_mode_runs_a_model_of_its_own(counting_workload):
    """Graph mode's first step starts from a fresh model, whatever eager's steps left behind."""
    eager = [counting_workload.steps["eager"]().clone() for _ in range(3)]
    graph = counting_workload.steps["graph"]().clone()
    assert eager[-1].tolist() == [3.0] * 3
    assert graph.tolist() == eager[0].tolist()


def test_the_summary_names_the_inputs_the_steps_run_on(counting_workload):
    """The summary's inputs row describes what the steps run on: example_inputs() on the device."""
    device = select_backend().device
    assert counting_workload.inputs == describe_tree((torch.ones(3, device=device),))


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


def test_an_npu_run_s_result_names_its_profiler_and_the_profile_folder(tmp_path):
    """An npugraph_ex run on an NPU: torch_npu's profiler, the figures its files hold, the trace
    for Perfetto and its whole profile folder for MindStudio Insight, and no note."""
    trace = write_npu_profile(tmp_path)
    backend = Backend("npugraph_ex", "npu", "Ascend910B2, torch_npu 2.11.0")
    result = profile.result_of(backend, profile.NPU_TRACER, "(Tensor[1, 8] float32,)", 2, trace)
    assert result == {
        "tracer": "torch_npu.profiler",
        "backend": "npugraph_ex",
        "reason": "Ascend910B2, torch_npu 2.11.0",
        "device": "npu",
        "inputs": "(Tensor[1, 8] float32,)",
        "steps": 2,
        **profile.summarize_trace(trace),
        "trace": str(trace),
        "open": [
            (str(trace), "Perfetto (https://ui.perfetto.dev) or chrome://tracing"),
            (
                str(tmp_path / "host_1_20260101000000000_ascend_pt"),
                "MindStudio Insight, or TensorBoard with torch-tb-profiler-ascend",
            ),
        ],
        "note": None,
    }


@pytest.mark.parametrize(("device", "tracer"), [("npu", "torch_npu.profiler"), ("cpu", "torch.profiler")])
def test_torch_npu_profiles_on_an_npu_and_torch_elsewhere(device, tracer):
    """On an NPU torch_npu's profiler records the steps, whatever the backend; elsewhere torch's."""
    assert profile.tracer_for(Backend("eager", device, "a test")).name == tracer


@pytest.mark.parametrize(
    ("backend", "note"),
    [
        (Backend("npugraph_ex", "npu", "Ascend910B2"), None),
        (
            Backend("aot_eager", "cpu", "torch_npu is not installed"),
            (
                "aot_eager stands in for npugraph_ex and torch.profiler for torch_npu's: this "
                "trace shows the CPU path only (no device time, no kernels, no aclgraph replay)"
            ),
        ),
        (
            Backend("eager", "npu", "forced by NPUGRAPH_BACKEND"),
            "eager ran instead of npugraph_ex (forced by NPUGRAPH_BACKEND): no aclgraph to replay",
        ),
    ],
)
def test_the_note_says_what_the_trace_cannot_show(backend, note):
    """No note when npugraph_ex ran on an NPU; off NPU the trace shows the CPU path only; on an
    NPU another backend leaves no aclgraph to replay, and the note says why it ran."""
    assert profile.note(backend) == note


def figures_of(
    host_ms: float,
    operators: float,
    regions: float,
    top: list[tuple[str, float, float]],
    **npu: Any,
) -> dict[str, Any]:
    """One mode's per-step figures as summarize_mode() gives them: off NPU, unless `npu` sets
    device_ms, kernels, top_kernels and the aclgraph counts."""
    return {
        "steps": 2,
        "host_ms": host_ms,
        "operators": operators,
        "compiled_regions": regions,
        "replays": 0.0,
        "captures": 0.0,
        "eager_fallbacks": 0.0,
        "top_operators": [{"name": name, "self_ms": ms, "calls": calls} for name, ms, calls in top],
        "device_ms": None,
        "kernels": None,
        "top_kernels": None,
        **npu,
    }


CPU_TRACE = "prof/host_1.1767225600000.pt.trace.json"
NPU_TRACE = "prof/host_1_20260101000000000_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"


def cpu_result() -> dict[str, Any]:
    """A result off NPU, every figure unlike the others."""
    return {
        "tracer": "torch.profiler",
        "backend": "aot_eager",
        "reason": "torch_npu is not installed",
        "device": "cpu",
        "inputs": "(Tensor[2, 8] float32,)",
        "steps": 2,
        "eager": figures_of(1.23456, 2.5, 0.0, [("aten::mm", 0.5, 1.0), ("aten::relu", 0.25, 1.5)]),
        "graph": figures_of(0.5, 3.0, 1.0, [("aten::addmm", 0.125, 1.0)]),
        "trace": CPU_TRACE,
        "open": [(CPU_TRACE, profile.PERFETTO)],
        "note": "what the trace cannot show",
    }


def npu_result() -> dict[str, Any]:
    """A result of npugraph_ex on an NPU, every figure unlike the others."""
    eager_kernels = [{"name": "MatMulV2", "device_ms": 0.5}]
    graph_kernels = [{"name": "MatMulV2", "device_ms": 0.25}, {"name": "Add", "device_ms": 0.0625}]
    return {
        "tracer": "torch_npu.profiler",
        "backend": "npugraph_ex",
        "reason": "Ascend910B2, torch_npu 2.11.0",
        "device": "npu",
        "inputs": "(Tensor[2, 8] float16,)",
        "steps": 3,
        "eager": figures_of(
            2.0,
            4.0,
            0.0,
            [("aten::mm", 0.75, 2.0)],
            device_ms=0.8766,
            kernels=4.0,
            top_kernels=eager_kernels,
        ),
        "graph": figures_of(
            0.25,
            0.0,
            1.0,
            [("aten::empty", 0.015625, 1.0)],
            device_ms=0.375,
            kernels=3.0,
            replays=1.0,
            top_kernels=graph_kernels,
        ),
        "trace": NPU_TRACE,
        "open": profile.viewers(Path(NPU_TRACE), profile.NPU_TRACER.name),
        "note": None,
    }


def test_summary_off_npu_reads_every_host_figure_under_its_mode():
    """Off NPU the summary: what ran, the host figures of each mode in two columns (no rows for
    what only an NPU measures), each mode's top operators, the note, and the trace's viewer."""
    assert profile.render(cpu_result()).splitlines() == [
        "profiler            torch.profiler, 2 steps of each mode after 1 warm-up",
        "backend             aot_eager (torch_npu is not installed)",
        "device              cpu",
        "inputs              (Tensor[2, 8] float32,)",
        "per step                   eager       graph",
        "  host ms                  1.235       0.500",
        "  operators                  2.5           3",
        "  compiled regions             0           1",
        "eager top 5         self ms per step, calls per step",
        "                        0.500      1  aten::mm",
        "                        0.250    1.5  aten::relu",
        "graph top 5         self ms per step, calls per step",
        "                        0.125      1  aten::addmm",
        "note                what the trace cannot show",
        f"trace               {CPU_TRACE}: open in Perfetto (https://ui.perfetto.dev) or chrome://tracing",
    ]


def test_summary_on_an_npu_adds_device_time_kernels_and_aclgraph_counts():
    """On an NPU the summary adds device time, kernels and graph replays, captures and eager
    fallbacks per step, each mode's top kernels by device time, and the profile folder to open."""
    folder = NPU_TRACE.removesuffix("/ASCEND_PROFILER_OUTPUT/trace_view.json")
    assert profile.render(npu_result()).splitlines() == [
        "profiler            torch_npu.profiler, 3 steps of each mode after 1 warm-up",
        "backend             npugraph_ex (Ascend910B2, torch_npu 2.11.0)",
        "device              npu",
        "inputs              (Tensor[2, 8] float16,)",
        "per step                   eager       graph",
        "  host ms                  2.000       0.250",
        "  device ms                0.877       0.375",
        "  operators                    4           0",
        "  kernels                      4           3",
        "  compiled regions             0           1",
        "  graph replays                0           1",
        "  graph captures               0           0",
        "  eager fallbacks              0           0",
        "eager top 5         self ms per step, calls per step",
        "                        0.750      2  aten::mm",
        "                        0.500  device  MatMulV2",
        "graph top 5         self ms per step, calls per step",
        "                        0.016      1  aten::empty",
        "                        0.250  device  MatMulV2",
        "                        0.062  device  Add",
        f"trace               {NPU_TRACE}: open in Perfetto (https://ui.perfetto.dev) or chrome://tracing",
        f"trace               {folder}: open in MindStudio Insight, or TensorBoard with torch-tb-profiler-ascend",
    ]


def test_summary_on_an_npu_without_kernel_details_shows_dashes():
    """On an NPU whose profile has no kernel_details.csv, device time and kernels read "-"."""
    result = npu_result()
    for mode in profile.MODES:
        result[mode].update(device_ms=None, kernels=None, top_kernels=None)
    lines = profile.render(result).splitlines()
    assert "  device ms                    -           -" in lines
    assert "  kernels                      -           -" in lines


class Drawn(NamedTuple):
    size: tuple[int, int]
    """The image's width and height in pixels."""
    canvas: Any
    """The matplotlib Figure that plot() saved, to read its panels back."""


def draw(result: dict[str, Any], folder: Path) -> Drawn:
    """plot() the result into a PNG file in `folder`, read back as a viewer of the file sees it."""
    figure = pytest.importorskip(
        "matplotlib.figure", reason="needs matplotlib, the plot extra: pip install -e '.[plot]'"
    )
    saved = []
    savefig = figure.Figure.savefig

    def keep(canvas, *arguments, **keywords):
        saved.append(canvas)
        return savefig(canvas, *arguments, **keywords)

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(figure.Figure, "savefig", keep)
        profile.plot(result, folder / "profile.png")
    # A PNG's width and height: the first chunk's (IHDR) first two fields.
    size = struct.unpack(">II", (folder / "profile.png").read_bytes()[16:24])
    (canvas,) = saved
    return Drawn(size, canvas)


@pytest.fixture(scope="module")
def cpu_plot(tmp_path_factory) -> Drawn:
    """--plot of cpu_result(), drawn once for the tests that read it."""
    return draw(cpu_result(), tmp_path_factory.mktemp("plot"))


def bars(axes) -> dict[str, list[tuple[float, float, float]]]:
    """Each bar series of `axes` by its label: (centre, length, thickness) of each bar."""
    series = {}
    for container in axes.containers:
        shapes = []
        for bar in container:
            x, y, width, height = bar.get_x(), bar.get_y(), bar.get_width(), bar.get_height()
            if container.orientation == "vertical":
                shapes.append((x + width / 2, height, width))
            else:
                shapes.append((y + height / 2, width, height))
        series[container.get_label()] = [tuple(round(each, 6) for each in shape) for shape in shapes]
    return series


def legend(axes) -> list[str]:
    return [text.get_text() for text in axes.get_legend().get_texts()]


def test_plot_is_a_wide_png_of_two_panels_titled_by_what_ran(cpu_plot):
    """--plot draws a 1200x500 image, laid out so that no label overlaps: a narrow panel of time
    per step beside one three times as wide of the top operators, under a title naming the
    backend and device."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    size, canvas = cpu_plot
    assert size == (1200, 500)
    assert isinstance(canvas.get_layout_engine(), ConstrainedLayoutEngine)
    assert canvas.get_suptitle() == "eager against graph mode: aot_eager on cpu"
    timing, operators = canvas.axes
    grid = timing.get_subplotspec().get_gridspec()
    assert grid is operators.get_subplotspec().get_gridspec()
    assert (grid.get_geometry(), grid.get_width_ratios()) == ((1, 2), [1, 3])
    assert (timing.get_title(), timing.get_ylabel()) == ("time per step", "ms per step")
    assert operators.get_title() == "top 5 operators by self time, each mode"
    assert operators.get_xlabel() == "self ms per step"


def test_plot_off_npu_draws_host_time_per_mode(cpu_plot):
    """Off NPU the time panel has one bar per mode, its host ms per step, under its name."""
    timing, _ = cpu_plot.canvas.axes
    assert bars(timing) == {"host": [(0, 1.23456, 0.8), (1, 0.5, 0.8)]}
    assert legend(timing) == ["host"]
    assert list(timing.get_xticks()) == [0, 1]
    assert [label.get_text() for label in timing.get_xticklabels()] == ["eager", "graph"]


def test_plot_on_an_npu_draws_host_and_device_time_side_by_side(tmp_path):
    """On an NPU each mode has a host and a device bar, side by side around its name."""
    timing, _ = draw(npu_result(), tmp_path).canvas.axes
    assert bars(timing) == {
        "host": [(-0.2, 2.0, 0.4), (0.8, 0.25, 0.4)],
        "device": [(0.2, 0.8766, 0.4), (1.2, 0.375, 0.4)],
    }
    assert legend(timing) == ["host", "device"]


def test_plot_draws_every_top_operator_of_either_mode_with_both_bars(cpu_plot):
    """Every operator in either mode's top list gets a row, eager's first and slowest on top,
    with an eager and a graph bar of its self ms per step (0 where the mode's list lacks it)."""
    _, operators = cpu_plot.canvas.axes
    assert [label.get_text() for label in operators.get_yticklabels()] == [
        "aten::mm",
        "aten::relu",
        "aten::addmm",
    ]
    assert list(operators.get_yticks()) == [0, 1, 2]
    assert operators.yaxis_inverted()
    assert bars(operators) == {
        "eager": [(-0.2, 0.5, 0.4), (0.8, 0.25, 0.4), (1.8, 0.0, 0.4)],
        "graph": [(0.2, 0.0, 0.4), (1.2, 0.0, 0.4), (2.2, 0.125, 0.4)],
    }
    assert legend(operators) == ["eager", "graph"]


# torch_npu.profiler as torch-npu 2.13 defines it, reduced to what npu_profiler() calls: the
# real signatures and defaults, each argument resolved as the real code resolves it (an invalid
# one reset, with the warning torch_npu prints), kept for the test to read. From torch_npu/
# profiler/: profiler.py (tensorboard_trace_handler L180-198, profile L201-260),
# profiler_interface.py (L97-105: no experimental_config means the default one), scheduler.py
# (Schedule L34-110), experimental_config.py (L54-105, checks L156-260) and
# _profiler_path_creator.py (ProfPathCreator.init L28-48).
NPU_WARNINGS: list[str] = []
"""What the simulated torch_npu.profiler warned about, in order: arguments it had to reset."""


class NpuActivity(enum.Enum):
    """torch_npu._C._profiler.ProfilerActivity: CPU and NPU only (profiler_interface.py L249)."""

    CPU = 0
    NPU = 1


class NpuSchedule:
    """scheduler.py Schedule: an invalid count is reset, and no warm-up step is warned about."""

    def __init__(self, wait, active, warmup=0, repeat=0, skip_first=0, skip_first_wait=0) -> None:
        self.wait = checked("wait", wait, least=0, default=0)
        self.warmup = checked("warmup", warmup, least=0, default=0)
        self.active = checked("active", active, least=1, default=1)
        self.repeat = checked("repeat", repeat, least=0, default=0)
        self.skip_first = checked("skip_first", skip_first, least=0, default=0)
        self.skip_first_wait = skip_first_wait
        if self.warmup == 0:
            NPU_WARNINGS.append("Profiler won't be using warmup, this can skew profiler results")

    def __call__(self, step: int) -> ProfilerAction:
        # Schedule.__call__ (L51-76), as written there.
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        if self.skip_first_wait != 0:
            step += self.wait
        num_steps = self.wait + self.warmup + self.active
        if self.repeat > 0 and step / num_steps >= self.repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < self.wait:
            return ProfilerAction.NONE
        if mod_step < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE


def checked(name: str, value: Any, least: int, default: int) -> int:
    """Schedule._check_params: an integer of at least `least`, or `default` and a warning."""
    if isinstance(value, int) and value >= least:
        return value
    NPU_WARNINGS.append(f"Invalid parameter {name}, reset it to {default}.")
    return default


LEVELS = ("Level0", "Level1", "Level2", "Level_none")
PIPE_UTILIZATION, AI_CORE_NONE = "ACL_AICORE_PIPE_UTILIZATION", "ACL_AICORE_NONE"


class NpuExperimentalConfig:
    """experimental_config.py _ExperimentalConfig: the level, AI Core metrics and export types
    it ends up with, after its own checks."""

    def __init__(
        self,
        profiler_level="Level0",
        aic_metrics=PIPE_UTILIZATION,
        l2_cache=False,
        msprof_tx=False,
        mstx=False,
        data_simplification=True,
        record_op_args=False,
        op_attr=False,
        gc_detect_threshold=None,
        export_type="text",
        host_sys=None,
        mstx_domain_include=None,
        mstx_domain_exclude=None,
        sys_io=False,
        sys_interconnection=False,
    ) -> None:
        if isinstance(export_type, str) and export_type:
            export_type = [export_type]
        elif not isinstance(export_type, list) or not export_type:
            NPU_WARNINGS.append(f"Invalid parameter export_type: {export_type}, reset it to text.")
            export_type = ["text"]
        if profiler_level in {"Level0", "Level_none"} and aic_metrics != AI_CORE_NONE:
            NPU_WARNINGS.append(
                "Please use level1 or level2 if you want to collect aic metrics, reset aic metrics to None!"
            )
            aic_metrics = AI_CORE_NONE
        if profiler_level not in LEVELS:
            NPU_WARNINGS.append("Invalid parameter profiler_level, reset it to ProfilerLevel.Level0.")
            profiler_level = "Level0"
        if not set(export_type) <= {"text", "db"}:
            NPU_WARNINGS.append("Invalid parameter export_type, reset it to text.")
            export_type = ["text"]
        self.settings = {
            "profiler_level": profiler_level,
            "aic_metrics": aic_metrics,
            "export_type": export_type,
        }


class NpuTraceHandler:
    """tensorboard_trace_handler's result: the profile's parent folder, and the worker name its
    folder starts with (ProfPathCreator: no dir_name means the working directory, a dir_name that
    is not a non-empty str is reset to it with a warning, no worker_name means the host's name)."""

    def __init__(self, dir_name=None, worker_name=None, analyse_flag=True, async_mode=False):
        if dir_name is not None and not (dir_name and isinstance(dir_name, str)):
            NPU_WARNINGS.append("Invalid parameter dir_name, reset it to default.")
            dir_name = None
        self.folder = os.path.realpath(dir_name) if dir_name else str(Path.cwd())
        self.worker = worker_name or "the host's name"


class NpuProfile:
    """profiler.py profile: keyword arguments only; without a callable schedule it records every
    step and marks none (no ProfilerStep#N), without activities it takes those the C extension
    supports, and without an experimental_config the default one."""

    def __init__(
        self,
        *,
        activities=None,
        schedule=None,
        on_trace_ready=None,
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
        with_flops=False,
        with_modules=False,
        experimental_config=None,
        execution_trace_observer=None,
        custom_trace_id_callback=None,
        use_cuda=None,
    ) -> None:
        self.activities = set(activities) if activities else "supported_activities()"
        self.schedule = schedule if callable(schedule) else None
        self.on_trace_ready = on_trace_ready
        self.experimental_config = experimental_config or NpuExperimentalConfig()


@pytest.fixture
def torch_npu_profiler(monkeypatch) -> types.SimpleNamespace:
    """The simulated torch_npu.profiler, importable as torch_npu's, with no warning yet."""
    simulated = types.SimpleNamespace(
        profile=NpuProfile,
        ProfilerActivity=NpuActivity,
        schedule=NpuSchedule,
        tensorboard_trace_handler=NpuTraceHandler,
        _ExperimentalConfig=NpuExperimentalConfig,
        ProfilerLevel=types.SimpleNamespace(**{level: level for level in LEVELS}),
        AiCMetrics=types.SimpleNamespace(PipeUtilization=PIPE_UTILIZATION, AiCoreNone=AI_CORE_NONE),
        ExportType=types.SimpleNamespace(Db="db", Text="text"),
    )
    monkeypatch.setitem(sys.modules, "torch_npu", types.SimpleNamespace(profiler=simulated))
    NPU_WARNINGS.clear()
    return simulated


def test_on_an_npu_the_profiler_is_set_up_as_ascends_guide_sets_it(torch_npu_profiler, tmp_path):
    """torch_npu's profiler records CPU and NPU activity: one warm-up step, then the `active`
    steps and nothing after; its trace handler writes into --out under the worker's name; Level0,
    no AI Core metrics, text export. torch_npu resets none of it, so it warns about nothing."""
    out = tmp_path / "prof"
    prof = profile.npu_profiler(out, "rank1", 3)
    assert prof.activities == {NpuActivity.CPU, NpuActivity.NPU}
    assert [prof.schedule(step) for step in range(6)] == [
        ProfilerAction.WARMUP,
        ProfilerAction.RECORD,
        ProfilerAction.RECORD,
        ProfilerAction.RECORD_AND_SAVE,
        ProfilerAction.NONE,
        ProfilerAction.NONE,
    ]
    handler = prof.on_trace_ready
    assert (handler.folder, handler.worker) == (os.path.realpath(out), "rank1")
    assert prof.experimental_config.settings == {
        "profiler_level": "Level0",
        "aic_metrics": AI_CORE_NONE,
        "export_type": ["text"],
    }
    assert NPU_WARNINGS == []


def test_off_npu_the_profiler_records_the_cpu_alone(monkeypatch, tmp_path):
    """Off NPU torch.profiler records the CPU only, even where torch could trace more (CUDA, or
    an NPU through torch_npu's PrivateUse1 device): the stand-in's trace is the CPU path."""
    activity = torch.profiler.ProfilerActivity
    everything = {activity.CPU, activity.CUDA, activity.PrivateUse1}
    monkeypatch.setattr(
        sys.modules[torch.profiler.profile.__module__], "supported_activities", lambda: everything
    )
    assert profile.cpu_profiler(tmp_path, None, 1).activities == {activity.CPU}


def tiny_steps() -> dict[str, profile.Step]:
    """An eager and a "graph" step of one operator each: enough for a trace, nothing compiled."""
    ones = torch.ones(4)
    return {"eager": lambda: ones * 2, "graph": lambda: ones + 1}


def test_a_trace_goes_into_a_new_folder_named_after_its_worker(tmp_path):
    """--out may name a folder inside one that does not exist yet: both are created, and the
    trace in it starts with the worker's name."""
    out = tmp_path / "runs" / "prof"
    trace = profile.profile_steps(profile.CPU_TRACER, tiny_steps(), 1, out, worker="rank1")
    assert trace.parent == out.resolve()
    assert trace.name.startswith("rank1.")


def test_a_second_run_into_the_same_folder_reads_its_own_trace(tmp_path):
    """A run into a folder that an earlier run wrote to returns the trace it wrote itself."""
    first = profile.profile_steps(profile.CPU_TRACER, tiny_steps(), 1, tmp_path)
    second = profile.profile_steps(profile.CPU_TRACER, tiny_steps(), 1, tmp_path)
    assert second != first
    assert sorted(tmp_path.glob("*.pt.trace.json")) == sorted([first, second])


class Writes:
    """A profiler that writes the given files, each with its modification time, when it stops."""

    def __init__(self, out: Path, files: dict[str, float]) -> None:
        self.out, self.files = out, files

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for name, mtime in self.files.items():
            (self.out / name).write_text("{}")
            os.utime(self.out / name, (mtime, mtime))

    def step(self) -> None:
        pass


def writing(files: dict[str, float]) -> profile.Tracer:
    return profile.Tracer("a test profiler", lambda out, worker, active: Writes(out, files), "*.json")


def test_a_profiler_that_writes_no_trace_is_an_error_naming_what_was_looked_for(tmp_path):
    """A profiler that wrote no trace is an error naming the profiler and the path it looked for."""
    with pytest.raises(RuntimeError) as error:
        profile.profile_steps(writing({}), tiny_steps(), 1, tmp_path)
    expected = f"a test profiler wrote no trace matching {tmp_path.resolve() / '*.json'}"
    assert str(error.value) == expected


def test_of_several_new_traces_the_last_written_is_read(tmp_path):
    """If a profiler writes more than one trace, the one written last is read."""
    tracer = writing({"a.json": 2_000_000_000, "b.json": 1_000_000_000, "c.json": 1_500_000_000})
    assert profile.profile_steps(tracer, tiny_steps(), 1, tmp_path).name == "a.json"


def event(name: str, start: float, duration: float, cat: str = "cpu_op", tid: int = 1) -> dict:
    """A complete ("X") event of a torch.profiler trace."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": start, "dur": duration}


@pytest.fixture
def edges(tmp_path) -> dict[str, Any]:
    """The eager figures of a hand-made torch.profiler trace of one step: aten::linear starts
    with the step's range, and aten::mm inside it at the same time; aten::relu ends with the
    range; a runtime call lies inside aten::mm, and another thread runs aten::add meanwhile."""
    events = [
        event("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        event("eager step", 100, 800, cat="user_annotation"),
        event("aten::linear", 100, 300),
        event("aten::mm", 100, 200),
        event("cudaLaunchKernel", 150, 20, cat="cuda_runtime"),
        event("aten::relu", 800, 100),
        event("aten::add", 200, 100, tid=2),
    ]
    trace = tmp_path / "host.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    return profile.summarize_trace(trace)["eager"]


def test_operators_that_start_or_end_with_their_step_are_in_it(edges):
    """An operator that starts or ends exactly when its step's range does is inside the step;
    one on another thread at the same time is not."""
    assert edges["operators"] == 3
    assert {operator["name"] for operator in edges["top_operators"]} == {
        "aten::linear",
        "aten::mm",
        "aten::relu",
    }


def test_self_time_leaves_out_the_operators_inside_even_those_starting_together(edges):
    """An operator's self time is its duration less that of the operators directly inside it,
    even one that starts at the same time; a runtime call (not an operator or a range) takes
    nothing off."""
    self_ms = {operator["name"]: operator["self_ms"] for operator in edges["top_operators"]}
    assert self_ms == pytest.approx({"aten::mm": 0.2, "aten::linear": 0.1, "aten::relu": 0.1})


@pytest.fixture
def one_graph_step(tmp_path) -> dict[str, dict[str, Any]]:
    """The figures of a hand-made torch.profiler trace of one graph step and no eager step: a
    compiled region replaying its aclgraph, then one operator."""
    events = [
        event("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        event("graph step", 100, 500, cat="user_annotation"),
        event("Torch-Compiled Region: 0/0", 110, 300, cat="user_annotation"),
        event("acl_graph_replay", 120, 100, cat="user_annotation"),
        event("aten::add", 450, 50),
    ]
    trace = tmp_path / "host.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    return profile.summarize_trace(trace)


OFF_NPU = {"device_ms": None, "kernels": None, "top_kernels": None}
"""What a trace without kernel_details.csv beside it says of the device: nothing."""


def test_a_mode_with_no_step_in_the_trace_reads_zero(one_graph_step):
    """A mode the trace holds no step of reads zero of everything, not an error."""
    assert one_graph_step["eager"] == {
        "steps": 0,
        "host_ms": 0.0,
        "operators": 0.0,
        "compiled_regions": 0.0,
        "replays": 0.0,
        "captures": 0.0,
        "eager_fallbacks": 0.0,
        "top_operators": [],
        **OFF_NPU,
    }


def test_the_figures_of_one_step_are_that_step_s(one_graph_step):
    """With one step of a mode, its per-step figures are that step's own."""
    assert one_graph_step["graph"] == {
        "steps": 1,
        "host_ms": pytest.approx(0.5),
        "operators": 1.0,
        "compiled_regions": 1.0,
        "replays": 1.0,
        "captures": 0.0,
        "eager_fallbacks": 0.0,
        "top_operators": [{"name": "aten::add", "self_ms": pytest.approx(0.05), "calls": 1.0}],
        **OFF_NPU,
    }


def test_top_kernels_are_the_five_slowest_by_device_time_per_step(tmp_path):
    """On an NPU each mode's top kernels are its five with the most device time per step, a
    kernel's launches summed, slowest first."""
    output = tmp_path / "host_1_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    output.mkdir(parents=True)
    events = []
    durations = [("MatMul", 40), ("Add", 10), ("MatMul", 20), ("Mul", 30), ("Cast", 5)]
    durations += [("Relu", 25), ("Sub", 15), ("Exp", 1)]
    rows = []
    for step in (1, 2):
        start = step * 1000
        events.append(event(f"ProfilerStep#{step}", start, 900, cat="user_annotation"))
        events.append(event("graph step", start + 10, 800, cat="user_annotation"))
        rows += [[step, 0, name, name, "AI_CORE", start, us, 0, 1] for name, us in durations]
    (output / "trace_view.json").write_text(json.dumps(events))
    with (output / "kernel_details.csv").open("w", newline="") as file:
        csv.writer(file).writerows([KERNEL_HEADERS, *rows])
    graph = profile.summarize_trace(output / "trace_view.json")["graph"]
    assert graph["top_kernels"] == [
        {"name": "MatMul", "device_ms": pytest.approx(0.06)},
        {"name": "Mul", "device_ms": pytest.approx(0.03)},
        {"name": "Relu", "device_ms": pytest.approx(0.025)},
        {"name": "Sub", "device_ms": pytest.approx(0.015)},
        {"name": "Add", "device_ms": pytest.approx(0.01)},
    ]


def test_help_names_every_option_with_its_default(help_of):
    """`profile --help` gives the usage under the command's name, what profile does, and each
    option with what it does and its default."""
    printed = help_of(profile.main, "forward_project profile")
    usage = "[-h] [--steps STEPS] [--out OUT] [--plot FILE.png] [--json]"
    assert printed.startswith(f"usage: forward_project profile {usage} ")
    assert (
        " Profile where a step's time goes, eager against graph mode, in the viewers NPU "
        "engineers use. options: "
    ) in printed
    for option in [
        "--steps STEPS profiled steps of each mode (default: 5)",
        "--out OUT folder the traces go to (default: ./prof)",
        "--plot FILE.png also draw the summary",
        "--json print one JSON object, not a table",
    ]:
        assert option in printed


def test_steps_default_to_5_and_may_be_1():
    """Without --steps, 5 steps of each mode are profiled; --steps 1 profiles one."""
    assert profile.parse_args([], None).steps == 5
    assert profile.parse_args(["--steps", "1"], None).steps == 1


def quick_main_of(project: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """The project's profile.main() in tmp_path, whose run() prints a line (as a model may) and
    returns cpu_result() at once."""
    tool = importlib.import_module(f"{project}.toolkit.profile")

    def run(*arguments: Any) -> dict[str, Any]:
        print("a line your model printed")
        return cpu_result()

    monkeypatch.setattr(tool, "run", run)
    monkeypatch.chdir(tmp_path)
    return tool.main


@pytest.fixture
def quick_main(monkeypatch, tmp_path):
    """quick_main_of() the default project."""
    return quick_main_of("forward_project", monkeypatch, tmp_path)


@pytest.mark.parametrize("project", ["forward_project", "parallel_project"])
def test_what_runs_prints_to_stderr_and_stdout_holds_the_json_alone(project, monkeypatch, tmp_path, capsys):
    """Whatever prints while profile runs (your model, torch_npu's profiler) goes to stderr:
    stdout holds the one JSON object, on one device or as rank 0 of a tensor-parallel job."""
    assert quick_main_of(project, monkeypatch, tmp_path)(["--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["eager"] == cpu_result()["eager"]
    assert captured.err == "a line your model printed\n"


def test_without_json_profile_prints_the_summary(quick_main, capsys):
    """Without --json, profile prints the summary table."""
    assert quick_main([]) == 0
    assert capsys.readouterr().out == profile.render(cpu_result()) + "\n"


def test_plot_says_where_it_is_written(quick_main, capsys, tmp_path):
    """--plot writes the file and says so on stderr, after the summary."""
    pytest.importorskip("matplotlib", reason="needs matplotlib, the plot extra: pip install -e '.[plot]'")
    assert quick_main(["--plot", "p.png"]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == "profile: plot written to p.png"
    assert (tmp_path / "p.png").is_file()


def test_a_backend_that_cannot_run_exits_2_saying_why(monkeypatch, tmp_path, capsys):
    """A backend that cannot run here stops profile before anything runs: exit 2, and the
    reason on stderr."""
    monkeypatch.setenv(BACKEND_ENV, "no_such_backend")
    with pytest.raises(ValueError, match="no_such_backend") as refused:
        select_backend()
    monkeypatch.chdir(tmp_path)
    assert profile.main([]) == 2
    assert capsys.readouterr().err == f"profile: {refused.value}\n"
    assert not (tmp_path / profile.DEFAULT_OUT).exists()


# With tensor parallelism: the parallel project's profile.
def test_slowest_rank_is_the_one_with_the_highest_graph_host_time():
    """The summary's figures are the slowest rank's, named under "ranks", with every rank's trace."""
    parallel_profile = importlib.import_module("parallel_project.toolkit.profile")
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

    result = parallel_profile.slowest_rank(results, Group)
    assert result["graph"]["host_ms"] == 3.0
    assert result["ranks"] == {"size": 3, "backend": "gloo", "slowest": 1}
    assert result["traces"] == ["rank0.json", "rank1.json", "rank2.json"]
    opened = [path for path, _ in result["open"]]
    assert opened == [f"rank{rank}.json (rank {rank})" for rank in range(3)]


@pytest.mark.parametrize(
    ("result", "row"),
    [
        (
            {**cpu_result(), "ranks": {"size": 2, "backend": "gloo", "slowest": 1}},
            "ranks               2 (gloo), figures from rank 1, the slowest",
        ),
        (
            {**npu_result(), "ranks": {"size": 1, "backend": "hccl", "slowest": 0}},
            "ranks               1 (hccl), figures from rank 0, the only one",
        ),
    ],
    ids=["two ranks", "one rank"],
)
def test_with_tensor_parallelism_the_summary_names_the_ranks_after_the_inputs(result, row):
    """With tensor parallelism the summary says how many ranks ran, over what, and whose figures
    it shows; the rest of the table is as on one device."""
    lines = importlib.import_module("parallel_project.toolkit.profile").render(result).splitlines()
    without_ranks = {key: value for key, value in result.items() if key != "ranks"}
    assert lines[4] == row
    assert lines[:4] + lines[5:] == profile.render(without_ranks).splitlines()


def test_each_rank_traces_under_its_own_name(monkeypatch, tmp_path, capsys):
    """With tensor parallelism a rank's trace is named after it (the worker rank<RANK>), and rank 0
    prints the slowest rank's figures with every rank's trace, here a job of one rank."""
    counting_model("parallel_project", monkeypatch)
    parallel_profile = importlib.import_module("parallel_project.toolkit.profile")
    torch._dynamo.reset()
    assert parallel_profile.main(["--steps", "1", "--out", str(tmp_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (trace,) = result["traces"]
    assert Path(trace).parent == tmp_path.resolve()
    assert Path(trace).name.startswith("rank0.")
    assert result["ranks"] == {"size": 1, "backend": "gloo", "slowest": 0}
    assert result["open"] == [[f"{trace} (rank 0)", profile.PERFETTO]]


# --- tensor parallelism: this rank's run, and who prints


def test_with_tensor_parallelism_both_modes_are_this_ranks_share(monkeypatch):
    """workload() builds eager's and graph mode's models on this rank, and compiles graph mode's
    for it (in cache_compile mode each rank keeps a cache of its own)."""
    parallel_profile = importlib.import_module("parallel_project.toolkit.profile")
    ranks, backend = object(), select_backend()
    asked = []

    def seeded_model(where):
        asked.append(("built on", where))
        return torch.nn.Identity(), (torch.ones(1),)

    def graph_of(model, on, *rank):
        asked.append(("compiled for", rank))
        return model

    monkeypatch.setattr(parallel_profile, "seeded_model", seeded_model)
    monkeypatch.setattr(parallel_profile, "graph_of", graph_of)
    parallel_profile.workload(backend, ranks)
    assert asked == [("built on", ranks), ("built on", ranks), ("compiled for", (ranks,))]


@pytest.mark.parametrize("first", [True, False], ids=["rank 0", "another rank"])
def test_the_ranks_join_on_the_backends_device_and_rank_0_alone_prints(monkeypatch, tmp_path, capsys, first):
    """profile joins the ranks on its backend's device, gathers every rank's result, and only
    rank 0 prints the slowest rank's; every rank exits 0."""
    parallel_profile = importlib.import_module("parallel_project.toolkit.profile")
    parallel = importlib.import_module("parallel_project.toolkit.parallel")
    joined = []
    ranks = types.SimpleNamespace(is_first=first, gather=lambda result: [result])

    @contextlib.contextmanager
    def tensor_parallel(device_type):
        joined.append(device_type)
        yield ranks

    monkeypatch.setattr(parallel, "tensor_parallel", tensor_parallel)
    monkeypatch.setattr(parallel_profile, "run", lambda *arguments: cpu_result())
    monkeypatch.setattr(parallel_profile, "slowest_rank", lambda results, on: results[0])
    monkeypatch.chdir(tmp_path)
    assert parallel_profile.main(["--json"]) == 0
    assert joined == [select_backend().device]
    printed = capsys.readouterr().out
    assert printed == (json.dumps(cpu_result()) + "\n" if first else "")


@pytest.mark.parametrize(("rank", "told"), [("0", True), ("1", False)])
def test_a_model_profile_refuses_is_told_by_rank_0_alone(monkeypatch, tmp_path, capsys, rank, told):
    """A model every rank refuses alike (a ContractError) exits 2 on each, and rank 0 alone ($RANK)
    says why: one line, not one a rank."""
    parallel_profile = importlib.import_module("parallel_project.toolkit.profile")

    def refuse(*arguments):
        raise parallel_profile.ContractError("the model keeps a number")

    monkeypatch.setattr(parallel_profile, "profiled", refuse)
    monkeypatch.setenv("RANK", rank)
    monkeypatch.chdir(tmp_path)
    assert parallel_profile.main([]) == 2
    assert capsys.readouterr().err == ("profile: the model keeps a number\n" if told else "")
