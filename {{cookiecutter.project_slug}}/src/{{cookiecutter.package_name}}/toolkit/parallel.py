"""Tensor parallelism with PyTorch's own engine: torch.distributed, a DeviceMesh, parallelize_module.

Launch with torchrun, one process per rank: `torchrun --nproc-per-node 2 -m <package>.mre`. Plain
`python -m <package>.mre` runs as one rank. Each rank builds the full model from the same seed and
parallel_plan() (model.py) shards it, so every rank's output equals the single-device model's. In a
decode project a rank computes only its share of the attention heads, so its KV cache holds only
those heads: KVCacheParallel, a plan entry like the others.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from fnmatch import fnmatch
from functools import partial
from typing import Any

import torch
import torch.distributed as dist
import torch.utils._pytree as pytree
from torch import nn
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    RowwiseParallel,
    parallelize_module,
)

from . import project
from .rank_failure import report_when_uncaught
from .state import state_tensors

Plan = dict[str, ParallelStyle]

# A rank that waits for a failed one: torchrun stops the others as soon as one rank exits with an
# error, and this bounds the wait when a rank hangs instead (compiling and capturing take minutes
# on an NPU, well under this).
COLLECTIVE_TIMEOUT = timedelta(minutes=30)
# A job of one rank waits for no one: a wait there is a bug, which fails in seconds, not minutes.
SOLO_TIMEOUT = timedelta(seconds=30)


class PlanError(ValueError):
    """parallel_plan() cannot shard this model across this many ranks: the message says why."""


class KVCacheParallel(ParallelStyle):
    """The KV cache of a module sharded by attention heads, as ColwiseParallel shards the k and v
    projections that write it: each rank keeps only its own heads of every state tensor of the
    module (its buffers, and tensors marked with torch._dynamo.mark_static_address).

    Rank r of N keeps heads [r * H / N, (r + 1) * H / N) of dimension `dim`: the heads whose rows
    of the k and v weights ColwiseParallel gives it. The cache stays a plain tensor, which the
    rank's own attention writes in place; nothing is communicated. dim=1 fits the (batch, heads,
    positions, head_dim) layout of gpt-fast's KVCache and transformers' StaticCache.
    """

    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def heads(self, module: nn.Module) -> dict[str, int]:
        """The size of dimension `dim` of each state tensor of `module`, by its path."""
        return {path: tensor.shape[self.dim] for path, tensor in state_tensors(module).items()}

    def local(self, tensor: torch.Tensor, rank: int, size: int) -> torch.Tensor:
        """Rank `rank`'s share of `tensor`, of `size` ranks: a copy, so the rest is freed."""
        return tensor.chunk(size, self.dim)[rank].clone()

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        rank, size = device_mesh.get_local_rank(), device_mesh.size()
        with torch.no_grad():
            for tensor in state_tensors(module).values():
                # The same tensor object, now holding this rank's heads: whatever refers to it
                # (the module's buffer, a cache object's list, mark_static_address) still does.
                tensor.data = self.local(tensor.data, rank, size)
        return module


@dataclass(frozen=True)
class Ranks:
    """This process's place in the job, and the mesh that parallelize_module shards over."""

    rank: int
    """The global rank (torchrun's RANK); rank 0 prints."""
    local_rank: int
    """The rank on this node (torchrun's LOCAL_RANK): the NPU it runs on."""
    size: int
    """The world size: every rank holds 1/size of each sharded layer."""
    backend: str
    """The process-group backend: hccl on NPUs, gloo on the CPU."""
    device: str
    """npu:<LOCAL_RANK> on NPUs, cpu elsewhere."""
    mesh: DeviceMesh

    @property
    def is_first(self) -> bool:
        return self.rank == 0

    def shard(self, model: nn.Module, plan: Plan) -> nn.Module:
        """The model with each submodule in `plan` sharded over the mesh (parallelize_module)."""
        check_plan(model, plan, self.size)
        return parallelize_module(model, self.mesh, plan)

    def gather(self, value: Any) -> list[Any]:
        """`value` from every rank, in rank order, on every rank."""
        values: list[Any] = [None] * self.size
        dist.all_gather_object(values, value)
        return values

    def cache_keywords(self) -> dict[str, int]:
        """cache_compile's rank keywords: each rank writes and loads its own cache."""
        # tp_rank is the global rank: the tensor-parallel group spans every rank.
        return {"global_rank": self.rank, "tp_rank": self.rank}


