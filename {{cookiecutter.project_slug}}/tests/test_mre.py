{%- set cache = cookiecutter.mode == "cache_compile" -%}
"""The MRE runs, matches eager, reports what ran, and keeps the seed's shape."""

import ast
import inspect

import torch

from {{ cookiecutter.package_name }} import mre
from {{ cookiecutter.package_name }}.backend import select_backend
from {{ cookiecutter.package_name }}.model import INPUT_SHAPE, {{ cookiecutter.model_class }}

FIXED_NAMES = {"config", {% if not cache %}"compiled_model", {% endif %}"dummy_input", "output"}


def eager_output() -> torch.Tensor:
    """The model run without graph mode, on the MRE's seeded weights and input."""
    torch.manual_seed(0)
    device = select_backend().device
    model = {{ cookiecutter.model_class }}().to(device).eval()
    dummy_input = torch.randn(INPUT_SHAPE).to(device)
    with torch.no_grad():
        return model.{{ "_forward" if cache else "forward" }}(dummy_input)


def test_mre_output_equals_eager(mre_run):
    """Graph mode computes what eager computes."""
    torch.testing.assert_close(mre_run.output, eager_output())


def test_mre_output_keeps_input_shape(mre_run):
    """A transformer block maps (..., sequence, hidden) to the same shape."""
    assert tuple(mre_run.output.shape) == INPUT_SHAPE


def test_mre_report_names_backend_reason_and_timing(mre_run):
    """The report says which backend ran, why, on what tensors, and how long the first call took."""
    report = mre_run.report
    backend = select_backend()
    assert f"backend     {backend.name} ({backend.reason})" in report
    assert f"input       {INPUT_SHAPE}" in report
    assert f"output      {INPUT_SHAPE}" in report
    assert "first call" in report


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
    """config, {% if not cache %}compiled_model, {% endif %}dummy_input and output are assigned in infer_one_step."""
    assigned = {
        target.id
        for node in ast.walk(infer_one_step_ast())
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert assigned >= FIXED_NAMES
{%- if not cache %}


def test_mre_compiles_whole_graph_with_static_shapes():
    """torch.compile gets fullgraph=True and dynamic=False, as npugraph_ex needs."""
    calls = [
        node
        for node in ast.walk(infer_one_step_ast())
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.compile"
    ]
    assert len(calls) == 1
    keywords = {kw.arg: ast.unparse(kw.value) for kw in calls[0].keywords}
    assert keywords["fullgraph"] == "True"
    assert keywords["dynamic"] == "False"
    assert keywords["options"] == "config"
{%- endif %}


def test_mre_docstring_explains_each_key_setting():
    """The docstring lists every key setting, so a support engineer reads why it is there."""
    docstring = ast.get_docstring(infer_one_step_ast())
{%- if cache %}
    for setting in ("cache_compile", "config", ".eval()", "torch.no_grad()", "manual_seed"):
{%- else %}
    for setting in ('backend="npugraph_ex"', "fullgraph=True", "dynamic=False", "options=config"):
{%- endif %}
        assert setting in docstring
