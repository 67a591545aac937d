import torch
from torch import nn


class SmallCNN(nn.Module):
    """Two conv blocks and a classifier over (batch, channels, height, width) images."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(32, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(images).flatten(1))


def build_model() -> nn.Module:
    return SmallCNN(classes=10)


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 32, 32),)
