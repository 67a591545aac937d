import torch
from torch import nn


class MaskedPool(nn.Module):
    """Project each position, then average the positions the mask keeps."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        weights = mask.to(x.dtype).unsqueeze(-1)
        return (self.proj(x) * weights).sum(1) / weights.sum(1).clamp(min=1)


def build_model() -> nn.Module:
    return MaskedPool(hidden=32)


def example_inputs() -> tuple[torch.Tensor, ...]:
    x = torch.randn(2, 8, 32)
    mask = torch.rand(2, 8) > 0.3  # a bool tensor: any dtype goes
    return (x, mask)
