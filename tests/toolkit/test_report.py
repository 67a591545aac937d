"""The MRE's report: one row per fact (backend and why, options, input, output, first call), and a
first call that must compile a graph."""

import sys
from types import SimpleNamespace

import pytest
import torch

from cache_project.toolkit import report as cache_report
from forward_project.toolkit import report
from forward_project.toolkit.backend import NPUGRAPH_EX_OPTIONS, Backend, select_backend
from forward_project.toolkit.contract import describe_tree
from forward_project.toolkit.report import NoGraphError, first_call


def test_the_report_names_each_non_tensor_input(capsys):
    """A float input gets a `constant` row: its path and value, baked into the graph, and the fix."""
    backend = select_backend()
    dummy_input = (torch.ones(3), 0.5)
    call = report.FirstCall(0.1, 1)
    report.print_report(backend, dummy_input, torch.ones(3), call)
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("constant")]
    assert row.startswith("constant    [1]: float 0.5 is baked into the graph as a constant")
    assert "; pass a 0-d tensor, torch.tensor(0.5)" in row


def test_the_report_has_a_row_for_every_non_tensor_input(capsys):
    """Two constant inputs: a `constant` row each, in input order."""
    dummy_input = (torch.ones(3), 0.5, 2)
    report.print_report(select_backend(), dummy_input, torch.ones(3), report.FirstCall(0.1, 1))
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("constant")]
    assert [row.split()[1] for row in rows] == ["[1]:", "[2]:"]


@pytest.mark.parametrize(
    ("backend", "call", "options", "first_call"),
    [
        (select_backend(), (0.126, 1), "none (only npugraph_ex takes options)", "0.13 s, 1 graph"),
        (Backend("npugraph_ex", "cpu", "a test"), (2.5, 2), str(NPUGRAPH_EX_OPTIONS), "2.50 s, 2 graphs"),
    ],
    ids=["stand-in", "npugraph_ex"],
)
def test_the_report_reads_row_by_row(capsys, backend, call, options, first_call):
    """Each row of the report: the backend and why, its options, the input and the output, and
    the first call's time and graphs (one graph, or several)."""
    dummy_input, output = (torch.ones(2),), torch.zeros(3)
    report.print_report(backend, dummy_input, output, report.FirstCall(*call))
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
    module.print_report(select_backend(), (torch.ones(2),), torch.ones(2), module.FirstCall(0.5, graphs))
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("first call")]
    assert row == f"first call  0.50 s, {said} (compile and capture included)"


@pytest.fixture
def hooked(monkeypatch) -> list[tuple]:
    """sys.excepthook as a recorder of what it is handed: the traceback Python would print."""
    handed: list[tuple] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, value, tb: handed.append((kind, value, tb)))
    return handed


def fail_first_call(error: Exception) -> Exception:
    """`error`, raised in an MRE's first call."""
    with pytest.raises(type(error)) as raised, first_call(select_backend()):
        raise error
    return raised.value


POINTER = "`python -m forward_project check` names the cause in one line, at your line\n"


def test_a_failed_first_call_ends_the_mre_with_a_pointer_to_check(hooked, capsys):
    """An error in the MRE's first call that ends the run keeps its traceback, and is followed by
    one line: what failed, and the command that names the cause."""
    error = fail_first_call(ValueError("ids must be integers\nmore detail"))
    trace = error.__traceback__
    sys.excepthook(ValueError, error, trace)
    assert hooked == [(ValueError, error, trace)]
    assert capsys.readouterr().err == (
        f"mre: graph mode failed on the first call (ValueError: ids must be integers); {POINTER}"
    )
    other = KeyError("elsewhere")
    sys.excepthook(KeyError, other, None)
    assert (hooked[-1], capsys.readouterr().err) == ((KeyError, other, None), "")


def test_a_second_failure_in_one_process_points_once(hooked, capsys):
    """Each failed first call in one process names only itself, once: the hook is installed once,
    and an error with no message is named by its type."""
    fail_first_call(ValueError("first"))
    error = fail_first_call(ValueError())
    sys.excepthook(ValueError, error, None)
    assert capsys.readouterr().err == f"mre: graph mode failed on the first call (ValueError: ); {POINTER}"


@pytest.mark.parametrize("where", ["an exported file", "a rank under torchrun"])
def test_an_mre_with_no_project_or_a_ranks_report_points_nowhere(hooked, capsys, monkeypatch, where):
    """The exported file, which has no project to check, and a rank under torchrun, which
    rank_failure reports, print the traceback alone."""
    if where == "an exported file":
        monkeypatch.setattr(report, "__package__", "")
    else:
        monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", "error.json")
    error = fail_first_call(ValueError("no pointer"))
    sys.excepthook(ValueError, error, None)
    assert (hooked, capsys.readouterr().err) == ([(ValueError, error, None)], "")


def mre_that_copies_to_the_host():
    """An MRE's infer_one_step() whose model copies a value to the host in its graph."""
    backend = select_backend()
    compiled_model = torch.compile(
        lambda x: x * x.amax().cpu(), backend=backend.name, fullgraph=True, dynamic=False
    )
    return compiled_model(torch.ones(3))  # copied to the host here


def test_the_report_names_what_capture_refuses_in_one_row(capsys):
    """The MRE runs where the stand-in can, and its report says in one row that an NPU will not
    capture the graph, with the code and the line."""
    output = report.report(mre_that_copies_to_the_host, lambda: (torch.ones(3),))
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("capture")]
    assert torch.equal(output, torch.ones(3))
    assert "CAP002" in row
    assert f"{__file__}:" in row


def test_the_report_of_a_graph_capture_takes_has_no_capture_row(capsys):
    """Nothing refused, no capture row: the report runs the MRE and prints its rows."""
    backend = select_backend()

    def infer_one_step():
        compiled = torch.compile(lambda x: x * 2, backend=backend.name, fullgraph=True, dynamic=False)
        return compiled(torch.ones(3))

    report.report(infer_one_step, lambda: (torch.ones(3),))
    printed = capsys.readouterr().out
    assert printed.startswith("backend ")
    assert "\ncapture" not in printed
