"""Tensor parallelism: two ranks under torchrun compute what one device computes, one graph each."""

import pytest
from torch import nn
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

from {{ cookiecutter.package_name }}.model import build_model, parallel_plan
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same
from {{ cookiecutter.package_name }}.toolkit.parallel import (
    PlanError,
    check_plan,
    plan_targets,
    tensor_parallel,
)


# two_ranks (conftest.py): the MRE, among other steps, on two ranks under torchrun (two_ranks.py).
def test_every_rank_matches_the_single_device_model(two_ranks, eager_output):
    """Each rank's output equals the unsharded model run eagerly in one process."""
    assert sorted(two_ranks.results) == list(range(two_ranks.size))
    for result in two_ranks.results.values():
        assert_same(result["mre"]["value"], eager_output)  # each dtype's tolerance


def test_every_rank_compiles_one_graph(two_ranks):
    """The step, collectives included, is one graph on each rank: fullgraph=True held."""
    graphs = [result["mre"]["graphs"] for result in two_ranks.results.values()]
    assert graphs == [1] * two_ranks.size


def test_rank_zero_alone_prints_the_report_with_a_ranks_line(two_ranks):
    """One report, from rank 0, naming the world size and the process-group backend."""
    printed = [two_ranks.results[rank]["mre"]["printed"] for rank in range(two_ranks.size)]
    assert printed[1:] == [""] * (two_ranks.size - 1)
    report = printed[0]
    group_backend = "hccl" if select_backend().device == "npu" else "gloo"
    assert report.count("\nbackend     ") + report.startswith("backend     ") == 1
    assert f"\nranks       {two_ranks.size} ({group_backend}), slowest first call " in report
    assert "1 graph on each rank" in report


# The placement DTensor gives each parameter, by style and layer (torch/distributed/tensor/
# parallel/style.py, _partition_linear_fn and _partition_embedding_fn): a row-parallel bias is
# whole on every rank, since each rank adds it after the all-reduce.
PLACEMENTS = {
    (ColwiseParallel, nn.Linear): {"weight": Shard(0), "bias": Shard(0)},
    (RowwiseParallel, nn.Linear): {"weight": Shard(1), "bias": Replicate()},
    (ColwiseParallel, nn.Embedding): {"weight": Shard(1)},
    (RowwiseParallel, nn.Embedding): {"weight": Shard(0)},
}


def assert_sharded(model: nn.Module, plan: dict) -> None:
    """Every parameter of every layer `plan` names is a DTensor placed as its style places it."""
    for key, style in plan.items():
        for path, layer in plan_targets(model, key):
            weights = dict(layer.named_parameters(recurse=False))
            assert weights, f"{path} has no weights to shard"
            expected = PLACEMENTS.get((type(style), type(layer)), {})
            for name, weight in weights.items():
                assert isinstance(weight, DTensor), f"{path}.{name} is not distributed"
                if name in expected:
                    assert weight.placements == (expected[name],), f"{path}.{name}"


def test_the_plan_shards_every_layer_it_names():
    """Each layer that parallel_plan() names holds distributed weights after Ranks.shard (one
    rank), each placed as DTensor places it for the layer's style."""
    with tensor_parallel(select_backend().device) as ranks:
        plan = parallel_plan(ranks.size)
        assert_sharded(ranks.shard(build_model(), plan), plan)


def test_a_megatron_plan_over_layers_with_biases_shards():
    """Column-parallel biases are split, the row-parallel bias stays whole: both are right."""
    with tensor_parallel(select_backend().device) as ranks:
        plan = {"0": ColwiseParallel(), "1": RowwiseParallel()}
        assert_sharded(ranks.shard(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4)), plan), plan)


def test_plain_python_is_one_rank_even_with_master_addr_exported(monkeypatch):
    """Without torchrun (no WORLD_SIZE) the job is one rank, whatever MASTER_ADDR a shell exports."""
    monkeypatch.setenv("MASTER_ADDR", "an-unreachable-host.invalid")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with tensor_parallel(select_backend().device) as ranks:
        assert (ranks.rank, ranks.size) == (0, 1)


def test_a_plan_key_that_names_no_submodule_is_refused():
    """A typo in parallel_plan() is an error naming the key and the model's children."""
    model = nn.Sequential(nn.Linear(4, 4))
    with pytest.raises(PlanError, match=r"'proj' names no submodule .*children: 0"):
        check_plan(model, {"proj": ColwiseParallel()}, 2)


@pytest.mark.parametrize(
    ("style", "size"), [(ColwiseParallel(), "out_features=3"), (RowwiseParallel(), "in_features=5")]
)
def test_a_size_the_ranks_cannot_split_is_refused(style, size):
    """A layer that does not divide by the world size is refused with its size and the fix."""
    model = nn.Sequential(nn.Linear(5, 3))
    with pytest.raises(PlanError, match=rf"0\.{size} cannot be split across 2 ranks"):
        check_plan(model, {"0": style}, 2)


def test_plan_keys_match_submodules_as_parallelize_module_does():
    """`*` matches one part of a dotted name, so one key can shard every layer."""
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 4)), nn.Sequential(nn.Linear(4, 3)))
    with pytest.raises(PlanError, match=r"1\.0\.out_features=3"):
        check_plan(model, {"*.0": ColwiseParallel()}, 2)
    check_plan(model, {"0.0": ColwiseParallel()}, 2)
