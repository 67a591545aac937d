"""Your language model, behind the decode contract every tool of this project follows.

- `build_model()` returns the torch.nn.Module to run. Its forward(tokens, input_pos) takes tokens, a
  LongTensor (batch, n), at positions input_pos, a LongTensor (n,); it writes those positions of
  rows [:batch] of its KV cache, in place, and returns logits (batch, n, vocab) or an object whose
  .logits they are. The cache lives in the module: buffers, or tensors marked with
  torch._dynamo.mark_static_address (transformers' StaticCache).
- `example_inputs()` returns (prompt,): a LongTensor (batch, prompt length), on the CPU, where
  generation starts.
- `MAX_BATCH`, `MAX_SEQ_LEN`: the cache's rows and positions.
- `CAPTURE_SIZES`: the batch sizes whose decode step is captured once each, smallest first; a batch
  runs padded up to the next size.
- Optional: `TOLERANCES`, how far graph mode may be from eager per dtype, e.g.
  `{torch.bfloat16: {"rtol": 5e-2, "atol": 1e-1}}` (README, section 'Tolerances').

The MRE seeds torch.manual_seed(0), then calls build_model(), then example_inputs(). Replace
everything below with your own model; sibling modules of this file are fine (README, sections
'Your own model' and 'Generation'). The sample is a small decoder in the spirit of gpt-fast: an
embedding, two blocks of attention over the cache with rotary positions, and a head.
"""

import torch
import torch.nn.functional as F
from torch import nn

PROMPT_SHAPE = (2, 8)
"""The sample prompt's (batch, length)."""
HIDDEN = 32
HEADS = 8
"""The sample's attention heads."""
LAYERS = 2
VOCAB = 256
MAX_BATCH = 4
MAX_SEQ_LEN = 40
CAPTURE_SIZES = (1, 2, 4)


class KVCache(nn.Module):
    """Keys and values of every position so far, for up to MAX_BATCH sequences, as gpt-fast keeps
    them: buffers the graph updates in place, at addresses that never change."""

    def __init__(self, max_batch: int, heads: int, max_seq_len: int, head_dim: int) -> None:
        super().__init__()
        shape = (max_batch, heads, max_seq_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

    def update(
        self, input_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k and v (batch, heads, n, head_dim) at positions input_pos of rows [:batch]; the
        cache rows [:batch], every position."""
        batch = k.shape[0]
        self.k_cache[:batch, :, input_pos] = k
        self.v_cache[:batch, :, input_pos] = v
        return self.k_cache[:batch], self.v_cache[:batch]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding: each pair of features turned by its position's angle."""
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


class Block(nn.Module):
    """Attention over the KV cache and an MLP, each behind an RMSNorm and a residual connection."""

    def __init__(self, hidden: int, heads: int, max_batch: int, max_seq_len: int) -> None:
        super().__init__()
        self.head_dim = hidden // heads
        self.attn_norm = nn.RMSNorm(hidden)
        # Separate projections, not one fused qkv: each splits by heads on its own.
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.kv_cache = KVCache(max_batch, heads, max_seq_len, self.head_dim)
        self.mlp_norm = nn.RMSNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden, bias=False)
        self.down = nn.Linear(4 * hidden, hidden, bias=False)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, heads * head_dim) -> (batch, heads, n, head_dim)."""
        return x.unflatten(-1, (-1, self.head_dim)).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        input_pos: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        h = self.attn_norm(x)
        q, k, v = (self.split_heads(proj(h)) for proj in (self.q_proj, self.k_proj, self.v_proj))
        k, v = self.kv_cache.update(input_pos, rotate(k, cos, sin), v)
        # Over every cached position; the mask hides those after input_pos.
        attention = F.scaled_dot_product_attention(rotate(q, cos, sin), k, v, attn_mask=mask)
        x = x + self.o_proj(attention.transpose(1, 2).flatten(-2))
        return x + self.down(F.silu(self.up(self.mlp_norm(x))))


class TinyBlock(nn.Module):
    """Token embedding, LAYERS blocks over their KV caches, a norm and the vocabulary head."""

    def __init__(
        self, vocab: int, hidden: int, heads: int, layers: int, max_batch: int, max_seq_len: int
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(
            Block(hidden, heads, max_batch, max_seq_len) for _ in range(layers)
        )
        self.norm = nn.RMSNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        # Position p sees positions 0..p: row p of this mask.
        causal = torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).tril()
        self.register_buffer("causal_mask", causal, persistent=False)
        head_dim = hidden // heads
        frequencies = 10000.0 ** -(torch.arange(0, head_dim, 2) / head_dim)
        angles = torch.outer(torch.arange(max_seq_len), frequencies).repeat(1, 2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        # Indexed by the tensor input_pos: a new position is new data for the same graph.
        mask = self.causal_mask[None, None, input_pos]
        cos, sin = self.cos[input_pos], self.sin[input_pos]
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, input_pos, cos, sin, mask)
        return self.head(self.norm(x))


def build_model() -> nn.Module:
    """The model the MRE, generate, the tests and every tool run."""
    return TinyBlock(VOCAB, HIDDEN, HEADS, LAYERS, MAX_BATCH, MAX_SEQ_LEN)


def example_inputs() -> tuple[torch.Tensor]:
    """(prompt,): token ids (batch, prompt length), on the CPU, where generation starts."""
    return (torch.randint(0, VOCAB, PROMPT_SHAPE),)


def hf_config() -> dict:
    """config.json of `python -m decode_project export-hf`: the architecture that vllm_model.py
    registers with vLLM, and the sizes its port reads (README, section 'Serving with vLLM')."""
    return {
        "architectures": ["TinyBlockForCausalLM"],
        # An existing model_type, so that transformers' AutoConfig, which vLLM calls, reads the file.
        "model_type": "llama",
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "intermediate_size": 4 * HIDDEN,
        "max_position_embeddings": MAX_SEQ_LEN,
        # nn.RMSNorm's eps when none is given: the float32 rounding step.
        "rms_norm_eps": torch.finfo(torch.float32).eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "tie_word_embeddings": False,
        "dtype": "float32",
    }
