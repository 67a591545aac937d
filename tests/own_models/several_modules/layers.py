import torch
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, hidden: int, expansion: int) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, expansion * hidden)
        self.down = nn.Linear(expansion * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(x)))
