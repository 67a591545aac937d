{%- set cache = cookiecutter.mode == "cache_compile" -%}
"""Minimal reproducible example: one graph-mode inference step of the model in model.py.

Run it with `python -m {{ cookiecutter.package_name }}.mre`. On an Ascend NPU it uses npugraph_ex;
elsewhere the aot_eager stand-in, and the report says which ran and why. `python -m
{{ cookiecutter.package_name }} export` turns this file, your model and everything it imports into
one file for a bug report.
"""

import torch

from .model import build_model, example_inputs
from .toolkit.backend import select_backend
{%- if cache %}
from .toolkit.compile_cache import CACHE_DIR, CachedModel
{%- endif %}
from .toolkit.contract import to_device
from .toolkit.report import first_call, print_report


def infer_one_step():
    """
{%- if cache %}
    One inference step of build_model() through its cache_compile graph.

    Key settings:
    - cache_compile instead of torch.compile: CachedModel.forward() runs the cached graph of its
      _forward(), which calls your model (its docstring lists dynamic=False, cache_dir and the
      cache rules); the first run writes the cache, later runs load it
    - cache_dir=CACHE_DIR: the cache folder, relative to where you run
    - config = backend.options: the npugraph_ex options cache_compile uses (None off NPU)
{%- else %}
    One inference step of build_model() in npugraph_ex graph mode.

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
    - torch.manual_seed(0), then build_model(), then example_inputs(): the same weights and
      inputs on every run, so runs compare and anyone can rebuild the eager reference
    """
    torch.manual_seed(0)
    backend = select_backend()
    config = backend.options
    model = build_model().to(backend.device).eval()
{%- if cache %}
    compiled_model = CachedModel(model, cache_dir=CACHE_DIR)
{%- else %}
    compiled_model = torch.compile(
        model,
        backend=backend.name,
        fullgraph=True,
        dynamic=False,
        options=config,
    )
{%- endif %}
    dummy_input = to_device(example_inputs(), backend.device)
    with torch.no_grad(), first_call(backend) as call:
        output = compiled_model(*dummy_input)
    print_report(backend, config, dummy_input, output, call)
    return output


if __name__ == "__main__":
    infer_one_step()
