"""Minimal reproducible example: one graph-mode inference step of the model in model.py.

`python -m plugin_project.mre` runs it and prints what ran and why.
`python -m plugin_project export` writes it, with your model, as one file for a bug report.
"""

import torch

from .model import build_model, example_inputs
from .toolkit.backend import select_backend
from .toolkit.report import report


def infer_one_step():
    """
    One inference step of build_model() in npugraph_ex graph mode.

    Key settings:
    - backend="npugraph_ex": capture & replay moves task dispatch onto the device (off an NPU the
      aot_eager stand-in compiles the same graph)
    - fullgraph=True: the whole model is one graph; a graph break is an error
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
    compiled_model = torch.compile(
        model,
        backend=backend.name,
        fullgraph=True,
        dynamic=False,
        options=config,
    )
    dummy_input = [x.to(backend.device) if torch.is_tensor(x) else x for x in example_inputs()]
    with torch.no_grad():
        output = compiled_model(*dummy_input)
    return output


if __name__ == "__main__":
    report(infer_one_step, example_inputs)
