{%- set op = "torch.ops." ~ cookiecutter.__op_ns ~ "." ~ cookiecutter.__op -%}
"""Your model, behind the contract every tool of this project follows.

- `build_model()` returns the torch.nn.Module to run, built with whatever arguments it needs.
- `example_inputs()` returns the positional inputs of one inference step, as a tuple, on the CPU,
  of any dtype and number (token ids are a LongTensor); the project moves them to the device.

The MRE seeds torch.manual_seed(0), then calls build_model(), then example_inputs(). Replace
everything below with your own model; sibling modules of this file are fine (README: "Your own
model"). The sample is a small pre-norm transformer block.
"""

import torch
import torch.nn.functional as F
from torch import nn
{%- if cookiecutter.custom_op != "none" %}

# Registers {{ op }} (and its {{ "Meta" if cookiecutter.op_registration == "op_plugin" else "fake" }} function) before anything compiles.
from . import {{ "meta_registrations" if cookiecutter.op_registration == "op_plugin" else "custom_op" }}  # noqa: F401
{%- endif %}

INPUT_SHAPE = ({{ cookiecutter.input_shape.replace(" ", "").split(",") | map("int") | join(", ") }})
"""The sample's input shape: (..., sequence, hidden)."""


class {{ cookiecutter.model_class }}(nn.Module):
    """Self-attention and an MLP, each behind an RMSNorm and a residual connection."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.mlp_norm = nn.RMSNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden, bias=False)
        self.down = nn.Linear(4 * hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.attn_norm(x)).chunk(3, dim=-1)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True))
{%- if cookiecutter.custom_op == "in_place" %}
        mlp = self.down(F.silu(self.up(self.mlp_norm(x))))
        # The custom op: x += mlp, in place.
        {{ op }}(x, mlp)
        return x
{%- elif cookiecutter.custom_op == "out_of_place" %}
        mlp = self.down(F.silu(self.up(self.mlp_norm(x))))
        # The custom op: x + mlp.
        return {{ op }}(x, mlp)
{%- else %}
        return x + self.down(F.silu(self.up(self.mlp_norm(x))))
{%- endif %}


def build_model() -> nn.Module:
    """The model the MRE, the tests and every tool run."""
    return {{ cookiecutter.model_class }}(hidden=INPUT_SHAPE[-1])


def example_inputs() -> tuple[torch.Tensor, ...]:
    """The positional inputs of one inference step, on the CPU."""
    return (torch.randn(INPUT_SHAPE),)
