"""bench: eager against graph mode, outputs checked first, timings summarized, recompiles named; in
a decode project at every capture size, prefill timed apart from the decode step, every timed call
from a state put back; with tensor parallelism the slowest rank's figures."""

import contextlib
import gc
import importlib
import io
import json
import sys
import types
from collections import Counter
from typing import Any, NamedTuple

import pytest
import torch
from torch import nn
from torch._C._distributed_c10d import _get_work_registry_size
from torch._dynamo.utils import counters
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.utils._pytree import tree_leaves, tree_map_only

from decode_project import model as decode_model
from forward_project.model import build_model, example_inputs
from forward_project.toolkit import bench
from forward_project.toolkit.backend import BACKEND_ENV, Backend, select_backend
from forward_project.toolkit.contract import ContractError, assert_same, describe_tree, to_device
from parallel_project.toolkit.parallel import fake_ranks

FAST = ["--iters", "3", "--warmup", "1"]
FIELDS = {
    "backend",
    "reason",
    "device",
    "inputs",
    "iters",
    "warmup",
    "compile_s",
    "recompiled",
    "outputs_match",
    "note",
}
"""The fields of every result."""
FORWARD_FIELDS = {"eager", "graph", "speedup"}
DECODE_FIELDS = {"graphs", "capture", "sizes", "recompiles"}
SIZE_FIELDS = {
    "batch",
    "inputs",
    "prefill",
    "eager",
    "graph",
    "speedup",
    "tokens_per_s",
    "recompiled",
}
"""The fields of each capture size's figures, in a decode project."""
SPIED_MS = {"prefill": 50.0, "eager": 4.0, "graph": 2.0}
"""The time the spy gives each kind of call, in ms."""


def module_of(project: str, name: str) -> types.ModuleType:
    """The project's module `name`, e.g. toolkit.bench."""
    return importlib.import_module(f"{project}.{name}")


def bench_of(project: str) -> types.ModuleType:
    return module_of(project, "toolkit.bench")


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """No forced backend, whatever a run writes (a cache_compile cache) in a folder of the test's
    own, and main()'s --backend undone afterwards."""
    # setenv first records the original value, so teardown also removes what --backend sets.
    monkeypatch.setenv(BACKEND_ENV, "")
    monkeypatch.delenv(BACKEND_ENV)
    monkeypatch.chdir(tmp_path)


def bench_run(project: str, folder, *args: str) -> tuple[int, str, str]:
    """The project's bench main(FAST + args) run in `folder`: exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.chdir(folder),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = bench_of(project).main([*FAST, *args])
    return code, out.getvalue(), err.getvalue()


class Benched(NamedTuple):
    project: str
    result: dict[str, Any]
    """What `bench --json` printed."""


# One run of each kind serves every test that reads it: each run compiles the model again.
@pytest.fixture(scope="module", params=["forward_project", "cache_project", "parallel_project"])
def benched(request, tmp_path_factory) -> Benched:
    """bench --json on the sample model of a forward project: npugraph_ex, cache_compile, and
    tensor-parallel (one rank)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.delenv(BACKEND_ENV, raising=False)
        torch._dynamo.reset()
        code, out, err = bench_run(request.param, tmp_path_factory.mktemp("bench"), "--json")
    assert code == 0, err
    return Benched(request.param, json.loads(out))


class Timed(NamedTuple):
    """One call bench timed: what it was, on which inputs, and the state it started from."""

    kind: str
    """prefill, eager (the model's decode step) or graph (the step through its capture size)."""
    batch: int
    length: int
    """Tokens per sequence: the prompt's length for prefill, 1 for a decode step."""
    position: list[int] | None
    """A step's input_pos; None for prefill."""
    start: Any
    """The model's state (state.save())."""
    end: Any
    """The model's state after the call."""
    device: str
    """The device bench waits for and times the call on."""


class Spy:
    """Stands in for a decode project's bench.time_call: makes each call as bench would, notes
    what it was and the state it started from, and gives it a fixed time, so the figures bench
    reports can be checked exactly."""

    def __init__(self, project: str) -> None:
        self.project = project
        self.tool = bench_of(project)
        self.state = module_of(project, "toolkit.state")
        self.real_build = self.tool.build
        self.timed: list[Timed] = []
        self.synchronized: list[str] = []
        """The devices bench waited for (report.synchronize), in turn."""
        self.shown: list[str] = []
        """Bench's status lines, as a terminal would see them."""

    def build(self, *arguments):
        """bench.build, remembering its arguments, the model, its graphs, the prompt and the
        starting state."""
        self.arguments = arguments
        self.model, self.graphs, self.prompt = self.real_build(*arguments)
        self.start = self.state.save(self.model)
        return self.model, self.graphs, self.prompt

    def time_call(self, fn, dummy_input, device):
        kind = "eager" if fn is self.model else "graph" if fn is self.graphs else "prefill"
        start = self.state.save(self.model)
        fn(*dummy_input)
        tokens = dummy_input[0]
        position = dummy_input[1].tolist() if len(dummy_input) == 2 else None
        end = self.state.save(self.model)
        self.timed.append(Timed(kind, tokens.shape[0], tokens.shape[1], position, start, end, device))
        return SPIED_MS[kind], None

    def synchronize(self, device):
        self.synchronized.append(device)

    def after_prefill(self, size: int):
        """The state prefill of `size` sequences leaves, from the state the model was built with."""
        self.first_step_inputs(size)
        return self.state.save(self.model)

    def first_step_inputs(self, size: int):
        """The first decode step's inputs at `size` sequences, prefilled from the starting state."""
        first_step = module_of(self.project, "toolkit.decode").first_step
        self.state.restore(self.model, self.start)
        with torch.no_grad():
            return first_step(self.model, self.tool.rows_of(self.prompt, size))

    def capture_sizes(self) -> list[int]:
        return list(module_of(self.project, "toolkit.decode").limits().capture_sizes)


class Spied(NamedTuple):
    result: dict[str, Any]
    spy: Spy


@pytest.fixture(scope="module", params=["decode_project", "decode_parallel_project"])
def spied(request, tmp_path_factory) -> Spied:
    """bench --json in a decode project with its timer spied on: the result, and every call it
    timed."""
    spy = Spy(request.param)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.delenv(BACKEND_ENV, raising=False)
        monkeypatch.setattr(spy.tool, "build", spy.build)
        monkeypatch.setattr(spy.tool, "time_call", spy.time_call)
        monkeypatch.setattr(spy.tool, "synchronize", spy.synchronize)
        monkeypatch.setattr(spy.tool.Progress, "show", lambda progress, text: spy.shown.append(text))
        # From a clean Dynamo, warm-up compiles a graph for every size, as in a fresh process.
        torch._dynamo.reset()
        code, out, err = bench_run(request.param, tmp_path_factory.mktemp("bench"), "--json")
    assert code == 0, err
    return Spied(json.loads(out), spy)


class Table(NamedTuple):
    project: str
    out: str
    err: str


@pytest.fixture(scope="module", params=["forward_project", "decode_project", "parallel_project"])
def table_run(request, tmp_path_factory) -> Table:
    """bench's table, the eager backend forced (Dynamo alone compiles fastest; the JSON runs cover
    the default backend)."""
    folder = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv(BACKEND_ENV, "")  # recorded, so the --backend that main() sets is undone
        code, out, err = bench_run(request.param, folder, "--backend", "eager")
    assert code == 0, err
    return Table(request.param, out, err)


def a_test(project: str = "forward_project") -> Any:
    """The stand-in backend, as a test names it, of the project's toolkit."""
    return bench_of(project).Backend("aot_eager", "cpu", "a test")


