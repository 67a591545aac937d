"""Every variant's mre.py is the seed's MRE, literal: three parts, the fixed names, the compile call
in plain sight, one toolkit call inside infer_one_step(), and a docstring of its key settings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import CODE_VARIANTS, package_of, variant_id

FIXED_NAMES = {"config", "compiled_model", "dummy_input", "output"}


def mre_of(project: Path) -> ast.Module:
    return ast.parse((project / "src" / package_of(project) / "mre.py").read_text())


def infer_one_step(module: ast.Module) -> ast.FunctionDef:
    (found,) = [node for node in module.body if isinstance(node, ast.FunctionDef)]
    assert found.name == "infer_one_step"
    return found


def toolkit_names(module: ast.Module) -> set[str]:
    """The names mre.py imports from the toolkit."""
    return {
        alias.asname or alias.name
        for node in module.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("toolkit")
        for alias in node.names
    }


@pytest.fixture(params=CODE_VARIANTS, ids=variant_id)
def mre(request, baked) -> ast.Module:
    return mre_of(baked(**request.param))


def test_the_mre_has_the_seed_three_part_shape(mre):
    """A docstring, imports, (cache_compile's class,) def infer_one_step(), then the __main__
    guard: nothing else."""
    kinds = [type(node).__name__ for node in mre.body]
    assert kinds[0] == "Expr"
    imports = kinds[1 : kinds.index("ClassDef") if "ClassDef" in kinds else kinds.index("FunctionDef")]
    assert set(imports) == {"Import", "ImportFrom"} or set(imports) == {"ImportFrom"}
    assert kinds[-2:] == ["FunctionDef", "If"]
    assert ast.unparse(mre.body[-1].test) == "__name__ == '__main__'"


def test_infer_one_step_assigns_the_fixed_names(mre):
    """config, compiled_model, dummy_input and output are assigned in infer_one_step()."""
    assigned = {
        target.id
        for node in ast.walk(infer_one_step(mre))
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert assigned >= FIXED_NAMES


def test_infer_one_step_calls_the_contract_in_order(mre):
    """manual_seed(0), then build_model(), then example_inputs(): anyone can rebuild the reference."""
    contract = {"torch.manual_seed", "build_model", "example_inputs"}
    calls = sorted(
        (node.lineno, node.col_offset, ast.unparse(node.func))
        for node in ast.walk(infer_one_step(mre))
        if isinstance(node, ast.Call) and ast.unparse(node.func) in contract
    )
    assert [name for *_, name in calls] == ["torch.manual_seed", "build_model", "example_inputs"]


def test_the_only_toolkit_call_in_infer_one_step_is_the_backends_choice(mre):
    """Inside infer_one_step() the toolkit chooses the backend, and nothing else: the rest is the
    user's code and torch's, written out."""
    called = {ast.unparse(node.func) for node in ast.walk(infer_one_step(mre)) if isinstance(node, ast.Call)}
    assert called & toolkit_names(mre) == {"select_backend"}


def test_the_compile_call_is_in_plain_sight(mre):
    """torch.compile(..., fullgraph=True, dynamic=False, options=config), or under cache_compile
    npugraph_ex's cache_compile(..., dynamic=False, cache_dir=...), is written in mre.py."""
    calls = [node for node in ast.walk(mre) if isinstance(node, ast.Call)]
    cache = [call for call in calls if ast.unparse(call.func).endswith("inference.cache_compile")]
    if cache:
        keywords = {keyword.arg: ast.unparse(keyword.value) for keyword in cache[0].keywords}
        assert keywords["dynamic"] == "False"
        assert "cache_dir" in keywords
        return
    (compiled,) = [call for call in calls if ast.unparse(call.func) == "torch.compile"]
    keywords = {keyword.arg: ast.unparse(keyword.value) for keyword in compiled.keywords}
    assert (keywords["fullgraph"], keywords["dynamic"], keywords["options"]) == ("True", "False", "config")


def test_the_docstring_lists_each_key_setting_in_a_dozen_lines(mre):
    """The docstring names each key setting and why, as the seed's does, in about a dozen lines."""
    docstring = ast.get_docstring(infer_one_step(mre))
    settings = [line for line in docstring.splitlines() if line.startswith("- ")]
    assert len(docstring.splitlines()) <= 16
    assert any("dynamic=False" in line for line in settings)
    assert any("options=config" in line for line in settings)
