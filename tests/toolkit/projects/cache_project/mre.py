"""Minimal reproducible example: one graph-mode inference step of the model in model.py.

`python -m cache_project.mre` runs it and prints what ran and why.
`python -m cache_project export` writes it, with your model, as one file for a bug report.
"""

import torch

from .model import build_model, example_inputs
from .toolkit.backend import select_backend
from .toolkit.compile_cache import CACHE_DIR, keyed
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
    - torch.manual_seed(0), .eval(), torch.no_grad(): the same weights and inputs on every run,
      inference only
    """
    torch.manual_seed(0)
    backend = select_backend()
    config = backend.options
    model = build_model().to(backend.device).eval()
    compiled_model = CachedModel(model, backend, config)
    dummy_input = [x.to(backend.device) if torch.is_tensor(x) else x for x in example_inputs()]
    with torch.no_grad():
        output = compiled_model(*dummy_input)
    return output


if __name__ == "__main__":
    report(infer_one_step, example_inputs)
