{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""bench: eager against graph mode, outputs checked first, timings summarized, recompiles named."""

import contextlib
import io
import json

import pytest
import torch
{%- if tp %}
from torch import nn
from torch._C._distributed_c10d import _get_work_registry_size
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
{%- endif %}
from torch.utils._pytree import tree_map_only

from {{ cookiecutter.package_name }}.model import example_inputs
from {{ cookiecutter.package_name }}.toolkit import bench
from {{ cookiecutter.package_name }}.toolkit.backend import BACKEND_ENV, Backend, select_backend
from {{ cookiecutter.package_name }}.toolkit.contract import describe_tree
{%- if tp %}
from {{ cookiecutter.package_name }}.toolkit.parallel import fake_ranks
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
    "eager",
    "graph",
    "speedup",
    "recompiled",
    "outputs_match",
    "note",
}


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


# One run of each kind serves every test that reads it: each run compiles your model again. Each
# asks for mre_run only to skip if the MRE failed: test_mre.py reports that once.
@pytest.fixture(scope="module")
def json_result(mre_run, tmp_path_factory) -> dict:
    code, out, _ = bench_run(tmp_path_factory.mktemp("bench"), "--json")
    assert code == 0
    return json.loads(out)


@pytest.fixture(scope="module")
def table_run(mre_run, tmp_path_factory) -> tuple[str, str]:
    # The eager backend (Dynamo alone) compiles fastest; the JSON run covers the default backend.
    folder = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv(BACKEND_ENV, "")  # recorded, so the --backend that main() sets is undone
        code, out, err = bench_run(folder, "--backend", "eager")
    assert code == 0
    return out, err


def fabricated_run(before: dict, after: dict) -> bench.Run:
    """A timed loop of three iterations, the last one's graph call slow."""
    return bench.Run(
        counters_before=before,
        counters_after=after,
        host_ms={"eager": [2.0, 2.0, 2.0], "graph": [1.0, 1.0, 4.0]},
    )


def summarize(run: bench.Run) -> dict:
    return bench.summarize(Backend("aot_eager", "cpu", "a test"), example_inputs(), 1, 0.5, run)


def test_json_is_one_object_with_every_field(json_result):
    """--json prints a single object holding every documented field."""
    assert set(json_result) >= FIELDS
    for mode in ("eager", "graph"):
        assert set(json_result[mode]) >= {"p50_ms", "p95_ms", "mean_ms"}
    assert set(json_result["speedup"]) >= {"median", "p25", "p75"}


def test_json_values_are_sane(json_result, eager_step):
    """The outputs match, nothing recompiles, and every time and ratio is positive and ordered."""
    result = json_result
    backend = select_backend()
    assert (result["backend"], result["reason"]) == (backend.name, backend.reason)
    inputs = describe_tree(eager_step.dummy_input)
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


class ReadsAGlobal(torch.nn.Module):
    """Dynamo guards on SCALE's value: change it, and the next call recompiles."""

    def forward(self, x):
        return x * SCALE["value"]


def test_a_real_recompile_while_timing_is_reported(capsys, monkeypatch):
    """A graph that really recompiles during the timed loop is named in the result."""
    model = ReadsAGlobal()
    graph = torch.compile(model, backend="aot_eager", fullgraph=True, dynamic=False)
    monkeypatch.setattr(bench, "build", lambda backend{{ ", ranks" if tp else "" }}: (model, graph, (torch.ones(3),)))
    time_call = bench.time_call

    def recompiling_time_call(fn, dummy_input, device):
        SCALE["value"] += 1  # the next graph call fails its guard and compiles again
        return time_call(fn, dummy_input, device)

    monkeypatch.setattr(bench, "time_call", recompiling_time_call)
    monkeypatch.setitem(SCALE, "value", 1.0)
    torch._dynamo.reset()
    assert bench.main([*FAST, "--json"]) == 0
    captured = capsys.readouterr()
    assert "stats.unique_graphs" in json.loads(captured.out)["recompiled"]
    assert "recompiled or recaptured" in captured.err


def test_unknown_backend_exits_2(capsys):
    """A backend torch.compile does not know stops bench before it builds anything."""
    assert bench.main([*FAST, "--backend", "no_such_backend"]) == 2
    assert "no_such_backend" in capsys.readouterr().err


def plus_one(tensor: torch.Tensor) -> torch.Tensor:
    return tensor + 1


def test_outputs_that_differ_stop_the_run(capsys, monkeypatch):
    """A graph that computes something else is reported and exits 1 without timing."""
    build = bench.build

    def off_by_one(backend{{ ", ranks" if tp else "" }}):
        eager, _, dummy_input = build(backend{{ ", ranks" if tp else "" }})
        return eager, lambda *args: tree_map_only(torch.Tensor, plus_one, eager(*args)), dummy_input

    monkeypatch.setattr(bench, "build", off_by_one)
    assert bench.main([*FAST, "--json"]) == 1
    captured = capsys.readouterr()
    assert "does not match eager" in captured.err
    assert json.loads(captured.out)["outputs_match"] is False


def test_speedup_is_the_median_ratio_with_its_iqr():
    """Speedup is the median per-iteration eager/graph ratio, so one slow call barely moves it."""
    speedup = summarize(fabricated_run({}, {}))["speedup"]
    assert speedup == {"median": 2.0, "p25": 1.25, "p75": 2.0}


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
{%- if not tp %}


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
    return {"graph": {"p50_ms": graph_p50}, "recompiled": recompiled}


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
    """The figures come from the rank with the highest graph p50; a recompile on any rank counts."""
    results = [rank_result(1.0, []), rank_result(3.0, []), rank_result(2.0, ["stats.graphs"])]
    result = bench.slowest_rank(results, {"size": 3, "backend": "gloo"})
    assert result["graph"] == {"p50_ms": 3.0}
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
