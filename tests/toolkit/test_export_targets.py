"""What export writes for each project: your code and the MRE, nothing else, in the literal form
of its target (npu: the seed's npugraph_ex form; portable: the aot_eager stand-in on the CPU)."""

import ast
import functools
import importlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import symtable
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import RUFF

from forward_project.toolkit import backend, bundle
from toolkit.projects import PROJECTS

TARGETS = ["npu", "portable"]
CACHE = [package for package, answers in PROJECTS.items() if answers.get("mode") == "cache_compile"]
NPUGRAPH_EX = [package for package in PROJECTS if package not in CACHE]
PARALLEL = [package for package, answers in PROJECTS.items() if answers.get("parallel")]
SINGLE = [package for package in PROJECTS if package not in PARALLEL]
EVERY_FEATURE = {
    "workload": "decode",
    "parallel": "tensor_parallel",
    "mode": "cache_compile",
    "custom_op": "in_place",
    "op_registration": "op_plugin",
}
"""A project with every feature at once: its file is the longest beside your code."""
BUDGET = 60


@functools.cache
def exported_text(package: str, target: str) -> str:
    """export.export(target) in that project, once for this module's tests."""
    return export_of(package).export(target)


def export_of(package: str):
    return importlib.import_module(f"{package}.toolkit.export")


