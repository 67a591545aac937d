{%- set decode = cookiecutter.workload == "decode" -%}
"""Tensor parallelism: two ranks under torchrun compute what one device computes, one graph each.
{%- if decode %}
Each rank's KV cache holds only its own heads, and generation on two ranks chooses one device's
tokens.
{%- endif %}"""

{% if decode -%}
import json
{% endif -%}
from types import SimpleNamespace

import pytest
import torch
{%- if decode %}
import torch._dynamo
{%- endif %}
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
{%- if decode %}
    parallelize_module,
{%- endif %}
)

{% if decode -%}
from {{ cookiecutter.package_name }} import generate
{% endif -%}
from {{ cookiecutter.package_name }}.model import build_model, example_inputs, parallel_plan
from {{ cookiecutter.package_name }}.toolkit import parallel
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same
{%- if decode %}
from {{ cookiecutter.package_name }}.toolkit.generation import prompt_of
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.parallel import (
    COLLECTIVE_TIMEOUT,
{%- if decode %}
    KVCacheParallel,
{%- endif %}
    PlanError,
    check_plan,
{%- if decode %}
    fake_ranks,
{%- endif %}
    plan_targets,
    rehearse,
    shapes,
    start,
    tensor_parallel,
    this_process,
)
{%- if decode %}
from {{ cookiecutter.package_name }}.toolkit.state import (
    State,
    save,
    state_mismatches,
    state_tensors,
)
{%- endif %}


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


def assert_sharded(model: nn.Module, plan: dict, whole: nn.Module, size: int) -> None:
    """Every parameter of every layer `plan` names is a DTensor placed as its style places it
{%- if decode %}; every
    state tensor of a KVCacheParallel module is a plain tensor of 1/size of the heads of `whole`'s
{%- endif %}."""
    for key, style in plan.items():
        for path, layer in plan_targets(model, key):
{%- if decode %}
            if isinstance(style, KVCacheParallel):
                unsharded = state_tensors(whole.get_submodule(path))
                local = state_tensors(layer)
                assert local.keys() == unsharded.keys(), f"{path} holds other state"
                for name, tensor in local.items():
                    assert not isinstance(tensor, DTensor), f"{path}.{name} is distributed"
                    heads = unsharded[name].shape[style.dim] // size
                    assert tensor.shape[style.dim] == heads, f"{path}.{name}"
                continue
{%- endif %}
            weights = dict(layer.named_parameters(recurse=False))
            assert weights, f"{path} has no weights to shard"
            expected = PLACEMENTS.get((type(style), type(layer)), {})
            for name, weight in weights.items():
                assert isinstance(weight, DTensor), f"{path}.{name} is not distributed"
                if name in expected:
                    assert weight.placements == (expected[name],), f"{path}.{name}"


def test_the_plan_shards_every_layer_it_names():
    """Each layer that parallel_plan() names holds distributed weights after Ranks.shard (one
    rank), each placed as DTensor places it for the layer's style
{%- if decode %}; each cache its rank's heads
{%- endif %}."""
    with tensor_parallel(select_backend().device) as ranks:
        plan = parallel_plan(ranks.size)
        assert_sharded(ranks.shard(build_model(), plan), plan, build_model(), ranks.size)


def test_the_plan_runs_on_two_ranks_in_rehearsal():
    """parallel_plan(2) shards build_model() so that it runs{{ " prefill and a decode step" if decode else "" }} on two ranks
    (a fake process group in this process): no layer gets a style that does not fit it."""
    rehearse(build_model, parallel_plan(2), example_inputs(), 2)


def test_a_megatron_plan_over_layers_with_biases_shards():
    """Column-parallel biases are split, the row-parallel bias stays whole: both are right."""
    with tensor_parallel(select_backend().device) as ranks:
        plan = {"0": ColwiseParallel(), "1": RowwiseParallel()}
        layers = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4))
        assert_sharded(ranks.shard(layers, plan), plan, layers, ranks.size)


def test_plain_python_is_one_rank_even_with_master_addr_exported(monkeypatch):
    """Without torchrun (no WORLD_SIZE) the job is one rank, whatever MASTER_ADDR a shell exports."""
    monkeypatch.setenv("MASTER_ADDR", "an-unreachable-host.invalid")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with tensor_parallel(select_backend().device) as ranks:
        assert (ranks.rank, ranks.size) == (0, 1)


