"""What npu::my_op computes, in plain torch: keep it in step with your Ascend C kernel.

Off NPU (or before torch_npu is rebuilt with the op) the development stand-in runs this as the
op's kernel, so the Meta function, the model and the compile path run on any machine.
"""

import torch


def reference(x: torch.Tensor, y: torch.Tensor) -> None:
    """x += y, in place (a fused residual add)."""
    x.add_(y)
