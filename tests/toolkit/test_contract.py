"""The contract's helpers: outputs compared within their dtype's tolerance, inputs baked in named."""

import importlib
import math
import re
from dataclasses import dataclass

import pytest
import torch
import torch.utils._pytree as pytree

from forward_project import model
from forward_project.toolkit import bench, contract
from forward_project.toolkit.contract import (
    ContractError,
    assert_same,
    constant_inputs,
    describe,
    describe_tree,
    mismatches,
    non_tensor_leaves,
    to_device,
    tolerances,
)

EXAMPLE = 'e.g. TOLERANCES = {torch.bfloat16: {"rtol": 5e-2, "atol": 5e-2}}'
"""The example every refusal of model.py's TOLERANCES ends with."""


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


@pytest.mark.parametrize(
    ("own", "refusal"),
    [
        ([1e-3], "TOLERANCES in model.py must be a dict, got list"),
        ({"bf16": {"rtol": 0.1}}, "TOLERANCES key 'bf16' is not a torch.dtype"),
        (
            {torch.bfloat16: 0.1},
            "TOLERANCES[torch.bfloat16] must be a dict with rtol and/or atol, got 0.1",
        ),
    ],
    ids=["not a dict", "not a dtype", "not rtol and atol"],
)
def test_tolerances_that_break_the_contract_are_refused(monkeypatch, own, refusal):
    """TOLERANCES of the wrong shape is a contract error naming the value, with an example."""
    monkeypatch.setattr(model, "TOLERANCES", own, raising=False)
    with pytest.raises(ContractError) as refused:
        tolerances(torch.bfloat16)
    assert str(refused.value) == f"{refusal}; {EXAMPLE}"


def test_tolerances_may_set_rtol_and_atol_together(monkeypatch):
    """model.py's TOLERANCES may set both keys for a dtype."""
    own = {torch.bfloat16: {"rtol": 0.5, "atol": 0.25}}
    monkeypatch.setattr(model, "TOLERANCES", own, raising=False)
    assert tolerances(torch.bfloat16) == {"rtol": 0.5, "atol": 0.25}


def test_a_dtype_without_a_default_gets_five_rounding_steps():
    """A float the table lacks (float8) gets 5 steps of its eps; complex, its real part's."""
    assert tolerances(torch.float8_e5m2) == {"rtol": 1.25, "atol": 1.25}  # eps 0.25
    assert tolerances(torch.complex64) == tolerances(torch.float32)


def test_float32_passes_within_its_tolerance_and_fails_beyond():
    """float32's rtol (1e-4) and atol (1e-5) hold at their edge: half of each passes, twice fails."""
    eager = torch.tensor([1.0, 0.0])
    assert mismatches(torch.tensor([1 + 5e-5, 5e-6]), eager) == []
    (found,) = mismatches(torch.tensor([1 + 2e-4, 2e-5]), eager)
    assert found.mismatched == 2


def test_a_tolerance_given_applies_to_every_leaf():
    """assert_same's rtol and atol replace each leaf's default."""
    rounded = torch.tensor([1 + 5e-5])
    assert_same(rounded, torch.ones(1))
    with pytest.raises(AssertionError, match="1 of 1 elements differ"):
        assert_same(rounded, torch.ones(1), rtol=0.0, atol=0.0)


def test_a_nan_where_eager_has_a_nan_is_the_same():
    """NaN where eager computed NaN is the same result."""
    eager = torch.tensor([float("nan"), 1.0])
    assert mismatches(eager.clone(), eager) == []


def test_a_bool_leaf_that_differs_is_counted():
    """A mask that differs is counted element by element, like any other leaf."""
    (found,) = mismatches(torch.tensor([True, False]), torch.tensor([True, True]))
    assert (found.mismatched, found.max_abs) == (1, 1.0)


def test_the_differences_are_measured_in_double_precision():
    """The numbers are worked out in float64, not rounded to the leaf's own dtype."""
    (found,) = mismatches(torch.tensor([4.0]), torch.tensor([3.0]))
    assert found.max_rel == 1 / 3


def test_a_complex_leaf_is_compared_in_both_parts():
    """A complex leaf that differs only in its imaginary part differs."""
    (found,) = mismatches(torch.tensor([1 + 2j]), torch.tensor([1 + 1j]))
    assert (found.mismatched, found.max_abs) == (1, 1.0)


