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
        # One token through the model makes each layer allocate its tensors in the sizes it
        # writes: keys and values (DeepSeek-V3's are a latent and a rotary key, of two widths),
        # or the conv and SSM states of a recurrent layer (Mamba2's). reset() zeroes them.
        token = torch.zeros(MAX_BATCH, 1, dtype=torch.long, device=device)
        with torch.no_grad():
            self.lm(input_ids=token, cache=self.cache, use_cache=True)
        self.cache.reset()
        for layer in self.cache.layers:
            if hasattr(layer, "has_previous_state"):
                # A recurrent layer reads its states only where this Python flag says they hold
                # earlier tokens: set it once, for good (graph mode bakes a flag in), and let
                # forward zero the states at each new request instead.
                layer.has_previous_state = dict.fromkeys(layer.has_previous_state, True)

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
        for layer in self.cache.layers:
            # An attention layer writes where its own count of tokens says: set the count to
            # input_pos, in place, so that the writes land there (transformers 5 takes no
            # cache_position).
            if hasattr(layer, "cumulative_length"):
                layer.cumulative_length.copy_(input_pos[0])
            # A recurrent layer holds no positions, only what the tokens before left: a new
            # request (input_pos from 0) starts from zeros, not from the last request's states.
            if hasattr(layer, "recurrent_states"):
                for state in [*layer.conv_states.values(), *layer.recurrent_states.values()]:
                    state.masked_fill_(input_pos[0] == 0, 0)
        positions = input_pos.expand(MAX_BATCH, -1)
        output = self.lm(input_ids=tokens, position_ids=positions, cache=self.cache, use_cache=True)
        return output.logits[:batch]


def build_model() -> nn.Module:
    return StaticCacheLM()


def example_inputs() -> tuple[torch.Tensor]:
    # The prompt: token ids (batch, prompt length), a LongTensor.
    return (torch.randint(0, CONFIG.vocab_size, (MAX_BATCH, 8)),)
