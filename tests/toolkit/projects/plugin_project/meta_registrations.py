"""Meta function of the op-plugin operator npu::my_op: its output's shape and dtype, for graph mode.

In production this function belongs in op-plugin's op_plugin/python/meta/_meta_registrations.py
(then delete it here); it sits inline so the project and its MRE are self-contained. It must be
registered before torch.compile runs, which importing this module (model.py does) ensures.
npugraph_ex needs nothing more: aclgraph captures and replays the eager kernel, no converter.
"""

import torch
from torch.library import Library, impl

from .op_reference import reference
from .toolkit.op_plugin import define

# Off NPU, or before torch_npu is rebuilt with the op, this defines npu::my_op from the
# schema in op_plugin_functions.yaml, with op_reference.py's kernel for the CPU: a Meta function can
# only be registered for an existing op. Kept: the definition lasts as long as its Library.
defined = define(reference)

m = Library("npu", "IMPL", "Meta")


@impl(m, "my_op")
def my_op_meta(x: torch.Tensor, y: torch.Tensor) -> None:
    """The op writes into x and returns nothing: there is no output to describe."""
