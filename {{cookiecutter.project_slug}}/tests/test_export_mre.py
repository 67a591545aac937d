{%- set cache = cookiecutter.mode == "cache_compile" -%}
"""export_mre writes one self-contained file in the seed's shape, for either target."""

import ast

import pytest

from {{ cookiecutter.package_name }} import export_mre

TARGETS = ["npu", "portable"]
# What an exported file may import: torch, torch_npu, and os to set TORCH_DEVICE_BACKEND_AUTOLOAD.
ALLOWED_IMPORTS = {"os", "torch", "torch_npu"}


@pytest.fixture(scope="module", params=TARGETS)
def exported(request) -> tuple[str, ast.Module]:
    text = export_mre.export(request.param)
    return request.param, ast.parse(text)


def test_file_has_the_seed_three_part_shape(exported):
    """Docstring and imports, definitions, def infer_one_step(), then the __main__ guard."""
    _, module = exported
    kinds = [type(node).__name__ for node in module.body]
    assert kinds[0] == "Expr"
    head = {"Expr", "Import", "ImportFrom"}
    first_definition = next(i for i, kind in enumerate(kinds) if kind not in head)
    assert not {"Import", "ImportFrom"} & set(kinds[first_definition:])
    assert module.body[-2].name == "infer_one_step"
    assert ast.unparse(module.body[-1]) == "if __name__ == '__main__':\n    infer_one_step()"


def test_infer_one_step_uses_the_fixed_names(exported):
    """config, {% if not cache %}compiled_model, {% endif %}dummy_input and output, as in the project's MRE."""
    _, module = exported
    step = module.body[-2]
    assigned = {node.targets[0].id for node in ast.walk(step) if isinstance(node, ast.Assign)}
    assert assigned >= {"config", {% if not cache %}"compiled_model", {% endif %}"dummy_input", "output"}


def test_imports_nothing_of_the_project(exported):
    """Only torch (and torch_npu) are imported: the file runs without this project."""
    _, module = exported
    roots = {
        alias.name.split(".")[0] if isinstance(node, ast.Import) else node.module.split(".")[0]
        for node in ast.walk(module)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert roots <= ALLOWED_IMPORTS


def test_header_names_project_setup_and_versions():
    """The docstring says which project, mode and versions produced the file."""
    header = export_mre.export("npu").split('"""')[1]
    assert export_mre.PROJECT in header
    assert "mode {{ cookiecutter.mode }}" in header
    assert f"torch {export_mre.versions()['torch']}" in header


def test_npu_target_is_the_literal_seed_form():
    """The npu target moves model and input with .npu() and names npugraph_ex literally."""
    text = export_mre.export("npu")
    assert "import torch_npu" in text
    assert "().npu().eval()" in text
    assert "torch.randn(INPUT_SHAPE).npu()" in text
{%- if cache %}
    assert "torch.npu.npugraph_ex.inference.cache_compile(" in text
{%- else %}
    assert 'backend="npugraph_ex",' in text
{%- endif %}


def test_main_writes_the_file(tmp_path):
    """`-o FILE --target portable` writes the portable export there."""
    path = tmp_path / "mre.py"
    assert export_mre.main(["-o", str(path), "--target", "portable"]) == 0
    assert path.read_text() == export_mre.export("portable")