def fabricated_run(project: str, before: dict, after: dict) -> Any:
    """A timed loop of three iterations, the last one's graph call slow."""
    return bench_of(project).Run(
        counters_before=before,
        counters_after=after,
        host_ms={"eager": [2.0, 2.0, 2.0], "graph": [1.0, 1.0, 4.0]},
    )


def summarize(project: str, run: Any, recompiles: list[str] | None = None, backend=None) -> dict:
    """The project's result for `run`; in a decode project, of one capture size, 1, whose decode
    steps `run` timed."""
    tool = bench_of(project)
    backend = backend or a_test(project)
    if not module_of(project, "toolkit.project").DECODE:
        return tool.summarize(backend, module_of(project, "model").example_inputs(), 1, 0.5, run)
    prefill = tool.Run({}, host_ms={"prefill": [9.0] * 3}, device_ms={"prefill": []})
    step_input = (torch.zeros(1, 1, dtype=torch.long), torch.tensor([8]))
    runs = [tool.SizeRun(1, step_input, prefill, run)]
    (prompt,) = module_of(project, "model").example_inputs()
    warmup = module_of(project, "toolkit.decode").Warmup((1,), 1, 0.5)
    return tool.summarize_sizes(backend, prompt, 1, warmup, runs, recompiles or [])


def figures(result: dict) -> dict:
    """The figures of the (only) capture size of a decode result, or a forward result's own."""
    if "sizes" not in result:
        return result
    (size,) = result["sizes"]
    return size


def test_json_is_one_object_with_every_field(benched):
    """--json prints a single object holding every documented field."""
    result = benched.result
    assert set(result) >= FIELDS | FORWARD_FIELDS
    for mode in ("eager", "graph"):
        assert set(result[mode]) >= {"p50_ms", "p95_ms", "mean_ms"}
    assert set(result["speedup"]) >= {"median", "p25", "p75"}


def test_json_values_are_sane(benched):
    """The outputs match, nothing recompiles, and every time and ratio is positive and ordered."""
    result = benched.result
    backend = select_backend()
    inputs = module_of(benched.project, "model").example_inputs()
    assert (result["backend"], result["reason"]) == (backend.name, backend.reason)
    assert (result["device"], result["inputs"]) == (
        backend.device,
        describe_tree(to_device(inputs, backend.device)),
    )
    assert (result["iters"], result["warmup"]) == (3, 1)
    assert result["outputs_match"] is True
    assert result["recompiled"] == []
    assert result["compile_s"] > 0
    for mode in ("eager", "graph"):
        assert 0 < result[mode]["p50_ms"] <= result[mode]["p95_ms"]
        assert result[mode]["mean_ms"] > 0
    speedup = result["speedup"]
    assert 0 < speedup["p25"] <= speedup["median"] <= speedup["p75"]


def test_decode_json_is_one_object_with_every_field(spied):
    """In a decode project, --json prints a single object holding every documented field, and the
    figures of each capture size."""
    result = spied.result
    assert set(result) >= FIELDS | DECODE_FIELDS
    for size in result["sizes"]:
        assert set(size) >= SIZE_FIELDS
        for mode in ("prefill", "eager", "graph"):
            assert set(size[mode]) >= {"p50_ms", "p95_ms", "mean_ms"}
        assert set(size["speedup"]) >= {"median", "p25", "p75"}
        assert set(size["tokens_per_s"]) == {"eager", "graph"}


def test_decode_json_values_are_sane(spied):
    """The outputs match, warm-up captured every size, nothing recompiles, and every time and
    ratio is positive and ordered."""
    result = spied.result
    backend = select_backend()
    sizes = spied.spy.capture_sizes()
    example = module_of(spied.spy.project, "model").example_inputs()
    prompt = tuple(tensor.to(backend.device) for tensor in example)
    assert (result["backend"], result["reason"]) == (backend.name, backend.reason)
    assert (result["device"], result["inputs"]) == (backend.device, describe_tree(prompt))
    assert (result["iters"], result["warmup"]) == (3, 1)
    assert result["outputs_match"] is True
    assert (result["recompiled"], result["recompiles"]) == ([], [])
    assert result["graphs"] == len(sizes)
    assert result["capture"].startswith(f"captured {len(sizes)} graph")
    assert result["compile_s"] > 0
    for size in result["sizes"]:
        for mode in ("prefill", "eager", "graph"):
            assert 0 < size[mode]["p50_ms"] <= size[mode]["p95_ms"]
            assert size[mode]["mean_ms"] > 0
        assert 0 < size["speedup"]["p25"] <= size["speedup"]["median"] <= size["speedup"]["p75"]


def test_every_capture_size_is_timed_in_turn(spied):
    """Each capture size, smallest first, gets its figures and its own timed calls: a prefill, an
    eager and a graph step per iteration, at a batch of that many sequences."""
    sizes = spied.spy.capture_sizes()
    assert [size["batch"] for size in spied.result["sizes"]] == sizes
    batches = [call.batch for call in spied.spy.timed]
    assert sorted(set(batches)) == sizes
    assert batches == sorted(batches)
    for size in sizes:
        kinds = Counter(call.kind for call in spied.spy.timed if call.batch == size)
        assert kinds == {"prefill": 3, "eager": 3, "graph": 3}


def test_each_capture_size_names_the_decode_step_inputs_it_timed(spied):
    """A capture size's `inputs` are its decode step's: that many sequences' first step."""
    spy = spied.spy
    for size in spied.result["sizes"]:
        assert size["inputs"] == describe_tree(spy.first_step_inputs(size["batch"]))


def test_with_tensor_parallelism_bench_times_the_rank_s_shard(spied):
    """bench builds the model for this rank of the job, and times its shard: the parameters the
    plan splits are DTensors (one rank's job here); without tensor parallelism, none is."""
    spy = spied.spy
    parallel = module_of(spy.project, "toolkit.project").TENSOR_PARALLEL
    ranks = spy.arguments[1] if len(spy.arguments) > 1 else None
    assert (ranks is not None) == parallel
    sharded = [name for name, parameter in spy.model.named_parameters() if isinstance(parameter, DTensor)]
    assert bool(sharded) == parallel


def test_prefill_times_the_prompt_and_a_step_one_token_after_it(spied):
    """A timed prefill is the whole prompt, nothing else; a timed decode step is one token per
    sequence at the position right after the prompt, every time: never beyond MAX_SEQ_LEN."""
    length = spied.spy.prompt.shape[1]
    for call in spied.spy.timed:
        if call.kind == "prefill":
            assert (call.length, call.position) == (length, None)
        else:
            assert (call.length, call.position) == (1, [length])


def test_every_timed_call_starts_from_a_state_put_back(spied):
    """No timed call sees another's cache writes: each prefill starts from the state the model
    was built with, and each decode step, eager or graph, from the state prefill leaves."""
    spy = spied.spy
    for size in spy.capture_sizes():
        after_prefill = spy.after_prefill(size)
        for call in spy.timed:
            if call.batch == size:
                expected = spy.start if call.kind == "prefill" else after_prefill
                assert spy.state.state_mismatches(call.start, expected) == [], (call.kind, size)


def test_every_timed_prefill_fills_the_cache_as_a_prefill_does(spied):
    """A timed prefill is a real one: it leaves the state an eager prefill of its batch leaves."""
    spy = spied.spy
    for size in spy.capture_sizes():
        after_prefill = spy.after_prefill(size)
        for call in spy.timed:
            if call.batch == size and call.kind == "prefill":
                assert spy.state.state_mismatches(call.end, after_prefill) == [], size


def test_every_call_is_timed_and_waited_for_on_the_backends_device(spied):
    """Each timed call, and every wait for the device (after a state is put back too), is on the
    device the model runs on."""
    spy = spied.spy
    assert {call.device for call in spy.timed} == {"cpu"}
    assert spy.synchronized
    assert set(spy.synchronized) == {"cpu"}


