{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""The MRE runs your model in graph mode, matches eager, and reports what ran."""

import pytest

from {{ cookiecutter.package_name }}.model import example_inputs
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same, describe_tree, to_device


def test_mre_runs_in_graph_mode(mre_failure):
    """infer_one_step() compiles and runs the model; if it cannot, this one test says why."""
    if mre_failure:
        pytest.fail(
            "the MRE fails, so the tests that need its output are skipped:\n"
            f"{mre_failure}\n"
            "`python -m {{ cookiecutter.package_name }} check` lists every graph break with a hint",
            pytrace=False,
        )


def test_mre_output_equals_eager(mre_run, eager_output):
    """Graph mode computes what eager computes, leaf by leaf, whatever the output's structure."""
    assert_same(mre_run.output, eager_output)


def test_mre_report_names_backend_reason_inputs_and_output(mre_run):
    """The report says which backend ran and why, what went in and came out, and what it compiled."""
    backend = select_backend()
    rows = dict(line.split(maxsplit=1) for line in mre_run.report.splitlines() if " " in line)
    assert rows["backend"] == f"{backend.name} ({backend.reason})"
    assert rows["input"] == describe_tree(to_device(example_inputs(), backend.device))
    assert rows["output"] == describe_tree(mre_run.output)
    assert f"{mre_run.graphs} graph" in rows["first"]
    assert "capture" not in rows  # nothing in your graph that aclgraph capture refuses
{%- if tp %}
    # Plain python runs one rank.
    group_backend = "hccl" if backend.device == "npu" else "gloo"
    assert rows["ranks"].startswith(f"1 ({group_backend}), slowest first call ")
{%- endif %}
