"""cache_compile that runs anywhere: npugraph_ex's compile cache on an NPU, the stand-in elsewhere."""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from .backend import select_backend

log = logging.getLogger(__name__)


def cache_compile(
    method: Callable[..., torch.Tensor],
    *,
    dynamic: bool = False,
    cache_dir: str | None = None,
) -> Callable[..., torch.Tensor]:
    """Wrap a bound nn.Module method like torch.npu.npugraph_ex.inference.cache_compile.

    On a usable NPU this is that call: the first run compiles and writes the cache under
    `cache_dir`, later starts load it and skip Dynamo; the options are backend.NPUGRAPH_EX_OPTIONS.
    Elsewhere `method` is compiled with the
    stand-in backend (fullgraph=True), which checks the same graph but writes no cache.
    """
    backend = select_backend()
    if backend.is_npugraph_ex:
        return torch.npu.npugraph_ex.inference.cache_compile(
            method, dynamic=dynamic, cache_dir=cache_dir, options=backend.options
        )
    log.warning(
        "cache_compile: %s compiles %s here, and no persistent cache is written",
        backend.name,
        method.__qualname__,
    )
    return torch.compile(method, backend=backend.name, fullgraph=True, dynamic=dynamic)
