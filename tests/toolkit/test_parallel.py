"""Tensor parallelism in one process: the plan is checked, rehearsed on a fake process group and
refused with the entry at fault; the process group a block starts and ends; each rank's share of a
decode model's KV cache; rank 0 alone prints the MRE's report. (Two real ranks under torchrun run
in each tensor-parallel project's own suite, and in tests/test_tensor_parallel.py.)"""

import contextlib
import importlib
import types
from datetime import timedelta
from types import SimpleNamespace
from unittest.mock import patch

import pytest
import torch
import torch._dynamo
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from parallel_project.toolkit import parallel, report
from parallel_project.toolkit.backend import select_backend
from parallel_project.toolkit.parallel import (
    COLLECTIVE_TIMEOUT,
    KVCacheParallel,
    PlanError,
    Ranks,
    check_plan,
    fake_ranks,
    plan_targets,
    shapes,
    start,
    tensor_parallel,
    this_process,
)
from parallel_project.toolkit.state import save, state_tensors

PARALLEL = ["parallel_project", "decode_parallel_project"]
"""The tensor-parallel projects: forward, and decode (whose plan shards the KV cache too)."""


@pytest.fixture(params=PARALLEL)
def sample(request) -> SimpleNamespace:
    """Each tensor-parallel project's model.py (the sample, with its own plan) and toolkit.parallel."""
    return SimpleNamespace(
        model=importlib.import_module(f"{request.param}.model"),
        parallel=importlib.import_module(f"{request.param}.toolkit.parallel"),
    )


@pytest.fixture(params=PARALLEL)
def one_step(request, monkeypatch) -> types.ModuleType:
    """Each tensor-parallel project's toolkit.parallel, which rehearses a small model of the test's
    own by running it once on its example inputs (in a decode project: as the step, with no
    prefill)."""
    tool = importlib.import_module(f"{request.param}.toolkit.parallel")
    monkeypatch.setattr(tool, "first_step", lambda model, *inputs: inputs)
    return tool


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
    """Every parameter of every layer `plan` names is a DTensor placed as its style places it;
    every state tensor of a KVCacheParallel module is a plain tensor of 1/size of the heads of
    `whole`'s."""
    for key, style in plan.items():
        for path, layer in plan_targets(model, key):
            if type(style).__name__ == "KVCacheParallel":  # a style of either project's toolkit
                unsharded = state_tensors(whole.get_submodule(path))
                local = state_tensors(layer)
                assert local.keys() == unsharded.keys(), f"{path} holds other state"
                for name, tensor in local.items():
                    assert not isinstance(tensor, DTensor), f"{path}.{name} is distributed"
                    heads = unsharded[name].shape[style.dim] // size
                    assert tensor.shape[style.dim] == heads, f"{path}.{name}"
                continue
            weights = dict(layer.named_parameters(recurse=False))
            assert weights, f"{path} has no weights to shard"
            expected = PLACEMENTS.get((type(style), type(layer)), {})
            for name, weight in weights.items():
                assert isinstance(weight, DTensor), f"{path}.{name} is not distributed"
                if name in expected:
                    assert weight.placements == (expected[name],), f"{path}.{name}"


def test_the_plan_shards_every_layer_it_names(sample):
    """Each layer that the sample's parallel_plan() names holds distributed weights after
    Ranks.shard (one rank), each placed as DTensor places it for the layer's style; in a decode
    project each cache holds its rank's heads."""
    build_model, parallel_plan = sample.model.build_model, sample.model.parallel_plan
    with sample.parallel.tensor_parallel(select_backend().device) as ranks:
        plan = parallel_plan(ranks.size)
        assert_sharded(ranks.shard(build_model(), plan), plan, build_model(), ranks.size)


def test_the_plan_runs_on_two_ranks_in_rehearsal(sample):
    """The sample's parallel_plan(2) shards its build_model() so that it runs (in a decode project:
    prefill and a decode step) on two ranks (a fake process group in this process): no layer gets
    a style that does not fit it."""
    model = sample.model
    sample.parallel.rehearse(model.build_model, model.parallel_plan(2), model.example_inputs(), 2)


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


def test_a_job_of_one_rank_gives_up_a_wait_in_seconds():
    """Plain python's one-rank group times a collective out after SOLO_TIMEOUT (30 s): with no
    other rank to wait for, a wait is a bug to fail fast, not after torch's default 30 minutes."""
    with tensor_parallel("cpu"):
        gloo = dist.group.WORLD._get_backend(torch.device("cpu"))
        assert gloo.options._timeout == parallel.SOLO_TIMEOUT == timedelta(seconds=30)


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


