import torch
from transformers import T5Config, T5EncoderModel

# The encoder of a small T5 built from its config: random weights, nothing to download. It takes
# token ids and an attention mask and returns a ModelOutput.
CONFIG = T5Config(
    vocab_size=512,
    d_model=64,
    d_kv=16,
    d_ff=128,
    num_layers=2,
    num_heads=4,
)


def build_model() -> torch.nn.Module:
    return T5EncoderModel(CONFIG)


def example_inputs() -> tuple[torch.Tensor, ...]:
    input_ids = torch.randint(0, CONFIG.vocab_size, (2, 16))
    attention_mask = torch.ones(2, 16, dtype=torch.long)
    attention_mask[1, 12:] = 0  # the second sequence is padded
    return (input_ids, attention_mask)
