import torch
from torch import nn


class Scaled(nn.Module):
    """forward(x, scale: float): the scale is a plain Python float, not a tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor, scale: float) -> torch.Tensor:
        return self.proj(x) * scale


def build_model() -> nn.Module:
    return Scaled()


def example_inputs() -> tuple[torch.Tensor | float, ...]:
    return (torch.randn(2, 8, 32), 0.5)
