{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
"""bench on your model: it finishes, graph mode matching eager, with figures that make sense{{ ", on
every rank under torchrun" if tp else "" }}."""

import contextlib
import io
import json

import pytest

from {{ cookiecutter.package_name }}.toolkit import bench
{%- if decode %}
from {{ cookiecutter.package_name }}.toolkit.decode import limits
{%- endif %}


# It asks for mre_run to skip if the MRE failed (test_mre.py reports that once), and so that it
# runs after the MRE, whose compile it reuses (capture.recorder_for()).
@pytest.fixture(scope="module")
def benched(mre_run, tmp_path_factory) -> dict:
    """`bench --iters 3 --warmup 1 --json` on your model, in a folder of its own."""
    printed, errors = io.StringIO(), io.StringIO()
    with (
        contextlib.chdir(tmp_path_factory.mktemp("bench")),
        contextlib.redirect_stdout(printed),
        contextlib.redirect_stderr(errors),
    ):
        code = bench.main(["--iters", "3", "--warmup", "1", "--json"])
    if code:
        pytest.fail(f"bench exits {code} on your model:\n{errors.getvalue()}", pytrace=False)
    return json.loads(printed.getvalue())


def test_bench_times_your_model_and_graph_mode_matches_eager(benched):
    """bench finishes on your model{{ " at every capture size" if decode else "" }}: graph mode computes what eager
    computes, nothing recompiles while it times, and every time and ratio is positive and
    ordered."""
    assert benched["outputs_match"] is True
{%- if decode %}
    assert (benched["recompiled"], benched["recompiles"]) == ([], [])
    timed = benched["sizes"]  # the figures of each capture size
    assert [size["batch"] for size in timed] == list(limits().capture_sizes)
{%- else %}
    assert benched["recompiled"] == []
    timed = [benched]
{%- endif %}
    assert benched["compile_s"] > 0
    for figures in timed:
        for mode in ({{ '"prefill", ' if decode else "" }}"eager", "graph"):
            assert 0 < figures[mode]["p50_ms"] <= figures[mode]["p95_ms"]
            assert figures[mode]["mean_ms"] > 0
        speedup = figures["speedup"]
        assert 0 < speedup["p25"] <= speedup["median"] <= speedup["p75"]
{%- if tp %}


def test_torchrun_ranks_print_one_result_and_exit_0(two_ranks):
    """Under torchrun every rank times your model, rank 0 alone prints one JSON result, and all
    exit 0.

    (toolkit/two_ranks.py runs `bench --iters 3 --warmup 1 --json` on each rank.)
    """
    steps = [two_ranks.results[rank]["bench"] for rank in range(two_ranks.size)]
    failed = [
        f"rank {rank} exits {step['value']}: {step['told']}"
        for rank, step in enumerate(steps)
        if step["value"]
    ]
    if failed:
        pytest.fail("bench under torchrun:\n" + "\n".join(failed), pytrace=False)
    (printed,) = "".join(step["printed"] for step in steps).splitlines()
    assert steps[0]["printed"] == f"{printed}\n"
    result = json.loads(printed)
    assert result["outputs_match"] is True
    assert result["ranks"]["size"] == two_ranks.size
    assert result["ranks"]["slowest"] in range(two_ranks.size)
{%- endif %}
