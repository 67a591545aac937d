"""cache_compile for any model: npugraph_ex's compile cache on an NPU, the stand-in elsewhere.

CachedModel applies the seed's cache_compile pattern around your model, so that your model's
class never has to change: its __init__ wraps its own _forward with cache_compile, forward runs
the cached graph, and _forward calls your model. In a decode project cached_steps() does the
same for the decode step, once per capture size. With tensor parallelism each rank passes its
ranks (global_rank, tp_rank, pp_rank) and so writes and loads a cache of its own.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch._dynamo

from . import project
from .backend import npu_versions, select_backend
from .state import model_classes, state_tensors

# Read once, at import: a default of the signatures below, and the name mre.py and generate.py
# import. This module exists only in cache_compile projects, whose settings always set it.
CACHE_DIR = project.CACHE_DIR
"""Where cache_compile keeps compiled graphs, relative to the working directory of the run."""

log = logging.getLogger(__name__)


def code_fingerprint(model: torch.nn.Module) -> str:
    """A short hash of the source files that define the model's classes (model.py and what it
    builds from, transformers' modeling files and torch's included) and of its state's paths,
    shapes and dtypes. npugraph_ex's own key covers str(model) and the options alone, which show
    neither your code nor a config value such as rope_theta or the cache's length."""
    digest = hashlib.sha256()
    for file in sorted({file for cls in model_classes(model) if (file := source_file(cls))}):
        digest.update(Path(file).name.encode() + b"\0" + Path(file).read_bytes())
    for path, tensor in sorted(state_tensors(model).items()):
        digest.update(f"{path} {tuple(tensor.shape)} {tensor.dtype}\n".encode())
    return digest.hexdigest()[:12]


def source_file(cls: type) -> str | None:
    """The file that defines `cls`, or None for a class with none (a built-in's, or one made at
    run time)."""
    try:
        return inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None


def folder_key(model: torch.nn.Module) -> str:
    """A short hash of the model's code and state (code_fingerprint()) and of the torch_npu and
    CANN releases that compile it (npu_versions()). npugraph_ex's own key has neither release, and
    a graph compiled by one is no graph for another (vllm-ascend's npugraph_ex cache hashes
    torch_npu's version too)."""
    key = f"{code_fingerprint(model)}\n{npu_versions()}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def keyed(cache_dir: str | None, model: torch.nn.Module) -> str | None:
    """The folder for `model`'s cache under `cache_dir`: code_<folder_key>, so that a start after
    an edit of your code, or an upgrade of torch_npu or CANN, compiles a cache of its own instead
    of loading the old one. None (the cache_compile default, $TORCHAIR_CACHE_HOME) stays None."""
    return None if cache_dir is None else os.path.join(cache_dir, f"code_{folder_key(model)}")


def cache_compile(
    method: Callable[..., Any], *, dynamic: bool, cache_dir: str | None, **ranks: int
) -> Callable[..., Any]:
    """torch.npu.npugraph_ex.inference.cache_compile on a usable NPU, the stand-in elsewhere.

    On an NPU the first run compiles and writes the cache under `cache_dir`, later starts load it
    and skip Dynamo; the options are backend.NPUGRAPH_EX_OPTIONS, and `ranks` (global_rank,
    tp_rank, pp_rank; none without tensor parallelism) give each rank of a parallel job its own
    cache. Elsewhere `method` is compiled with the stand-in backend (fullgraph=True), which checks
    the same graph but writes no cache.
    """
    backend = select_backend()
    if backend.is_npugraph_ex:
        return torch.npu.npugraph_ex.inference.cache_compile(
            method, dynamic=dynamic, cache_dir=cache_dir, options=backend.options, **ranks
        )
    log.warning(
        "cache_compile: %s compiles %s here, and no persistent cache is written",
        backend.name,
        method.__qualname__,
    )
    return torch.compile(method, backend=backend.name, fullgraph=True, dynamic=dynamic)


class CachedModel(torch.nn.Module):
    """Your model behind cache_compile: forward() runs the cached graph of _forward()."""

    instances = 0
    """CachedModels built in this process so far."""

    def __init__(
        self, model: torch.nn.Module, cache_dir: str | None = CACHE_DIR, **ranks: int
    ) -> None:
        super().__init__()
        if CachedModel.instances:
            # cache_compile's saver takes a second compile of _forward in one process for a
            # recompile and deletes the cache: start the second instance from a clean Dynamo.
            torch._dynamo.reset()
        CachedModel.instances += 1
        self.model = model
        self.cached_forward = cache_compile(
            self._forward, dynamic=False, cache_dir=keyed(cache_dir, model), **ranks
        )

    def forward(self, *dummy_input: Any) -> Any:
        """
        Run the cached graph of _forward().

        Key settings:
        - cache_compile (torch.npu.npugraph_ex.inference.cache_compile on an NPU) replaces
          torch.compile: the Dynamo result is cached, so the next start skips compiling
        - dynamic=False: fixed shapes; aclgraph has no dynamic shapes, and dynamic=True may still
          capture one aclgraph per shape
        - cache_dir: where the cache goes (npugraph_ex's default: .torchair_cache), in a folder
          keyed on your model's code and state shapes and on the torch_npu and CANN releases
          (keyed()); clear it after new input shapes
        - options: the npugraph_ex options (NPUGRAPH_EX_OPTIONS) on an NPU, none off NPU
        - _forward() must compile as one graph, once: no RNG ops, no backward, no recompiles
          (a change of the NPU deterministic level recompiles too)
        """
        return self.cached_forward(*dummy_input)

    # Dynamo traces this method: a mutation tester's dispatch around it would break the graph.
    def _forward(self, *dummy_input: Any) -> Any:  # pragma: no mutate block
        return self.model(*dummy_input)


class DecodeSteps(torch.nn.Module):
    """Your model's decode step behind cache_compile, one cached method per capture size.

    A recompile deletes a cache_compile cache, so each static shape gets a method of its own, as
    npugraph_ex's docs do with cached_prompt and cached_decode: decode_batch1, decode_batch2, ...
    Each is a copy of one function under its own name, so each is its own code to Dynamo (one
    graph, never a recompile of another size's) and its own folder in the cache.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def step(self, *dummy_input: Any) -> Any:
        return self.model(*dummy_input)

    def method(self, size: int) -> Callable[..., Any]:
        """step() as a method named decode_batch<size>."""
        name = f"decode_batch{size}"
        code = DecodeSteps.step.__code__.replace(co_name=name, co_qualname=f"DecodeSteps.{name}")
        return types.MethodType(types.FunctionType(code, globals()), self)  # named by its code


def cached_steps(
    model: torch.nn.Module,
    sizes: tuple[int, ...],
    cache_dir: str | None = CACHE_DIR,
    **ranks: int,
) -> dict[int, Callable[..., Any]]:
    """The decode step of `model` behind cache_compile for each capture size, by size."""
    steps, folder = DecodeSteps(model), keyed(cache_dir, model)
    return {
        size: cache_compile(steps.method(size), dynamic=False, cache_dir=folder, **ranks)
        for size in sizes
    }
