import torch
from transformers import LlamaConfig, LlamaForCausalLM

# A small decoder built from its config: random weights, nothing to download. use_cache=False:
# one forward scores the whole sequence and returns logits only. To generate text, bake a
# decode project: a static KV cache, and one graph-mode step per new token.
CONFIG = LlamaConfig(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    use_cache=False,
)


def build_model() -> torch.nn.Module:
    return LlamaForCausalLM(CONFIG)


def example_inputs() -> tuple[torch.Tensor, ...]:
    # Token ids are integers: a LongTensor of (batch, sequence).
    return (torch.randint(0, CONFIG.vocab_size, (2, 16)),)