def wait_collectives(output: Any) -> Any:
    """`output` with its collectives done. A sharded layer run eagerly hands back a tensor whose
    all-reduce is still in flight (AsyncCollectiveTensor), awaited only when something reads it;
    a call that nobody reads would otherwise be timed without its collective."""
    return pytree.tree_map_only(AsyncCollectiveTensor, AsyncCollectiveTensor.wait, output)


def plan_targets(model: nn.Module, key: str) -> list[tuple[str, nn.Module]]:
    """The submodules a plan key names, matched as parallelize_module does: fnmatch per dotted part."""
    found = [("", model)]
    for token in key.split("."):
        found = [
            (f"{path}.{name}".lstrip("."), child)
            for path, module in found
            for name, child in module.named_children()
            if fnmatch(name, token)
        ]
    return found


def sharded_sizes(module: nn.Module, style: ParallelStyle) -> list[tuple[str, int]]:
    """The sizes a style splits across ranks, each with its name; none where this check can't tell."""
    found = sharded_size(module, style)
    if isinstance(style, KVCacheParallel):
        heads = style.heads(module)
        return [(f"{path}.shape[{style.dim}]", size) for path, size in heads.items()]
    return [found] if found else []


def sharded_size(module: nn.Module, style: ParallelStyle) -> tuple[str, int] | None:
    """The size a style splits across ranks, with its name; None where this check can't tell."""
    if isinstance(module, nn.Linear):
        if isinstance(style, ColwiseParallel):
            return "out_features", module.out_features
        if isinstance(style, RowwiseParallel):
            return "in_features", module.in_features
    if isinstance(module, nn.Embedding):
        if isinstance(style, ColwiseParallel):
            return "embedding_dim", module.embedding_dim
        if isinstance(style, RowwiseParallel):
            return "num_embeddings", module.num_embeddings
    return None


def check_plan(model: nn.Module, plan: Plan, size: int) -> None:
    """Raise PlanError unless every key names a submodule and each split size divides by `size`."""
    for key, style in plan.items():
        targets = plan_targets(model, key)
        if not targets:
            children = ", ".join(name for name, _ in model.named_children()) or "none"
            raise PlanError(
                f"parallel_plan() key {key!r} names no submodule of build_model() (its children: "
                f"{children}); write the submodule's dotted name, * matches any one part"
            )
        for path, module in targets:
            if isinstance(style, KVCacheParallel) and not state_tensors(module):
                raise PlanError(
                    f"parallel_plan() key {key!r} (KVCacheParallel) names {path}, which holds no "
                    "cache (no buffer, no tensor marked static): name the module that holds the "
                    "k and v caches, e.g. 'layers.*.kv_cache'"
                )
            for name, value in sharded_sizes(module, style):
                if value % size == 0:
                    continue
                raise PlanError(
                    f"{path}.{name}={value} cannot be split across {size} ranks "
                    f"({type(style).__name__}); run a number of ranks that divides {value}, "
                    "or change the model's sizes"
                )


@contextmanager
def quiet_rule_failures() -> Iterator[None]:
    """No log of each failed sharding or shape rule: torch logs one, traceback and all, before it
    raises the error that says the same (once per rank under torchrun)."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    level, log.level = log.level, logging.CRITICAL
    try:
        yield
    finally:
        log.level = level


@contextmanager
def fake_ranks(size: int, rank: int = 0) -> Iterator[DeviceMesh]:
    """A CPU mesh of `size` ranks in this one process, as rank `rank`: DTensor applies every
    sharding rule and computes that rank's shapes, while the collectives move nothing. It is
    torch's own fake process group (torch.testing._internal.distributed.fake_pg), which
    torchtitan's dry runs use too."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=size)
    try:
        yield init_device_mesh("cpu", (size,))
    finally:
        dist.destroy_process_group()


def shapes(values: Any) -> str:
    """The shapes of the tensors among `values`, e.g. `(2, 8, 32)`, for an error message."""
    found = [tuple(v.shape) for v in pytree.tree_leaves(values) if isinstance(v, torch.Tensor)]
    return ", ".join(str(shape) for shape in found) or "no tensor"


def first_step(model: nn.Module, *prompt: Any) -> tuple[Any, ...]:
    """A decode project's prefill, decode.first_step(), imported when it runs: decode.py is in
    decode projects only. A name of this module, so that a test can run a small model of its own
    without a prefill (tests/toolkit's test_parallel.py does)."""
    from .decode import first_step

    return first_step(model, *prompt)


