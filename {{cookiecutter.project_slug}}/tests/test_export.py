{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""export bundles your MRE into one file that runs without this project, and verifies it."""

import ast

import pytest

from {{ cookiecutter.package_name }}.toolkit import export
{%- if tp %}
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same
{%- endif %}


@pytest.fixture
def bundles(export_refusal) -> None:
    """For a test that exports this project: skip it when export refuses your model's data files."""
    if export_refusal:
        pytest.skip(export_refusal)


def test_export_runs_your_mre_as_one_file(exported):
    """The file `export --target portable` writes runs in a fresh process, in an empty folder,
    with the project unimportable, and matches the MRE's output, as export checks before it
    writes it: the file computes what your MRE computes, without this project."""
    if exported.code:
        failure = f"export exits {exported.code} on your model:\n{exported.verdict}"
        pytest.fail(failure, pytrace=False)
    assert exported.verdict == f"the file ran {export.ISOLATED}, and matches the MRE's output"


@pytest.mark.usefixtures("bundles")
def test_npu_target_is_written_in_the_literal_npugraph_ex_form():
    """The npu target of your MRE, export's default, is select_backend()'s choice on an NPU written
    out: torch_npu imported, the model and its inputs moved with .npu(), npugraph_ex named, no
    choice left for the file to make where it runs. (export refuses an mre.py it cannot write so,
    naming the use.)"""
    text = export.export("npu")
    step = text[text.index("\ndef infer_one_step(") :]
    assert "import torch_npu" in text
    names = {node.id for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Name)}
    assert "select_backend" not in names
    assert ".npu()" in step
    assert '"cpu"' not in step  # every move is to the NPU
{%- if cache %}
    assert "torch.npu.npugraph_ex.inference.cache_compile(" in text
{%- else %}
    assert 'backend="npugraph_ex"' in step
{%- endif %}
{%- if tp %}


@pytest.mark.usefixtures("bundles")
def test_portable_export_runs_under_torchrun(mre_run, two_ranks):
    """Under torchrun the portable file runs on two ranks, with the project unimportable, and every
    rank computes what the MRE computed.

    (toolkit/two_ranks.py runs the file the suite exported before it imports anything of the project.)
    """
    assert sorted(two_ranks.results) == list(range(two_ranks.size))
    for result in two_ranks.results.values():
        assert_same(result["portable"]["value"], mre_run.output)  # each dtype's tolerance
{%- endif %}
