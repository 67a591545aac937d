import torch
from PACKAGE.layers import FeedForward
from torch import nn


def build_model() -> nn.Module:
    return nn.Sequential(FeedForward(hidden=12, expansion=3), nn.LayerNorm(12))


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(5, 12),)
