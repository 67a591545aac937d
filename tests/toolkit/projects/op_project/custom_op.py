"""The custom operator op_project::my_op_, registered with torch.library for graph mode.

Graph mode traces the op through its fake function (shapes and dtypes only), so that is
registered too. On an NPU your kernel runs (the marked spot below); everywhere else the plain-torch
reference does, so the model, the fake function and the compile path are tested on any machine.
The model calls it as torch.ops.op_project.my_op_.
"""

import torch

from .toolkit.backend import npu_status

OP_NAME = "op_project::my_op_"


def reference(x: torch.Tensor, y: torch.Tensor) -> None:
    """What the op computes, in plain torch: x += y, in place (a fused residual add)."""
    x.add_(y)


# device_types=None: this body is the kernel on every device; an NPU kernel below takes over there.
# mutates_args names the argument written in place; the op returns None, never the mutated input.
@torch.library.custom_op(OP_NAME, mutates_args=("x",), device_types=None)
def my_op_(x: torch.Tensor, y: torch.Tensor) -> None:
    reference(x, y)


@my_op_.register_fake
def my_op_fake(x: torch.Tensor, y: torch.Tensor) -> None:
    """Nothing to describe: the op writes into x and returns nothing."""


# device_types="npu" only exists once torch_npu has loaded (before that, naming it raises), so the
# NPU kernel is registered only where an NPU is usable.
if npu_status()[0]:

    @my_op_.register_kernel("npu")
    def my_op_npu(x: torch.Tensor, y: torch.Tensor) -> None:
        # <your NPU implementation: e.g. call your Ascend C kernel through its aclnn binding>
        return reference(x, y)
