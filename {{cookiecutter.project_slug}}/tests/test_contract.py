"""The contract's helpers: outputs compared within their dtype's tolerance, inputs baked in named."""

import re

import pytest
import torch

from {{ cookiecutter.package_name }} import model
from {{ cookiecutter.package_name }}.toolkit import bench
from {{ cookiecutter.package_name }}.toolkit.contract import (
    ContractError,
    assert_same,
    constant_inputs,
    constant_note,
    mismatches,
    tolerances,
)


def split_sum(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A matrix product whole, and summed from two parts of its inner dimension, as a retiled
    kernel sums it: (whole, halves). Outputs of size ~1, as activations."""
    torch.manual_seed(0)
    x = torch.randn(16, 1024).to(dtype)
    w = (torch.randn(1024, 16) / 32).to(dtype)
    # An odd cut: the parts round apart from the whole on any CPU's blocking.
    return x @ w, x[:, :333] @ w[:333] + x[:, 333:] @ w[333:]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_sum_split_in_two_is_the_same_as_the_whole(dtype):
    """A correct result summed in another order is off by rounding: within its dtype's tolerance."""
    whole, halves = split_sum(dtype)
    assert not torch.equal(whole, halves)  # the premise: they do round apart
    assert_same(halves, whole)


def test_tolerances_in_model_py_override_the_defaults(monkeypatch):
    """model.py's TOLERANCES replaces its dtype's default, key by key; other dtypes keep theirs."""
    whole, halves = split_sum(torch.bfloat16)
    float32 = tolerances(torch.float32)
    monkeypatch.setattr(model, "TOLERANCES", {torch.bfloat16: {"atol": 0.0}}, raising=False)
    assert tolerances(torch.bfloat16)["atol"] == 0.0
    assert tolerances(torch.float32) == float32
    with pytest.raises(AssertionError, match=r"elements differ beyond the tolerance"):
        assert_same(halves, whole)


def test_a_tolerance_that_is_not_rtol_or_atol_is_refused(monkeypatch):
    """A misspelt key in TOLERANCES is a contract error naming it, not silently ignored."""
    monkeypatch.setattr(model, "TOLERANCES", {torch.bfloat16: {"rtl": 0.1}}, raising=False)
    with pytest.raises(ContractError, match=r"rtol and/or atol, got \{'rtl': 0.1\}"):
        tolerances(torch.bfloat16)


def test_integers_are_compared_exactly():
    """Token ids and other integers do not round: one off is a difference."""
    ids = torch.arange(8)
    assert mismatches(ids + (ids == 3), ids)[0].mismatched == 1


def test_a_mismatch_counts_elements_and_measures_the_worst():
    """A leaf that differs is named by its path, with the elements beyond the tolerance (of how
    many), the largest absolute and relative difference, and the tolerance itself."""
    eager = {"logits": torch.ones(2), "hidden": torch.tensor([1.0, 2.0, 0.0, -4.0])}
    graph = {"logits": torch.ones(2), "hidden": torch.tensor([1.0, 2.5, 0.1, -4.0])}
    (found,) = mismatches(graph, eager)
    assert (found.path, found.mismatched, found.total) == ("['hidden']", 2, 4)
    # 0.5 off a 2 is the largest relative difference: the 0.1 off a 0 has none.
    assert (found.max_abs, found.max_rel) == (pytest.approx(0.5), pytest.approx(0.25))
    assert {"rtol": found.rtol, "atol": found.atol} == tolerances(torch.float32)


def test_bench_compares_outputs_with_the_same_tolerances(monkeypatch):
    """bench's output check passes a rounding difference and names the leaf of a real one."""
    inputs = (torch.linspace(1, 2, 8),)
    rounded = bench.compare_outputs(torch.nn.Identity(), lambda x: x * (1 + 1e-6), inputs)
    assert rounded is None
    exact = {torch.float32: {"rtol": 0.0, "atol": 0.0}}
    monkeypatch.setattr(model, "TOLERANCES", exact, raising=False)
    mismatch = bench.compare_outputs(torch.nn.Identity(), lambda x: x * (1 + 1e-6), inputs)
    assert mismatch.startswith("output: 8 of 8 elements differ")


def test_non_tensor_inputs_are_the_constants_none_aside():
    """Numbers, bools and strings are baked into the graph; None leaves an optional input out."""
    inputs = (torch.ones(2), None, True, 0.5, {"mode": "greedy"})
    assert constant_inputs(inputs) == [("[2]", True), ("[3]", 0.5), ("[4]['mode']", "greedy")]


class Scale(torch.nn.Module):
    def forward(self, x, scale):
        return x * scale


def test_the_recompile_limit_named_is_where_fullgraph_fails():
    """The note's recompile limit is torch's: that many values compile, the next one raises."""
    what, fix = constant_note("[1]", 0.5)
    limit = int(re.search(r"recompile_limit = (\d+)", what).group(1))
    assert "torch.tensor(0.5)" in fix
    torch._dynamo.reset()
    # Dynamo decides about recompiles whatever the backend: aot_eager is enough, and quick.
    compiled = torch.compile(Scale(), backend="aot_eager", fullgraph=True, dynamic=False)
    for value in range(limit):
        compiled(torch.ones(2), value + 0.5)
    with pytest.raises(torch._dynamo.exc.FailOnRecompileLimitHit):
        compiled(torch.ones(2), limit + 0.5)


def test_a_0d_tensor_takes_any_value_in_one_graph():
    """The note's fix holds: as a 0-d tensor, the value is an input and new values reuse the graph."""
    torch._dynamo.reset()
    compiled = torch.compile(Scale(), backend="aot_eager", fullgraph=True, dynamic=False)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for value in range(torch._dynamo.config.recompile_limit + 1):
        scaled = compiled(torch.ones(2), torch.tensor(value + 0.5))
        assert torch.equal(scaled, torch.full((2,), value + 0.5))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs == 1