def test_plain_python_joins_a_group_of_the_backend_it_names():
    """One rank on the CPU runs a gloo process group, the backend its Ranks report."""
    with tensor_parallel("cpu") as ranks:
        assert (ranks.backend, dist.get_backend()) == ("gloo", "gloo")


def test_the_process_group_ends_with_its_block():
    """tensor_parallel() starts the job's process group and destroys it on the way out."""
    with tensor_parallel(select_backend().device):
        assert dist.is_initialized()
    assert not dist.is_initialized()


def test_a_block_inside_a_job_joins_it_and_leaves_it_running():
    """Within a job already joined (an enclosing block, a launcher of yours), a block runs as its
    rank and leaves the process group to whoever started it."""
    with tensor_parallel(select_backend().device) as outer:
        with tensor_parallel(select_backend().device) as inner:
            assert (inner.rank, inner.size) == (outer.rank, outer.size)
        assert dist.is_initialized()
        outer.gather(0)  # the group still works


@pytest.mark.parametrize(
    ("model", "children"),
    [(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), "0, 1"), (nn.Linear(4, 4), "none")],
)
def test_a_plan_key_that_names_no_submodule_is_refused(model, children):
    """A typo in parallel_plan() is an error naming the key, the model's children and the fix."""
    with pytest.raises(PlanError) as refused:
        check_plan(model, {"proj": ColwiseParallel()}, 2)
    assert str(refused.value) == (
        f"parallel_plan() key 'proj' names no submodule of build_model() (its children: {children}); "
        "write the submodule's dotted name, * matches any one part"
    )


@pytest.mark.parametrize(
    ("layer", "style", "size"),
    [
        (nn.Linear(5, 3), ColwiseParallel, "out_features=3"),
        (nn.Linear(3, 5), RowwiseParallel, "in_features=3"),
        (nn.Embedding(5, 3), ColwiseParallel, "embedding_dim=3"),
        (nn.Embedding(3, 5), RowwiseParallel, "num_embeddings=3"),
    ],
)
def test_a_size_the_ranks_cannot_split_is_refused(layer, style, size):
    """A layer that does not divide by the world size is refused with its size, style and the fix."""
    with pytest.raises(PlanError) as refused:
        check_plan(nn.Sequential(layer), {"0": style()}, 2)
    assert str(refused.value) == (
        f"0.{size} cannot be split across 2 ranks ({style.__name__}); "
        "run a number of ranks that divides 3, or change the model's sizes"
    )


def test_a_style_whose_split_the_check_cannot_tell_passes_it():
    """SequenceParallel on a norm splits no size of the layer's: check_plan lets it through."""
    model = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6))
    check_plan(model, {"0": ColwiseParallel(), "1": SequenceParallel()}, 2)


def test_plan_keys_match_submodules_as_parallelize_module_does():
    """`*` matches one part of a dotted name, so one key can shard every layer."""
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 4)), nn.Sequential(nn.Linear(4, 3)))
    with pytest.raises(PlanError, match=r"1\.0\.out_features=3"):
        check_plan(model, {"*.0": ColwiseParallel()}, 2)
    check_plan(model, {"0.0": ColwiseParallel()}, 2)


def test_plan_targets_are_named_by_their_whole_dotted_path():
    """Each layer a key matches comes with its path as named_modules() spells it, whatever its
    children's names start with."""
    model = nn.ModuleDict({"Xattn": nn.Linear(4, 4), "mlp": nn.Sequential(nn.Linear(4, 4))})
    assert [path for path, _ in plan_targets(model, "*")] == ["Xattn", "mlp"]
    assert [path for path, _ in plan_targets(model, "mlp.*")] == ["mlp.0"]


FIX = (
    "  fix: give each layer the style its place needs (ColwiseParallel for layers that widen, "
    "RowwiseParallel for the one that narrows after them), or drop the entry"
)
"""The last line of a rehearsal's refusal, where the plan's styles are at fault."""


def refusal(plan: dict, build, inputs: tuple) -> list[str]:
    """The lines of the PlanError that rehearsing `plan` on two ranks raises."""
    with pytest.raises(PlanError) as refused:
        rehearse(build, plan, inputs, 2)
    return str(refused.value).splitlines()