def test_the_status_line_names_each_stage_and_each_capture_sizes_loops(spied):
    """On a terminal, warm-up and the comparison say what they do, then each capture size's
    prefill and decode step loops say which they are."""
    spy = spied.spy
    assert spy.shown[:2] == [
        f"bench: warm-up: {select_backend().name} captures every capture size",
        "bench: comparing outputs at every capture size",
    ]
    loops = [line for line in spy.shown if line.startswith("bench: batch")]
    expected = [
        f"bench: batch {size} {what}: {stage}"
        for size in spy.capture_sizes()
        for what in ("prefill", "decode step")
        for stage in ("warming up 1/1", "timing 1/3", "timing 2/3", "timing 3/3")
    ]
    assert loops == expected


def test_prefill_is_reported_apart_from_the_per_token_figures(spied):
    """Prefill's time is its own figure; per-token latency and tokens/s are the decode step's alone:
    a batch's sequences over one step's mean time."""
    ms = SPIED_MS
    for size in spied.result["sizes"]:
        assert size["prefill"]["p50_ms"] == ms["prefill"]
        assert (size["eager"]["p50_ms"], size["graph"]["p50_ms"]) == (ms["eager"], ms["graph"])
        rates = {mode: size["batch"] * 1e3 / ms[mode] for mode in ("eager", "graph")}
        assert size["tokens_per_s"] == pytest.approx(rates)
        assert size["speedup"]["median"] == pytest.approx(ms["eager"] / ms["graph"])


def test_table_names_the_forced_backend_and_why(table_run):
    """--backend eager times the eager backend as graph mode, and the table says it was forced."""
    assert f"backend     eager (forced by {BACKEND_ENV})" in table_run.out


def test_table_flags_a_backend_other_than_npugraph_ex(table_run):
    """Unless npugraph_ex ran, a note says the numbers do not predict NPU speed."""
    assert "eager stands in for npugraph_ex" in table_run.out
    assert "do not predict NPU speed" in table_run.out


def test_no_progress_line_off_a_terminal(table_run):
    """With stderr not a terminal, bench writes no progress line there."""
    assert "\r" not in table_run.err


SCALE = {"value": 1.0}


class ReadsAGlobal(torch.nn.Module):
    """Dynamo guards on SCALE's value: change it, and the next call recompiles."""

    def forward(self, x):
        return x * SCALE["value"]


@pytest.mark.parametrize("project", ["forward_project", "parallel_project"])
def test_a_real_recompile_while_timing_is_reported(project, capsys, monkeypatch):
    """A graph that really recompiles during the timed loop is named in the result, on every
    rank's count."""
    tool = bench_of(project)
    model = ReadsAGlobal()
    graph = torch.compile(model, backend="aot_eager", fullgraph=True, dynamic=False)
    monkeypatch.setattr(tool, "build", lambda *where: (model, graph, (torch.ones(3),)))
    time_call = tool.time_call

    recapture = "recapture_due_to_mutated_input_change_graph_0"

    def recompiling_time_call(fn, dummy_input, device):
        SCALE["value"] += 1  # the next graph call fails its guard and compiles again
        counters["npugraph_ex"][recapture] += 1  # and npugraph_ex would capture it again
        return time_call(fn, dummy_input, device)

    monkeypatch.setattr(tool, "time_call", recompiling_time_call)
    monkeypatch.setitem(SCALE, "value", 1.0)
    monkeypatch.setitem(counters, "npugraph_ex", {recapture: 0})
    torch._dynamo.reset()
    assert tool.main([*FAST, "--json"]) == 0
    captured = capsys.readouterr()
    moved = f"npugraph_ex.{recapture}, stats.unique_graphs"
    assert json.loads(captured.out)["recompiled"] == moved.split(", ")
    assert captured.err.splitlines()[-1] == (
        f"bench: warning: {moved} changed while timing: graph mode recompiled or recaptured, so "
        "its times include that work (changing shapes or input addresses?)"
    )


def test_a_real_recompile_while_timing_a_decode_step_is_reported(capsys, monkeypatch):
    """A decode step that really recompiles during the timed loop is named in the result."""
    tool = bench_of("decode_project")
    logits_of = module_of("decode_project", "toolkit.decode").logits_of
    size = module_of("decode_project", "toolkit.decode").limits().capture_sizes[0]
    monkeypatch.setattr(decode_model, "CAPTURE_SIZES", (size,))  # one size: few recompiles in all
    build = tool.build

    def reads_a_global(*where):
        model, graphs, prompt = build(*where)

        def step(tokens, input_pos):
            # Dynamo guards on SCALE's value: change it, and the next call recompiles.
            return logits_of(model(tokens, input_pos)) * SCALE["value"]

        graph = torch.compile(step, backend="aot_eager", fullgraph=True, dynamic=False)
        graphs.compiled = {size: graph}
        return model, graphs, prompt

    monkeypatch.setattr(tool, "build", reads_a_global)
    time_call = tool.time_call

    def recompiling_time_call(fn, dummy_input, device):
        SCALE["value"] += 1  # the next graph call fails its guard and compiles again
        return time_call(fn, dummy_input, device)

    monkeypatch.setattr(tool, "time_call", recompiling_time_call)
    monkeypatch.setitem(SCALE, "value", 1.0)
    assert tool.main([*FAST, "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert "stats.unique_graphs" in result["recompiled"]
    assert f"batch {size} (capture size {size})" in result["recompiles"][0]
    assert "recompiled or recaptured" in captured.err


def test_help_names_every_option_with_its_default(help_of):
    """`bench --help` gives the usage under the command's name, what bench does, and each option
    with what it does and its default."""
    printed = help_of(bench.main, "forward_project bench")
    usage = "[-h] [--json] [--iters ITERS] [--warmup WARMUP] [--backend BACKEND]"
    assert printed.startswith(f"usage: forward_project bench {usage} ")
    assert " Time eager against graph mode on the same model and input. options: " in printed
    for option in [
        "--json print one JSON object, not a table",
        "--iters ITERS timed iterations (default: 50)",
        "--warmup WARMUP warm-up calls of each (default: 5)",
        f"--backend BACKEND torch.compile backend to time, via ${BACKEND_ENV} (default: what the MRE uses)",
    ]:
        assert option in printed


def test_iterations_default_to_50_after_5_warm_up_calls_and_may_be_1_after_none():
    """Without options bench times 50 iterations after 5 warm-up calls of each; --iters 1 and
    --warmup 0 are accepted."""
    defaults = bench.parse_args([], None)
    assert (defaults.iters, defaults.warmup) == (50, 5)
    fewest = bench.parse_args(["--iters", "1", "--warmup", "0"], None)
    assert (fewest.iters, fewest.warmup) == (1, 0)


class Terminal(io.StringIO):
    """A stderr that is a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_the_status_line_rewritten_then_cleared(monkeypatch):
    """On a terminal, bench's status line is rewritten in place and erased when it is done."""
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    progress = bench.Progress()
    progress.show("bench: comparing outputs")
    progress.clear()
    assert terminal.getvalue() == "\r\x1b[Kbench: comparing outputs\r\x1b[K"


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        (["--iters", "0"], "argument --iters: 0 is less than 1"),
        (["--warmup", "-1"], "argument --warmup: -1 is less than 0"),
        (["--iters", "many"], "argument --iters: 'many' is not an integer"),
    ],
)
def test_a_count_out_of_range_is_refused_naming_the_option(arguments, refusal, capsys):
    """--iters below 1, --warmup below 0 or a count that is no integer exits 2, naming the option,
    the value and the limit."""
    with pytest.raises(SystemExit) as exit_status:
        bench.main(arguments, prog="bench")
    assert exit_status.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"bench: error: {refusal}"


