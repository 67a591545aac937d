{%- set cache = cookiecutter.mode == "cache_compile" -%}
"""Minimal reproducible example: one graph-mode inference step of {{ cookiecutter.model_class }}.

Run it with `python -m {{ cookiecutter.package_name }}.mre`. On an Ascend NPU it uses npugraph_ex;
elsewhere the aot_eager stand-in, and the report says which ran and why.
"""

import time

import torch

from .backend import select_backend
from .model import INPUT_SHAPE, {{ cookiecutter.model_class }}
from .report import print_report


def infer_one_step() -> torch.Tensor:
    """
{%- if cache %}
    One inference step of {{ cookiecutter.model_class }} through its cache_compile graph.

    Key settings:
    - cache_compile instead of torch.compile: {{ cookiecutter.model_class }}.forward() runs the cached
      graph of _forward() (its docstring lists dynamic=False, cache_dir and the cache rules); the first
      run writes the cache, later runs load it
    - config = backend.options: the npugraph_ex options cache_compile uses (None off NPU)
{%- else %}
    One inference step of {{ cookiecutter.model_class }} in npugraph_ex graph mode.

    Key settings:
    - backend="npugraph_ex": capture & replay moves task dispatch onto the device and cuts host
      overhead; off NPU the aot_eager stand-in checks the same graph ($NPUGRAPH_BACKEND overrides)
    - fullgraph=True: capture the whole model; a graph break is an error, not a silent split
    - dynamic=False: fixed shapes; aclgraph has no dynamic shapes, and dynamic=True may still
      capture one aclgraph per shape
    - options=config: the npugraph_ex options, each explained in backend.NPUGRAPH_EX_OPTIONS
      (None off NPU: the stand-in takes none)
{%- endif %}
    - .eval() and torch.no_grad(): inference only, no autograd state in the graph
    - torch.manual_seed(0): the same weights and input on every run, so runs can be compared
    """
    torch.manual_seed(0)
    backend = select_backend()
    config = backend.options
    model = {{ cookiecutter.model_class }}().to(backend.device).eval()
{%- if not cache %}
    compiled_model = torch.compile(
        model,
        backend=backend.name,
        fullgraph=True,
        dynamic=False,
        options=config,
    )
{%- endif %}
    dummy_input = torch.randn(INPUT_SHAPE).to(backend.device)
    started = time.perf_counter()
    with torch.no_grad():
        output = {{ "model" if cache else "compiled_model" }}(dummy_input)
    print_report(backend, config, dummy_input, output, started)
    return output


if __name__ == "__main__":
    infer_one_step()