@pytest.mark.parametrize(
    ("graph", "eager", "text"),
    [
        (3, 4, "[1]: int 3 where eager has int 4"),
        (3.0, 3, "[1]: float 3.0 where eager has int 3"),
        (torch.tensor(3), 3, "[1]: () int64 on cpu where eager has int 3"),
        (3, torch.tensor(3), "[1]: int 3 where eager has () int64 on cpu"),
        (torch.tensor(3), None, "[1]: () int64 on cpu where eager has NoneType None"),
    ],
    ids=["value", "type", "tensor for int", "int for tensor", "tensor for None"],
)
def test_a_non_tensor_leaf_must_match_eagers_type_and_value(graph, eager, text):
    """A leaf that is not a tensor on either side is the same only in type and value."""
    ones = torch.ones(2)
    assert mismatches((ones, 3), (ones, 3)) == []
    assert list(map(str, mismatches((ones, graph), (ones, eager)))) == [text]


@pytest.mark.parametrize(
    ("graph", "text"),
    [
        (torch.ones(3, 2), "output: (3, 2) float32 on cpu where eager has (2, 3) float32 on cpu"),
        (
            torch.ones(2, 3, dtype=torch.float16),
            "output: (2, 3) float16 on cpu where eager has (2, 3) float32 on cpu",
        ),
        (
            torch.ones(2, 3, device="meta"),
            "output: (2, 3) float32 on meta where eager has (2, 3) float32 on cpu",
        ),
    ],
    ids=["shape", "dtype", "device"],
)
def test_a_leaf_of_another_shape_dtype_or_device_differs(graph, text):
    """A tensor leaf unlike eager's in shape, dtype or device is named with both descriptions."""
    assert list(map(str, mismatches(graph, torch.ones(2, 3)))) == [text]


@dataclass
class Output:
    """An output object, as transformers' ModelOutput: a pytree node with named fields."""

    logits: torch.Tensor


pytree.register_dataclass(Output)
ONES = torch.ones(2)


@pytest.mark.parametrize(
    ("graph", "eager"),
    [
        ([ONES, ONES], (ONES, ONES)),
        ({"logits": ONES, "hidden": ONES}, {"logits": ONES, "cache": ONES}),
        ({"logits": ONES}, Output(ONES)),
    ],
    ids=["list for tuple", "another key", "dict for output object"],
)
def test_trees_that_differ_only_in_structure_differ(graph, eager):
    """The same leaves in another structure differ: one line for the whole output, naming both
    structures."""

    def structure(tree):
        return " ".join(str(pytree.tree_structure(tree)).split())

    assert list(map(str, mismatches(graph, eager))) == [
        f"output: structure differs: {structure(graph)} where eager has {structure(eager)}"
    ]


def test_assert_same_names_every_differing_leaf():
    """assert_same raises with a line for each leaf that differs."""
    with pytest.raises(AssertionError) as raised:
        assert_same((torch.ones(2), 3), (torch.zeros(2), 4))
    values = (
        "[0]: 2 of 2 elements differ beyond the tolerance: max abs difference 1 (atol 1e-05), "
        "max relative inf (rtol 0.0001)"
    )
    assert str(raised.value).splitlines() == [values, "[1]: int 3 where eager has int 4"]


def test_integers_are_compared_exactly():
    """Token ids and other integers do not round: one off is a difference."""
    ids = torch.arange(8)
    assert mismatches(ids + (ids == 3), ids)[0].mismatched == 1


def test_a_mismatch_counts_elements_and_measures_the_worst():
    """A leaf that differs is named by its path, with the elements beyond the tolerance (of how
    many), the largest absolute and relative difference, and the tolerance itself."""
    eager = {"logits": torch.ones(2), "hidden": torch.tensor([1.0, 2.0, 0.4, -4.0])}
    graph = {"logits": torch.ones(2), "hidden": torch.tensor([1.0, 2.5, 0.45, -4.0])}
    (found,) = mismatches(graph, eager)
    assert (found.path, found.mismatched, found.total) == ("['hidden']", 2, 4)
    assert (found.max_abs, found.max_rel) == (pytest.approx(0.5), pytest.approx(0.25))
    assert {"rtol": found.rtol, "atol": found.atol} == tolerances(torch.float32)
    assert str(found) == (
        "['hidden']: 2 of 4 elements differ beyond the tolerance: max abs difference 0.5 "
        "(atol 1e-05), max relative 0.25 (rtol 0.0001)"
    )


def test_an_element_off_where_eager_has_0_is_infinitely_far_relatively():
    """The relative difference is taken over the elements beyond the tolerance: one off where
    eager has 0 makes it infinite, not 0, however well the other elements match."""
    eager = torch.tensor([0.0, 2.0, 3.0])
    (found,) = mismatches(torch.tensor([1.0, 2.0, 3.0]), eager)
    assert (found.max_abs, found.max_rel) == (1.0, math.inf)


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


