"""The decode step in graph mode, built as generation runs it: generate builds it here, and bench
times what it builds, so both run the same graphs.

A decode project's own: the template leaves this file out of forward projects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..model import build_model
from . import project
from .decode import DecodeGraphs, limits

if TYPE_CHECKING:
    from .backend import Backend
    from .parallel import Ranks


def build(backend: Backend, ranks: Ranks | None = None) -> tuple[torch.nn.Module, DecodeGraphs]:
    """The model, seeded as in the MRE, and its decode step in graph mode at every capture size.

    With tensor parallelism, `ranks` is this process's rank: the model is sharded over the ranks
    by parallel_plan(), and runs on the rank's device.
    """
    torch.manual_seed(0)
    if ranks is None:
        device = backend.device
        model = build_model().to(device).eval()
    else:
        # Only a tensor-parallel project's model.py has a plan.
        from ..model import parallel_plan

        device = ranks.device
        model = ranks.shard(build_model().to(device).eval(), parallel_plan(ranks.size))
    bounds = limits()
    if project.CACHE_COMPILE:
        from .compile_cache import cached_steps

        # One cached method per capture size; with tensor parallelism each rank writes and loads
        # its own cache.
        keywords = {} if ranks is None else ranks.cache_keywords()
        compiled = cached_steps(
            model, bounds.capture_sizes, cache_dir=project.CACHE_DIR, **keywords
        )
    else:
        compiled_model = torch.compile(
            model,
            backend=backend.name,
            fullgraph=True,
            dynamic=False,
            options=backend.options,
        )
        # One compiled model: Dynamo compiles one graph for each batch size it meets.
        compiled = dict.fromkeys(bounds.capture_sizes, compiled_model)
    return model, DecodeGraphs(model, compiled, bounds, device)
