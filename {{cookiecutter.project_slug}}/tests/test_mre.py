{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""The MRE runs your model in graph mode, matches eager, reports what ran, and keeps the seed's
shape."""

import ast
import inspect

import pytest

from {{ cookiecutter.package_name }} import mre
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same, describe_tree

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
    missing = sorted(FIXED_NAMES - assigned)
    assert not missing, f"infer_one_step() no longer assigns {missing}: keep the MRE's fixed names"


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
