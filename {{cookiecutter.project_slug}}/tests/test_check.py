{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
{#- What a test that swaps model.py for a small model of its own also needs. -#}
{%- set swapped = ", own_model" if tp or decode else "" -%}
"""check: the sample is ready for graph mode; a graph break is found, located and explained;
constant inputs and outputs that differ from eager are named, with the numbers; each rung starts
from the state eager started from."""

import json
from pathlib import Path

{% if tp or decode -%}
import pytest
{% endif -%}
import torch
from torch import nn
{%- if tp %}
from torch.distributed.tensor.parallel import ColwiseParallel
{%- endif %}

from {{ cookiecutter.package_name }} import model
from {{ cookiecutter.package_name }}.toolkit import check
from {{ cookiecutter.package_name }}.toolkit.contract import tolerances


{% if tp or decode -%}
@pytest.fixture
def own_model(monkeypatch):
    """For a model.py swapped for a small model of its own:
{%- if tp %}
    - an empty parallel_plan(), which the sample's plan would not fit;
{%- endif %}
{%- if decode %}
    - its example inputs run as the step, with no prefill, and new data from seed 1 as the step
      after (as in a forward project).
{%- endif %}
    """
{%- if tp %}
    monkeypatch.setattr(model, "parallel_plan", lambda world_size: {})
{%- endif %}
{%- if decode %}

    def new_data(*inputs):
        torch.manual_seed(1)
        device = next(x.device for x in inputs if isinstance(x, torch.Tensor))
        return check.to_device(model.example_inputs(), device)

    monkeypatch.setattr(check, "first_step", lambda model, *inputs: inputs)
    monkeypatch.setattr(check, "next_step", new_data)
{%- endif %}


{% endif -%}
def test_the_model_is_ready(capsys, mre_run):
    """The project's model has no graph break, and every rung here matches eager: exit 0.

    (If the MRE fails, this skips: test_mre.py reports the failure once.)
    """
    assert check.main([]) == 0
    report = capsys.readouterr().out
    # The rung line is printed whatever its outcome: its status is what must say ok.
    (rung,) = [
        line.split() for line in report.splitlines() if line.startswith("rung        aot_eager ")
    ]
    assert rung[2] == "ok"
    assert report.splitlines()[-1].startswith("ready for graph mode")


class PrintsInForward(nn.Module):
    def forward(self, x):
        print("debugging")  # the break check must point here
        return x * 2


def test_a_graph_break_is_listed_with_its_line_and_a_hint(capsys, monkeypatch{{ swapped }}):
    """A print() in forward is a break reported at its file:line, with the fix, and exit 1."""
    monkeypatch.setattr(model, "build_model", PrintsInForward)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.ones(2),))
    assert check.main(["--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    (found,) = [f for f in result["findings"] if f["what"] == "aot_eager fails"]
    source = Path(__file__).read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "the break check must" in text)
    assert found["where"].startswith(f"{__file__}:{line}")
    assert "print()" in found["hint"]
    assert {rung["name"]: rung["status"] for rung in result["rungs"]}["aot_eager"] == "fail"


def test_float_token_ids_get_the_dtype_hint(capsys, monkeypatch{{ swapped }}):
    """An embedding fed floats cannot run at all: exit 2, and the hint says token ids are integers."""
    monkeypatch.setattr(model, "build_model", lambda: nn.Embedding(16, 4))
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.zeros(2, 3),))
    assert check.main([]) == 2
    assert "token ids must be integers" in capsys.readouterr().out


