{%- set in_place = cookiecutter.custom_op == "in_place" -%}
{%- set cache_update = in_place and cookiecutter.workload == "decode" -%}
"""Meta function of the op-plugin operator npu::{{ cookiecutter.op_name }}: its output's shape and dtype, for graph mode.

In production this function belongs in op-plugin's op_plugin/python/meta/_meta_registrations.py
(then delete it here); it sits inline so the project and its MRE are self-contained. It must be
registered before torch.compile runs, which importing this module (model.py does) ensures.
npugraph_ex needs nothing more: aclgraph captures and replays the eager kernel, no converter.
"""

import torch
from torch.library import Library, impl

from .op_reference import reference
from .toolkit.op_plugin import define

# Off NPU, or before torch_npu is rebuilt with the op, this defines npu::{{ cookiecutter.op_name }} from the
# schema in op_plugin_functions.yaml, with op_reference.py's kernel for the CPU: a Meta function can
# only be registered for an existing op. Kept: the definition lasts as long as its Library.
defined = define(reference)

m = Library("npu", "IMPL", "Meta")


@impl(m, "{{ cookiecutter.op_name }}")
{%- if cache_update %}
def {{ cookiecutter.op_name }}_meta(
    cache: torch.Tensor,
    input_pos: torch.Tensor,
    update: torch.Tensor,
) -> None:
    """The op writes into cache and returns nothing: there is no output to describe."""
{%- elif in_place %}
def {{ cookiecutter.op_name }}_meta(x: torch.Tensor, y: torch.Tensor) -> None:
    """The op writes into x and returns nothing: there is no output to describe."""
{%- else %}
def {{ cookiecutter.op_name }}_meta(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Same shape and dtype as x, on the meta device: empty_like, never a real CPU tensor."""
    return torch.empty_like(x)
{%- endif %}
