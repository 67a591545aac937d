import torch
from transformers import BertConfig, BertModel

# A small encoder built from its config: random weights, nothing to download. It takes three
# LongTensors and returns a ModelOutput (last_hidden_state, pooler_output).
CONFIG = BertConfig(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=64,
)


def build_model() -> torch.nn.Module:
    return BertModel(CONFIG)


def example_inputs() -> tuple[torch.Tensor, ...]:
    input_ids = torch.randint(0, CONFIG.vocab_size, (2, 16))
    attention_mask = torch.ones(2, 16, dtype=torch.long)
    attention_mask[1, 12:] = 0  # the second sequence is padded
    token_type_ids = torch.zeros(2, 16, dtype=torch.long)
    token_type_ids[:, 8:] = 1  # two segments
    return (input_ids, attention_mask, token_type_ids)