def test_swapped_styles_are_refused_naming_the_entry_the_error_and_the_fix(one_step):
    """Megatron's styles swapped: the rehearsal names the entry that fails, its layer's weights
    and input shape, the error's first line, and the fix."""
    lines = refusal(
        {"0": RowwiseParallel(), "1": ColwiseParallel()},
        lambda: nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4)),
        (torch.ones(3, 4),),
    )
    assert lines == [
        (
            "the plan cannot run on 2 ranks: plan entry '0' (RowwiseParallel) on 0: Linear, "
            "weight (8, 4), bias (8,); input (3, 4) (shapes on rank 0)"
        ),
        "  RuntimeError: a and b must have same reduction dim, but got [3, 8] X [4, 8].",
        FIX,
    ]


def test_a_failure_after_every_entry_ran_says_so(one_step):
    """A column-parallel layer with no row-parallel one after it: the unsharded layer that follows
    fails on the rank's half of the features, outside every plan entry."""
    lines = refusal(
        {"0": ColwiseParallel()},
        lambda: nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4)),
        (torch.ones(3, 4),),
    )
    assert lines == [
        "the plan cannot run on 2 ranks: after the last plan entry ran (shapes on rank 0)",
        "  RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x4 and 8x4)",
        FIX,
    ]


class Scale(nn.Module):
    """A layer without weights: it scales each feature by its index."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.arange(x.shape[-1])


def test_an_entry_on_a_layer_without_weights_says_it_has_none(one_step):
    """SequenceParallel hands a weightless layer a distributed input it cannot mix with its own
    plain tensor: the entry is named, with no weights."""
    lines = refusal(
        {"1": SequenceParallel()},
        lambda: nn.Sequential(nn.Linear(4, 8), Scale()),
        (torch.ones(3, 4),),
    )
    assert lines[0] == (
        "the plan cannot run on 2 ranks: plan entry '1' (SequenceParallel) on 1: Scale, "
        "no weights; input (3, 8) (shapes on rank 0)"
    )


def test_shapes_lists_each_tensors_shape_or_says_there_is_none():
    """An error message shows the shapes of the tensors among a call's arguments, nested or not."""
    assert shapes((torch.ones(2, 3), 4, {"mask": torch.ones(5)})) == "(2, 3), (5,)"
    assert shapes((None, 4)) == "no tensor"


def test_this_process_is_the_rank_torchrun_says(monkeypatch):
    """RANK, LOCAL_RANK and WORLD_SIZE as torchrun exports them; without them, the one rank 0."""
    for name, value in {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}.items():
        monkeypatch.setenv(name, value)
    assert this_process() == (3, 1, 4)
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name)
    assert this_process() == (0, 0, 1)


def test_a_rank_on_npus_takes_the_npu_of_its_local_rank_before_joining_over_hccl(monkeypatch):
    """Rank 3 of 4, the second on its node: torch.npu.set_device(1) (torch_npu/npu/utils.py), then
    the process group over hccl, the backend torch_npu registers, waiting at most
    COLLECTIVE_TIMEOUT for a rank that hangs, and a mesh of npu devices."""
    calls = []
    npu = SimpleNamespace(set_device=lambda device: calls.append(("set_device", device)))
    monkeypatch.setattr(torch, "npu", npu, raising=False)

    def join(backend: str, **options: object) -> None:
        calls.append(("init_process_group", backend, options))

    monkeypatch.setattr(dist, "init_process_group", join)
    monkeypatch.setattr(parallel, "init_device_mesh", lambda device, shape: ("mesh", device, shape))
    for name, value in {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}.items():
        monkeypatch.setenv(name, value)
    ranks = start("npu", joined=False)
    assert calls == [
        ("set_device", 1),
        ("init_process_group", "hccl", {"timeout": COLLECTIVE_TIMEOUT}),
    ]
    assert (ranks.rank, ranks.local_rank, ranks.size) == (3, 1, 4)
    assert (ranks.backend, ranks.device, ranks.mesh) == ("hccl", "npu:1", ("mesh", "npu", (4,)))
{%- if decode %}


