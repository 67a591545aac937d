{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
"""Minimal reproducible example: one graph-mode {{ "decode step" if decode else "inference step" }} of the model in model.py.

Run it with `python -m {{ cookiecutter.package_name }}.mre`
{%- if tp %} (one rank) or `torchrun --nproc-per-node 2 -m
{{ cookiecutter.package_name }}.mre` (two ranks, tensor parallel)
{%- endif %}. On an Ascend NPU it uses npugraph_ex;
elsewhere the aot_eager stand-in, and the report says which ran and why. `python -m
{{ cookiecutter.package_name }} export` turns this file, your model and everything it imports into
one file for a bug report.
"""

import torch

from .model import build_model, example_inputs{{ ", parallel_plan" if tp else "" }}
from .toolkit.backend import select_backend
{%- if cache %}
from .toolkit.compile_cache import CACHE_DIR, CachedModel
{%- endif %}
from .toolkit.contract import to_device
{%- if decode %}
from .toolkit.decode import first_step
{%- endif %}
{%- if tp %}
from .toolkit.parallel import tensor_parallel
{%- endif %}
from .toolkit.report import first_call, print_report


def infer_one_step():
    """
{%- if cache %}
    One {{ "decode step" if decode else "inference step" }} of build_model() through its cache_compile graph.

    Key settings:
    - cache_compile instead of torch.compile: CachedModel.forward() runs the cached graph of its
      _forward(), which calls your model (its docstring lists dynamic=False, cache_dir and the
      cache rules); the first run writes the cache, later runs load it
    - cache_dir=CACHE_DIR: the cache folder, relative to where you run; each version of your
      model's code gets a folder of its own in it
    - config: the npugraph_ex options cache_compile uses, backend.NPUGRAPH_EX_OPTIONS (None off
      NPU)
{%- else %}
    One {{ "decode step" if decode else "inference step" }} of build_model() in npugraph_ex graph mode.

    Key settings:
    - backend="npugraph_ex": capture & replay moves task dispatch onto the device and cuts host
      overhead; off NPU the aot_eager stand-in checks the same graph ($NPUGRAPH_BACKEND overrides)
    - fullgraph=True: capture the whole model; a graph break is an error, not a silent split
    - dynamic=False: fixed shapes; aclgraph has no dynamic shapes, and dynamic=True may still
      capture one aclgraph per shape
    - options=config: the npugraph_ex options, each explained in backend.NPUGRAPH_EX_OPTIONS
      (None off NPU: the stand-in takes none)
{%- endif %}
{%- if decode %}
    - first_step(model, prompt): the prompt runs eagerly (prefill) and fills the KV cache; the
      graph is the decode step that follows, as generation replays it for every new token
    - dummy_input = (tokens, input_pos): one new token per sequence at position input_pos, a
      tensor, so the next position is new data for the same graph, not a recompile
    - frozen_parameter=True (in config on an NPU): the weights and the cache buffers keep their
      addresses, so npugraph_ex takes them as fixed and never re-checks them per call; the cache
      is written in place inside the graph, which input_inplace_pass (default True) keeps in place
{%- endif %}
    - .eval() and torch.no_grad(): inference only, no autograd state in the graph
    - torch.manual_seed(0), then build_model(), then example_inputs(): the same weights and
      inputs on every run{{ " and every rank" if tp else "" }}, so runs compare and anyone can rebuild the
      eager reference
{%- if tp %}
    - tensor_parallel(backend.device): this process is one rank of the torchrun job (one rank without
      torchrun), on npu:<LOCAL_RANK> with hccl, or the CPU with gloo; the process group is
      destroyed on the way out, error or not
    - ranks.shard(model, parallel_plan(ranks.size)): parallelize_module over a DeviceMesh of all
      ranks; every rank builds the full model, the plan keeps its slice, and the row-parallel
      layers all-reduce, so the output equals one device's{{ "" if cache else "; the collectives are part of the one graph" }}
{%- if decode %}
    - KVCacheParallel in the plan: each rank's KV cache keeps only the heads the rank computes,
      which its prefill and decode step write in place; no collective touches it
{%- endif %}
{%- if cache %}
    - CachedModel(..., **ranks.cache_keywords()): global_rank and tp_rank, so each rank writes
      and loads its own cache
{%- endif %}
{%- endif %}
    """
    torch.manual_seed(0)
    backend = select_backend()
    config = backend.options
{%- if tp %}
    with tensor_parallel(backend.device) as ranks:
        model = ranks.shard(build_model().to(ranks.device).eval(), parallel_plan(ranks.size))
{%- if cache %}
        compiled_model = CachedModel(model, cache_dir=CACHE_DIR, **ranks.cache_keywords())
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
        (prompt,) = to_device(example_inputs(), ranks.device)
        with torch.no_grad():
            dummy_input = first_step(model, prompt)
            with first_call(backend) as call:
                output = compiled_model(*dummy_input)
{%- else %}
        dummy_input = to_device(example_inputs(), ranks.device)
        with torch.no_grad(), first_call(backend) as call:
            output = compiled_model(*dummy_input)
{%- endif %}
        print_report(backend, config, dummy_input, output, call, ranks)
{%- else %}
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
{%- if decode %}
    (prompt,) = to_device(example_inputs(), backend.device)
    with torch.no_grad():
        dummy_input = first_step(model, prompt)
        with first_call(backend) as call:
            output = compiled_model(*dummy_input)
{%- else %}
    dummy_input = to_device(example_inputs(), backend.device)
    with torch.no_grad(), first_call(backend) as call:
        output = compiled_model(*dummy_input)
{%- endif %}
    print_report(backend, config, dummy_input, output, call)
{%- endif %}
    return output


if __name__ == "__main__":
    infer_one_step()
