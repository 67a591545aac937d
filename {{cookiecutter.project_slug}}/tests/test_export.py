{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""export bundles what the MRE runs into one file in the seed's shape, and verifies it."""

import ast
import functools
import runpy
import sys
from collections.abc import Callable

import pytest
import torch

from {{ cookiecutter.package_name }}.toolkit import export
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same

TARGETS = ["npu", "portable"]
PACKAGE = "{{ cookiecutter.package_name }}"


@pytest.fixture(scope="module")
def export_text() -> Callable[[str], str]:
    """export.export(target), each target exported once for this module's tests."""
    return functools.cache(export.export)


@pytest.fixture(scope="module", params=TARGETS)
def exported(request, export_text) -> tuple[str, str, ast.Module]:
    text = export_text(request.param)
    return request.param, text, ast.parse(text)


def test_file_has_the_seed_three_part_shape(exported):
    """Docstring and imports, definitions, def infer_one_step(), then the __main__ guard."""
    _, _, module = exported
    kinds = [type(node).__name__ for node in module.body]
    assert kinds[0] == "Expr"
    assert not {"Import", "ImportFrom"} & set(kinds[kinds.index("FunctionDef") :])
    assert module.body[-2].name == "infer_one_step"
    assert ast.unparse(module.body[-1]) == "if __name__ == '__main__':\n    infer_one_step()"


def test_infer_one_step_uses_the_fixed_names(exported):
    """config, compiled_model, dummy_input and output, as in the project's MRE."""
    _, _, module = exported
    assigned = {
        node.targets[0].id
        for node in ast.walk(module.body[-2])
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    assert assigned >= {"config", "compiled_model", "dummy_input", "output"}


def test_imports_nothing_of_the_project(exported):
    """The file imports no module of this project: it runs where the project is not installed."""
    _, _, module = exported
    imported = {
        alias.name if isinstance(node, ast.Import) else node.module or ""
        for node in ast.walk(module)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert {name.split(".")[0] for name in imported}.isdisjoint({PACKAGE, ""})


def test_file_compiles_with_every_name_defined(exported):
    """The written file compiles and reads no undefined name: what export verifies before exit 0."""
    target, text, _ = exported
    compile(text, f"export-{target}", "exec")
    assert export.undefined_names(text) == []


def test_undefined_names_are_found():
    """The verifier finds a name read but never bound, at module level and inside functions."""
    text = "import torch\n\nX = torch.ones(1)\n\n\ndef f(a):\n    return a + Missing + X\n\nprint(Other)\n"
    assert export.undefined_names(text) == ["Missing", "Other"]


def test_file_is_defined_in_every_script():
    """__file__ is no undefined name: Python defines it in every script, the exported one too."""
    text = "from pathlib import Path\n\nHERE = Path(__file__).parent\n"
    assert export.undefined_names(text) == []


def test_npu_target_is_the_literal_seed_form(export_text):
    """The npu target moves the model with .npu() and names npugraph_ex literally, whole-graph."""
    text = export_text("npu")
    assert "import torch_npu" in text
    assert "build_model().npu().eval()" in text
{%- if cache %}
    assert "torch.npu.npugraph_ex.inference.cache_compile(" in text
    cached = next(
        node
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) == "torch.npu.npugraph_ex.inference.cache_compile"
    )
    keywords = {kw.arg: ast.unparse(kw.value) for kw in cached.keywords}
    assert keywords["dynamic"] == "False"
    assert keywords["options"] == "NPUGRAPH_EX_OPTIONS"
{%- else %}
    compile_call = next(
        node
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.compile"
    )
    keywords = {kw.arg: ast.unparse(kw.value) for kw in compile_call.keywords}
    assert keywords == {
        "backend": "'npugraph_ex'",
        "fullgraph": "True",
        "dynamic": "False",
        "options": "config",
    }
{%- endif %}


def test_portable_export_runs_and_matches_the_mre(mre_run, tmp_path, monkeypatch):
    """The portable file, run on its own in an empty folder, computes what the MRE computed."""
    path = tmp_path / "mre.py"
    assert export.main(["-o", str(path), "--target", "portable"]) == 0
    monkeypatch.chdir(tmp_path)
    torch._dynamo.reset()
    # The file's own copies of the project's code, not the project's modules, must do the work.
    monkeypatch.setitem(sys.modules, PACKAGE, None)
    namespace = runpy.run_path(str(path), run_name="exported")
    output = namespace["infer_one_step"]()
    assert_same(output, mre_run.output)


{%- if tp %}


def test_portable_export_runs_under_torchrun(mre_run, two_ranks):
    """Under torchrun the portable file runs on two ranks, with the project unimportable, and every
    rank computes what the MRE computed.

    (two_ranks.py runs the file conftest.py exported before it imports anything of the project.)
    """
    assert sorted(two_ranks.results) == list(range(two_ranks.size))
    for result in two_ranks.results.values():
        assert_same(result["portable"]["value"], mre_run.output)  # each dtype's tolerance
{%- endif %}


def test_what_cannot_be_bundled_exits_1_with_the_reason(monkeypatch, tmp_path, capsys):
    """A name defined twice across your modules is refused: exit 1, the name, and no file."""

    original = export.load

    def load_with_a_clash(name, target):
        module = original(name, target)
        if name == f"{PACKAGE}.model":
            module.definitions.append(export.Definition(name, "to_device = None", {"to_device"}))
        return module

    monkeypatch.setattr(export, "load", load_with_a_clash)
    path = tmp_path / "mre.py"
    assert export.main(["-o", str(path)]) == 1
    assert "`to_device` is defined in both" in capsys.readouterr().err
    assert not path.exists()


def test_header_names_project_setup_and_versions(export_text):
    """The docstring says which project, mode and versions produced the file."""
    header = export_text("npu").split('"""')[1]
    assert export.PROJECT in header
    assert "mode {{ cookiecutter.mode }}" in header
    assert f"torch {torch.__version__}" in header
