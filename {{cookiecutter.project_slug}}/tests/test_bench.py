{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
{%- if decode -%}
"""bench: eager against graph mode at every capture size, outputs checked first, prefill timed apart
from the decode step, every timed call from a state put back, timings summarized, recompiles named."""
{%- else -%}
"""bench: eager against graph mode, outputs checked first, timings summarized, recompiles named."""
{%- endif %}

import contextlib
{%- if not decode %}
import gc
{%- endif %}
import io
import json
import sys
{%- if decode %}
from collections import Counter
from typing import NamedTuple
{%- endif %}

import pytest
import torch
{%- if tp %}
from torch import nn
from torch._C._distributed_c10d import _get_work_registry_size
{%- endif %}
from torch._dynamo.utils import counters
{%- if tp %}
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
{%- endif %}
{%- if not decode %}
from torch.utils._pytree import {{ "tree_leaves, " if not tp else "" }}tree_map_only
{%- endif %}
{% if decode %}
from {{ cookiecutter.package_name }} import model as model_py
{%- endif %}
from {{ cookiecutter.package_name }}.model import example_inputs
from {{ cookiecutter.package_name }}.toolkit import bench
from {{ cookiecutter.package_name }}.toolkit.backend import BACKEND_ENV, Backend, select_backend
from {{ cookiecutter.package_name }}.toolkit.contract import (
{%- if not decode %}
    ContractError,
{%- endif %}
{%- if not tp and not decode %}
    assert_same,
{%- endif %}
    describe_tree,
{%- if not decode %}
    to_device,
{%- endif %}
)
{%- if decode %}
from {{ cookiecutter.package_name }}.toolkit.decode import Warmup, first_step, limits, logits_of
{%- endif %}
{%- if tp %}
from {{ cookiecutter.package_name }}.toolkit.parallel import fake_ranks
{%- endif %}
{%- if decode %}
from {{ cookiecutter.package_name }}.toolkit.state import State, restore, save, state_mismatches
{%- endif %}

FAST = ["--iters", "3", "--warmup", "1"]
FIELDS = {
    "backend",
    "reason",
    "device",
    "inputs",
    "iters",
    "warmup",
    "compile_s",
{%- if decode %}
    "graphs",
    "capture",
    "sizes",
    "recompiles",
{%- else %}
    "eager",
    "graph",
    "speedup",
{%- endif %}
    "recompiled",
    "outputs_match",
    "note",
}
{%- if decode %}
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
SPIED_MS = {"prefill": 50.0, "eager": 4.0, "graph": 2.0}
"""The time the spy gives each kind of call, in ms."""
{%- endif %}


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """No forced backend, no cache left in the project, and main()'s --backend undone afterwards."""
    # setenv first records the original value, so teardown also removes what --backend sets.
    monkeypatch.setenv(BACKEND_ENV, "")
    monkeypatch.delenv(BACKEND_ENV)
{%- if cache %}
    # cache_compile writes its cache (on an NPU) relative to the working directory.
{%- else %}
    # Whatever a run writes stays out of the project.
{%- endif %}
    monkeypatch.chdir(tmp_path)


def bench_run(folder, *args: str) -> tuple[int, str, str]:
    """main(FAST + args) run in `folder`: exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.chdir(folder),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = bench.main([*FAST, *args])
    return code, out.getvalue(), err.getvalue()


{% if decode -%}
class Timed(NamedTuple):
    """One call bench timed: what it was, on which inputs, and the state it started from."""

    kind: str
    """prefill, eager (the model's decode step) or graph (the step through its capture size)."""
    batch: int
    length: int
    """Tokens per sequence: the prompt's length for prefill, 1 for a decode step."""
    position: list[int] | None
    """A step's input_pos; None for prefill."""
    start: State


class Spy:
    """Stands in for bench.time_call: makes each call as bench would, notes what it was and the
    state it started from, and gives it a fixed time, so the figures bench reports can be checked
    exactly."""

    def __init__(self, build) -> None:
        self.real_build = build
        self.timed: list[Timed] = []

    def build(self, *arguments):
        """bench.build, remembering the model, its graphs, the prompt and the starting state."""
        self.model, self.graphs, self.prompt = self.real_build(*arguments)
        self.start = save(self.model)
        return self.model, self.graphs, self.prompt

    def time_call(self, fn, dummy_input, device):
        kind = "eager" if fn is self.model else "graph" if fn is self.graphs else "prefill"
        start = save(self.model)
        fn(*dummy_input)
        tokens = dummy_input[0]
        position = dummy_input[1].tolist() if len(dummy_input) == 2 else None
        self.timed.append(Timed(kind, tokens.shape[0], tokens.shape[1], position, start))
        return SPIED_MS[kind], None

    def after_prefill(self, size: int) -> State:
        """The state prefill of `size` sequences leaves, from the state the model was built with."""
        restore(self.model, self.start)
        with torch.no_grad():
            first_step(self.model, bench.rows_of(self.prompt, size))
        return save(self.model)


# One run of each kind serves every test that reads it: each run compiles your model again. Each
# asks for mre_run only to skip if the MRE failed: test_mre.py reports that once.
@pytest.fixture(scope="module")
def spied_run(mre_run, tmp_path_factory) -> tuple[dict, Spy]:
    """bench --json with its timer spied on: the result, and every call it timed."""
    spy = Spy(bench.build)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(bench, "build", spy.build)
        monkeypatch.setattr(bench, "time_call", spy.time_call)
        # From a clean Dynamo, warm-up compiles a graph for every size, as in a fresh process.
        torch._dynamo.reset()
        code, out, _ = bench_run(tmp_path_factory.mktemp("bench"), "--json")
    assert code == 0
    return json.loads(out), spy


@pytest.fixture(scope="module")
def json_result(spied_run) -> dict:
    return spied_run[0]


@pytest.fixture(scope="module")
def spy(spied_run) -> Spy:
    return spied_run[1]


{% else -%}
# One run of each kind serves every test that reads it: each run compiles your model again. Each
# asks for mre_run only to skip if the MRE failed: test_mre.py reports that once.
@pytest.fixture(scope="module")
def json_result(mre_run, tmp_path_factory) -> dict:
    code, out, _ = bench_run(tmp_path_factory.mktemp("bench"), "--json")
    assert code == 0
    return json.loads(out)


{% endif -%}
@pytest.fixture(scope="module")
def table_run(mre_run, tmp_path_factory) -> tuple[str, str]:
    # The eager backend (Dynamo alone) compiles fastest; the JSON run covers the default backend.
    folder = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv(BACKEND_ENV, "")  # recorded, so the --backend that main() sets is undone
        code, out, err = bench_run(folder, "--backend", "eager")
    assert code == 0
    return out, err


A_TEST = Backend("aot_eager", "cpu", "a test")
"""The stand-in backend, as a test names it."""


def fabricated_run(before: dict, after: dict) -> bench.Run:
    """A timed loop of three iterations, the last one's graph call slow."""
    return bench.Run(
        counters_before=before,
        counters_after=after,
        host_ms={"eager": [2.0, 2.0, 2.0], "graph": [1.0, 1.0, 4.0]},
    )


{% if decode -%}
def summarize(
    run: bench.Run, recompiles: list[str] | None = None, backend: Backend = A_TEST
) -> dict:
    """A result of one capture size, 1, whose decode steps `run` timed."""
    prefill = bench.Run({}, host_ms={"prefill": [9.0] * 3}, device_ms={"prefill": []})
    step_input = (torch.zeros(1, 1, dtype=torch.long), torch.tensor([8]))
    runs = [bench.SizeRun(1, step_input, prefill, run)]
    (prompt,) = example_inputs()
    return bench.summarize_sizes(backend, prompt, 1, Warmup((1,), 1, 0.5), runs, recompiles or [])


def figures(result: dict) -> dict:
    """The figures of the (only) capture size."""
    (size,) = result["sizes"]
    return size
{%- else -%}
def summarize(run: bench.Run, backend: Backend = A_TEST) -> dict:
    return bench.summarize(backend, example_inputs(), 1, 0.5, run)


def figures(result: dict) -> dict:
    return result
{%- endif %}


def test_json_is_one_object_with_every_field(json_result):
    """--json prints a single object holding every documented field."""
    assert set(json_result) >= FIELDS
{%- if decode %}
    for size in json_result["sizes"]:
        assert set(size) >= SIZE_FIELDS
        for mode in ("prefill", "eager", "graph"):
            assert set(size[mode]) >= {"p50_ms", "p95_ms", "mean_ms"}
        assert set(size["speedup"]) >= {"median", "p25", "p75"}
        assert set(size["tokens_per_s"]) == {"eager", "graph"}
{%- else %}
    for mode in ("eager", "graph"):
        assert set(json_result[mode]) >= {"p50_ms", "p95_ms", "mean_ms"}
    assert set(json_result["speedup"]) >= {"median", "p25", "p75"}
{%- endif %}


{% if decode -%}
def test_json_values_are_sane(json_result):
    """The outputs match, warm-up captured every size, nothing recompiles, and every time and
    ratio is positive and ordered."""
    result = json_result
    backend = select_backend()
    sizes = limits().capture_sizes
    prompt = tuple(tensor.to(backend.device) for tensor in example_inputs())
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


def test_every_capture_size_is_timed_in_turn(json_result, spy):
    """Each capture size, smallest first, gets its figures and its own timed calls: a prefill, an
    eager and a graph step per iteration, at a batch of that many sequences."""
    sizes = list(limits().capture_sizes)
    assert [size["batch"] for size in json_result["sizes"]] == sizes
    batches = [call.batch for call in spy.timed]
    assert sorted(set(batches)) == sizes
    assert batches == sorted(batches)
    for size in sizes:
        kinds = Counter(call.kind for call in spy.timed if call.batch == size)
        assert kinds == {"prefill": 3, "eager": 3, "graph": 3}


def test_prefill_times_the_prompt_and_a_step_one_token_after_it(spy):
    """A timed prefill is the whole prompt, nothing else; a timed decode step is one token per
    sequence at the position right after the prompt, every time: never beyond MAX_SEQ_LEN."""
    length = spy.prompt.shape[1]
    for call in spy.timed:
        if call.kind == "prefill":
            assert (call.length, call.position) == (length, None)
        else:
            assert (call.length, call.position) == (1, [length])


def test_every_timed_call_starts_from_a_state_put_back(spy):
    """No timed call sees another's cache writes: each prefill starts from the state the model
    was built with, and each decode step, eager or graph, from the state prefill leaves."""
    for size in limits().capture_sizes:
        after_prefill = spy.after_prefill(size)
        for call in spy.timed:
            if call.batch == size:
                expected = spy.start if call.kind == "prefill" else after_prefill
                assert state_mismatches(call.start, expected) == [], (call.kind, size)


def test_prefill_is_reported_apart_from_the_per_token_figures(json_result):
    """Prefill's time is its own figure; per-token latency and tokens/s are the decode step's alone:
    a batch's sequences over one step's mean time."""
    ms = SPIED_MS
    for size in json_result["sizes"]:
        assert size["prefill"]["p50_ms"] == ms["prefill"]
        assert (size["eager"]["p50_ms"], size["graph"]["p50_ms"]) == (ms["eager"], ms["graph"])
        rates = {mode: size["batch"] * 1e3 / ms[mode] for mode in ("eager", "graph")}
        assert size["tokens_per_s"] == pytest.approx(rates)
        assert size["speedup"]["median"] == pytest.approx(ms["eager"] / ms["graph"])
{%- else -%}
def test_json_values_are_sane(json_result, eager_step):
    """The outputs match, nothing recompiles, and every time and ratio is positive and ordered."""
    result = json_result
    backend = select_backend()
    inputs = describe_tree(eager_step.dummy_input)
    assert (result["backend"], result["reason"]) == (backend.name, backend.reason)
    assert (result["device"], result["inputs"]) == (backend.device, inputs)
    assert (result["iters"], result["warmup"]) == (3, 1)
    assert result["outputs_match"] is True
    assert result["recompiled"] == []
    assert result["compile_s"] > 0
    for mode in ("eager", "graph"):
        assert 0 < result[mode]["p50_ms"] <= result[mode]["p95_ms"]
        assert result[mode]["mean_ms"] > 0
    speedup = result["speedup"]
    assert 0 < speedup["p25"] <= speedup["median"] <= speedup["p75"]
{%- endif %}


def test_table_names_the_forced_backend_and_why(table_run):
    """--backend eager times the eager backend as graph mode, and the table says it was forced."""
    assert f"backend     eager (forced by {BACKEND_ENV})" in table_run[0]


def test_table_flags_a_backend_other_than_npugraph_ex(table_run):
    """Unless npugraph_ex ran, a note says the numbers do not predict NPU speed."""
    assert "eager stands in for npugraph_ex" in table_run[0]
    assert "do not predict NPU speed" in table_run[0]


def test_no_progress_line_off_a_terminal(table_run):
    """With stderr not a terminal, bench writes no progress line there."""
    assert "\r" not in table_run[1]


SCALE = {"value": 1.0}


{% if decode -%}
def test_a_real_recompile_while_timing_is_reported(capsys, monkeypatch):
    """A decode step that really recompiles during the timed loop is named in the result."""
    size = limits().capture_sizes[0]
    monkeypatch.setattr(model_py, "CAPTURE_SIZES", (size,))  # one size: few recompiles in all
    build = bench.build

    def reads_a_global(*where):
        model, graphs, prompt = build(*where)

        def step(tokens, input_pos):
            # Dynamo guards on SCALE's value: change it, and the next call recompiles.
            return logits_of(model(tokens, input_pos)) * SCALE["value"]

        graph = torch.compile(step, backend="aot_eager", fullgraph=True, dynamic=False)
        graphs.compiled = {size: graph}
        return model, graphs, prompt

    monkeypatch.setattr(bench, "build", reads_a_global)
    time_call = bench.time_call

    def recompiling_time_call(fn, dummy_input, device):
        SCALE["value"] += 1  # the next graph call fails its guard and compiles again
        return time_call(fn, dummy_input, device)

    monkeypatch.setattr(bench, "time_call", recompiling_time_call)
    monkeypatch.setitem(SCALE, "value", 1.0)
    assert bench.main([*FAST, "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert "stats.unique_graphs" in result["recompiled"]
    assert f"batch {size} (capture size {size})" in result["recompiles"][0]
    assert "recompiled or recaptured" in captured.err
{%- else -%}
class ReadsAGlobal(torch.nn.Module):
    """Dynamo guards on SCALE's value: change it, and the next call recompiles."""

    def forward(self, x):
        return x * SCALE["value"]


def test_a_real_recompile_while_timing_is_reported(capsys, monkeypatch):
    """A graph that really recompiles during the timed loop is named in the result."""
    model = ReadsAGlobal()
    graph = torch.compile(model, backend="aot_eager", fullgraph=True, dynamic=False)
    monkeypatch.setattr(bench, "build", lambda *where: (model, graph, (torch.ones(3),)))
    time_call = bench.time_call

    recapture = "recapture_due_to_mutated_input_change_graph_0"

    def recompiling_time_call(fn, dummy_input, device):
        SCALE["value"] += 1  # the next graph call fails its guard and compiles again
        counters["npugraph_ex"][recapture] += 1  # and npugraph_ex would capture it again
        return time_call(fn, dummy_input, device)

    monkeypatch.setattr(bench, "time_call", recompiling_time_call)
    monkeypatch.setitem(SCALE, "value", 1.0)
    monkeypatch.setitem(counters, "npugraph_ex", {recapture: 0})
    torch._dynamo.reset()
    assert bench.main([*FAST, "--json"]) == 0
    captured = capsys.readouterr()
    moved = f"npugraph_ex.{recapture}, stats.unique_graphs"
    assert json.loads(captured.out)["recompiled"] == moved.split(", ")
    assert captured.err.splitlines()[-1] == (
        f"bench: warning: {moved} changed while timing: graph mode recompiled or recaptured, so "
        "its times include that work (changing shapes or input addresses?)"
    )
{%- endif %}


def test_help_names_every_option_with_its_default(help_of):
    """`bench --help` gives the usage under the command's name, what bench does, and each option
    with what it does and its default."""
    printed = help_of(bench.main, "{{ cookiecutter.package_name }} bench")
    usage = "[-h] [--json] [--iters ITERS] [--warmup WARMUP] [--backend BACKEND]"
    assert printed.startswith(f"usage: {{ cookiecutter.package_name }} bench {usage} ")
    assert " Time eager against graph mode on the same model and input. options: " in printed
    for option in [
        "--json print one JSON object, not a table",
        "--iters ITERS timed iterations (default: 50)",
        "--warmup WARMUP warm-up calls of each (default: 5)",
        (
            f"--backend BACKEND torch.compile backend to time, via ${BACKEND_ENV} (default: what "
            "the MRE uses)"
        ),
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
{%- if not decode %}


def test_a_model_py_that_breaks_its_contract_exits_2_saying_how(monkeypatch, capsys):
    """example_inputs() that breaks the contract stops bench: exit 2, and what to fix on stderr."""
    monkeypatch.setattr(bench, "example_inputs", lambda: [torch.ones(2)])
    with pytest.raises(ContractError) as broken:
        to_device([torch.ones(2)], "cpu")
    assert bench.main(FAST) == 2
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


def test_a_terminal_sees_each_stage_on_the_status_line(monkeypatch):
    """On a terminal, bench's status line shows each stage in turn: the first graph call, the
    comparison, each warm-up and each timed iteration; it is erased at the end."""
    monkeypatch.setattr(bench, "build", lambda *arguments: (Plus(), Plus(), (torch.ones(2),)))
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with contextlib.redirect_stdout(io.StringIO()):
        assert bench.main(FAST) == 0
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
{%- endif %}
{%- if not tp and not decode %}


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
{%- endif %}


def test_unknown_backend_exits_2(capsys):
    """A backend torch.compile does not know stops bench before it builds anything."""
    assert bench.main([*FAST, "--backend", "no_such_backend"]) == 2
    assert "no_such_backend" in capsys.readouterr().err


def plus_one(tensor: torch.Tensor) -> torch.Tensor:
    return tensor + 1


{% if decode -%}
def test_outputs_that_differ_stop_the_run(capsys, monkeypatch):
    """A decode step that computes something else is reported with its batch, and exits 1
    without timing."""
    build = bench.build

    def off_by_one(*where):
        model, graphs, prompt = build(*where)

        def step(*args):
            return plus_one(logits_of(model(*args)))

        graphs.compiled = dict.fromkeys(graphs.compiled, step)
        return model, graphs, prompt

    monkeypatch.setattr(bench, "build", off_by_one)
    monkeypatch.setattr(bench, "measure_sizes", lambda *args: pytest.fail("timed after a mismatch"))
    assert bench.main([*FAST, "--json"]) == 1
    captured = capsys.readouterr()
    assert "does not match eager" in captured.err
    assert f"at batch {limits().capture_sizes[0]}" in captured.err
    assert json.loads(captured.out)["outputs_match"] is False


def test_a_prompt_the_cache_cannot_follow_is_refused(capsys, monkeypatch):
    """A prompt that leaves no position for the decode step in MAX_SEQ_LEN exits 2, naming both."""
    length = example_inputs()[0].shape[1]
    monkeypatch.setattr(model_py, "MAX_SEQ_LEN", length)
    assert bench.main(FAST) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"prompt has {length} tokens" in line
    assert f"MAX_SEQ_LEN = {length}" in line


def test_capture_sizes_out_of_order_are_refused(capsys, monkeypatch):
    """CAPTURE_SIZES that are not strictly increasing exit 2 with the rule and an example."""
    monkeypatch.setattr(model_py, "CAPTURE_SIZES", (2, 1))
    assert bench.main(FAST) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("bench: CAPTURE_SIZES = (2, 1) must be positive and strictly increasing")


def test_a_compile_after_warm_up_is_reported():
    """A decode step that compiled after warm-up (a size it missed) is a warning in the table."""
    reason = "batch 2 (capture size 2) at positions [8] compiled a new graph"
    result = summarize(fabricated_run({}, {}), recompiles=[reason])
    assert result["recompiles"] == [reason]
    assert f"WARNING: {reason}" in bench.render_table(result)


{% else -%}
def test_outputs_that_differ_stop_the_run(capsys, monkeypatch):
    """A graph that computes something else is reported and exits 1 without timing."""
    build = bench.build

    inputs = []

    def off_by_one(*where):
        eager, _, dummy_input = build(*where)
        inputs.append(dummy_input)
        return eager, lambda *args: tree_map_only(torch.Tensor, plus_one, eager(*args)), dummy_input

    monkeypatch.setattr(bench, "build", off_by_one)
    assert bench.main([*FAST, "--json"]) == 1
    captured = capsys.readouterr()
    headline, how, *_ = captured.err.splitlines()
    backend = select_backend()
{%- if tp %}
    expected = f"bench: {backend.name} does not match eager on rank 0, so nothing was timed:"
    assert headline == expected
    assert how.startswith("rank 0: ")
{%- else %}
    assert headline == f"bench: {backend.name} does not match eager, so nothing was timed:"
{%- endif %}
    assert "elements differ beyond the tolerance" in how
    result = json.loads(captured.out)
    assert (result["outputs_match"], result["inputs"]) == (False, describe_tree(inputs[0]))


class TwoOutputs(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, 2 * x


def test_every_difference_is_reported_on_a_line_of_its_own():
    """Each output that differs from eager's is one line of the report, named by its path."""
    report = bench.compare_outputs(TwoOutputs(), lambda x: (x + 1, 2 * x + 1), (torch.ones(2),))
    first, second = report.split("\n")
    assert (first[:5], second[:5]) == ("[0]: ", "[1]: ")


{% endif -%}
def test_speedup_is_the_median_ratio_with_its_iqr():
    """Speedup is the median per-iteration eager/graph ratio, so one slow call barely moves it."""
    speedup = figures(summarize(fabricated_run({}, {})))["speedup"]
    assert speedup == {"median": 2.0, "p25": 1.25, "p75": 2.0}


def test_npugraph_ex_s_numbers_carry_no_note():
    """When npugraph_ex ran, the numbers are the NPU's own: no note, in the result or the table."""
    npugraph_ex = Backend("npugraph_ex", "npu", "Ascend910B2")
    result = summarize(fabricated_run({}, {}), backend=npugraph_ex)
    assert result["note"] is None
    assert bench.render_table(result).splitlines()[-1].startswith("recompiles")


def test_recompile_while_timing_is_reported():
    """A counter that moved during the timed loop is named in the result and in the table."""
    recapture = "npugraph_ex.recapture_due_to_mutated_input_change_graph_0"
    before = {"stats.unique_graphs": 1}
    after = {"stats.unique_graphs": 2, recapture: 1}
    result = summarize(fabricated_run(before, after))
    assert result["recompiled"] == [recapture, "stats.unique_graphs"]
    assert f"WARNING: {recapture}, stats.unique_graphs changed" in bench.render_table(result)


def test_unchanged_counters_report_no_recompile():
    """Counters equal before and after the timed loop mean no recompile is reported."""
    counters = {"stats.unique_graphs": 1, "npugraph_ex.captures": 1}
    result = summarize(fabricated_run(counters, dict(counters)))
    assert result["recompiled"] == []
    assert "none while timing" in bench.render_table(result)


def test_latency_is_the_median_p95_and_mean_of_the_calls():
    """p50 is the median call, p95 lies between the two slowest, mean is the mean: on times where
    each differs from the others, and from the mean of the device times."""
    timings = bench.latency([4.0, 1.0, 10.0, 2.0, 3.0], [0.5, 1.5])
    assert timings == pytest.approx(
        {"p50_ms": 3.0, "p95_ms": 8.8, "mean_ms": 4.0, "device_mean_ms": 1.0}
    )
    one_call = {"p50_ms": 5.0, "p95_ms": 5.0, "mean_ms": 5.0, "device_mean_ms": None}
    assert bench.latency([5.0], []) == one_call


def test_each_mode_s_device_time_is_the_mean_of_its_calls_device_times():
    """On an NPU each mode's device ms is the mean of its own calls' device times (not their
    median, not the other mode's)."""
    host_ms = {"eager": [3.0, 2.0, 7.0], "graph": [1.0, 1.5, 4.0]}
    device_ms = {"eager": [1.0, 2.0, 6.0], "graph": [0.5, 0.25, 0.75]}
    figures = bench.timing(bench.Run({}, {}, host_ms=host_ms, device_ms=device_ms))
    assert (figures["eager"]["device_mean_ms"], figures["graph"]["device_mean_ms"]) == (3.0, 0.5)


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
                    raise RuntimeError(
                        "Both events must be recorded before calculating elapsed time."
                    )
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
{%- if not decode %}


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
{%- endif %}
{%- if not tp %}


def test_a_mismatch_says_how_graph_mode_differs(capsys):
    """A mismatch report names the backend, says nothing was timed and shows how graph mode
    differs; with --json, a failed result leads with what ran, where and on which inputs."""
    backend = Backend("aot_eager", "cpu", "a test")
    mismatch = "output: off by one\nstate: stale"
    bench.report_mismatch(backend, example_inputs(), [mismatch], None, True)
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
{%- endif %}
{%- if not tp and not decode %}


def test_bench_runs_the_mre_s_seeded_weights_on_its_inputs(eager_step):
    """bench's model and inputs are the MRE's, from the same seed: its eager output is the MRE's."""
    model, dummy_input = bench.seeded_model(select_backend())
    with torch.no_grad():
        assert_same(model(*dummy_input), eager_step.output)


def test_the_model_and_its_inputs_go_to_the_backend_s_device():
    """bench builds the model and its inputs on the backend's device: here "meta", not the CPU
    that build_model() and example_inputs() build them on."""
    model, dummy_input = bench.seeded_model(Backend("aot_eager", "meta", "a test"))
    inputs = [leaf for leaf in tree_leaves(dummy_input) if isinstance(leaf, torch.Tensor)]
    assert {tensor.device.type for tensor in [*model.parameters(), *inputs]} == {"meta"}
{%- endif %}
{%- if not cache and not tp %}


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
    graph = bench.graph_of(BreaksTheGraph(), A_TEST)
    with pytest.raises(torch._dynamo.exc.Unsupported):
        graph(torch.ones(2))


def test_graph_mode_compiles_a_static_graph_for_each_input_shape():
    """Graph mode keeps shapes fixed, as the MRE does (dynamic=False; an aclgraph has fixed
    shapes): each new input shape gets a graph of its own, never one graph for any shape."""
    torch._dynamo.reset()
    graph = bench.graph_of(PlusOne(), A_TEST)
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
{%- endif %}
{%- if not tp and not decode %}


def uneven_result(device_ms: tuple[float, float] | None) -> dict:
    """A summarized run whose every figure differs, with device times or without."""
    host_ms = {"eager": [3.0, 2.0, 7.0], "graph": [1.0, 1.5, 4.0]}
    result = summarize(bench.Run(counters_before={}, counters_after={}, host_ms=host_ms))
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
{%- endif %}
{%- if tp %}


def group_backend() -> str:
    """The process-group backend the ranks use here."""
    return "hccl" if select_backend().device == "npu" else "gloo"


def test_json_names_the_one_rank_it_ran(json_result):
    """Without torchrun, bench runs as one rank, and the JSON's ranks key says so."""
    assert json_result["ranks"] == {"size": 1, "backend": group_backend(), "slowest": 0}


def test_table_names_the_one_rank_it_ran(table_run):
    """Without torchrun, the table's ranks row names one rank and the process-group backend."""
    row = f"ranks       1 ({group_backend()}), figures from rank 0, the only one"
    assert row in table_run[0].splitlines()


def rank_result(graph_p50: float, recompiled: list[str]) -> dict:
    """One rank's summary, reduced to what choosing the slowest rank reads."""
{%- if decode %}
    # Two capture sizes: a rank's graph time is their sum.
    sizes = [{"graph": {"p50_ms": 1.0}}, {"graph": {"p50_ms": graph_p50}}]
    return {"sizes": sizes, "recompiled": recompiled, "recompiles": recompiled}
{%- else %}
    return {"graph": {"p50_ms": graph_p50}, "recompiled": recompiled}
{%- endif %}


def test_every_timed_call_waits_for_its_collectives():
    """A row-parallel layer run eagerly returns its all-reduce still in flight: a timed call
    waits for it, so the time covers it and no collective is left unwaited."""
    with fake_ranks(2) as mesh:
        layers = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4))
        plan = {"0": ColwiseParallel(), "1": RowwiseParallel()}
        sharded = parallelize_module(layers, mesh, plan)
        in_flight = _get_work_registry_size()
        bench.time_call(sharded, (torch.ones(3, 4),), "cpu")
        assert _get_work_registry_size() == in_flight


def test_the_slowest_rank_s_figures_are_reported():
    """The figures come from the rank with the highest graph p50{{ " (over every capture size)" if decode else "" }}; a recompile on any rank
    counts."""
    results = [rank_result(1.0, []), rank_result(3.0, []), rank_result(2.0, ["stats.graphs"])]
    result = bench.slowest_rank(results, {"size": 3, "backend": "gloo"})
{%- if decode %}
    assert result["sizes"][1]["graph"] == {"p50_ms": 3.0}
    assert result["recompiles"] == ["stats.graphs"]
{%- else %}
    assert result["graph"] == {"p50_ms": 3.0}
{%- endif %}
    assert result["ranks"] == {"size": 3, "backend": "gloo", "slowest": 1}
    assert result["recompiled"] == ["stats.graphs"]
    assert bench.ranks_text(result["ranks"]) == "3 (gloo), figures from rank 1, the slowest"


def test_a_mismatch_names_the_rank_it_happened_on(capsys):
    """When one rank's graph output differs, rank 0's report names that rank and shows how."""
    backend = Backend("aot_eager", "cpu", "a test")
    group = {"size": 2, "backend": "gloo"}
    bench.report_mismatch(backend, example_inputs(), [None, "off by one"], group, as_json=True)
    captured = capsys.readouterr()
    assert "does not match eager on rank 1, so nothing was timed" in captured.err
    assert "rank 1: off by one" in captured.err
    assert json.loads(captured.out)["ranks"] == {**group, "mismatched": [1]}


def test_torchrun_ranks_print_one_result_and_exit_0(two_ranks):
    """Under torchrun every rank times, rank 0 alone prints one JSON result, and all exit 0.

    (two_ranks.py runs `bench --iters 3 --warmup 1 --json` on each rank.)
    """
    steps = [two_ranks.results[rank]["bench"] for rank in range(two_ranks.size)]
    assert [step["value"] for step in steps] == [0] * two_ranks.size
    (printed,) = "".join(step["printed"] for step in steps).splitlines()
    assert steps[0]["printed"] == f"{printed}\n"
    result = json.loads(printed)
    assert result["outputs_match"] is True
    assert result["ranks"]["size"] == two_ranks.size
    assert result["ranks"]["slowest"] in range(two_ranks.size)
{%- endif %}
