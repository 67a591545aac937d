{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set op = "torch.ops." ~ cookiecutter.__op_ns ~ "." ~ cookiecutter.__op -%}
"""The model the MRE runs: a small pre-norm transformer block.

Put your own model here. Graph mode captures forward() whole, so keep it free of graph breaks:
no .item(), print() or Python branches on tensor values (tests/test_graph.py shows the error).
"""

import torch
import torch.nn.functional as F
from torch import nn
{%- if cache or cookiecutter.custom_op != "none" %}
{% endif %}
{%- if cookiecutter.custom_op != "none" %}
# Registers {{ op }} (and its {{ "Meta" if cookiecutter.op_registration == "op_plugin" else "fake" }} function) before anything compiles.
from . import {{ "meta_registrations" if cookiecutter.op_registration == "op_plugin" else "custom_op" }}  # noqa: F401
{%- endif %}
{%- if cache %}
from .compile_cache import cache_compile
{%- endif %}

INPUT_SHAPE = ({{ cookiecutter.input_shape.replace(" ", "").split(",") | map("int") | join(", ") }})
"""The shape the MRE feeds the model: (..., sequence, hidden)."""
{%- if cache %}

CACHE_DIR = {{ cookiecutter.cache_dir | tojson }}
"""Where cache_compile keeps compiled graphs, relative to the working directory."""
{%- endif %}


class {{ cookiecutter.model_class }}(nn.Module):
    """Self-attention and an MLP, each behind an RMSNorm and a residual connection."""

    def __init__(self, hidden: int = INPUT_SHAPE[-1]) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.mlp_norm = nn.RMSNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden, bias=False)
        self.down = nn.Linear(4 * hidden, hidden, bias=False)
{%- if cache %}
        self.cached_forward = cache_compile(
            self._forward,
            dynamic=False,
            cache_dir=CACHE_DIR,
        )

    def forward(self, dummy_input: torch.Tensor) -> torch.Tensor:
        """
        Run the cached graph of _forward().

        Key settings:
        - cache_compile (torch.npu.npugraph_ex.inference.cache_compile on an NPU) replaces
          torch.compile: the Dynamo result is cached, so the next start skips compiling
        - dynamic=False: fixed shapes; aclgraph has no dynamic shapes, and dynamic=True may still
          capture one aclgraph per shape
        - cache_dir=CACHE_DIR: where the cache goes (npugraph_ex's default: .torchair_cache);
          it is keyed on str(model) and the options, not on your code: clear it after editing
          _forward() or upgrading CANN
        - options: the npugraph_ex options (NPUGRAPH_EX_OPTIONS) on an NPU, none off NPU
        - _forward() must compile as one graph, once: no RNG ops, no backward, no recompiles
        """
        return self.cached_forward(dummy_input)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
{%- else %}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
{%- endif %}
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
