import torch
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel
from transformers import LlamaConfig, LlamaForCausalLM

# A small decoder built from its config: random weights, nothing to download. use_cache=False:
# one step returns logits only, not a growing KV-cache object.
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


def parallel_plan(world_size: int) -> dict[str, ParallelStyle]:
    # Whole heads on every rank: the key/value heads are the fewest.
    if CONFIG.num_key_value_heads % world_size:
        raise ValueError(
            f"{CONFIG.num_key_value_heads} key/value heads cannot be split across {world_size} ranks"
        )
    return {
        "model.layers.*.self_attn.q_proj": ColwiseParallel(),
        "model.layers.*.self_attn.k_proj": ColwiseParallel(),
        "model.layers.*.self_attn.v_proj": ColwiseParallel(),
        "model.layers.*.self_attn.o_proj": RowwiseParallel(),
        "model.layers.*.mlp.gate_proj": ColwiseParallel(),
        "model.layers.*.mlp.up_proj": ColwiseParallel(),
        "model.layers.*.mlp.down_proj": RowwiseParallel(),
    }
