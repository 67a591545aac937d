"""The MRE's report: one row per fact (backend and why, options, input, output, first call), and a
first call that must compile a graph."""

import sys
from types import SimpleNamespace

import pytest
import torch

from cache_project.toolkit import report as cache_report
from forward_project.toolkit import report
from forward_project.toolkit.backend import select_backend
from forward_project.toolkit.contract import describe_tree
from forward_project.toolkit.report import NoGraphError, first_call


def test_the_report_names_each_non_tensor_input(capsys):
    """A float input gets a `constant` row: its path and value, baked into the graph, and the fix."""
    backend = select_backend()
    dummy_input = (torch.ones(3), 0.5)
    call = report.FirstCall(0.1, 1)
    report.print_report(backend, None, dummy_input, torch.ones(3), call)
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("constant")]
    assert row.startswith("constant    [1]: float 0.5 is baked into the graph as a constant")
    assert "; pass a 0-d tensor, torch.tensor(0.5)" in row


def test_the_report_has_a_row_for_every_non_tensor_input(capsys):
    """Two constant inputs: a `constant` row each, in input order."""
    dummy_input = (torch.ones(3), 0.5, 2)
    report.print_report(select_backend(), None, dummy_input, torch.ones(3), report.FirstCall(0.1, 1))
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("constant")]
    assert [row.split()[1] for row in rows] == ["[1]:", "[2]:"]


@pytest.mark.parametrize(
    ("config", "call", "options", "first_call"),
    [
        (None, (0.126, 1), "none (only npugraph_ex takes options)", "0.13 s, 1 graph"),
        ({"frozen_parameter": True}, (2.5, 2), "{'frozen_parameter': True}", "2.50 s, 2 graphs"),
    ],
)
def test_the_report_reads_row_by_row(capsys, config, call, options, first_call):
    """Each row of the report: the backend and why, its options, the input and the output, and
    the first call's time and graphs (one graph, or several)."""
    backend = select_backend()
    dummy_input, output = (torch.ones(2),), torch.zeros(3)
    report.print_report(backend, config, dummy_input, output, report.FirstCall(*call))
    assert capsys.readouterr().out.splitlines()[:5] == [
        f"backend     {backend.name} ({backend.reason})",
        f"options     {options}",
        f"input       {describe_tree(dummy_input)}",
        f"output      {describe_tree(output)}",
        f"first call  {first_call} (compile and capture included)",
    ]


def test_on_an_npu_the_first_call_waits_for_the_device(monkeypatch):
    """On an NPU the first call's time covers the device work still queued; elsewhere nothing
    waits."""
    waited = []
    npu = SimpleNamespace(synchronize=lambda: waited.append("npu"))
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    report.synchronize("cpu")
    assert waited == []
    report.synchronize("npu")
    assert waited == ["npu"]


def test_a_first_call_that_compiles_no_graph_raises():
    """A first call that ran eagerly (no graph compiled) raises NoGraphError: the MRE must not pass."""
    backend = select_backend()
    with pytest.raises(NoGraphError, match="compiled no graph"), first_call(backend):
        torch.ones(3, device=backend.device) * 2


def test_a_first_call_that_compiles_a_graph_counts_it():
    """A first call that compiles one graph passes and counts it."""
    backend = select_backend()
    compiled = torch.compile(lambda x: x * 2, backend=backend.name, fullgraph=True, dynamic=False)
    with first_call(backend) as call:
        compiled(torch.ones(3, device=backend.device))
    assert call.graphs == 1


@pytest.mark.parametrize(
    ("module", "graphs", "said"),
    [
        (cache_report, 0, "no graph: loaded from the cache_compile cache"),
        (cache_report, 1, "1 graph"),
        (report, 0, "0 graphs"),
    ],
    ids=["cache_compile, loaded", "cache_compile, compiled", "npugraph_ex"],
)
def test_a_first_call_that_loaded_the_cache_says_so(capsys, module, graphs, said):
    """In cache_compile mode a first call that compiled no graph loaded the cache, and the report
    says so; one that compiled counts its graphs, as every other mode does."""
    module.print_report(
        select_backend(), None, (torch.ones(2),), torch.ones(2), module.FirstCall(0.5, graphs)
    )
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("first call")]
    assert row == f"first call  0.50 s, {said} (compile and capture included)"


@pytest.fixture
def hooked(monkeypatch) -> list[BaseException]:
    """sys.excepthook as a recorder of what it is handed: the traceback Python would print."""
    handed: list[BaseException] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, value, tb: handed.append(value))
    return handed


def test_a_failed_first_call_ends_the_mre_with_a_pointer_to_check(hooked, capsys):
    """An error in the MRE's first call that ends the run keeps its traceback, and is followed by
    one line: what failed, and the command that names the cause."""
    with pytest.raises(ValueError, match="ids") as raised, first_call(select_backend()):
        raise ValueError("ids must be integers\nmore detail")
    sys.excepthook(ValueError, raised.value, None)
    assert hooked == [raised.value]
    assert capsys.readouterr().err == (
        "mre: graph mode failed on the first call (ValueError: ids must be integers); "
        "`python -m forward_project check` names the cause in one line, at your line\n"
    )
    other = KeyError("elsewhere")
    sys.excepthook(KeyError, other, None)
    assert (hooked[-1], capsys.readouterr().err) == (other, "")


def test_an_exported_mre_points_to_no_project(hooked, capsys, monkeypatch):
    """The exported file, which has no project to check, prints the traceback alone."""
    monkeypatch.setattr(report, "__package__", "")
    with pytest.raises(ValueError, match="no project") as raised, first_call(select_backend()):
        raise ValueError("no project")
    sys.excepthook(ValueError, raised.value, None)
    assert (hooked, capsys.readouterr().err) == ([raised.value], "")
