"""Minimal reproducible example: one graph-mode decode step of the model in model.py.

`python -m decode_parallel_project.mre` runs it as one rank; `torchrun --nproc-per-node 2 -m decode_parallel_project.mre` as two and prints what ran and why.
`python -m decode_parallel_project export` writes it, with your model, as one file for a bug report.
"""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import parallelize_module

from .model import build_model, example_inputs, parallel_plan
from .toolkit.backend import select_backend
from .toolkit.parallel import tensor_parallel
from .toolkit.report import report


def infer_one_step():
    """
    One decode step of build_model() in npugraph_ex graph mode.

    Key settings:
    - backend="npugraph_ex": capture & replay moves task dispatch onto the device (off an NPU the
      aot_eager stand-in compiles the same graph)
    - fullgraph=True: the whole model is one graph; a graph break is an error
    - dynamic=False: fixed shapes; aclgraph has none, and dynamic=True may capture one per shape
    - options=config: the npugraph_ex options (frozen_parameter: the weights' addresses are fixed;
      clone_output: each output is a copy the next replay cannot overwrite)
    - the prompt runs eagerly (prefill) and fills the KV cache; the graph is the decode step, on
      input_pos as a tensor, so the next position is new data, not a new graph
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
    compiled_model = torch.compile(
        model,
        backend=backend.name,
        fullgraph=True,
        dynamic=False,
        options=config,
    )
    (prompt,) = example_inputs()
    prompt = prompt.to(backend.device)
    with torch.no_grad():
        prefill = model(prompt, torch.arange(prompt.shape[1], device=backend.device))
        logits = getattr(prefill, "logits", prefill)
        token = logits[:, -1:].argmax(-1)
        dummy_input = (token, torch.tensor([prompt.shape[1]], device=backend.device))
        output = compiled_model(*dummy_input)
    return output


if __name__ == "__main__":
    with tensor_parallel(select_backend().device) as ranks:
        report(infer_one_step, example_inputs, ranks)