@pytest.mark.parametrize("project", ["forward_project", "parallel_project"])
def test_a_model_py_that_breaks_its_contract_exits_2_saying_how(project, monkeypatch, capsys):
    """example_inputs() that breaks the contract stops bench: exit 2, and what to fix on stderr."""
    tool = bench_of(project)
    monkeypatch.setattr(
        importlib.import_module(f"{project}.model"), "example_inputs", lambda: [torch.ones(2)]
    )
    with pytest.raises(ContractError) as broken:
        to_device([torch.ones(2)], "cpu")
    assert tool.main(FAST) == 2
    assert capsys.readouterr().err == f"bench: {broken.value}\n"


class Plus(torch.nn.Module):
    """x + 1, and `npu.kernel(ms, name)` first if given a simulated NPU."""

    def __init__(self, npu: "SimulatedNpu | None" = None, ms: float = 0.0, name: str = "") -> None:
        super().__init__()
        self.npu, self.ms, self.name = npu, ms, name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.npu:
            self.npu.kernel(self.ms, self.name)
        return x + 1


@pytest.mark.parametrize("project", ["forward_project", "parallel_project"])
def test_a_terminal_sees_each_stage_on_the_status_line(project, monkeypatch):
    """On a terminal, bench's status line shows each stage in turn: the first graph call, the
    comparison, each warm-up and each timed iteration; it is erased at the end."""
    tool = bench_of(project)
    monkeypatch.setattr(tool, "build", lambda *arguments: (Plus(), Plus(), (torch.ones(2),)))
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with contextlib.redirect_stdout(io.StringIO()):
        assert tool.main(FAST) == 0
    assert terminal.getvalue().split("\r\x1b[K") == [
        "",
        f"bench: first {select_backend().name} call (compile and capture)",
        "bench: comparing outputs",
        "bench: warming up 1/1",
        "bench: timing 1/3",
        "bench: timing 2/3",
        "bench: timing 3/3",
        "",
    ]


