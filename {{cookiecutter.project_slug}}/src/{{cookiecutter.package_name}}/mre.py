{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
{%- set step = "decode step" if decode else "inference step" -%}
"""Minimal reproducible example: one graph-mode {{ step }} of the model in model.py.

`python -m {{ cookiecutter.package_name }}.mre` runs it{{ " as one rank; `torchrun --nproc-per-node 2 -m " ~ cookiecutter.package_name ~ ".mre` as two" if tp else "" }} and prints what ran and why.
`python -m {{ cookiecutter.package_name }} export` writes it, with your model, as one file for a bug report.
"""

import torch
{%- if tp %}
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import parallelize_module
{%- endif %}

from .model import build_model, example_inputs{{ ", parallel_plan" if tp else "" }}
from .toolkit.backend import select_backend
{%- if cache %}
from .toolkit.compile_cache import CACHE_DIR, keyed
{%- endif %}
{%- if tp %}
from .toolkit.parallel import tensor_parallel
{%- endif %}
from .toolkit.report import report
{%- if cache %}


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
{%- if tp %}
                global_rank=dist.get_rank(),
                tp_rank=dist.get_rank(),
{%- endif %}
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
{%- endif %}


def infer_one_step():
    """
    One {{ step }} of build_model() in npugraph_ex graph mode.

    Key settings:
{%- if cache %}
    - cache_compile instead of torch.compile: the compiled graph is cached on disk (cache_dir),
      so the next start loads it instead of compiling
{%- else %}
    - backend="npugraph_ex": capture & replay moves task dispatch onto the device (off an NPU the
      aot_eager stand-in compiles the same graph)
    - fullgraph=True: the whole model is one graph; a graph break is an error
{%- endif %}
    - dynamic=False: fixed shapes; aclgraph has none, and dynamic=True may capture one per shape
    - options=config: the npugraph_ex options (frozen_parameter: the weights' addresses are fixed;
      clone_output: each output is a copy the next replay cannot overwrite)
{%- if decode %}
    - the prompt runs eagerly (prefill) and fills the KV cache; the graph is the decode step, on
      input_pos as a tensor, so the next position is new data, not a new graph
{%- endif %}
{%- if tp %}
    - parallelize_module(..., parallel_plan(ranks)): each rank keeps its slice of every layer, and
      the row-parallel layers all-reduce, so the output equals one device's
{%- endif %}
    - torch.manual_seed(0), .eval(), torch.no_grad(): the same weights and inputs on every run,
      inference only
    """
    torch.manual_seed(0)
    backend = select_backend()
    config = backend.options
    model = build_model().to(backend.device).eval()
{%- if tp %}
    mesh = init_device_mesh(backend.device, (dist.get_world_size(),))
    model = parallelize_module(model, mesh, parallel_plan(mesh.size()))
{%- endif %}
{%- if cache %}
    compiled_model = CachedModel(model, backend, config)
{%- else %}
    compiled_model = torch.compile(
        model,
        backend=backend.name,
        fullgraph=True,
        dynamic=False,
        options=config,
    )
{%- endif %}
{%- if decode %}
    (prompt,) = example_inputs()
    prompt = prompt.to(backend.device)
    with torch.no_grad():
        prefill = model(prompt, torch.arange(prompt.shape[1], device=backend.device))
        logits = getattr(prefill, "logits", prefill)
        token = logits[:, -1:].argmax(-1)
        dummy_input = (token, torch.tensor([prompt.shape[1]], device=backend.device))
        output = compiled_model(*dummy_input)
{%- else %}
    dummy_input = [x.to(backend.device) if torch.is_tensor(x) else x for x in example_inputs()]
    with torch.no_grad():
        output = compiled_model(*dummy_input)
{%- endif %}
    return output


if __name__ == "__main__":
{%- if tp %}
    with tensor_parallel(select_backend().device) as ranks:
        report(infer_one_step, example_inputs, ranks)
{%- else %}
    report(infer_one_step, example_inputs)
{%- endif %}
