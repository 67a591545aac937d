"""The hooks: bad answers are refused before anything is written; pruning follows the answers."""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from pathlib import Path

import pytest
from conftest import CODE_VARIANTS, TEMPLATE, bake
from cookiecutter.exceptions import FailedHookException


def load_hook(name: str):
    spec = importlib.util.spec_from_file_location(name, TEMPLATE / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pre_gen = load_hook("pre_gen_project")
post_gen = load_hook("post_gen_project")

BAD_ANSWERS = {
    "package_name not an identifier": ("package_name", "my-project", "valid Python import name"),
    "package_name starting with a digit": ("package_name", "2fast", "valid Python import name"),
    "package_name a keyword": ("package_name", "class", "Python keyword"),
    "package_name a soft keyword": ("package_name", "match", "Python keyword"),
    "package_name shadowing torch": ("package_name", "torch", "shadow the module `torch`"),
    "package_name shadowing the stdlib test package": ("package_name", "test", "shadow the module `test`"),
    "package_name shadowing json": ("package_name", "json", "shadow the module `json`"),
    "package_name too long": ("package_name", "p" * 33, "longer than 32 characters"),
    "model_class not an identifier": ("model_class", "My Model", "valid class name"),
    "model_class a keyword": ("model_class", "None", "Python keyword"),
    "model_class clashing with generated code": ("model_class", "INPUT_SHAPE", "clashes with the name"),
    "model_class collected by pytest": ("model_class", "TestNet", "collect it as a test class"),
    "model_class in capitals": ("model_class", "CNN", "all capitals"),
    "cache_dir with a newline": ("cache_dir", "cache\nrm", "control character"),
    "input_shape with a word": ("input_shape", "2, eight, 32", "positive integers"),
    "input_shape with zero": ("input_shape", "2, 0, 32", "positive integers"),
    "input_shape negative": ("input_shape", "2, -8, 32", "positive integers"),
    "input_shape empty": ("input_shape", "", "positive integers"),
    "input_shape one dimension": ("input_shape", "32", "at least two dimensions"),
    "cache_dir absolute": ("cache_dir", "/tmp/cache", "relative"),
    "cache_dir Windows absolute": ("cache_dir", "C:\\cache", "relative"),
    "cache_dir home": ("cache_dir", "~/cache", "relative"),
    "cache_dir climbing out": ("cache_dir", "cache/../../elsewhere", "climb out"),
    "cache_dir empty": ("cache_dir", " ", "empty"),
    "cache_dir the project itself": ("cache_dir", ".", "project's own files"),
    "cache_dir inside src": ("cache_dir", "src/cache", "project's own files"),
    "cache_dir a gitignore pattern": ("cache_dir", "#cache", "patterns"),
    "model_class lowercase": ("model_class", "reference", "capital letter"),
    "project_slug with a space": ("project_slug", "my project", "folder and distribution name"),
    "author_email without @": ("author_email", "nobody", "email address"),
    "author_email in angle brackets": ("author_email", "<you@example.com>", "email address"),
    "author_email with a non-ASCII domain": ("author_email", "you@exämple.com", "non-ASCII characters"),
    "cache_dir with ./": ("cache_dir", "./npu_cache", "written plainly"),
}


@pytest.mark.parametrize(("variable", "value", "why"), BAD_ANSWERS.values(), ids=BAD_ANSWERS.keys())
def test_bad_answer_is_refused_with_variable_value_and_fix(tmp_path, capfd, variable, value, why):
    """The bake fails with an ERROR line naming the variable, the value and the reason, leaving no folder."""
    with pytest.raises(FailedHookException):
        bake(tmp_path, **{variable: value})
    error = capfd.readouterr().err
    assert f"ERROR: {variable}={value!r}" in error
    assert why in error
    assert "e.g." in error  # the fix
    assert not any((tmp_path / "out").iterdir())


DEFAULTS = {
    "project_name": "NPU Graph Demo",
    "description": "Graph-mode inference.",
    "author_name": "Your Name",
    "project_slug": "npu-graph-demo",
    "package_name": "npu_graph_demo",
    "model_class": "TinyBlock",
    "input_shape": "2, 8, 32",
    "cache_dir": ".torchair_cache",
    "author_email": "you@example.com",
    "workload": "forward",
    "parallel": "none",
    "custom_op": "none",
    "op_registration": "torch_library",
    "op_name": "my_op",
    "op_namespace": "npu_graph_demo",
}


OP_ANSWERS = {"custom_op": "out_of_place"}
BAD_OP_ANSWERS = {
    "op_name not snake_case": (OP_ANSWERS, "op_name", "MyOp", "snake_case"),
    "out-of-place op ending in _": (OP_ANSWERS, "op_name", "my_op_", "marks an in-place op"),
    "op-plugin in-place op ending in _": (
        {"custom_op": "in_place", "op_registration": "op_plugin"},
        "op_name",
        "my_op_",
        "ATen in-place variant",
    ),
    "op_name replacing a name custom_op.py uses": (OP_ANSWERS, "op_name", "reference", "already uses"),
    "namespace owned by torch_npu": (OP_ANSWERS, "op_namespace", "npu", "owned by torch or torch_npu"),
    "tensor parallel with an odd hidden size": (
        {"parallel": "tensor_parallel"},
        "input_shape",
        "2, 8, 33",
        "needs an even one; e.g. 2, 8, 34",
    ),
    "decode with an odd hidden size": (
        {"workload": "decode"},
        "input_shape",
        "2, 8, 33",
        "needs divisible by 2 (rotary positions turn pairs of features); e.g. 2, 8, 34",
    ),
    "decode over two ranks with a hidden size of 2 mod 4": (
        {"workload": "decode", "parallel": "tensor_parallel"},
        "input_shape",
        "2, 8, 30",
        "splits the heads over 2 ranks in the project's tests); e.g. 2, 8, 32",
    ),
}


@pytest.mark.parametrize(
    ("answers", "variable", "value", "why"), BAD_OP_ANSWERS.values(), ids=BAD_OP_ANSWERS.keys()
)
def test_bad_op_answer_is_refused(tmp_path, capfd, answers, variable, value, why):
    """Combinations that cannot work (custom-op, tensor-parallel) are refused like the others,
    leaving no folder."""
    with pytest.raises(FailedHookException):
        bake(tmp_path, **answers, **{variable: value})
    error = capfd.readouterr().err
    assert f"ERROR: {variable}={value!r}" in error
    assert why in error
    assert not any((tmp_path / "out").iterdir())


def test_default_answers_have_no_problems():
    """The defaults in cookiecutter.json pass every check, with and without a custom op, tensor
    parallelism or decode."""
    assert pre_gen.problems(DEFAULTS) == []
    assert pre_gen.problems({**DEFAULTS, "custom_op": "in_place", "op_registration": "op_plugin"}) == []
    assert pre_gen.problems({**DEFAULTS, "parallel": "tensor_parallel"}) == []
    assert pre_gen.problems({**DEFAULTS, "workload": "decode", "parallel": "tensor_parallel"}) == []


def test_every_problem_is_reported_at_once():
    """Several bad answers give one ERROR line each, so one retry can fix them all."""
    answers = {
        **DEFAULTS,
        "package_name": "class",
        "model_class": "1x",
        "input_shape": "0",
        "cache_dir": "/abs",
    }
    assert [line.split("=")[0] for line in pre_gen.problems(answers)] == [
        "ERROR: package_name",
        "ERROR: model_class",
        "ERROR: input_shape",
        "ERROR: cache_dir",
    ]


@pytest.mark.parametrize(
    "field",
    [
        "project_name",
        "description",
        "author_name",
        "author_email",
        "model_class",
        "package_name",
        "input_shape",
    ],
)
def test_answers_are_data_not_code(tmp_path, field):
    """An answer that closes a string and calls os.system runs nothing, now or in the baked code."""
    marker = tmp_path / "pwned"
    payload = f'"""\'\'\'); import os; os.system("touch {marker}"); ("@x'
    try:
        project = bake(tmp_path, **{field: payload})
    except FailedHookException:
        assert not marker.exists()
        return  # refused before anything was written
    assert not marker.exists()
    tomllib.loads((project / "pyproject.toml").read_text())
    for path in project.rglob("*.py"):
        calls = {
            ast.unparse(node.func)
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call)
        }
        assert "os.system" not in calls, path


