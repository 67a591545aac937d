import torch
from transformers import ViTConfig, ViTModel

# A small vision transformer built from its config: random weights, nothing to download. It takes
# images (batch, channels, height, width) and returns a ModelOutput.
CONFIG = ViTConfig(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    image_size=32,
    patch_size=8,
)


def build_model() -> torch.nn.Module:
    return ViTModel(CONFIG)


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(2, CONFIG.num_channels, CONFIG.image_size, CONFIG.image_size),)
