import torch
from torch import nn


class WithExtras(nn.Module):
    """Returns a tensor, a Python int and None, as some models return (logits, length, cache)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int, None]:
        return self.proj(x), x.shape[1], None


def build_model() -> nn.Module:
    return WithExtras()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 8, 32),)