def refusal(tool: types.ModuleType, plan: dict, build, inputs: tuple) -> list[str]:
    """The lines of the PlanError that rehearsing `plan` on two ranks raises."""
    with pytest.raises(tool.PlanError) as refused:
        tool.rehearse(build, plan, inputs, 2)
    return str(refused.value).splitlines()


def test_swapped_styles_are_refused_naming_the_entry_the_error_and_the_fix(one_step):
    """Megatron's styles swapped: the rehearsal names the entry that fails, its layer's weights
    and input shape, the error's first line, and the fix."""
    lines = refusal(
        one_step,
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
        one_step,
        {"0": ColwiseParallel()},
        lambda: nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4)),
        (torch.ones(3, 4),),
    )
    assert lines == [
        "the plan cannot run on 2 ranks: after the last plan entry ran (shapes on rank 0)",
        "  RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x4 and 8x4)",
        FIX,
    ]


def test_a_last_layer_left_split_is_refused_naming_the_output(one_step):
    """A column-parallel last layer that hands its rank's half of the features out of the model:
    the sharded model runs, but its output has the wrong shape, which the rehearsal names, with
    the fix that gathers it."""
    lines = refusal(
        one_step,
        {"1": ColwiseParallel()},
        lambda: nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4)),
        (torch.ones(3, 4),),
    )
    assert lines == [
        (
            "the plan changes the model's output on 2 ranks: output is (3, 2) torch.float32 on a "
            "rank, where the whole model's is (3, 4) torch.float32"
        ),
        (
            "  fix: a layer whose output leaves the model whole must hand it on whole: "
            "ColwiseParallel(output_layouts=Replicate()) gathers it on every rank; or drop its entry"
        ),
    ]


def test_a_gathered_last_layer_passes_the_rehearsal(one_step):
    """The same last layer with its output gathered (Replicate) gives the whole model's shapes."""
    plan = {"1": ColwiseParallel(output_layouts=Replicate())}
    one_step.rehearse(lambda: nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4)), plan, (torch.ones(3, 4),), 2)


class Scale(nn.Module):
    """A layer without weights: it scales each feature by its index."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.arange(x.shape[-1])


def test_an_entry_on_a_layer_without_weights_says_it_has_none(one_step):
    """SequenceParallel hands a weightless layer a distributed input it cannot mix with its own
    plain tensor: the entry is named, with no weights."""
    lines = refusal(
        one_step,
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


def test_ranks_that_compiled_other_counts_of_graphs_are_each_named():
    """Ranks whose first calls compiled different numbers of graphs: the ranks row gives each
    rank's count, in rank order."""
    ranks = Ranks(0, 0, 3, "gloo", "cpu", mesh=None)
    calls = [report.FirstCall(0.5, 1), report.FirstCall(0.5, 2), report.FirstCall(0.5, 1)]
    row = report.ranks_row(ranks, calls)
    assert row.endswith("on rank 0, graphs per rank 1, 2, 1")


def test_ranks_that_each_compiled_two_graphs_say_so_once():
    """Ranks that compiled the same number of graphs, two: one count for all, in the plural."""
    ranks = Ranks(0, 0, 2, "gloo", "cpu", mesh=None)
    row = report.ranks_row(ranks, [report.FirstCall(0.5, 2), report.FirstCall(0.5, 2)])
    assert row.endswith("on rank 0, 2 graphs on each rank")


FIRST_CALLS = [(0.5, 1), (1.25, 1)]
"""What the first call took and compiled on each of two ranks."""


class TwoRanks(Ranks):
    """A rank of two whose gather hands back FIRST_CALLS, once it was given its own."""

    def gather(self, value):
        assert value == FIRST_CALLS[self.rank]
        return FIRST_CALLS


def first_call_of(measured: tuple[float, int]):
    """report.first_call as if the block had taken and compiled what a rank's did."""

    @contextlib.contextmanager
    def first_call(backend):
        yield report.FirstCall(*measured)

    return first_call


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_zero_alone_prints_the_report_with_a_ranks_line(capsys, rank):
    """Every rank sends its first call to the others; rank 0 alone prints the report, once, with a
    row naming the world size, the process-group backend, the slowest rank and the graphs."""
    ranks = TwoRanks(rank, rank, 2, "gloo", "cpu", mesh=None)
    backend = select_backend()

    def infer_one_step():  # one graph, whatever rank this is
        compiled = torch.compile(lambda x: x * 2, backend=backend.name, fullgraph=True)
        return compiled(torch.ones(3))

    with patch.object(report, "first_call", first_call_of(FIRST_CALLS[rank])):
        report.report(infer_one_step, lambda: (torch.ones(3),), ranks)
    printed = capsys.readouterr().out
    if rank:
        assert printed == ""
        return
    assert [line.split()[0] for line in printed.splitlines()].count("backend") == 1
    assert printed.splitlines()[-1] == (
        "ranks       2 (gloo), slowest first call 1.25 s on rank 1, 1 graph on each rank"
    )