def module_level_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return names


def test_generated_names_list_what_model_class_could_clash_with(baked):
    """GENERATED_NAMES is exactly what the files naming the model class bind, in every code variant."""
    bound = set()
    for answers in CODE_VARIANTS:
        for path in baked(**answers).rglob("*.py"):
            names = module_level_names(path.read_text())
            if "TinyBlock" in names:
                bound |= names
    bound -= {"TinyBlock", "annotations"}
    assert {name for name in bound if not name.startswith("test_")} == pre_gen.GENERATED_NAMES


def test_post_gen_removes_the_other_modes_files():
    """Each mode keeps its own files and loses the other mode's."""
    answers = {
        "package_name": "pkg",
        "workload": "decode",
        "mode": "npugraph_ex",
        "custom_op": "out_of_place",
    }
    answers |= {"op_registration": "op_plugin", "parallel": "tensor_parallel"}
    assert post_gen.paths_to_remove(answers) == [
        "src/pkg/toolkit/compile_cache.py",
        "tests/test_compile_cache.py",
        "src/pkg/custom_op.py",
    ]
    assert post_gen.paths_to_remove({**answers, "mode": "cache_compile"}) == ["src/pkg/custom_op.py"]


def test_post_gen_leaves_no_trace_of_ops_without_one():
    """custom_op=none removes every op file of both styles, each once."""
    answers = {"package_name": "pkg", "workload": "forward", "mode": "cache_compile", "custom_op": "none"}
    answers["parallel"] = "none"
    removed = post_gen.paths_to_remove({**answers, "op_registration": "op_plugin"})
    assert removed == post_gen.paths_to_remove({**answers, "op_registration": "torch_library"})
    assert len(removed) == len(set(removed))
    assert {"src/pkg/custom_op.py", "src/pkg/op_plugin_functions.yaml", "tests/test_custom_op.py"} <= set(
        removed
    )


