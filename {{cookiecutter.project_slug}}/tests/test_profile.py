{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""profile on your model: each mode's steps in a trace under --out{{ ", on every rank under torchrun" if tp else "" }}.

(That the summary agrees with the trace is the toolkit's promise, tested in the template.)"""

import contextlib
import io
import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from {{ cookiecutter.package_name }}.toolkit import profile

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


# It asks for mre_run to skip if the MRE failed (test_mre.py reports that once), and so that it
# runs after the MRE, whose compile it reuses (capture.recorder_for()).
@pytest.fixture(scope="module")
def profiled(mre_run, tmp_path_factory) -> Profiled:
    """`profile --steps STEPS --json` on your model, in a folder of its own."""
    folder = tmp_path_factory.mktemp("profile")
    arguments = ["--steps", str(STEPS), "--out", str(folder / "prof"), "--json"]
    printed, errors = io.StringIO(), io.StringIO()
    with (
        contextlib.chdir(folder),
        contextlib.redirect_stdout(printed),
        contextlib.redirect_stderr(errors),
    ):
        code = profile.main(arguments)
    if code:
        pytest.fail(f"profile exits {code} on your model:\n{errors.getvalue()}", pytrace=False)
    return Profiled(json.loads(printed.getvalue()), folder / "prof")


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


def test_profile_traces_each_mode_of_your_model(profiled):
    """profile writes a trace under --out holding STEPS `eager step` ranges, then STEPS `graph
    step` ranges that each run your model's compiled code, which no eager one does."""
    trace = Path(profiled.result["trace"])
    assert profiled.out.resolve() in trace.parents
    events = events_of(trace)
    eager, graph = (step_ranges(events, mode) for mode in ("eager", "graph"))
    assert (len(eager), len(graph)) == (STEPS, STEPS)
    assert max(float(each["ts"]) for each in eager) < min(float(each["ts"]) for each in graph)

    def compiled(outer: dict[str, Any]) -> bool:
        return any(event["name"].startswith(GRAPH_MARKERS) for event in inside(events, outer))

    assert all(compiled(each) for each in graph)
    assert not any(compiled(each) for each in eager)
{%- if tp %}


def test_torchrun_ranks_each_write_a_trace_and_rank_0_prints_once(two_ranks):
    """Under torchrun every rank profiles and exits 0, each into its own trace, and rank 0 alone
    prints one summary naming the slowest rank.

    (toolkit/two_ranks.py runs `profile --steps 2 --json` on each rank.)
    """
    steps = [two_ranks.results[rank]["profile"] for rank in range(two_ranks.size)]
    failed = [
        f"rank {rank} exits {step['value']}: {step['told']}"
        for rank, step in enumerate(steps)
        if step["value"]
    ]
    if failed:
        pytest.fail("profile under torchrun:\n" + "\n".join(failed), pytrace=False)
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
