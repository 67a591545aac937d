"""Minimal reproducible example: one graph-mode inference step of the model in model.py.

`python -m parallel_cache_project.mre` runs it as one rank; `torchrun --nproc-per-node 2 -m parallel_cache_project.mre` as two and prints what ran and why.
`python -m parallel_cache_project export` writes it, with your model, as one file for a bug report.
"""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import parallelize_module

from .model import build_model, example_inputs, parallel_plan
from .toolkit.backend import select_backend
from .toolkit.compile_cache import CACHE_DIR, keyed
from .toolkit.parallel import tensor_parallel
from .toolkit.report import report


class CachedModel(torch.nn.Module):
    """Your model behind cache_compile: forward() runs the cached graph of _forward()."""

    def __init__(self, model, backend, config):
        super().__init__()
        self.model = model
        if backend.is_npugraph_ex:
            self.cached_forward = torch.npu.npugraph_ex.inference.cache_compile(
                self._forward,
                dynamic=False,
                cache_dir=keyed(CACHE_DIR, model),
                options=config,
                global_rank=dist.get_rank(),
                tp_rank=dist.get_rank(),
            )
        else:  # off an NPU: the stand-in compiles the same graph, and nothing is cached
            self.cached_forward = torch.compile(
                self._forward,
                backend=backend.name,
                fullgraph=True,
                dynamic=False,
                options=config,
            )

    def forward(self, *dummy_input):
        return self.cached_forward(*dummy_input)

    def _forward(self, *dummy_input):
        return self.model(*dummy_input)


def infer_one_step():
    """
    One inference step of build_model() in npugraph_ex graph mode.

    Key settings:
    - cache_compile instead of torch.compile: the compiled graph is cached on disk (cache_dir),
      so the next start loads it instead of compiling
    - dynamic=False: fixed shapes; aclgraph has none, and dynamic=True may capture one per shape
    - options=config: the npugraph_ex options (frozen_parameter: the weights' addresses are fixed;
      clone_output: each output is a copy the next replay cannot overwrite)
    - parallelize_module(..., parallel_plan(ranks)): each rank keeps its slice of every layer, and
      the row-parallel layers all-reduce, so the output equals one device's
    - torch.manual_seed(0), .eval(), torch.no_grad(): the same weights and inputs on every run,
      inference only
    """
    torch.manual_seed(0)
    backend = select_backend()
    config = backend.options
    model = build_model().to(backend.device).eval()
    mesh = init_device_mesh(backend.device, (dist.get_world_size(),))
    model = parallelize_module(model, mesh, parallel_plan(mesh.size()))
    compiled_model = CachedModel(model, backend, config)
    dummy_input = [x.to(backend.device) if torch.is_tensor(x) else x for x in example_inputs()]
    with torch.no_grad():
        output = compiled_model(*dummy_input)
    return output


if __name__ == "__main__":
    with tensor_parallel(select_backend().device) as ranks:
        report(infer_one_step, example_inputs, ranks)
