{%- set in_place = cookiecutter.custom_op == "in_place" -%}
{%- set cache_update = in_place and cookiecutter.workload == "decode" -%}
"""What npu::{{ cookiecutter.op_name }} computes, in plain torch: keep it in step with your Ascend C kernel.

Off NPU (or before torch_npu is rebuilt with the op) the development stand-in runs this as the
op's kernel, so the Meta function, the model and the compile path run on any machine.
"""

import torch
{%- if cache_update %}


def reference(cache: torch.Tensor, input_pos: torch.Tensor, update: torch.Tensor) -> None:
    """The KV-cache update, in place: cache[:batch, :, input_pos] = update.

    cache (max_batch, heads, max_seq_len, head_dim) gets update (batch, heads, n, head_dim) at
    positions input_pos (n,) of rows [:batch]; other rows and positions keep their values.
    """
    cache[: update.shape[0], :, input_pos] = update
{%- elif in_place %}


def reference(x: torch.Tensor, y: torch.Tensor) -> None:
    """x += y, in place (a fused residual add)."""
    x.add_(y)
{%- else %}


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x + y in a new tensor (a fused residual add)."""
    return x + y
{%- endif %}