def test_unknown_backend_exits_2(capsys):
    """A backend torch.compile does not know stops bench before it builds anything."""
    assert bench.main([*FAST, "--backend", "no_such_backend"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("bench: --backend='no_such_backend' is not a torch.compile backend; use one of")


def test_npugraph_ex_asked_for_off_an_npu_names_the_option_and_the_fix(capsys):
    """--backend npugraph_ex where no NPU can run it: exit 2, naming --backend, why, and the fix."""
    assert bench.main([*FAST, "--backend", "npugraph_ex"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("bench: --backend=npugraph_ex needs a usable NPU, but ")
    assert line.endswith("; leave out --backend")


def plus_one(tensor: torch.Tensor) -> torch.Tensor:
    return tensor + 1


@pytest.mark.parametrize("project", ["forward_project", "parallel_project"])
def test_outputs_that_differ_stop_the_run(project, capsys, monkeypatch):
    """A graph that computes something else is reported and exits 1 without timing; with tensor
    parallelism the report names the rank."""
    tool = bench_of(project)
    build = tool.build

    inputs = []

    def off_by_one(*where):
        eager, _, dummy_input = build(*where)
        inputs.append(dummy_input)
        return eager, lambda *args: tree_map_only(torch.Tensor, plus_one, eager(*args)), dummy_input

    monkeypatch.setattr(tool, "build", off_by_one)
    assert tool.main([*FAST, "--json"]) == 1
    captured = capsys.readouterr()
    headline, how, *_ = captured.err.splitlines()
    backend = select_backend()
    if module_of(project, "toolkit.project").TENSOR_PARALLEL:
        expected = f"bench: {backend.name} does not match eager on rank 0, so nothing was timed:"
        assert headline == expected
        assert how.startswith("rank 0: ")
    else:
        assert headline == f"bench: {backend.name} does not match eager, so nothing was timed:"
    assert "elements differ beyond the tolerance" in how
    result = json.loads(captured.out)
    assert (result["outputs_match"], result["inputs"]) == (False, describe_tree(inputs[0]))


def off_by_one_at(sizes):
    """decode_project's bench.build, its graphs at `sizes` computing eager's logits plus one."""
    build = bench_of("decode_project").build
    decode = module_of("decode_project", "toolkit.decode")

    def built(*where):
        model, graphs, prompt = build(*where)

        def step(*args):
            return plus_one(decode.logits_of(model(*args)))

        graphs.compiled.update(dict.fromkeys(sizes, step))
        return model, graphs, prompt

    return built


def test_a_decode_step_that_differs_stops_the_run(capsys, monkeypatch):
    """A decode step that computes something else is reported with every batch it differs at, and
    exits 1 without timing."""
    tool = bench_of("decode_project")
    decode = module_of("decode_project", "toolkit.decode")
    monkeypatch.setattr(tool, "build", off_by_one_at(decode.limits().capture_sizes))
    monkeypatch.setattr(tool, "measure_sizes", lambda *args: pytest.fail("timed after a mismatch"))
    assert tool.main([*FAST, "--json"]) == 1
    captured = capsys.readouterr()
    first, *others = decode.limits().capture_sizes
    assert "does not match eager" in captured.err
    assert f"at batch {first} (batch {', '.join(map(str, others))} too):" in captured.err
    result = json.loads(captured.out)
    assert result["outputs_match"] is False
    assert result["inputs"] == describe_tree(to_device(decode_model.example_inputs(), "cpu"))


def test_a_decode_step_that_differs_at_one_size_names_that_size_alone_and_how(capsys, monkeypatch):
    """Only the largest capture size's graph computes something else: the report names that batch
    alone, then how it differs."""
    tool = bench_of("decode_project")
    largest = module_of("decode_project", "toolkit.decode").limits().capture_sizes[-1]
    monkeypatch.setattr(tool, "build", off_by_one_at([largest]))
    assert tool.main(FAST) == 1
    lines = capsys.readouterr().err.splitlines()
    at = lines.index(f"at batch {largest}:")
    assert "differ" in lines[at + 1]


def test_a_prompt_the_cache_cannot_follow_is_refused(capsys, monkeypatch):
    """A prompt that leaves no position for the decode step in MAX_SEQ_LEN exits 2, naming both."""
    length = decode_model.example_inputs()[0].shape[1]
    monkeypatch.setattr(decode_model, "MAX_SEQ_LEN", length)
    assert bench_of("decode_project").main(FAST) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"prompt has {length} tokens" in line
    assert line.endswith(f"MAX_SEQ_LEN = {length}; shorten the prompt or raise MAX_SEQ_LEN in model.py")


def test_capture_sizes_out_of_order_are_refused(capsys, monkeypatch):
    """CAPTURE_SIZES that are not strictly increasing exit 2 with the rule and an example."""
    monkeypatch.setattr(decode_model, "CAPTURE_SIZES", (2, 1))
    assert bench_of("decode_project").main(FAST) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("bench: CAPTURE_SIZES = (2, 1) must be positive and strictly increasing")


AFTER_WARM_UP = [
    "batch 2 (capture size 2) at positions [8] compiled a new graph",
    "batch 3 (capture size 4) at positions [8] compiled a new graph",
]
"""Two decode steps that compiled after warm-up."""


def test_a_compile_after_warm_up_is_reported():
    """Each decode step that compiled after warm-up (a size it missed) is a warning in the table."""
    result = summarize("decode_project", fabricated_run("decode_project", {}, {}), AFTER_WARM_UP)
    assert result["recompiles"] == AFTER_WARM_UP
    assert f"WARNING: {'; '.join(AFTER_WARM_UP)}" in bench_of("decode_project").render_table(result)


def test_every_compile_after_warm_up_is_a_warning_on_stderr(capsys, monkeypatch):
    """bench warns on stderr of each decode step that compiled after warm-up, a line each."""
    tool = bench_of("decode_project")
    result = summarize("decode_project", fabricated_run("decode_project", {}, {}), AFTER_WARM_UP)
    outcome = tool.Outcome((), [None], [result])
    monkeypatch.setattr(tool, "benchmark", lambda *arguments: outcome)
    assert tool.main(FAST) == 0
    warnings = capsys.readouterr().err.splitlines()
    assert warnings == [f"bench: warning: after warm-up, {reason}" for reason in AFTER_WARM_UP]


def uneven_decode_result() -> dict:
    """A decode project's summarized run at capture sizes 1 and 2, every figure different."""
    tool = bench_of("decode_project")

    def timed(prefill_ms: list[float], eager_ms: list[float], graph_ms: list[float]) -> tuple:
        prefill = tool.Run({}, host_ms={"prefill": prefill_ms}, device_ms={"prefill": []})
        return prefill, tool.Run({}, {}, host_ms={"eager": eager_ms, "graph": graph_ms})

    runs = [
        tool.SizeRun(
            size,
            (torch.zeros(size, 1, dtype=torch.long), torch.tensor([8])),
            *timed(*figures),
        )
        for size, figures in (
            (1, ([9.0, 10.0, 14.0], [3.0, 2.0, 7.0], [1.0, 1.5, 4.0])),
            (2, ([12.0, 11.0, 20.0], [4.0, 5.0, 6.0], [2.0, 2.0, 2.5])),
        )
    ]
    (prompt,) = module_of("decode_project", "model").example_inputs()
    warmup = module_of("decode_project", "toolkit.decode").Warmup((1, 2), 2, 0.5)
    return tool.summarize_sizes(a_test("decode_project"), prompt, 1, warmup, runs, [])


def test_a_decode_table_reads_each_capture_sizes_figures_under_its_title():
    """A decode table: what ran, the ranks (with tensor parallelism) and the capture, then for each
    capture size in turn its prefill, eager and graph step ms, the steps' tokens/s and the
    speedup; recompiles after warm-up; the stand-in's note."""
    result = uneven_decode_result()
    result["ranks"] = {"size": 2, "backend": "gloo", "slowest": 1}
    step = "[0] ({}, 1) int64 on cpu, [1] (1,) int64 on cpu"
    assert bench_of("decode_project").render_table(result).splitlines() == [
        "backend     aot_eager (a test)",
        "device      cpu",
        "ranks       2 (gloo), figures from rank 1, the slowest",
        "prompt      [0] (2, 8) int64 on cpu",
        (
            "iterations  3 timed at each capture size, each one prefill, then one eager and one "
            "graph decode step from the state prefill left; warm-up: 1 of each"
        ),
        "warm-up     captured 2 graphs (batch 1, 2) in 0.5 s",
        "                p50 ms    p95 ms   mean ms  tokens/s",
        f"batch 1     decode step on {step.format(1)}",
        "  prefill       10.000    13.600    11.000",
        "  eager          3.000     6.600     4.000     250.0",
        "  graph          1.500     3.750     2.167     461.5",
        "  speedup   1.75x eager/graph, median per iteration (IQR 1.54x to 2.38x)",
        f"batch 2     decode step on {step.format(2)}",
        "  prefill       12.000    19.200    14.333",
        "  eager          5.000     5.900     5.000     400.0",
        "  graph          2.000     2.450     2.167     923.1",
        "  speedup   2.40x eager/graph, median per iteration (IQR 2.20x to 2.45x)",
        "recompiles  none while timing (no recompile, no recapture after warm-up)",
        (
            "note        aot_eager stands in for npugraph_ex: these numbers compare eager with the "
            "stand-in and do not predict NPU speed"
        ),
    ]


def test_a_decode_table_warns_of_what_moved_then_of_what_compiled_after_warm_up():
    """Both kinds of recompile in one warning: what changed while timing first, then each compile
    after warm-up, in the order they happened."""
    result = uneven_decode_result()
    result["recompiled"], result["recompiles"] = ["graphs"], ["size 1 recompiled", "size 2 recompiled"]
    assert bench_of("decode_project").recompiles_text(result) == (
        "WARNING: graphs changed while timing; size 1 recompiled; size 2 recompiled"
    )


class TwoOutputs(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, 2 * x


def test_every_difference_is_reported_on_a_line_of_its_own():
    """Each output that differs from eager's is one line of the report, named by its path."""
    report = bench.compare_outputs(TwoOutputs(), lambda x: (x + 1, 2 * x + 1), (torch.ones(2),))
    first, second = report.split("\n")
    assert (first[:5], second[:5]) == ("[0]: ", "[1]: ")


def test_a_mismatch_says_how_graph_mode_differs(capsys):
    """A mismatch report names the backend, says nothing was timed and shows how graph mode
    differs; with --json, a failed result leads with what ran, where and on which inputs."""
    mismatch = "output: off by one\nstate: stale"
    bench.report_mismatch(a_test(), example_inputs(), [mismatch], None, True)
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "bench: aot_eager does not match eager, so nothing was timed:",
        "output: off by one",
        "state: stale",
    ]
    assert json.loads(captured.out) == {
        "backend": "aot_eager",
        "reason": "a test",
        "device": "cpu",
        "inputs": describe_tree(example_inputs()),
        "outputs_match": False,
    }


def test_bench_runs_the_mre_s_seeded_weights_on_its_inputs():
    """bench's model and inputs are the MRE's, from the same seed: its eager output is the MRE's
    (the sample model, seeded with 0, on example_inputs())."""
    device = select_backend().device
    torch.manual_seed(0)
    reference = build_model().to(device).eval()
    with torch.no_grad():
        expected = reference(*to_device(example_inputs(), device))
        model, dummy_input = bench.seeded_model(select_backend())
        assert_same(model(*dummy_input), expected)


def test_in_a_decode_project_the_seeded_model_stands_at_its_first_decode_step():
    """In a decode project (profile times its decode step), the seeded model has prefilled the
    prompt eagerly, and the inputs are the first decode step's: prefill's tokens, at the
    position after the prompt."""
    decode = module_of("decode_project", "toolkit.decode")
    state = module_of("decode_project", "toolkit.state")
    torch.manual_seed(0)
    reference = decode_model.build_model().eval()
    (prompt,) = decode_model.example_inputs()
    with torch.no_grad():
        expected = decode.first_step(reference, prompt)
    model, dummy_input = bench_of("decode_project").seeded_model(a_test("decode_project"))
    assert_same(dummy_input, expected)
    assert dummy_input[1].tolist() == [prompt.shape[1]]
    assert state.state_mismatches(state.save(model), state.save(reference)) == []


def test_a_decode_prefill_s_device_time_is_the_mean_of_its_calls_device_times():
    """On an NPU each capture size's prefill reports its own device ms per call."""
    tool = bench_of("decode_project")
    prefill = tool.Run({}, host_ms={"prefill": [9.0, 9.0]}, device_ms={"prefill": [1.0, 3.0]})
    step_input = (torch.zeros(1, 1, dtype=torch.long), torch.tensor([8]))
    size = tool.per_size(tool.SizeRun(1, step_input, prefill, fabricated_run("decode_project", {}, {})))
    assert size["prefill"]["device_mean_ms"] == 2.0


def test_with_tensor_parallelism_bench_builds_the_graph_of_the_rank_s_cache(monkeypatch):
    """In cache_compile mode with tensor parallelism, what bench builds for a rank of the job is
    compiled into that rank's own cache."""
    tool = bench_of("parallel_cache_project")
    compile_cache = module_of("parallel_cache_project", "toolkit.compile_cache")
    made = []
    monkeypatch.setattr(compile_cache, "CachedModel", lambda model, **ranks: made.append(ranks))
    backend = a_test("parallel_cache_project")
    with tool.joined(backend) as ranks:
        tool.build(backend, ranks)
        assert made == [ranks.cache_keywords()]


def test_with_tensor_parallelism_each_rank_keeps_its_own_compile_cache(monkeypatch):
    """In cache_compile mode, bench's graph of a rank's shard writes and loads that rank's cache,
    as the rank's MRE does; without ranks, the one cache."""
    tool = bench_of("parallel_cache_project")
    compile_cache = module_of("parallel_cache_project", "toolkit.compile_cache")
    made = []
    monkeypatch.setattr(compile_cache, "CachedModel", lambda model, **ranks: made.append(ranks))
    rank = types.SimpleNamespace(cache_keywords=lambda: {"global_rank": 1, "tp_rank": 1})
    tool.graph_of(PlusOne(), a_test("parallel_cache_project"), rank)
    tool.graph_of(PlusOne(), a_test("parallel_cache_project"))
    assert made == [{"global_rank": 1, "tp_rank": 1}, {}]


def test_the_model_and_its_inputs_go_to_the_backend_s_device():
    """bench builds the model and its inputs on the backend's device: here "meta", not the CPU
    that build_model() and example_inputs() build them on."""
    model, dummy_input = bench.seeded_model(Backend("aot_eager", "meta", "a test"))
    inputs = [leaf for leaf in tree_leaves(dummy_input) if isinstance(leaf, torch.Tensor)]
    assert {tensor.device.type for tensor in [*model.parameters(), *inputs]} == {"meta"}


class PlusOne(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


class BreaksTheGraph(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch._dynamo.graph_break()
        return x + 1


def test_graph_mode_refuses_a_graph_break():
    """Graph mode captures the whole model or fails, as the MRE does (fullgraph=True): a graph
    break is an error, not a silent split into smaller graphs."""
    torch._dynamo.reset()
    graph = bench.graph_of(BreaksTheGraph(), a_test())
    with pytest.raises(torch._dynamo.exc.Unsupported):
        graph(torch.ones(2))


def test_graph_mode_compiles_a_static_graph_for_each_input_shape():
    """Graph mode keeps shapes fixed, as the MRE does (dynamic=False; an aclgraph has fixed
    shapes): each new input shape gets a graph of its own, never one graph for any shape."""
    torch._dynamo.reset()
    graph = bench.graph_of(PlusOne(), a_test())
    before = counters["stats"]["unique_graphs"]
    for size in (2, 3, 4):
        graph(torch.ones(size))
    assert counters["stats"]["unique_graphs"] - before == 3


def test_graph_mode_hands_npugraph_ex_its_options(monkeypatch):
    """With npugraph_ex, graph mode hands it the backend's options, as the MRE does. The stand-in
    is registered under that name, as torch_npu 2.13 registers its own (dynamo/__init__.py,
    _register_npu_backend), and torch.compile passes it the options as a keyword
    (torch/__init__.py, _TorchCompileWrapper)."""
    received = []

    def npugraph_ex(graph_module, example_inputs, **keywords):
        received.append(keywords)
        return graph_module.forward

    # What torch._dynamo.register_backend(npugraph_ex) does, undone after the test.
    registry = torch._dynamo.backends.registry
    monkeypatch.setitem(registry._BACKENDS, "npugraph_ex", None)
    monkeypatch.setitem(registry._COMPILER_FNS, "npugraph_ex", npugraph_ex)
    backend = Backend("npugraph_ex", "cpu", "a test")
    torch._dynamo.reset()
    bench.graph_of(PlusOne(), backend)(torch.ones(2))
    assert received == [{"options": backend.options}]


def uneven_result(device_ms: tuple[float, float] | None) -> dict:
    """A summarized run whose every figure differs, with device times or without."""
    host_ms = {"eager": [3.0, 2.0, 7.0], "graph": [1.0, 1.5, 4.0]}
    run = bench.Run(counters_before={}, counters_after={}, host_ms=host_ms)
    result = summarize("forward_project", run)
    if device_ms:
        result["eager"]["device_mean_ms"], result["graph"]["device_mean_ms"] = device_ms
    return result


def test_table_reads_every_figure_under_its_title():
    """The table: what ran, then each mode's p50, p95, mean (and device) ms in titled columns, the
    speedup with its IQR, recompiles, and the stand-in's note."""
    inputs = describe_tree(example_inputs())
    assert bench.render_table(uneven_result((1.5, 0.25))).splitlines() == [
        "backend     aot_eager (a test)",
        "device      cpu",
        f"inputs      {inputs}",
        "iterations  3 timed, each one eager and one graph call; warm-up: 1 of each",
        "compile     0.500 s (first graph call: Dynamo, AOT, capture)",
        "                p50 ms    p95 ms   mean ms device ms",
        "eager            3.000     6.600     4.000     1.500",
        "graph            1.500     3.750     2.167     0.250",
        "speedup     1.75x eager/graph, median per iteration (IQR 1.54x to 2.38x)",
        "recompiles  none while timing (no recompile, no recapture)",
        (
            "note        aot_eager stands in for npugraph_ex: these numbers compare eager with the "
            "stand-in and do not predict NPU speed"
        ),
    ]


def test_table_has_no_device_column_without_device_times():
    """Off an NPU nothing times the device: no device column, and no empty cells."""
    lines = bench.render_table(uneven_result(None)).splitlines()
    assert lines[5:8] == [
        "                p50 ms    p95 ms   mean ms",
        "eager            3.000     6.600     4.000",
        "graph            1.500     3.750     2.167",
    ]


FORWARD_AND_DECODE = pytest.mark.parametrize("project", ["forward_project", "decode_project"])
"""A forward project, and a decode project (whose figures are per capture size)."""


@FORWARD_AND_DECODE
def test_speedup_is_the_median_ratio_with_its_iqr(project):
    """Speedup is the median per-iteration eager/graph ratio, so one slow call barely moves it."""
    speedup = figures(summarize(project, fabricated_run(project, {}, {})))["speedup"]
    assert speedup == {"median": 2.0, "p25": 1.25, "p75": 2.0}


@FORWARD_AND_DECODE
def test_npugraph_ex_s_numbers_carry_no_note(project):
    """When npugraph_ex ran, the numbers are the NPU's own: no note, in the result or the table."""
    npugraph_ex = bench_of(project).Backend("npugraph_ex", "npu", "Ascend910B2")
    result = summarize(project, fabricated_run(project, {}, {}), backend=npugraph_ex)
    assert result["note"] is None
    assert bench_of(project).render_table(result).splitlines()[-1].startswith("recompiles")


@FORWARD_AND_DECODE
def test_recompile_while_timing_is_reported(project):
    """A counter that moved during the timed loop is named in the result and in the table."""
    recapture = "npugraph_ex.recapture_due_to_mutated_input_change_graph_0"
    before = {"stats.unique_graphs": 1}
    after = {"stats.unique_graphs": 2, recapture: 1}
    result = summarize(project, fabricated_run(project, before, after))
    assert result["recompiled"] == [recapture, "stats.unique_graphs"]
    table = bench_of(project).render_table(result)
    assert f"WARNING: {recapture}, stats.unique_graphs changed" in table


@FORWARD_AND_DECODE
def test_unchanged_counters_report_no_recompile(project):
    """Counters equal before and after the timed loop mean no recompile is reported."""
    kept = {"stats.unique_graphs": 1, "npugraph_ex.captures": 1}
    result = summarize(project, fabricated_run(project, kept, dict(kept)))
    assert result["recompiled"] == []
    assert "none while timing" in bench_of(project).render_table(result)


def test_latency_is_the_median_p95_and_mean_of_the_calls():
    """p50 is the median call, p95 lies between the two slowest, mean is the mean: on times where
    each differs from the others, and from the mean of the device times."""
    timings = bench.latency([4.0, 1.0, 10.0, 2.0, 3.0], [0.5, 1.5])
    assert timings == pytest.approx({"p50_ms": 3.0, "p95_ms": 8.8, "mean_ms": 4.0, "device_mean_ms": 1.0})
    one_call = {"p50_ms": 5.0, "p95_ms": 5.0, "mean_ms": 5.0, "device_mean_ms": None}
    assert bench.latency([5.0], []) == one_call


def test_each_mode_s_device_time_is_the_mean_of_its_calls_device_times():
    """On an NPU each mode's device ms is the mean of its own calls' device times (not their
    median, not the other mode's)."""
    host_ms = {"eager": [3.0, 2.0, 7.0], "graph": [1.0, 1.5, 4.0]}
    device_ms = {"eager": [1.0, 2.0, 6.0], "graph": [0.5, 0.25, 0.75]}
    timings = bench.timing(bench.Run({}, {}, host_ms=host_ms, device_ms=device_ms))
    assert (timings["eager"]["device_mean_ms"], timings["graph"]["device_mean_ms"]) == (3.0, 0.5)


def test_the_counters_include_every_one_npugraph_ex_keeps(monkeypatch):
    """A recompile or recapture shows in the counters bench compares: Dynamo's unique graphs and
    each counter npugraph_ex keeps per graph (torch_npu 2.13
    dynamo/torchair/_acl_concrete_graph/acl_graph.py L1145-1147: counters["npugraph_ex"])."""
    kept = {"captured_graph_0": 1, "recapture_due_to_mutated_input_change_graph_0": 2}
    monkeypatch.setitem(counters, "npugraph_ex", kept)
    assert bench.counter_snapshot() == {
        "stats.unique_graphs": counters["stats"]["unique_graphs"],
        "npugraph_ex.captured_graph_0": 1,
        "npugraph_ex.recapture_due_to_mutated_input_change_graph_0": 2,
    }


class SimulatedNpu:
    """torch.npu as bench times with it, after torch_npu 2.13: Event(enable_timing=False,
    blocking=False, interprocess=False) (npu/streams.py L200), whose record() notes the device's
    clock and elapsed_time(end) the ms between two recorded events, each made to measure time
    ("Both events must be recorded before calculating elapsed time.": libtorch_npu.so); and
    synchronize() (npu/utils.py L65). kernel(ms) stands for device work: it moves the clock."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.log: list[str] = []
        npu = self

        class Event:
            def __init__(self, enable_timing=False, blocking=False, interprocess=False) -> None:
                self.timing, self.at = enable_timing, None

            def record(self, stream=None) -> None:
                npu.log.append("record")
                self.at = npu.clock

            def elapsed_time(self, end_event) -> float:
                if self.at is None or end_event.at is None:
                    raise RuntimeError("Both events must be recorded before calculating elapsed time.")
                if not (self.timing and end_event.timing):
                    raise RuntimeError("an event made without enable_timing=True measures no time")
                return end_event.at - self.at

        self.Event = Event

    def synchronize(self, device=None) -> None:
        self.log.append("synchronize")

    def kernel(self, ms: float, name: str = "kernel") -> None:
        self.log.append(name)
        self.clock += ms


def test_on_an_npu_a_call_is_timed_on_the_host_and_on_the_device(monkeypatch):
    """On an NPU a timed call gives its wall-clock ms until the device is done (bench waits for
    it before reading the clock) and its device ms, between events recorded either side of it."""
    npu = SimulatedNpu()
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    clock = iter([100.0, 100.25])
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(clock))
    assert bench.time_call(npu.kernel, (2.5,), "npu") == (250.0, 2.5)
    assert npu.log == ["record", "kernel", "record", "synchronize"]


def test_on_an_npu_the_first_call_is_timed_until_the_device_is_done(monkeypatch):
    """The first graph call's seconds (compile and capture) run until the device is done."""
    npu = SimulatedNpu()
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    clock = iter([100.0, 100.25])
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(clock))
    assert bench.time_first_call(npu.kernel, (2.5,), "npu") == 0.25
    assert npu.log == ["kernel", "synchronize"]


def timed(name: str) -> list[str]:
    """What timing one call does on the simulated NPU: an event either side, then a wait."""
    return ["record", name, "record", "synchronize"]


def test_measure_warms_up_then_times_each_call_in_turn_first_one_then_the_other(monkeypatch):
    """measure() warms each call up and waits for the device; then each iteration times one call
    of each, under its name, the first call going first in even iterations and last in odd ones,
    so that neither always runs on the other's warm caches."""
    npu = SimulatedNpu()
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    clock = iter(range(100))
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(clock) / 2)
    calls = {
        "first": lambda ms: npu.kernel(2 * ms, "first"),
        "second": lambda ms: npu.kernel(ms, "second"),
    }
    run = bench.measure(calls, (1.5,), "npu", 1, 3, bench.Progress())
    assert npu.log == [
        *["first", "second", "synchronize"],
        *timed("first") + timed("second"),
        *timed("second") + timed("first"),
        *timed("first") + timed("second"),
    ]
    assert run.host_ms == {"first": [500.0] * 3, "second": [500.0] * 3}
    assert run.device_ms == {"first": [3.0] * 3, "second": [1.5] * 3}


def test_garbage_collection_is_off_while_timing_and_back_on_after():
    """No garbage collection lands on a timed call: it is off while measure() times, and on again
    afterwards."""
    collecting = []

    def call() -> None:
        collecting.append(gc.isenabled())

    assert gc.isenabled()
    bench.measure({"eager": call, "graph": call}, (), "cpu", 0, 2, bench.Progress())
    assert collecting == [False] * 4
    assert gc.isenabled()


def test_a_terminal_sees_one_status_line_rewritten_per_call(capsys):
    """On a terminal, measure() rewrites one status line: each warm-up, then each iteration."""
    progress = bench.Progress()
    progress.live = True  # as if stderr were a terminal
    bench.measure({"eager": lambda: None, "graph": lambda: None}, (), "cpu", 2, 3, progress)
    assert capsys.readouterr().err.split("\r\x1b[K") == [
        "",
        "bench: warming up 1/2",
        "bench: warming up 2/2",
        "bench: timing 1/3",
        "bench: timing 2/3",
        "bench: timing 3/3",
    ]


def test_on_an_npu_bench_waits_for_the_device_and_times_it(monkeypatch, capsys):
    """On an NPU bench waits for the device after the first graph call, and reports each mode's
    device ms per call (the modules run on the CPU; the NPU's clock is simulated)."""
    npu = SimulatedNpu()
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    npugraph_ex = Backend("npugraph_ex", "npu", "a simulated NPU")
    monkeypatch.setattr(bench, "select_backend", lambda: npugraph_ex)
    eager, graph = Plus(npu, 2.0, "eager"), Plus(npu, 0.5, "graph")
    monkeypatch.setattr(bench, "build", lambda *where: (eager, graph, (torch.ones(2),)))
    assert bench.main([*FAST, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["eager"]["device_mean_ms"], result["graph"]["device_mean_ms"]) == (2.0, 0.5)
    assert npu.log[:2] == ["graph", "synchronize"]


# With tensor parallelism.


def group_backend() -> str:
    """The process-group backend the ranks use here."""
    return "hccl" if select_backend().device == "npu" else "gloo"


def one_rank(project: str) -> dict[str, Any] | None:
    """The ranks key of a result without torchrun: one rank with tensor parallelism, else none."""
    if not module_of(project, "toolkit.project").TENSOR_PARALLEL:
        return None
    return {"size": 1, "backend": group_backend(), "slowest": 0}


def test_json_names_the_one_rank_it_ran(benched):
    """Without torchrun, bench runs as one rank with tensor parallelism, and the JSON's ranks key
    says so; without tensor parallelism the JSON has no ranks key."""
    assert benched.result.get("ranks") == one_rank(benched.project)


def test_decode_json_names_the_one_rank_it_ran(spied):
    """In a decode project too, the JSON's ranks key names the one rank with tensor parallelism,
    and there is none without."""
    assert spied.result.get("ranks") == one_rank(spied.spy.project)


def test_table_names_the_one_rank_it_ran(table_run):
    """Without torchrun, the table's ranks row names one rank and the process-group backend, with
    tensor parallelism; without it there is no ranks row."""
    rows = [line for line in table_run.out.splitlines() if line.startswith("ranks ")]
    if one_rank(table_run.project) is None:
        assert rows == []
    else:
        assert rows == [f"ranks       1 ({group_backend()}), figures from rank 0, the only one"]


def test_a_mismatch_on_any_rank_of_the_job_stops_every_rank(monkeypatch):
    """What each rank found is gathered from the job: graph mode that differs on rank 1 alone
    leaves rank 0 untimed too."""
    tool = bench_of("parallel_project")
    model = PlusOne()
    monkeypatch.setattr(tool, "build", lambda backend, ranks: (model, model, (torch.ones(2),)))
    monkeypatch.setattr(tool, "measure", lambda *args, **kwargs: pytest.fail("timed after a mismatch"))
    ranks = types.SimpleNamespace(gather=lambda found: [found, "rank 1 differs"])
    arguments = tool.parse_args(FAST, None)
    outcome = tool.benchmark(a_test("parallel_project"), arguments, tool.Progress(), ranks)
    assert outcome.mismatches == [None, "rank 1 differs"]
    assert not outcome.matched


def test_a_rank_other_than_0_shows_and_prints_nothing_and_exits_0(monkeypatch, capsys):
    """Rank 1 of a job that matched and was timed leaves the status line and the result to rank 0,
    even on a terminal, and exits 0."""
    tool = bench_of("parallel_project")
    rank_1 = types.SimpleNamespace(is_first=False)

    def benchmark(backend, args, progress, ranks):
        progress.show("bench: a stage")
        return tool.Outcome((torch.ones(2),), [None, None], [{}, {}])

    monkeypatch.setattr(tool, "joined", lambda backend: contextlib.nullcontext(rank_1))
    monkeypatch.setattr(tool, "group_of", lambda ranks: {"size": 2})
    monkeypatch.setattr(tool, "benchmark", benchmark)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert tool.main(FAST) == 0
    assert terminal.getvalue() == ""
    assert capsys.readouterr().out == ""


def test_every_timed_call_waits_for_its_collectives():
    """A row-parallel layer run eagerly returns its all-reduce still in flight: a timed call
    waits for it, so the time covers it and no collective is left unwaited."""
    with fake_ranks(2) as mesh:
        layers = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4))
        plan = {"0": ColwiseParallel(), "1": RowwiseParallel()}
        sharded = parallelize_module(layers, mesh, plan)
        in_flight = _get_work_registry_size()
        bench_of("parallel_project").time_call(sharded, (torch.ones(3, 4),), "cpu")
        assert _get_work_registry_size() == in_flight


def rank_result(graph_p50: float, recompiled: list[str], decode: bool) -> dict:
    """One rank's summary, reduced to what choosing the slowest rank reads; in a decode project
    two capture sizes, whose graph times a rank's graph time sums."""
    if decode:
        sizes = [{"graph": {"p50_ms": 1.0}}, {"graph": {"p50_ms": graph_p50}}]
        return {"sizes": sizes, "recompiled": recompiled, "recompiles": recompiled}
    return {"graph": {"p50_ms": graph_p50}, "recompiled": recompiled}


@pytest.mark.parametrize("project", ["parallel_project", "decode_parallel_project"])
def test_the_slowest_rank_s_figures_are_reported(project):
    """The figures come from the rank with the highest graph p50 (in a decode project, over every
    capture size); a recompile on any rank counts, each rank's."""
    tool = bench_of(project)
    decode = module_of(project, "toolkit.project").DECODE
    results = [
        rank_result(1.0, ["stats.recaptures"], decode),
        rank_result(3.0, [], decode),
        rank_result(2.0, ["stats.graphs"], decode),
    ]
    result = tool.slowest_rank(results, {"size": 3, "backend": "gloo"})
    if decode:
        assert result["sizes"][1]["graph"] == {"p50_ms": 3.0}
        assert result["recompiles"] == ["stats.recaptures", "stats.graphs"]
    else:
        assert result["graph"] == {"p50_ms": 3.0}
    assert result["ranks"] == {"size": 3, "backend": "gloo", "slowest": 1}
    assert result["recompiled"] == ["stats.graphs", "stats.recaptures"]
    assert tool.ranks_text(result["ranks"]) == "3 (gloo), figures from rank 1, the slowest"


def test_a_mismatch_names_the_rank_it_happened_on(capsys):
    """When one rank's graph output differs, rank 0's report names that rank and shows how."""
    tool = bench_of("parallel_project")
    group = {"size": 2, "backend": "gloo"}
    inputs = module_of("parallel_project", "model").example_inputs()
    tool.report_mismatch(a_test(), inputs, [None, "off by one"], group, as_json=True)
    captured = capsys.readouterr()
    assert "does not match eager on rank 1, so nothing was timed" in captured.err
    assert "rank 1: off by one" in captured.err
    assert json.loads(captured.out)["ranks"] == {**group, "mismatched": [1]}


def test_a_mismatch_names_every_rank_it_happened_on(capsys):
    """When two ranks' graph outputs differ, the report names both, and shows how on the first."""
    tool = bench_of("parallel_project")
    group = {"size": 3, "backend": "gloo"}
    inputs = module_of("parallel_project", "model").example_inputs()
    tool.report_mismatch(a_test(), inputs, [None, "off by one", "off by two"], group, as_json=True)
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "bench: aot_eager does not match eager on ranks 1, 2, so nothing was timed:",
        "rank 1: off by one",
    ]
    assert json.loads(captured.out)["ranks"] == {**group, "mismatched": [1, 2]}


class Calls(torch.nn.Module):
    """A module whose forward is `call`."""

    def __init__(self, call) -> None:
        super().__init__()
        self.call = call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.call(x)


def test_each_side_of_a_comparison_gets_its_own_copy_of_the_inputs():
    """Graph mode and eager each run on a copy of the inputs, which forward may write in place:
    a model that doubles its input matches itself, and the inputs given stay as they were."""
    inputs = (torch.ones(2),)
    doubles = Calls(lambda x: x.mul_(2) + 1)
    assert bench.compare_outputs(doubles, doubles, inputs) is None
    assert inputs[0].tolist() == [1.0, 1.0]


def test_an_input_written_otherwise_than_eager_writes_it_is_a_difference():
    """A graph that writes an input in place otherwise than eager does differs from eager, by
    that input."""
    eager = Calls(lambda x: x.mul_(2).sum())
    report = bench.compare_outputs(eager, lambda x: x.mul_(3).sum() - 2, (torch.ones(2),))
    assert report.splitlines()[0].startswith("input [0]: 2 of 2 elements differ")


def test_both_sides_of_a_comparison_draw_the_same_random_numbers():
    """Graph mode and eager start from one random number generator's state: a model that draws
    random numbers matches itself."""
    noisy = Calls(lambda x: x + torch.randn_like(x))
    assert bench.compare_outputs(noisy, noisy, (torch.ones(4),)) is None