def test_example_inputs_that_are_not_a_tuple_are_refused():
    """A lone tensor from example_inputs() is refused, naming what came back and the fix."""
    with pytest.raises(ContractError) as refused:
        to_device(torch.ones(2), "cpu")
    assert str(refused.value) == (
        "example_inputs() must return a tuple of positional inputs, got Tensor; "
        "for one input write `return (x,)`"
    )


def test_every_input_tensor_goes_to_the_device():
    """Each tensor of the inputs, nested ones too, is moved to the device; other values stay."""
    moved = to_device((torch.ones(2), {"mask": torch.ones(1)}, 3), "meta")
    leaves = pytree.tree_leaves(moved)
    assert [leaf.device.type if torch.is_tensor(leaf) else leaf for leaf in leaves] == [
        "meta",
        "meta",
        3,
    ]


def test_a_tree_is_described_leaf_by_leaf():
    """Each leaf after its path: a tensor's shape, dtype and device; another value's type and value."""
    tree = {"logits": torch.ones(2, 3), "ids": torch.zeros(4, dtype=torch.long), "step": 7}
    assert describe_tree(tree) == (
        "['logits'] (2, 3) float32 on cpu, ['ids'] (4,) int64 on cpu, ['step'] int 7"
    )


def test_a_lone_tensor_is_described_as_itself_and_no_leaf_as_nothing():
    """A lone tensor needs no path; a tree without leaves is `nothing`."""
    assert describe_tree(torch.ones(2, dtype=torch.bfloat16)) == "(2,) bfloat16 on cpu"
    assert describe_tree(()) == "nothing"


def test_a_long_value_is_described_in_80_characters():
    """A long non-tensor value is cut to its first 80 characters."""
    assert describe("x" * 100) == "str '" + "x" * 75


def test_non_tensor_output_leaves_are_named_by_path_and_type():
    """Output leaves that are not tensors (None aside) are named: by path, or `output` alone."""
    assert non_tensor_leaves({"logits": torch.ones(1), "n": 3, "mask": None}) == ["['n']: int"]
    assert non_tensor_leaves(3) == ["output: int"]


CACHED = (
    "; under cache_compile that deletes the cache, and a loaded cache checks no guards: it "
    "keeps the value it was written with"
)
"""What a baked-in constant costs beyond a second graph under cache_compile."""


@pytest.fixture(params=["forward_project", "cache_project"])
def noted(request):
    """(constant_note, what it adds beyond a second graph) of a project in each mode."""
    contract = importlib.import_module(f"{request.param}.toolkit.contract")
    return contract.constant_note, CACHED if request.param == "cache_project" else ""


def test_a_bool_input_compiles_a_second_graph_for_its_other_value(noted):
    """A bool input: baked in, its other value compiles one more graph (under cache_compile it
    also deletes the cache), and the fix if it changes."""
    constant_note, cached = noted
    what = (
        "[1]: bool True is baked into the graph as a constant where forward reads it: the other "
        f"value compiles a second graph{cached}"
    )
    fix = (
        "fine for a setting that stays fixed; one that changes per call: pass a bool tensor and "
        "pick with torch.where instead of `if`"
    )
    assert constant_note("[1]", True) == (what, fix)


@pytest.mark.parametrize(
    ("value", "fix"),
    [
        (2, "pass a 0-d tensor, torch.tensor(2): an input, so new values reuse the graph"),
        ("greedy", "keep it the same on every call, or pass what it selects as a tensor"),
    ],
    ids=["number", "string"],
)
def test_a_constant_input_compiles_a_graph_per_value_up_to_the_limit(noted, value, fix):
    """A number or string input: each new value compiles a graph (under cache_compile it also
    deletes the cache) until the recompile limit, then fails; a number's fix is a 0-d tensor."""
    constant_note, cached = noted
    limit = torch._dynamo.config.recompile_limit
    what = (
        f"[1]: {describe(value)} is baked into the graph as a constant where forward reads it: "
        f"each new value compiles another graph{cached}, and after {limit} graphs the next new "
        f"value fails under fullgraph=True (FailOnRecompileLimitHit; "
        f"torch._dynamo.config.recompile_limit = {limit})"
    )
    assert constant_note("[1]", value) == (what, fix)


class Scale(torch.nn.Module):
    def forward(self, x, scale):
        return x * scale


def test_the_recompile_limit_named_is_where_fullgraph_fails():
    """The note's recompile limit is torch's: that many values compile, the next one raises."""
    what, fix = contract.constant_note("[1]", 0.5)
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
