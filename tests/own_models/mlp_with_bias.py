import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel


class FeedForward(nn.Module):
    """A Megatron-style MLP whose Linears have biases: the row-parallel bias stays whole."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


def build_model() -> nn.Module:
    return FeedForward(hidden=32)


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 8, 32),)


def parallel_plan(world_size: int) -> dict[str, ParallelStyle]:
    return {"up": ColwiseParallel(), "down": RowwiseParallel()}
