{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""The MRE runs in graph mode, matches eager, reports what ran, and keeps the seed's shape."""

import ast
import inspect
from types import SimpleNamespace

import pytest
import torch

from {{ cookiecutter.package_name }} import mre
from {{ cookiecutter.package_name }}.toolkit import report
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same, describe_tree
{%- if tp %}
from {{ cookiecutter.package_name }}.toolkit.parallel import tensor_parallel
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.report import NoGraphError, first_call

FIXED_NAMES = {"config", "compiled_model", "dummy_input", "output"}


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


def test_mre_report_names_backend_reason_inputs_and_output(mre_run, eager_step):
    """The report says which backend ran and why, what went in and came out, and what it compiled."""
    backend = select_backend()
    printed = mre_run.report
    assert f"backend     {backend.name} ({backend.reason})" in printed
    assert f"input       {describe_tree(eager_step.dummy_input)}" in printed
    assert f"output      {describe_tree(mre_run.output)}" in printed
    assert f"{mre_run.graphs} graph" in printed
{%- if tp %}
    # Plain python runs one rank.
    group_backend = "hccl" if backend.device == "npu" else "gloo"
    assert f"\nranks       1 ({group_backend}), slowest first call " in printed
{%- endif %}


def test_the_report_names_each_non_tensor_input(capsys):
    """A float input gets a `constant` row: its path and value, baked into the graph, and the fix."""
    backend = select_backend()
    dummy_input = (torch.ones(3), 0.5)
    call = report.FirstCall(0.1, 1)
{%- if tp %}
    with tensor_parallel(backend.device) as ranks:
        report.print_report(backend, None, dummy_input, torch.ones(3), call, ranks)
{%- else %}
    report.print_report(backend, None, dummy_input, torch.ones(3), call)
{%- endif %}
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("constant")]
    assert row.startswith("constant    [1]: float 0.5 is baked into the graph as a constant")
    assert "; pass a 0-d tensor, torch.tensor(0.5)" in row


@pytest.mark.parametrize(
    ("config", "call", "options", "first_call"),
    [
        (None, (0.126, 1), "none (only npugraph_ex takes options)", "0.13 s, 1 graph"),
        ({"frozen_parameter": True}, (2.5, 2), "{'frozen_parameter': True}", "2.50 s, 2 graphs"),
    ],
)
def test_the_report_reads_row_by_row(capsys, config, call, options, first_call):
    """Each row of the report: the backend and why, its options, the input and the output, and
    the first call's time and graphs (one graph, or several)."""
    backend = select_backend()
    dummy_input, output = (torch.ones(2),), torch.zeros(3)
{%- if tp %}
    with tensor_parallel(backend.device) as ranks:
        report.print_report(backend, config, dummy_input, output, report.FirstCall(*call), ranks)
{%- else %}
    report.print_report(backend, config, dummy_input, output, report.FirstCall(*call))
{%- endif %}
    assert capsys.readouterr().out.splitlines()[:5] == [
        f"backend     {backend.name} ({backend.reason})",
        f"options     {options}",
        f"input       {describe_tree(dummy_input)}",
        f"output      {describe_tree(output)}",
        f"first call  {first_call} (compile and capture included)",
    ]


def test_on_an_npu_the_first_call_waits_for_the_device(monkeypatch):
    """On an NPU the first call's time covers the device work still queued; elsewhere nothing
    waits."""
    waited = []
    npu = SimpleNamespace(synchronize=lambda: waited.append("npu"))
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    report.synchronize("cpu")
    assert waited == []
    report.synchronize("npu")
    assert waited == ["npu"]


def test_a_first_call_that_compiles_no_graph_raises():
    """A first call that ran eagerly (no graph compiled) raises NoGraphError: the MRE must not pass."""
    backend = select_backend()
    with pytest.raises(NoGraphError, match="compiled no graph"), first_call(backend):
        torch.ones(3, device=backend.device) * 2


def test_a_first_call_that_compiles_a_graph_counts_it():
    """A first call that compiles one graph passes and counts it."""
    backend = select_backend()
    compiled = torch.compile(lambda x: x * 2, backend=backend.name, fullgraph=True, dynamic=False)
    with first_call(backend) as call:
        compiled(torch.ones(3, device=backend.device))
    assert call.graphs == 1


def infer_one_step_ast() -> ast.FunctionDef:
    module = ast.parse(inspect.getsource(mre))
    return next(node for node in module.body if isinstance(node, ast.FunctionDef))


def test_mre_has_the_seed_three_part_shape():
    """Imports, then def infer_one_step(), then the __main__ guard that calls it: nothing else."""
    body = ast.parse(inspect.getsource(mre)).body
    kinds = [type(node).__name__ for node in body]
    assert kinds[0] == "Expr"  # module docstring
    assert set(kinds[1:-2]) <= {"Import", "ImportFrom"}
    assert [kinds[-2], kinds[-1]] == ["FunctionDef", "If"]
    assert body[-2].name == "infer_one_step"
    assert ast.unparse(body[-1]) == "if __name__ == '__main__':\n    infer_one_step()"


def test_mre_uses_the_fixed_names():
    """config, compiled_model, dummy_input and output are assigned in infer_one_step."""
    assigned = {
        target.id
        for node in ast.walk(infer_one_step_ast())
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert assigned >= FIXED_NAMES


def test_mre_calls_the_contract_in_order():
    """manual_seed(0), then build_model(), then example_inputs(): anyone can rebuild the reference."""
    contract = {"torch.manual_seed", "build_model", "example_inputs"}
    calls = sorted(
        (node.lineno, node.col_offset, ast.unparse(node.func))
        for node in ast.walk(infer_one_step_ast())
        if isinstance(node, ast.Call) and ast.unparse(node.func) in contract
    )
    assert [name for *_, name in calls] == ["torch.manual_seed", "build_model", "example_inputs"]


def test_mre_docstring_explains_each_key_setting():
    """The docstring lists every key setting, so a support engineer reads why it is there."""
    docstring = ast.get_docstring(infer_one_step_ast())
{%- if cache %}
    for setting in ("cache_compile", "cache_dir", "config", ".eval()", "torch.no_grad()"):
{%- else %}
    for setting in ('backend="npugraph_ex"', "fullgraph=True", "dynamic=False", "options=config"):
{%- endif %}
        assert setting in docstring
