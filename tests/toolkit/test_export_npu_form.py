"""export's npu target: select_backend()'s choice on an NPU written in the seed's literal form,
read from the structure of the code, never from its text."""

import ast
import importlib
import re
import subprocess
from pathlib import Path

import pytest
from ruff.__main__ import find_ruff_bin

from forward_project.toolkit import export
from toolkit.projects import PROJECTS

MRE = Path(export.source_of(export.ENTRY))


def npu_form(statement: str) -> str:
    return export.npu_form(statement, MRE, 1)


def test_the_backend_choice_becomes_the_npu_backend_with_its_options_name_and_device():
    """Each use of select_backend()'s result reads as what it is on an NPU."""
    statement = (
        "def step():\n"
        "    chosen = select_backend()\n"
        "    config = chosen.options\n"
        "    model = build_model().to(chosen.device).eval()\n"
        "    return torch.compile(model, backend=chosen.name, options=config)\n"
    )
    assert npu_form(statement) == (
        "def step():\n"
        f"    chosen = {export.NPU_BACKEND}\n"
        "    config = NPUGRAPH_EX_OPTIONS\n"
        "    model = build_model().npu().eval()\n"
        '    return torch.compile(model, backend="npugraph_ex", options=config)\n'
    )


def test_every_name_bound_to_the_choice_is_the_npu_backend():
    """Two names bound to select_backend() in one function: the options and device of each are
    the NPU's."""
    statement = (
        "def step():\n"
        "    first = select_backend()\n"
        "    second = select_backend()\n"
        "    return x.to(first.device), first.options, y.to(second.device), second.options\n"
    )
    assert npu_form(statement) == (
        "def step():\n"
        f"    first = {export.NPU_BACKEND}\n"
        f"    second = {export.NPU_BACKEND}\n"
        "    return x.npu(), NPUGRAPH_EX_OPTIONS, y.npu(), NPUGRAPH_EX_OPTIONS\n"
    )


def test_the_ranks_device_of_tensor_parallel_is_the_npu():
    """Under tensor parallelism the ranks' device is the rank's NPU: `.to(ranks.device)` is `.npu()`."""
    statement = (
        "with tensor_parallel(backend.device) as ranks:\n"
        "    model = ranks.shard(build_model().to(ranks.device).eval(), plan)\n"
    )
    assert ".to(" not in npu_form(statement)
    assert "build_model().npu().eval()" in npu_form(statement)


def test_other_devices_and_other_names_are_left_alone():
    """Only the backend's and the ranks' devices are the NPU; another `.to(...)` keeps its meaning."""
    statement = "x = y.to(other.device)\nz = w.to(dtype)\nname = options.name\n"
    assert npu_form(statement) == statement


def test_a_choice_formatted_over_several_lines_reads_alike():
    """The rewrite follows the code, not its layout: a call split over lines is found."""
    statement = "model = (\n    build_model()\n    .to(\n        backend.device\n    )\n)\nbackend = select_backend(\n)\n"
    form = npu_form(statement)
    assert "select_backend" not in form
    assert "build_model().npu()" in form


@pytest.mark.parametrize(
    "use",
    ["choose = select_backend", "backend = select_backend(prefer='npu')", "backends = [select_backend]"],
)
def test_a_use_it_cannot_write_as_a_literal_is_refused_naming_its_line(use):
    """A choice the file would make where it runs is refused, with the file and line, not half-written."""
    with pytest.raises(export.BundleError) as refused:
        export.npu_form(f"def step():\n    {use}\n", MRE, 2)
    assert str(refused.value) == (
        "mre.py:3: the npu target writes select_backend()'s choice on an NPU where it is called, "
        "and this use of it is not a call without arguments; call it plainly "
        "(`backend = select_backend()`), or export --target portable"
    )


def test_an_mre_renamed_and_reformatted_narrow_still_exports_the_seed_s_literal_form(tmp_path, monkeypatch):
    """Your own name for the backend, and `ruff format --line-length 40` on mre.py, change nothing
    the npu target writes of it: no choice is left to make where the file runs."""
    narrow = tmp_path / "mre.py"
    # Every use of the name; not the keyword torch.compile(backend=...), nor the module toolkit.backend.
    narrow.write_text(re.sub(r"(?<![.\w])backend\b(?!=)", "chosen", MRE.read_text()))
    subprocess.run([find_ruff_bin(), "format", "-q", "--line-length", "40", str(narrow)], check=True)
    source_of = export.source_of
    monkeypatch.setattr(export, "source_of", lambda name: narrow if name == export.ENTRY else source_of(name))
    bundle = export.export("npu")
    entry = bundle[bundle.index("def infer_one_step") :]
    assert "select_backend" not in entry
    assert f"chosen = {export.NPU_BACKEND}" in entry
    assert "config = NPUGRAPH_EX_OPTIONS" in entry
    assert 'backend="npugraph_ex"' in entry
    assert ".to(chosen.device)" not in entry


def keywords_of(text: str, function: str) -> dict[str | None, str]:
    """The keywords of the call of `function` in `text` ({None: ...} for a `**` one), as code."""
    call = next(
        node
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == function
    )
    return {keyword.arg: ast.unparse(keyword.value) for keyword in call.keywords}


@pytest.mark.parametrize("package", PROJECTS)
def test_each_kind_of_project_exports_the_literal_seed_form(package):
    """Every kind of project's npu target imports torch_npu, moves the model with .npu() and
    names npugraph_ex literally, whole-graph: torch.compile's backend, or under cache_compile
    npugraph_ex's own cache_compile with the npugraph_ex options (and a rank's keywords under
    tensor parallelism alone)."""
    answers = PROJECTS[package]
    text = importlib.import_module(f"{package}.toolkit.export").export("npu")
    assert "import torch_npu" in text
    assert "build_model().npu().eval()" in text
    if answers.get("mode") == "cache_compile":
        ranks = {None: "ranks"} if answers.get("parallel") == "tensor_parallel" else {}
        assert keywords_of(text, "torch.npu.npugraph_ex.inference.cache_compile") == {
            "dynamic": "False",
            # The folder of the model's code in the cache folder (compile_cache.keyed()).
            "cache_dir": "keyed(cache_dir, model)",
            "options": "NPUGRAPH_EX_OPTIONS",
            **ranks,
        }
    else:
        assert keywords_of(text, "torch.compile") == {
            "backend": "'npugraph_ex'",
            "fullgraph": "True",
            "dynamic": "False",
            "options": "config",
        }