class Cache(nn.Module):
    """A cache as the sample holds it (a buffer, (batch, heads, positions, head_dim)) and as
    transformers' StaticCache does (tensors marked static, in a list)."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        values = torch.arange(2 * heads * 3 * 2, dtype=torch.float).view(2, heads, 3, 2)
        self.register_buffer("k_cache", values)
        self.layers = [values + 1000]
        torch._dynamo.mark_static_address(self.layers[0])


@pytest.mark.parametrize("rank", [0, 1])
def test_the_cache_style_keeps_this_ranks_own_heads(rank):
    """Rank r of 2 keeps heads [2r, 2r + 2) of 4, the heads ColwiseParallel gives its k and v
    projections: of the buffer and of a marked tensor alike, in the same tensor objects."""
    cache = Cache(heads=4)
    whole = save(cache)
    marked = cache.layers[0]
    with fake_ranks(2, rank) as mesh:
        parallelize_module(cache, mesh, {"": KVCacheParallel()})
    assert cache.layers[0] is marked
    assert torch.equal(cache.k_cache, whole["k_cache"][:, 2 * rank : 2 * rank + 2])
    assert torch.equal(cache.layers[0], whole["layers[0]"][:, 2 * rank : 2 * rank + 2])


def test_a_cache_whose_heads_the_ranks_cannot_split_is_refused():
    """Three heads over two ranks: refused, naming the cache tensor, its heads and the fix."""
    model = nn.Sequential(Cache(heads=3))
    with pytest.raises(PlanError, match=r"0\.k_cache\.shape\[1\]=3 cannot be split across 2 ranks"):
        check_plan(model, {"0": KVCacheParallel()}, 2)


def test_a_cache_entry_on_a_module_without_a_cache_is_refused():
    """KVCacheParallel on a module that holds no state: refused, naming the module."""
    model = nn.Sequential(nn.Linear(4, 4))
    with pytest.raises(PlanError, match=r"'0' \(KVCacheParallel\) names 0, which holds no cache"):
        check_plan(model, {"0": KVCacheParallel()}, 2)


def test_a_plan_that_leaves_the_cache_whole_names_the_missing_entry():
    """The sample's plan without its KVCacheParallel entry cannot run on two ranks (each rank's
    heads do not fit a cache of every head): the rehearsal names the cache and the entry to add."""
    plan = {key: style for key, style in parallel_plan(2).items() if "kv_cache" not in key}
    with pytest.raises(PlanError) as refused:
        rehearse(build_model, plan, (prompt_of(None, "cpu"),), 2)
    assert "layers.0.kv_cache.k_cache" in str(refused.value)
    assert "'layers.*.kv_cache': KVCacheParallel()" in str(refused.value)


@pytest.fixture(scope="module")
def one_device() -> tuple[torch.Tensor, State]:
    """What generate --new-tokens 4 chooses on one device, unsharded and eager, and the state the
    model ends with."""
    torch.manual_seed(0)
    model = build_model().eval()
    prompt = prompt_of(None, "cpu")
    with torch.no_grad():
        tokens = generate.generate(model, model, prompt, 4)
    return tokens, save(model)


def test_two_ranks_generate_one_devices_tokens(two_ranks, one_device):
    """`generate --json` under torchrun: every rank exits 0, rank 0 alone prints, and the tokens
    are those one device chooses."""
    steps = [two_ranks.results[rank]["generate"] for rank in range(two_ranks.size)]
    assert [step["value"]["code"] for step in steps] == [0] * two_ranks.size
    assert [step["printed"] for step in steps[1:]] == [""] * (two_ranks.size - 1)
    result = json.loads(steps[0]["printed"])
    assert (result["ranks"]["size"], result["ranks"]["differ"]) == (two_ranks.size, [])
    assert torch.equal(torch.tensor(result["tokens"]), one_device[0])


def caches(size: int) -> dict[str, KVCacheParallel]:
    """Each state tensor of the model that a KVCacheParallel entry of parallel_plan(size) shards,
    with that entry's style."""
    model = build_model()
    return {
        f"{path}.{name}": style
        for key, style in parallel_plan(size).items()
        if isinstance(style, KVCacheParallel)
        for path, module in plan_targets(model, key)
        for name in state_tensors(module)
    }


def test_each_ranks_cache_holds_only_its_share_of_the_heads(two_ranks, one_device):
    """After generating, each rank's KV cache holds 1/2 of the heads: the slice of one device's
    cache that its own heads wrote; every other state tensor equals one device's."""
    sharded = caches(two_ranks.size)
    assert sharded, "parallel_plan() shards no cache"
    whole = one_device[1]
    for rank in range(two_ranks.size):
        state = two_ranks.results[rank]["generate"]["value"]["state"]
        for path, style in sharded.items():
            heads = whole[path].shape[style.dim] // two_ranks.size
            assert state[path].shape[style.dim] == heads, f"rank {rank}: {path}"
        expected = {
            path: sharded[path].local(tensor, rank, two_ranks.size) if path in sharded else tensor
            for path, tensor in whole.items()
        }
        assert state_mismatches(state, expected) == [], f"rank {rank}"
{%- endif %}
