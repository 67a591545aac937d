import torch
from torch import nn

# Registers the project's custom operator before anything compiles.
from . import custom_op  # noqa: F401


class Residual(nn.Module):
    """A linear layer whose residual add is the project's own operator."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.NAMESPACE.OP(x, self.linear(x))


def build_model() -> nn.Module:
    return Residual(hidden=16)


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(3, 16),)
