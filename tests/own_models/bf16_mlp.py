import torch
from torch import nn


def build_model() -> nn.Module:
    # Weights and inputs in bfloat16, as inference often runs.
    return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)).to(torch.bfloat16)


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(4, 16, 64, dtype=torch.bfloat16),)