def exercise(model: nn.Module, inputs: tuple[Any, ...]) -> Any:
    """What the tools run on a model: one call on `inputs`; in a decode project, prefill on the
    prompt `inputs`, then one decode step."""
    if project.DECODE:
        return model(*first_step(model, *inputs))
    return model(*inputs)


def rehearse(
    build: Callable[[], nn.Module], plan: Plan, inputs: tuple[Any, ...], size: int
) -> None:
    """Shard build() by `plan` for `size` ranks and run it once on `inputs` (exercise()), all in
    this process, before any torchrun: raise PlanError naming the plan entry, its layer and the
    shapes where a plan that cannot work fails (a style that does not fit its layer, swapped
    styles, a decode model's KV cache left whole, ...).

    A model that fails unsharded too raises its own error: that is not the plan's fault.
    """
    model = build()
    check_plan(model, plan, size)
    entered: list[str] = []  # the plan entries whose layer is running, innermost last

    def enter(entry: str, _module: nn.Module, args: tuple[Any, ...]) -> None:
        entered.append(f"{entry}; input {shapes(args)}")

    def leave(*_: Any) -> None:  # None: the layer's output stays as it is
        entered.pop()

    for key, style in plan.items():
        for path, module in plan_targets(model, key):
            weights = ", ".join(f"{name} {tuple(p.shape)}" for name, p in module.named_parameters())
            entry = (
                f"plan entry {key!r} ({type(style).__name__}) on {path}: "
                f"{type(module).__name__}, {weights or 'no weights'}"
            )
            # Registered before parallelize_module's own hooks, so they run first.
            module.register_forward_pre_hook(partial(enter, entry))
            module.register_forward_hook(leave)
    try:
        with quiet_rule_failures(), fake_ranks(size) as mesh, torch.no_grad():
            output = wait_collectives(exercise(parallelize_module(model, mesh, plan), inputs))
    except Exception as error:  # noqa: BLE001  (the model's or the plan's: told apart below)
        unsharded = build()
        # The state before the call, to find the caches it writes (a decode model's KV cache).
        start = {path: tensor.clone() for path, tensor in state_tensors(unsharded).items()}
        with torch.no_grad():
            exercise(unsharded, inputs)  # raises if the model itself cannot run
        where = entered[-1] if entered else "after the last plan entry ran"
        reason = f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"
        fix = (
            "give each layer the style its place needs (ColwiseParallel for layers that "
            "widen, RowwiseParallel for the one that narrows after them), or drop the entry"
        )
        if project.DECODE and (whole := unsharded_caches(unsharded, start, plan)):
            fix = (
                f"the model writes {first_two(whole)} (its KV cache) with every head, where a rank "
                f"computes only its share: shard it too, with the plan entry "
                f"{cache_key(unsharded, whole)}: KVCacheParallel()"
            )
        raise PlanError(
            f"the plan cannot run on {size} ranks: {where} (shapes on rank 0)\n  {reason}\n"
            f"  fix: {fix}"
        ) from None
    # The fake ranks' collectives leave the values meaningless, not the shapes: a rank's output
    # must have the shapes of the whole model's, or the plan left part of it split.
    with torch.no_grad():
        whole = exercise(build(), inputs)
    if differ := shape_differences(output, whole):
        raise PlanError(
            f"the plan changes the model's output on {size} ranks: {differ[0]}\n"
            "  fix: a layer whose output leaves the model whole must hand it on whole: "
            "ColwiseParallel(output_layouts=Replicate()) gathers it on every rank; or drop its entry"
        )


def shape_differences(got: Any, want: Any) -> list[str]:
    """Where output `got` differs from `want` in its structure, or a tensor leaf in its shape or
    dtype, in words: the values are not compared."""
    got_leaves, got_spec = pytree.tree_flatten_with_path(got)
    want_leaves, want_spec = pytree.tree_flatten_with_path(want)
    if got_spec != want_spec:
        return [f"its structure is {got_spec}, where the whole model's is {want_spec}"]
    found = []
    for (path, mine), (_, whole) in zip(got_leaves, want_leaves, strict=True):
        tensors = isinstance(whole, torch.Tensor) and isinstance(mine, torch.Tensor)
        if tensors and (mine.shape, mine.dtype) != (whole.shape, whole.dtype):
            found.append(
                f"{pytree.keystr(path) or 'output'} is {tuple(mine.shape)} {mine.dtype} on a "
                f"rank, where the whole model's is {tuple(whole.shape)} {whole.dtype}"
            )
    return found


