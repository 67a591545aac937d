import torch
from torch import nn

from .layers import FeedForward


class Tower(nn.Module):
    """A stack of feed-forward blocks; returns a dict, as many real models do."""

    def __init__(self, hidden: int, depth: int, expansion: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(FeedForward(hidden, expansion) for _ in range(depth))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        for block in self.blocks:
            x = block(x)
        hidden = self.norm(x)
        return {"hidden": hidden, "pooled": hidden.mean(dim=1)}


def build_model() -> nn.Module:
    return Tower(hidden=48, depth=3, expansion=2)


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(4, 10, 48),)