def test_post_gen_removes_decode_files_from_a_forward_project():
    """workload=forward removes generate.py, the decode toolkit and their tests; decode keeps them."""
    answers = {"package_name": "pkg", "mode": "npugraph_ex", "custom_op": "none", "parallel": "none"}
    answers["op_registration"] = "torch_library"
    decode_files = {"src/pkg/generate.py", "src/pkg/toolkit/decode.py", "tests/test_generate.py"}
    assert decode_files <= set(post_gen.paths_to_remove({**answers, "workload": "forward"}))
    assert not decode_files & set(post_gen.paths_to_remove({**answers, "workload": "decode"}))


def test_post_gen_removes_tensor_parallel_files_without_it():
    """parallel=none removes the parallel toolkit and its tests; tensor_parallel keeps them."""
    answers = {
        "package_name": "pkg",
        "workload": "forward",
        "mode": "cache_compile",
        "custom_op": "none",
        "op_registration": "torch_library",
    }
    removed = post_gen.paths_to_remove({**answers, "parallel": "none"})
    kept = post_gen.paths_to_remove({**answers, "parallel": "tensor_parallel"})
    tp_files = {"src/pkg/toolkit/parallel.py", "tests/test_tensor_parallel.py", "tests/two_ranks.py"}
    assert tp_files <= set(removed)
    assert not tp_files & set(kept)


def test_post_gen_removes_folders_left_empty(tmp_path: Path):
    """Pruning the last file of a folder removes the folder too."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "only.py").write_text("")
    (tmp_path / "keep.py").write_text("")
    post_gen.remove(tmp_path, ["a/b/only.py"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["keep.py"]
