{%- set in_place = cookiecutter.custom_op == "in_place" -%}
{%- set cache_update = in_place and cookiecutter.workload == "decode" -%}
{%- set op = cookiecutter.__op -%}
{%- set stem = cookiecutter.__op.rstrip("_") -%}
"""The custom operator {{ cookiecutter.__op_ns }}::{{ op }}, registered with torch.library for graph mode.

Graph mode traces the op through its fake function (shapes and dtypes only), so that is
registered too. On an NPU your kernel runs (the marked spot below); everywhere else the plain-torch
reference does, so the model, the fake function and the compile path are tested on any machine.
The model calls it as torch.ops.{{ cookiecutter.__op_ns }}.{{ op }}.
"""

import torch

from .toolkit.backend import npu_status

OP_NAME = "{{ cookiecutter.__op_ns }}::{{ op }}"
{%- if cache_update %}


def reference(cache: torch.Tensor, input_pos: torch.Tensor, update: torch.Tensor) -> None:
    """What the op computes, in plain torch: cache[:batch, :, input_pos] = update, in place.

    cache (max_batch, heads, max_seq_len, head_dim) gets update (batch, heads, n, head_dim) at
    positions input_pos (n,) of rows [:batch]; other rows and positions keep their values.
    """
    cache[: update.shape[0], :, input_pos] = update


# Modelled on torch_npu's scatter_update_(self, indices, updates, axis), but returning None: graph
# mode's automatic functionalization needs an in-place custom op to return no mutated input.
# device_types=None: this body is the kernel on every device; an NPU kernel below takes over there.
@torch.library.custom_op(OP_NAME, mutates_args=("cache",), device_types=None)
def {{ op }}(
    cache: torch.Tensor,
    input_pos: torch.Tensor,
    update: torch.Tensor,
) -> None:
    reference(cache, input_pos, update)


@{{ op }}.register_fake
def {{ stem }}_fake(
    cache: torch.Tensor,
    input_pos: torch.Tensor,
    update: torch.Tensor,
) -> None:
    """Nothing to describe: the op writes into cache and returns nothing.

    torch would derive this trivial fake function itself, for an op that only mutates; written
    out, it is where shape checks go (torch._check), which then fail at trace time.
    """
{%- elif in_place %}


def reference(x: torch.Tensor, y: torch.Tensor) -> None:
    """What the op computes, in plain torch: x += y, in place (a fused residual add)."""
    x.add_(y)


# device_types=None: this body is the kernel on every device; an NPU kernel below takes over there.
# mutates_args names the argument written in place; the op returns None, never the mutated input.
@torch.library.custom_op(OP_NAME, mutates_args=("x",), device_types=None)
def {{ op }}(x: torch.Tensor, y: torch.Tensor) -> None:
    reference(x, y)


@{{ op }}.register_fake
def {{ stem }}_fake(x: torch.Tensor, y: torch.Tensor) -> None:
    """Nothing to describe: the op writes into x and returns nothing."""
{%- else %}


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """What the op computes, in plain torch: x + y in a new tensor (a fused residual add)."""
    return x + y


# device_types=None: this body is the kernel on every device; an NPU kernel below takes over there.
@torch.library.custom_op(OP_NAME, mutates_args=(), device_types=None)
def {{ op }}(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return reference(x, y)


@{{ op }}.register_fake
def {{ stem }}_fake(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The output's shape, dtype and device, without computing it: like x."""
    return torch.empty_like(x)
{%- endif %}


# device_types="npu" only exists once torch_npu has loaded (before that, naming it raises), so the
# NPU kernel is registered only where an NPU is usable.
if npu_status()[0]:

    @{{ op }}.register_kernel("npu")
{%- if cache_update %}
    def {{ stem }}_npu(
        cache: torch.Tensor,
        input_pos: torch.Tensor,
        update: torch.Tensor,
    ) -> None:
        # <your NPU implementation: e.g. call your Ascend C kernel through its aclnn binding>
        reference(cache, input_pos, update)
{%- else %}
    def {{ stem }}_npu(x: torch.Tensor, y: torch.Tensor) -> {{ "None" if in_place else "torch.Tensor" }}:
        # <your NPU implementation: e.g. call your Ascend C kernel through its aclnn binding>
        return reference(x, y)
{%- endif %}
