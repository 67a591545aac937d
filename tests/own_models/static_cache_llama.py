import copy

import torch
from torch import nn
from transformers import AutoModelForCausalLM, LlamaConfig, StaticCache

# A small Llama built from its config: random weights, nothing to download. Another family's
# config (and its import) is the only change another model needs: see which fields differ below.
CONFIG = LlamaConfig(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    # Heads of 32 features: vLLM's CPU attention takes no narrower ones (vllm-check).
    num_attention_heads=2,
    num_key_value_heads=1,
)
MAX_BATCH = 2
MAX_SEQ_LEN = 64
# One size: a StaticCache holds a fixed batch, so every step runs at MAX_BATCH rows.
CAPTURE_SIZES = (MAX_BATCH,)


def cache_config(config):
    """The config the cache is built from: the model's, with its sliding window off, if it has
    one. Exact while MAX_SEQ_LEN fits in the window: each token attends to the positions of the
    window before it, and every position the cache holds is among them."""
    # GPT-2's n_positions goes by this name too: a position past it has no embedding.
    positions = getattr(config, "max_position_embeddings", None)
    if positions is not None and positions < MAX_SEQ_LEN:
        raise ValueError(f"MAX_SEQ_LEN = {MAX_SEQ_LEN} exceeds the model's {positions} positions")
    window = getattr(config, "sliding_window", None)
    if window is None:
        return config
    if window < MAX_SEQ_LEN:
        raise ValueError(f"MAX_SEQ_LEN = {MAX_SEQ_LEN} exceeds the sliding window, {window}")
    full = copy.deepcopy(config)
    full.sliding_window = None
    if getattr(config, "layer_types", None):
        full.layer_types = [
            "full_attention" if kind == "sliding_attention" else kind for kind in config.layer_types
        ]
    return full


class StaticCacheLM(nn.Module):
    """A transformers causal LM behind the decode contract, holding its StaticCache, whose
    tensors transformers marks with torch._dynamo.mark_static_address."""

    def __init__(self) -> None:
        super().__init__()
        # The config's own class: LlamaForCausalLM here, Qwen3ForCausalLM for a Qwen3Config, ...
        self.lm = AutoModelForCausalLM.from_config(CONFIG)
        self.allocate_cache(torch.device("cpu"))

    def allocate_cache(self, device: torch.device) -> None:
        """The cache's tensors, allocated (and marked) now rather than at the first call: every
        tool saves the state the model starts from, and the cache is part of it."""
        # Sliding-window cache layers count tokens in a Python int: graph mode would bake it in.
        self.cache = StaticCache(config=cache_config(CONFIG), max_cache_len=MAX_SEQ_LEN)
        # The sizes the model's attention uses: a config's own head_dim (Qwen3's, Gemma's) before
        # hidden_size / heads, and a KV head per head where a config has no grouped queries (GPT-2).
        heads = CONFIG.num_attention_heads
        head_dim = getattr(CONFIG, "head_dim", None) or CONFIG.hidden_size // heads
        kv_heads = getattr(CONFIG, "num_key_value_heads", None) or heads
        self.cache.early_initialization(MAX_BATCH, kv_heads, head_dim, self.lm.dtype, device)

    def _apply(self, fn, recurse=True):
        # model.to(device) moves parameters and buffers; a StaticCache is neither: allocate it
        # again where the parameters went.
        super()._apply(fn, recurse)
        self.allocate_cache(self.lm.device)
        return self

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        batch = tokens.shape[0]
        # The cache has MAX_BATCH rows: pad a smaller batch up to them.
        tokens = torch.cat([tokens, tokens.new_zeros(MAX_BATCH - batch, tokens.shape[1])])
        # StaticCache writes where its own count of tokens says: set the count to input_pos, in
        # place, so that the writes land at input_pos (transformers 5 takes no cache_position).
        for layer in self.cache.layers:
            layer.cumulative_length.copy_(input_pos[0])
        positions = input_pos.expand(MAX_BATCH, -1)
        output = self.lm(input_ids=tokens, position_ids=positions, cache=self.cache, use_cache=True)
        return output.logits[:batch]


def build_model() -> nn.Module:
    return StaticCacheLM()


def example_inputs() -> tuple[torch.Tensor]:
    # The prompt: token ids (batch, prompt length), a LongTensor.
    return (torch.randint(0, CONFIG.vocab_size, (MAX_BATCH, 8)),)