# --- a decode model's KV cache: each rank keeps the heads it computes


@pytest.fixture
def decode_parallel() -> types.ModuleType:
    """decode_parallel_project's toolkit.parallel, whose exercise() runs a prefill, then a step."""
    return importlib.import_module("decode_parallel_project.toolkit.parallel")


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


def test_every_cache_tensor_of_an_entry_is_checked_not_only_the_first():
    """A cache whose k splits across the ranks but whose v does not is refused, naming the v."""
    cache = Cache(heads=4)
    cache.register_buffer("v_cache", torch.zeros(2, 3, 3, 2))
    with pytest.raises(PlanError, match=r"0\.v_cache\.shape\[1\]=3 cannot be split across 2 ranks"):
        check_plan(nn.Sequential(cache), {"0": KVCacheParallel()}, 2)


def test_a_cache_entry_on_a_module_without_a_cache_is_refused():
    """KVCacheParallel on a module that holds no state: refused, naming the module."""
    model = nn.Sequential(nn.Linear(4, 4))
    with pytest.raises(PlanError) as refused:
        check_plan(model, {"0": KVCacheParallel()}, 2)
    assert str(refused.value) == (
        "parallel_plan() key '0' (KVCacheParallel) names 0, which holds no cache (no buffer, no "
        "tensor marked static): name the module that holds the k and v caches, e.g. "
        "'layers.*.kv_cache'"
    )


def test_a_cache_the_plan_shards_is_not_counted_as_left_whole():
    """Of two caches the call wrote, only the one no KVCacheParallel entry names is left whole;
    one the call did not write is no cache."""
    model = nn.Sequential(Cache(heads=4), Cache(heads=4), Cache(heads=4))
    start = {path: tensor.clone() for path, tensor in state_tensors(model).items()}
    model[0].k_cache += 1
    model[1].k_cache += 1
    whole = parallel.unsharded_caches(model, start, {"0": KVCacheParallel(), "1": ColwiseParallel()})
    assert whole == ["1.k_cache"]


@pytest.mark.parametrize(
    ("paths", "shown"),
    [
        (["a"], "a"),
        (["a", "b"], "a, b"),
        (["a", "b", "c"], "a, b and 1 more"),
        (["a", "b", "c", "d"], "a, b and 2 more"),
    ],
)
def test_the_caches_left_whole_are_shown_two_and_a_count(paths, shown):
    """A refusal names the first two caches left whole and counts the rest."""
    assert parallel.first_two(paths) == shown


def test_the_entry_named_for_caches_covers_each_layer_with_a_star():
    """The entry a refusal proposes names the module holding the caches, `*` for the layer
    number; a cache the model itself holds gets the words for it, as there is no key."""
    model = nn.Module()
    model.layers = nn.ModuleList(nn.ModuleDict({"kv": Cache(heads=4)}) for _ in range(2))
    assert parallel.cache_key(model, ["layers.0.kv.k_cache", "layers.1.kv.layers[0]"]) == "'layers.*.kv'"
    assert parallel.cache_key(Cache(heads=4), ["k_cache"]) == "naming the module that holds it"


def test_a_plan_that_leaves_the_cache_whole_names_the_missing_entry(decode_parallel):
    """The decode sample's plan without its KVCacheParallel entry cannot run on two ranks (each
    rank's heads do not fit a cache of every head): the rehearsal names the cache and the entry to
    add."""
    sample = importlib.import_module("decode_parallel_project.model")
    plan = {key: style for key, style in sample.parallel_plan(2).items() if "kv_cache" not in key}
    with pytest.raises(decode_parallel.PlanError) as refused:
        decode_parallel.rehearse(sample.build_model, plan, sample.example_inputs(), 2)
    assert "layers.0.kv_cache.k_cache" in str(refused.value)
    assert "'layers.*.kv_cache': KVCacheParallel()" in str(refused.value)


def test_every_cache_left_whole_is_counted(decode_parallel):
    """The decode sample writes four cache tensors (k and v of two layers): a plan that shards
    none names the first two and counts the others."""
    sample = importlib.import_module("decode_parallel_project.model")
    plan = {key: style for key, style in sample.parallel_plan(2).items() if "kv_cache" not in key}
    with pytest.raises(decode_parallel.PlanError) as refused:
        decode_parallel.rehearse(sample.build_model, plan, sample.example_inputs(), 2)
    whole = "layers.0.kv_cache.k_cache, layers.0.kv_cache.v_cache and 2 more (its KV cache)"
    assert f"the model writes {whole}" in str(refused.value)
