"""Your model, behind the contract every tool of this project follows.

- `build_model()` returns the torch.nn.Module to run, built with whatever arguments it needs.
- `example_inputs()` returns the positional inputs of one inference step, as a tuple, on the CPU,
  of any dtype and number (token ids are a LongTensor); the project moves them to the device.
- `parallel_plan(world_size)` returns how parallelize_module shards build_model() across the
  ranks of a torchrun job: submodule names to ColwiseParallel / RowwiseParallel.
- Optional: `TOLERANCES`, how far graph mode may be from eager per dtype, e.g.
  `{torch.bfloat16: {"rtol": 5e-2, "atol": 1e-1}}` (README, section 'Tolerances').

The MRE seeds torch.manual_seed(0), then calls build_model(), then example_inputs(). Replace
everything below with your own model; sibling modules of this file are fine (README, section
'Your own model'). The sample is a small pre-norm transformer block.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel

INPUT_SHAPE = (2, 8, 32)
"""The sample's input shape: (..., sequence, hidden)."""
HEADS = 8
"""The sample's attention heads: tensor parallelism splits them across ranks."""


class TinyBlock(nn.Module):
    """Multi-head self-attention and an MLP, each behind an RMSNorm and a residual connection."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.head_dim = hidden // heads
        self.attn_norm = nn.RMSNorm(hidden)
        # Separate projections, not one fused qkv: each splits by heads on its own.
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.mlp_norm = nn.RMSNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden, bias=False)
        self.down = nn.Linear(4 * hidden, hidden, bias=False)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(..., sequence, heads * head_dim) -> (..., heads, sequence, head_dim)."""
        # -1, not HEADS: under tensor parallelism a rank holds only its share of the heads.
        return x.unflatten(-1, (-1, self.head_dim)).transpose(-3, -2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.attn_norm(x)
        q, k, v = (self.split_heads(proj(h)) for proj in (self.q_proj, self.k_proj, self.v_proj))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(attention.transpose(-3, -2).flatten(-2))
        return x + self.down(F.silu(self.up(self.mlp_norm(x))))


def build_model() -> nn.Module:
    """The model the MRE, the tests and every tool run."""
    return TinyBlock(hidden=INPUT_SHAPE[-1], heads=HEADS)


def example_inputs() -> tuple[torch.Tensor, ...]:
    """The positional inputs of one inference step, on the CPU."""
    return (torch.randn(INPUT_SHAPE),)


def parallel_plan(world_size: int) -> dict[str, ParallelStyle]:
    """How parallelize_module shards build_model() across `world_size` ranks.

    Column-parallel projections in, row-parallel out (Megatron-style): each rank holds
    HEADS / world_size attention heads and a 1 / world_size slice of the MLP, and the row-parallel
    layers all-reduce, so every rank's output is the full one. Keys are submodule names of
    build_model(); `*` matches one part, e.g. "layers.*.q_proj".
    """
    if HEADS % world_size:
        raise ValueError(
            f"the sample's {HEADS} attention heads cannot be split across {world_size} ranks: "
            f"run a number of ranks that divides {HEADS}, or change HEADS in model.py"
        )
    return {
        "q_proj": ColwiseParallel(),
        "k_proj": ColwiseParallel(),
        "v_proj": ColwiseParallel(),
        "o_proj": RowwiseParallel(),
        "up": ColwiseParallel(),
        "down": RowwiseParallel(),
    }