class CountsCalls(nn.Module):
    """Dynamo guards on the Python number self.calls, which changes on every call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


def test_a_recompile_on_the_next_call_is_a_problem(capsys, monkeypatch{{ swapped }}):
    """A model that compiles again on its second call is named as recompiling: exit 1."""
    monkeypatch.setattr(model, "build_model", CountsCalls)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.ones(3),))
    code = check.main(["--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 1
    assert "aot_eager recompiled" in {finding["what"] for finding in result["findings"]}


class Scale(nn.Module):
    def forward(self, x, scale: float):
        return x * scale


def test_a_non_tensor_input_is_a_warning_naming_its_path(capsys, monkeypatch{{ swapped }}):
    """A float input is named by its path and value as baked into the graph, with the 0-d tensor
    fix: a warning, since the model runs, so the exit stays 0."""
    monkeypatch.setattr(model, "build_model", Scale)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.ones(3), 0.5))
    assert check.main(["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (found,) = [f for f in result["findings"] if f["what"] == "non-tensor input"]
    assert (found["path"], found["severity"]) == ("[1]", "warning")
    assert found["reason"].startswith("[1]: float 0.5 is baked into the graph as a constant")
    assert f"recompile_limit = {torch._dynamo.config.recompile_limit}" in found["reason"]
    assert "torch.tensor(0.5)" in found["hint"]


class OffUnderCompile(nn.Module):
    """Eager returns its input; any compiled rung adds 0.5 to the positive elements of `hidden`."""

    def forward(self, x):
        # Dynamo folds is_compiling() to True: no graph break, a graph that computes something else.
        off = 0.5 * (x > 0) if torch.compiler.is_compiling() else 0
        return {"logits": x.clone(), "hidden": x + off}


def test_a_differing_output_names_the_leaf_and_the_numbers(capsys, monkeypatch{{ swapped }}):
    """A rung whose output differs names the leaf, the elements beyond the tolerance of how many,
    and the largest differences against rtol and atol, as JSON fields: exit 1."""
    monkeypatch.setattr(model, "build_model", OffUnderCompile)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.arange(-3.0, 5.0),))
    assert check.main(["--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    (found,) = [f for f in result["findings"] if f["what"] == "aot_eager differs from eager"]
    assert found["path"] == "['hidden']"
    (mismatch,) = found["mismatches"]
    assert (mismatch["path"], mismatch["mismatched"], mismatch["total"]) == ("['hidden']", 4, 8)
    # 1, 2, 3 and 4 become 1.5 ... 4.5: the worst relative difference is 0.5 off a 1.
    assert (mismatch["max_abs"], mismatch["max_rel"]) == (0.5, 0.5)
    assert {mismatch["rtol"], mismatch["atol"]} == set(tolerances(torch.float32).values())


def test_the_table_shows_how_an_output_differs(capsys, monkeypatch{{ swapped }}):
    """The report names the differing leaf, its count and its largest differences, not just
    'not close'."""
    monkeypatch.setattr(model, "build_model", OffUnderCompile)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.arange(-3.0, 5.0),))
    assert check.main([]) == 1
    report = capsys.readouterr().out
    atol = tolerances(torch.float32)["atol"]
    assert (
        "aot_eager differs from eager: ['hidden']: 4 of 8 elements differ beyond the tolerance: "
        f"max abs difference 0.5 (atol {atol:g}), max relative 0.5 (rtol "
    ) in report


class RoundsUnderCompile(nn.Module):
    """Any compiled rung is 1e-5 off eager, relatively: rounding, for float32."""

    def forward(self, x):
        return x * (1 + 1e-5) if torch.compiler.is_compiling() else x.clone()


def test_check_compares_within_the_dtypes_tolerance(capsys, monkeypatch{{ swapped }}):
    """A rounding difference passes float32's tolerance; model.py's TOLERANCES, exact, fails it."""
    monkeypatch.setattr(model, "build_model", RoundsUnderCompile)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.linspace(1, 4, 8),))
    assert check.main([]) == 0
    exact = {torch.float32: {"rtol": 0.0, "atol": 0.0}}
    monkeypatch.setattr(model, "TOLERANCES", exact, raising=False)
    assert check.main([]) == 1
    assert "aot_eager differs from eager: output: 8 of 8 elements" in capsys.readouterr().out


class CountsSteps(nn.Module):
    """A buffer updated in forward, as a KV cache is: each call sees the calls before it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        self.steps.add_(1)  # in place, as a cache write: the graph must make it
        return x * self.steps


def test_each_rung_starts_from_the_state_eager_started_from(capsys, monkeypatch{{ swapped }}):
    """A buffer that forward updates does not leak from the eager reference into the rungs: each
    computes the first step, as eager did, so the model is ready."""
    monkeypatch.setattr(model, "build_model", CountsSteps)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.ones(3),))
    assert check.main([]) == 0, capsys.readouterr().out


class AddsATable(nn.Module):
    """Reads a tensor it holds as a plain attribute, not a buffer: a constant, not state."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.arange(3.0)

    def forward(self, x):
        return x + self.table


def test_a_constant_tensor_attribute_is_not_taken_for_state(capsys, monkeypatch{{ swapped }}):
    """A tensor attribute that forward only reads is ready for graph mode: compiling marks it as a
    static address, and check does not take it for state that eager lacked."""
    monkeypatch.setattr(model, "build_model", AddsATable)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.ones(3),))
    assert check.main([]) == 0, capsys.readouterr().out


def drops_state_writes(graph, example_inputs):
    """A backend that loses every in-place write to the graph's inputs, the buffers among them:
    the output of this call is right, the state left for the next one is not."""
    return lambda *inputs: graph(*(x.clone() if torch.is_tensor(x) else x for x in inputs))


def test_a_graph_that_drops_a_state_write_differs_from_eager(capsys, monkeypatch{{ swapped }}):
    """The state after the call is compared as well as the output: a lost buffer update is named
    by the buffer's path, exit 1."""
    monkeypatch.setattr(model, "build_model", CountsSteps)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.ones(3),))
    rung = ("drops writes", drops_state_writes, None)
    monkeypatch.setattr(check, "rungs_here", lambda npu_ok: [rung])
    assert check.main(["--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    (found,) = [f for f in result["findings"] if f["what"] == "drops writes differs from eager"]
    assert found["path"] == "state steps"
{%- if tp %}


def test_the_model_is_sharded_as_the_mre_shards_it(capsys, monkeypatch):
    """check shards build_model() by parallel_plan(): a key that names nothing stops it, exit 2."""
    plan = {"no_such_layer": ColwiseParallel()}
    monkeypatch.setattr(model, "parallel_plan", lambda world_size: plan)
    assert check.main([]) == 2
    assert "'no_such_layer' names no submodule" in capsys.readouterr().out


def test_a_plan_that_cannot_run_is_refused_first(capsys, swapped_styles):
    """check runs the plan for 2 ranks in this process before anything compiles: one that fails
    is refused in a few lines naming its entry and shapes, exit 2."""
    assert check.main(["--nproc-per-node", "2"]) == 2
    report = capsys.readouterr().out
    assert "the plan cannot run on 2 ranks" in report
    assert "plan entry '0' (RowwiseParallel) on 0: Linear, weight (8, 4)" in report
    assert len(report.splitlines()) <= 10
{%- endif %}
