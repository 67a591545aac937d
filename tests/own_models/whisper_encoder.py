import torch
from transformers import WhisperConfig, WhisperModel

# The encoder of a small Whisper built from its config: random weights, nothing to download. It
# takes log-mel features (batch, mel bins, frames) and returns a ModelOutput.
CONFIG = WhisperConfig(
    vocab_size=512,
    d_model=64,
    encoder_layers=2,
    encoder_attention_heads=4,
    encoder_ffn_dim=128,
    decoder_layers=1,
    decoder_attention_heads=4,
    decoder_ffn_dim=128,
    num_mel_bins=80,
    max_source_positions=32,
    # Whisper's special ids lie beyond a small vocabulary: keep them inside it.
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=1,
    decoder_start_token_id=2,
)


def build_model() -> torch.nn.Module:
    return WhisperModel(CONFIG).get_encoder()


def example_inputs() -> tuple[torch.Tensor]:
    # The encoder takes exactly two frames per position: 2 x max_source_positions.
    return (torch.randn(2, CONFIG.num_mel_bins, 2 * CONFIG.max_source_positions),)