def code_lines(text: str) -> int:
    """Lines that are neither blank nor comments."""
    return sum(1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def defined(text: str) -> dict[str, ast.stmt]:
    """The top-level statements of a module's text that bind a name (not by importing it), by
    that name."""
    found = {}
    for node in ast.parse(text).body:
        targets = [node] if isinstance(node, ast.FunctionDef | ast.ClassDef) else []
        targets += getattr(node, "targets", [getattr(node, "target", None)])
        found |= {getattr(target, "id", getattr(target, "name", None)): node for target in targets}
    return {name: node for name, node in found.items() if name}


def package_file(package: str, name: str) -> Path:
    return Path(importlib.util.find_spec(package).origin).with_name(name)


def yours(package: str) -> set[str]:
    """The top-level names model.py and the custom operator's files define."""
    files = ["model.py", "custom_op.py", "meta_registrations.py", "op_reference.py"]
    paths = [package_file(package, name) for name in files]
    return {name for path in paths if path.exists() for name in defined(path.read_text())}


def mre_definitions(package: str) -> set[str]:
    """The classes and functions mre.py defines."""
    return set(defined(package_file(package, "mre.py").read_text())) & {"CachedModel", "infer_one_step"}


def infer_one_step(package: str, target: str) -> str:
    """The source of the file's infer_one_step()."""
    text = exported_text(package, target)
    return ast.get_source_segment(text, defined(text)["infer_one_step"])


def cached_model(package: str, target: str) -> str:
    text = exported_text(package, target)
    return ast.get_source_segment(text, defined(text)["CachedModel"])


def guard(text: str) -> list[str]:
    """The statements of the file's __main__ guard."""
    main = ast.parse(text).body[-1]
    assert ast.unparse(main.test) == "__name__ == '__main__'"
    return [ast.unparse(statement) for statement in main.body]


def calls(source: str, function: str) -> list[ast.Call]:
    """The calls of `function` (its dotted name) in `source`."""
    return [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == function
    ]


def names(source: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}


def keywords(call: ast.Call) -> dict[str, str]:
    return {keyword.arg: ast.unparse(keyword.value) for keyword in call.keywords}


def unread_locals(function: str) -> list[str]:
    """The parameters and variables of the function whose source is `function` that it never reads."""
    (scope,) = symtable.symtable(textwrap.dedent(function), "<mre>", "exec").get_children()
    return sorted(
        symbol.get_name()
        for symbol in scope.get_symbols()
        if (symbol.is_parameter() or symbol.is_assigned()) and not symbol.is_referenced()
    )


def names_of_your_code(package: Path) -> set[str]:
    """The top-level names that your modules and the toolkit, whose definitions they may import,
    define in the package folder `package`; not mre.py's."""
    sources = [*package.glob("*.py"), *package.glob("toolkit/*.py")]
    names = {name for path in sources if path.name != "mre.py" for name in defined(path.read_text())}
    return names - set(defined((package / "mre.py").read_text()))


def lines_beside_yours(text: str, package: Path) -> int:
    """The file's lines of code (not blank, not comments, not docstrings) beside your code: every
    top-level statement but those that define a name of your code (names_of_your_code), and the
    import lines of the names the others read."""
    tree, lines, yours = ast.parse(text), text.splitlines(), names_of_your_code(package)
    ours = [
        node
        for node in tree.body
        if not isinstance(node, ast.Import | ast.ImportFrom)
        and not set(defined(ast.unparse(node))) & yours
        and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))  # a docstring
    ]
    counted = {line for node in ours for line in range(node.lineno, node.end_lineno + 1)}
    for node in ours:
        for each in ast.walk(node):
            if isinstance(each, ast.FunctionDef | ast.ClassDef) and ast.get_docstring(each):
                counted -= set(range(each.body[0].lineno, each.body[0].end_lineno + 1))
    read = {name.id for node in ours for name in ast.walk(node) if isinstance(name, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) in read:
                    counted.add(alias.lineno if node.end_lineno > node.lineno else node.lineno)
    return sum(1 for n in counted if lines[n - 1].strip() and not lines[n - 1].lstrip().startswith("#"))


# The seed's shape.


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("package", PROJECTS)
def test_the_file_is_imports_then_definitions_then_infer_one_step_then_the_guard(package, target):
    """The seed's order: the imports, the definitions, def infer_one_step(), the __main__ guard."""
    body = ast.parse(exported_text(package, target)).body
    imports = [n for n, node in enumerate(body) if isinstance(node, ast.Import | ast.ImportFrom)]
    definitions = [n for n, node in enumerate(body) if isinstance(node, ast.FunctionDef | ast.ClassDef)]
    assert max(imports) < min(definitions)
    assert (body[-2].name, ast.unparse(body[-1].test)) == ("infer_one_step", "__name__ == '__main__'")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("package", PROJECTS)
def test_infer_one_step_keeps_the_seed_s_fixed_names(package, target):
    """compiled_model, dummy_input and output, and config wherever the backend takes options."""
    stored = {
        node.id
        for node in ast.walk(ast.parse(infer_one_step(package, target)))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    takes_options = target == "npu" or package in NPUGRAPH_EX
    assert stored >= {"compiled_model", "dummy_input", "output"} | ({"config"} if takes_options else set())


# Your code and the MRE, nothing else.


@pytest.mark.parametrize("target", TARGETS)
def test_the_default_sample_s_file_defines_model_py_s_names_and_infer_one_step(target):
    """Nothing of the toolkit travels with the default sample: the file defines what model.py
    defines, and infer_one_step()."""
    assert set(defined(exported_text("forward_project", target))) == yours("forward_project") | {
        "infer_one_step"
    }


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("package", PROJECTS)
def test_no_toolkit_call_of_the_mre_reaches_the_file(package, target):
    """select_backend(), its Backend, the report, tensor_parallel(), the cache folder's key: none
    is named in the file."""
    assert names(exported_text(package, target)).isdisjoint(
        {"select_backend", "Backend", "report", "tensor_parallel", "keyed", "CACHE_DIR"}
    )


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("package", PROJECTS)
def test_every_name_beside_your_code_is_read(package, target):
    """Each top-level name the file defines beside your modules' is read in it (a `_name` kept
    for what it registers aside), and each parameter and variable of mre.py's definitions."""
    text = exported_text(package, target)
    tree = ast.parse(text)
    read = {
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    beside = {name for name in set(defined(text)) - yours(package) if not name.startswith("_")}
    assert beside - read == set()
    for name in mre_definitions(package):
        for function in ast.walk(defined(text)[name]):
            if isinstance(function, ast.FunctionDef):
                assert unread_locals(ast.get_source_segment(text, function)) == [], function.name


@pytest.mark.parametrize("target", TARGETS)
def test_the_default_sample_s_file_is_model_py_and_at_most_60_lines_of_code_more(target):
    """The default sample's file holds at most 60 lines of code (not blank, not comments) more
    than model.py's own, beyond its docstring and imports."""
    model = bundle.load("forward_project.model")
    beside = code_lines(exported_text("forward_project", target)) - code_lines(bundle.body_text(model))
    assert beside <= BUDGET


@pytest.fixture(scope="module")
def every_feature(baked) -> tuple[Path, dict[str, str]]:
    """A project baked with EVERY_FEATURE: its package folder, and its files by target, exported
    in a process of its own."""
    project = baked(**EVERY_FEATURE)
    package = next((project / "src").iterdir()).name
    code = f"import json, {package}.toolkit.export as e; print(json.dumps({{t: e.export(t) for t in {TARGETS}}}))"
    environment = {**os.environ, "PYTHONPATH": str(project / "src")}
    ran = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    )
    return project / "src" / package, json.loads(ran.stdout)


@pytest.mark.parametrize("target", TARGETS)
def test_a_project_with_every_feature_holds_at_most_60_lines_of_code_beside_yours(every_feature, target):
    """Decode, tensor parallelism, cache_compile and an op-plugin op at once: at most 60 lines of
    code beside your modules and the toolkit definitions they import (KVCacheParallel, ...)."""
    package, files = every_feature
    assert lines_beside_yours(files[target], package) <= BUDGET


# The npu target: the seed's literal npugraph_ex form.


@pytest.mark.parametrize("package", PROJECTS)
def test_the_npu_file_imports_torch_npu_before_your_code(package):
    """torch_npu, imported in a try that tells its failure, before any definition."""
    body = ast.parse(exported_text(package, "npu")).body
    (attempt,) = [n for n, node in enumerate(body) if isinstance(node, ast.Try)]
    assert ast.unparse(body[attempt].body) == "import torch_npu"
    assert all(not isinstance(node, ast.FunctionDef | ast.ClassDef) for node in body[:attempt])


@pytest.mark.parametrize("package", PROJECTS)
def test_the_npu_file_s_config_is_the_npugraph_ex_options_literally(package):
    """config = {the npugraph_ex options}, a literal dict: NPUGRAPH_EX_OPTIONS of backend.py."""
    (assignment,) = [
        node
        for node in ast.walk(ast.parse(infer_one_step(package, "npu")))
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "config"
    ]
    assert isinstance(assignment.value, ast.Dict)
    assert ast.literal_eval(assignment.value) == backend.NPUGRAPH_EX_OPTIONS


@pytest.mark.parametrize("package", PROJECTS)
def test_the_npu_file_moves_to_the_npu_with_npu(package):
    """Every move to the backend's device is `.npu()`: build_model().npu(), no `.to(` left, no cpu."""
    step = infer_one_step(package, "npu")
    assert "build_model().npu()" in step
    assert ".to(" not in step
    assert "cpu" not in step


@pytest.mark.parametrize("package", NPUGRAPH_EX)
def test_the_npu_file_compiles_with_torch_compile_backend_npugraph_ex(package):
    """torch.compile(model, backend="npugraph_ex", fullgraph=True, dynamic=False, options=config)."""
    (compile_,) = calls(infer_one_step(package, "npu"), "torch.compile")
    assert keywords(compile_) == {
        "backend": "'npugraph_ex'",
        "fullgraph": "True",
        "dynamic": "False",
        "options": "config",
    }


@pytest.mark.parametrize("package", CACHE)
def test_the_npu_file_caches_with_npugraph_ex_s_own_cache_compile(package):
    """CachedModel calls torch.npu.npugraph_ex.inference.cache_compile into the folder CACHE_DIR,
    literally, with the options config; a rank of a tensor-parallel job, its own cache; no
    torch.compile is left."""
    source = cached_model(package, "npu")
    (cache_compile,) = calls(source, "torch.npu.npugraph_ex.inference.cache_compile")
    folder = importlib.import_module(f"{package}.settings").CACHE_DIR
    expected = {"dynamic": "False", "cache_dir": repr(folder), "options": "config"}
    if package in PARALLEL:
        expected |= {"global_rank": "dist.get_rank()", "tp_rank": "dist.get_rank()"}
    assert keywords(cache_compile) == expected
    assert calls(source, "torch.compile") == []


@pytest.mark.parametrize("package", CACHE)
def test_cache_compile_s_model_takes_config_in_place_of_the_backend(package):
    """mre.py passes the backend to CachedModel; the npu file passes config, which it reads."""
    assert "def __init__(self, model, config):" in cached_model(package, "npu")
    assert "compiled_model = CachedModel(model, config)" in infer_one_step(package, "npu")


# The portable target: the stand-in, on the CPU.


@pytest.mark.parametrize("package", PROJECTS)
def test_the_portable_file_s_mre_never_names_torch_npu(package):
    """No import of torch_npu, and nothing of the NPU in the MRE: no .npu(), no npugraph_ex."""
    text = exported_text(package, "portable")
    tree = ast.parse(text)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    mre = [defined(text)[name] for name in mre_definitions(package)] + [tree.body[-1]]
    attributes = {node.attr for each in mre for node in ast.walk(each) if isinstance(node, ast.Attribute)}
    assert "torch_npu" not in imported
    assert attributes.isdisjoint({"npu", "npugraph_ex"})


@pytest.mark.parametrize("package", NPUGRAPH_EX)
def test_the_portable_file_compiles_with_the_stand_in_and_no_options(package):
    """config = None, and torch.compile(model, backend="aot_eager", ..., options=config)."""
    step = infer_one_step(package, "portable")
    (compile_,) = calls(step, "torch.compile")
    assert keywords(compile_)["backend"] == "'aot_eager'"
    assert keywords(compile_)["options"] == "config"
    assert "    config = None\n" in step


@pytest.mark.parametrize("package", CACHE)
def test_the_portable_file_s_cache_compile_is_its_else_branch(package):
    """CachedModel compiles with torch.compile(backend="aot_eager", options=config), and
    infer_one_step() passes it config = None: the stand-in takes no options."""
    source = cached_model(package, "portable")
    (compile_,) = calls(source, "torch.compile")
    assert keywords(compile_) == {
        "backend": "'aot_eager'",
        "fullgraph": "True",
        "dynamic": "False",
        "options": "config",
    }
    assert "def __init__(self, model, config):" in source
    assert "config = None" in infer_one_step(package, "portable")


@pytest.mark.parametrize("package", PROJECTS)
def test_the_portable_file_runs_on_the_cpu(package):
    """Every move is .to("cpu"), the model's too: a model's own .to() may do more than move."""
    step = infer_one_step(package, "portable")
    assert 'build_model().to("cpu")' in step
    assert {ast.unparse(call.args[0]) for call in calls(step, "x.to") + calls(step, "prompt.to")} <= {"'cpu'"}


# The guard.


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("package", SINGLE)
def test_the_guard_calls_infer_one_step(package, target):
    """As the seed's: `if __name__ == "__main__": infer_one_step()`."""
    assert guard(exported_text(package, target)) == ["infer_one_step()"]


@pytest.mark.parametrize("package", PARALLEL)
def test_a_tensor_parallel_guard_starts_and_destroys_the_process_group(package):
    """Under torchrun: each rank on its NPU, then hccl (portable: gloo) around infer_one_step()."""
    assert guard(exported_text(package, "npu")) == [
        "torch.npu.set_device(int(os.environ['LOCAL_RANK']))",
        "dist.init_process_group('hccl')",
        "infer_one_step()",
        "dist.destroy_process_group()",
    ]
    assert guard(exported_text(package, "portable")) == [
        "dist.init_process_group('gloo')",
        "infer_one_step()",
        "dist.destroy_process_group()",
    ]


# The file's own words and form.


@pytest.mark.parametrize("package", ["forward_project", "parallel_cache_project", "plugin_project"])
@pytest.mark.parametrize("target", TARGETS)
def test_the_header_says_what_the_file_is_its_target_how_to_run_it_and_with_what(
    monkeypatch, snapshot, package, target
):
    """A few comment lines: the project and its setup, the target and where it runs, the command
    that runs it (torchrun for a tensor-parallel MRE), and the versions that exported it."""
    versions = {"torch": "2.13.0", "torch-npu": None}

    def version(distribution: str) -> str:
        if versions.get(distribution) is None:
            raise importlib.metadata.PackageNotFoundError(distribution)
        return versions[distribution]

    monkeypatch.setattr(importlib.metadata, "version", version)
    tool = importlib.import_module(f"{package}.toolkit.export")
    monkeypatch.setattr(tool.platform, "python_version", lambda: "3.11.9")
    header = tool.header(target, "bug.py", package in PARALLEL)
    assert all(line.startswith("# ") and len(line) <= 100 for line in header.splitlines())
    assert header == snapshot


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("package", ["forward_project", "parallel_cache_project"])
def test_the_mre_reads_as_reviewed(snapshot, package, target):
    """mre.py's definitions and the guard, as each target writes them, from the first on."""
    text = exported_text(package, target)
    first = min(defined(text)[name].lineno for name in mre_definitions(package))
    assert "\n".join(text.splitlines()[first - 1 :]) == snapshot


def test_the_npu_file_without_torch_npu_says_what_it_needs_in_one_sentence_and_exits_2(tmp_path, snapshot):
    """Run where `import torch_npu` fails: one sentence on stderr (torch_npu with CANN, or the
    portable target, which runs anywhere), no traceback, exit 2."""
    broken = tmp_path / "site" / "torch_npu"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("libhccl.so: cannot open shared object file")\n')
    path = tmp_path / "mre_export.py"
    path.write_text(exported_text("forward_project", "npu"))
    environment = {**os.environ, "PYTHONPATH": str(broken.parent)}
    ran = subprocess.run(
        [sys.executable, str(path)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (ran.returncode, ran.stdout, ran.stderr.count("\n")) == (2, "", 1)
    assert ran.stderr == snapshot


def test_every_file_passes_ruff_check_and_format(tmp_path):
    """Both targets of every project lint clean, isort's order included, standalone."""
    for package in PROJECTS:
        for target in TARGETS:
            (tmp_path / f"{package}_{target}.py").write_text(exported_text(package, target))
    for command in (["check", "--extend-select", "I,W"], ["format", "--check", "--line-length", "100"]):
        ran = subprocess.run(
            [RUFF, *command, "--isolated", "--no-cache", str(tmp_path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