def unsharded_caches(model: nn.Module, start: dict[str, torch.Tensor], plan: Plan) -> list[str]:
    """The state tensors a call of `model` wrote (compared with `start`) that no KVCacheParallel
    entry of `plan` shards: a cache that keeps every head on every rank."""
    sharded = [
        f"{path}."
        for key, style in plan.items()
        if isinstance(style, KVCacheParallel)
        for path, _ in plan_targets(model, key)
    ]
    return [
        path
        for path, tensor in state_tensors(model).items()
        if not torch.equal(tensor, start[path]) and not path.startswith(tuple(sharded))
    ]


def first_two(paths: list[str]) -> str:
    """The first two paths, and how many more: 'a, b and 2 more'."""
    more = f" and {len(paths) - 2} more" if len(paths) > 2 else ""
    return ", ".join(paths[:2]) + more


def cache_key(model: nn.Module, paths: list[str]) -> str:
    """A plan key for the modules holding `paths`, with `*` for layer numbers: 'layers.*.kv_cache'."""
    modules = {name for name, _ in model.named_modules()}
    keys = set()
    for path in paths:
        parts = path.split(".")
        # The longest prefix that names a submodule holds it (a marked tensor's path goes on
        # through attributes: cache.layers[0].keys).
        end = max(end for end in range(len(parts)) if ".".join(parts[:end]) in modules)
        keys.add(".".join("*" if part.isdigit() else part for part in parts[:end]))
    key = min(keys)
    return repr(key) if key else "naming the module that holds it"


def this_process() -> tuple[int, int, int]:
    """RANK, LOCAL_RANK and WORLD_SIZE as torchrun sets them; one rank without torchrun."""
    rank, local_rank, size = (
        int(os.environ.get(name, default))
        for name, default in (("RANK", 0), ("LOCAL_RANK", 0), ("WORLD_SIZE", 1))
    )
    return rank, local_rank, size


def start(device_type: str, joined: bool) -> Ranks:
    """Pick this rank's device, then join the process group (unless `joined` already) and build
    the mesh."""
    rank, local_rank, size = this_process()
    if device_type == "npu":
        # Before the process group starts: hccl binds each rank to the current device.
        torch.npu.set_device(local_rank)
        device, group_backend = f"npu:{local_rank}", "hccl"
    else:
        device, group_backend = "cpu", "gloo"
    if joined:
        rank, size = dist.get_rank(), dist.get_world_size()
    elif "WORLD_SIZE" in os.environ:
        # Launched by torchrun, which also sets MASTER_ADDR and MASTER_PORT, where every rank
        # finds the others. (Not MASTER_ADDR alone: clusters often export it for everything.)
        dist.init_process_group(group_backend, timeout=COLLECTIVE_TIMEOUT)
    else:
        # Plain python: one rank, which needs no rendezvous (nor a free port).
        dist.init_process_group(
            group_backend, store=dist.HashStore(), rank=0, world_size=1, timeout=SOLO_TIMEOUT
        )
    # torch_npu runs DTensor on meshes of device type "npu" (its own DTensor tests do:
    # torch_npu/testing/_internal/common_dtensor.py), "cpu" takes gloo.
    mesh = init_device_mesh(device.partition(":")[0], (size,))
    return Ranks(rank, local_rank, size, group_backend, device, mesh)


@contextmanager
def tensor_parallel(device_type: str) -> Iterator[Ranks]:
    """This process as one rank of a tensor-parallel job on "npu" or "cpu", until the block ends.

    The process group is destroyed on the way out, error or not. An error that ends the rank is
    recorded for torchrun, whose summary then names the failed rank, and the first rank to fail
    prints its root cause in a few lines; the others add nothing (rank_failure.py). In a job this
    process has joined already (an enclosing block, a launcher of yours), the block runs as that
    rank and leaves the process group to whoever started it.
    """
    joined = dist.is_initialized()
    ranks = start(device_type, joined)
    try:
        with quiet_rule_failures():
            yield ranks
    except BaseException as error:
        report_when_uncaught(error, ranks.rank, ranks.size)
        raise
    finally:
        if not joined:
            dist.destroy_process_group()
