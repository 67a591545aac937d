{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""export bundles what the MRE runs into one file in the seed's shape, and verifies it."""

import ast
import contextlib
import functools
import io
import os
import runpy
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.utils._pytree as pytree
from torch import nn

import {{ cookiecutter.package_name }}
from {{ cookiecutter.package_name }} import mre
from {{ cookiecutter.package_name }}.toolkit import export
from {{ cookiecutter.package_name }}.toolkit.backend import npu_status
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same

TARGETS = ["npu", "portable"]
PACKAGE = "{{ cookiecutter.package_name }}"
MISSING = "a_module_this_machine_lacks"
"""A module the written file imports in the tests that make it fail when run."""


def run_export(*arguments: str) -> tuple[int, str]:
    """export.main(arguments) here: its exit status and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        code = export.main(list(arguments))
    return code, printed.getvalue()


@pytest.fixture(scope="module")
def export_text(export_refusal) -> Callable[[str], str]:
    """export.export(target), each target exported once for this module's tests."""
    if export_refusal:
        pytest.skip(export_refusal)
    return functools.cache(export.export)


@pytest.fixture
def bundles(export_refusal) -> None:
    """For a test that exports this project: skip it when export refuses your model's data files."""
    if export_refusal:
        pytest.skip(export_refusal)


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
    """The file compiles and reads no undefined name: what export checks before it runs it."""
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


def test_export_runs_the_file_before_it_says_wrote(mre_run, written):
    """Exit 0 and `wrote` only once the file ran in a fresh process, in an empty folder, with the
    project unimportable, and matched the MRE's output."""
    assert written.code == 0, written.message
    wrote = f"wrote {written.path} (portable target): the file ran {export.ISOLATED}"
    assert wrote in written.message
    assert "matches the MRE's output" in written.message
    assert written.path.exists()


def test_portable_export_runs_and_matches_the_mre(mre_run, written, tmp_path, monkeypatch):
    """The portable file, run on its own in an empty folder, computes what the MRE computed."""
    assert written.code == 0, written.message
    monkeypatch.chdir(tmp_path)
    torch._dynamo.reset()
    # The file's own copies of the project's code, not the project's modules, must do the work.
    monkeypatch.setitem(sys.modules, PACKAGE, None)
    namespace = runpy.run_path(str(written.path), run_name="exported")
    output = namespace["infer_one_step"]()
    assert_same(output, mre_run.output)


def test_npu_target_off_an_npu_runs_its_portable_rendering(export_text):
    """The npu literals need an NPU: off one, export runs the same bundle in its portable form."""
    text, what, unrun = export.rehearsal("npu", export_text("npu"))
    if npu_status()[0]:
        assert (text, unrun) == (export_text("npu"), "")
    else:
        assert (text, what) == (export_text("portable"), "its portable rendering")
        assert "need an NPU" in unrun


@pytest.mark.usefixtures("bundles")
def test_a_file_that_fails_when_run_is_not_written(monkeypatch, tmp_path):
    """A file that fails when run: exit 1, its error on the first line, and no file."""
    prelude = f"{export.PORTABLE_PRELUDE}import {MISSING}\n"
    monkeypatch.setattr(export, "PORTABLE_PRELUDE", prelude)
    path = tmp_path / "mre.py"
    code, message = run_export("-o", str(path), "--target", "portable")
    assert code == 1
    first = message.splitlines()[0]
    assert first.startswith(f"export: ModuleNotFoundError: No module named '{MISSING}'"), message
    assert f"the file fails when run {export.ISOLATED}" in message
    assert not path.exists()


@pytest.mark.usefixtures("bundles")
def test_a_file_that_fails_as_the_mre_fails_is_written_with_exit_2(monkeypatch, tmp_path):
    """A file that fails with the very error the MRE raises here reproduces it, as a bug report
    should: written, exit 2 (never 0), the error named."""
    prelude = f"{export.PORTABLE_PRELUDE}import {MISSING}\n"
    monkeypatch.setattr(export, "PORTABLE_PRELUDE", prelude)

    def infer_one_step():
        raise ModuleNotFoundError(f"No module named '{MISSING}'")

    monkeypatch.setattr(mre, "infer_one_step", infer_one_step)
    path = tmp_path / "mre.py"
    code, message = run_export("-o", str(path), "--target", "portable")
    assert code == 2
    assert "and so does the MRE run here in an empty folder, with the same error" in message
    assert f"ModuleNotFoundError: No module named '{MISSING}'" in message
    assert path.exists()


@pytest.mark.usefixtures("bundles")
def test_a_file_whose_output_differs_is_not_written(mre_run, monkeypatch, tmp_path):
    """A file that runs but computes another output than the MRE's: exit 1, the differing leaf
    first, and no file. (Its run is stood in for: the MRE's output, plus one.)"""
    leaves = []

    def rehearse(text, name):
        reference = export.run_mre()
        leaves.extend(reference.output)
        plus_one = pytree.tree_map_only(torch.Tensor, lambda t: t + 1, reference.output)
        return export.Run(plus_one), reference

    monkeypatch.setattr(export, "rehearse", rehearse)
    path = tmp_path / "mre.py"
    code, message = run_export("-o", str(path), "--target", "portable")
    assert code == 1
    first = message.splitlines()[0]
    assert any(first.startswith(f"export: {leaf}: ") for leaf in leaves), message
    assert "differs from the MRE's output" in message
    assert not path.exists()


{%- if tp %}


@pytest.mark.usefixtures("bundles")
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


# model.py of a copy of this project that reads weights.pt beside it: each way a model finds it.
READS_DATA = {
    "Path(__file__).parent": """\
from pathlib import Path

import torch
from torch import nn

WEIGHTS = Path(__file__).parent / "weights.pt"


def build_model() -> nn.Module:
    model = nn.Linear(4, 4)
    model.load_state_dict(torch.load(WEIGHTS))
    return model
""",
    "importlib.resources": """\
from importlib.resources import files

import torch
from torch import nn

WEIGHTS = files(__package__) / "weights.pt"


def build_model() -> nn.Module:
    model = nn.Linear(4, 4)
    with WEIGHTS.open("rb") as file:
        model.load_state_dict(torch.load(file))
    return model
""",
}
MODEL_REST = """

def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 4),)
{%- if tp %}


def parallel_plan(world_size: int) -> dict:
    return {}
{%- endif %}
"""


@pytest.fixture(scope="module")
def data_file_exports(tmp_path_factory) -> dict[str, tuple[int, str, Path]]:
    """`export` in copies of this project whose model.py reads weights.pt beside it, one copy per
    way of finding it (READS_DATA), side by side, each in a process of its own."""
    source = Path({{ cookiecutter.package_name }}.__file__).parent
    launched = {}
    for how, model in READS_DATA.items():
        root = tmp_path_factory.mktemp("reads-data")
        package = root / "src" / PACKAGE
        shutil.copytree(source, package, ignore=shutil.ignore_patterns("__pycache__"))
        (package / "model.py").write_text(model + MODEL_REST)
        torch.save(nn.Linear(4, 4).state_dict(), package / "weights.pt")
        path = root / "mre_export.py"
        paths = [str(root / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
        process = subprocess.Popen(
            [sys.executable, "-m", PACKAGE, "export", "-o", str(path)],
            cwd=root,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
            stderr=subprocess.PIPE,
            text=True,
        )
        launched[how] = (process, path)
    written = {}
    for how, (process, path) in launched.items():
        _, message = process.communicate(timeout=600)  # refused before anything runs: seconds
        written[how] = (process.returncode, message, path)
    return written


@pytest.mark.parametrize("how", READS_DATA)
def test_a_data_file_the_model_reads_is_named_and_refused(data_file_exports, how):
    """A model.py that reads weights.pt beside it, through Path(__file__).parent or
    importlib.resources: refused, exit 1, the file named first with the fix, and no file."""
    code, message, path = data_file_exports[how]
    assert code == 1, message
    first = message.splitlines()[0]
    assert "cannot carry the data files your modules read: weights.pt" in first
    assert "found at model.py:" in first
    assert "from the seed" in first
    assert not path.exists()


def test_header_names_project_setup_and_versions(export_text):
    """The docstring says which project, mode and versions produced the file."""
    header = export_text("npu").split('"""')[1]
    assert export.PROJECT in header
    assert "mode {{ cookiecutter.mode }}" in header
    assert f"torch {torch.__version__}" in header
