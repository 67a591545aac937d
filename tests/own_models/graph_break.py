import torch
from torch import nn


class Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # the graph break: a Python branch on a tensor value
            return self.linear(x)
        return -self.linear(x)


def build_model() -> nn.Module:
    return Gated()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 8),)
