"""The vLLM port of the sample decoder in model.py: the same weights, computed by vLLM's layers.

vLLM serves a model through a class of its own, written on its layers: its Attention owns a paged
KV cache that vLLM allocates and shares between requests, and each forward takes the tokens of
every running sequence flattened to (tokens,), with their positions. So the port has no KVCache,
no causal mask and no batch dimension: what it keeps of model.py is the computation, layer by
layer, and the weights, read under the names `python -m decode_parallel_project export-hf` writes
(build_model()'s state_dict). It is written as vLLM's own models/llama.py is written.

pyproject.toml's `vllm.general_plugins` entry point calls register() in every vLLM process, the
workers too, which is where the model runs. `python -m decode_parallel_project vllm-check` (and
`nox -s vllm`) checks that vLLM generates this project's greedy tokens through it.

For your own model: keep the class name equal to hf_config()'s architecture in model.py, write its
layers with vLLM's, as below, and map the names of your state_dict in load_weights(). A
transformers model needs no port: vLLM runs its architecture itself (README, 'Serving with vLLM').
"""

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn
from vllm.compilation.decorators import support_torch_compile
from vllm.config import VllmConfig
from vllm.distributed import get_tensor_model_parallel_world_size
from vllm.model_executor.layers.attention import Attention
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.linear import (
    ColumnParallelLinear,
    QKVParallelLinear,
    RowParallelLinear,
)
from vllm.model_executor.layers.logits_processor import LogitsProcessor
from vllm.model_executor.layers.rotary_embedding import get_rope
from vllm.model_executor.layers.vocab_parallel_embedding import (
    ParallelLMHead,
    VocabParallelEmbedding,
)
from vllm.model_executor.model_loader.weight_utils import default_weight_loader


def register() -> None:
    """Tell vLLM which class of this file serves the architecture hf_config() in model.py names,
    unless vLLM serves that name already. A model.py without hf_config() (a transformers model,
    which vLLM runs itself) registers nothing."""
    from vllm import ModelRegistry

    from . import model

    if not hasattr(model, "hf_config"):
        return
    architecture = model.hf_config()["architectures"][0]
    if architecture not in ModelRegistry.get_supported_archs():
        # The class of that name below: `module:Class`, which vLLM imports where it runs it.
        ModelRegistry.register_model(architecture, f"{__name__}:{architecture}")


class Block(nn.Module):
    """model.py's Block: attention over vLLM's paged cache, then the MLP, each behind an RMSNorm
    and a residual connection. Tensor parallel as vLLM's layers are: each rank holds its heads."""

    def __init__(self, vllm_config: VllmConfig, prefix: str) -> None:
        super().__init__()
        config = vllm_config.model_config.hf_config
        hidden, heads = config.hidden_size, config.num_attention_heads
        head_dim = hidden // heads
        local_heads = heads // get_tensor_model_parallel_world_size()
        self.attn_norm = RMSNorm(hidden, eps=config.rms_norm_eps)
        # q_proj, k_proj and v_proj as one matrix, as vLLM's Llama has them: load_weights() fills
        # each part from its own exported weight.
        self.qkv_proj = QKVParallelLinear(
            hidden, head_dim, heads, bias=False, prefix=f"{prefix}.qkv_proj"
        )
        self.o_proj = RowParallelLinear(hidden, hidden, bias=False, prefix=f"{prefix}.o_proj")
        # rotate() of model.py: each half of a head's features turned by its position's angle
        # (the "neox" style).
        self.rotary = get_rope(
            head_dim,
            max_position=config.max_position_embeddings,
            rope_parameters=config.rope_parameters,
            is_neox_style=True,
        )
        self.attn = Attention(
            local_heads,
            head_dim,
            head_dim**-0.5,
            num_kv_heads=local_heads,
            cache_config=vllm_config.cache_config,
            prefix=f"{prefix}.attn",
        )
        self.mlp_norm = RMSNorm(hidden, eps=config.rms_norm_eps)
        self.up = ColumnParallelLinear(
            hidden, config.intermediate_size, bias=False, prefix=f"{prefix}.up"
        )
        self.down = RowParallelLinear(
            config.intermediate_size, hidden, bias=False, prefix=f"{prefix}.down"
        )

    def forward(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        qkv, _ = self.qkv_proj(self.attn_norm(x))
        q, k, v = qkv.chunk(3, dim=-1)
        q, k = self.rotary(positions, q, k)
        attention, _ = self.o_proj(self.attn(q, k, v))
        x = x + attention
        up, _ = self.up(self.mlp_norm(x))
        down, _ = self.down(F.silu(up))
        return x + down


# vLLM compiles forward (and on an NPU vllm-ascend captures it), the token dimension dynamic.
@support_torch_compile(dynamic_arg_dims={"input_ids": 0, "positions": 0})
class TinyBlockForCausalLM(nn.Module):
    """model.py's model on vLLM's interface (vllm/model_executor/models/interfaces_base.py):
    forward() gives hidden states, compute_logits() the logits, load_weights() the weights."""

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.embed = VocabParallelEmbedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            Block(vllm_config, prefix=f"{prefix}layers.{index}")
            for index in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.head = ParallelLMHead(config.vocab_size, config.hidden_size, prefix=f"{prefix}head")
        self.logits_processor = LogitsProcessor(config.vocab_size)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed(input_ids)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        intermediate_tensors: object = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Hidden states (tokens, hidden) of the tokens of every running sequence, flattened."""
        x = self.embed(input_ids) if inputs_embeds is None else inputs_embeds
        for layer in self.layers:
            x = layer(positions, x)
        return self.norm(x)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.logits_processor(self.head, hidden_states)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Each exported weight into its parameter: q_proj, k_proj and v_proj into their parts of
        qkv_proj, the others under their own names. The names of the parameters loaded."""
        # (the port's parameter, the exported name, its part), as llama.py's stacked_params_mapping.
        stacked = [
            (".qkv_proj.", ".q_proj.", "q"),
            (".qkv_proj.", ".k_proj.", "k"),
            (".qkv_proj.", ".v_proj.", "v"),
        ]
        parameters = dict(self.named_parameters())
        loaded = set()
        for name, weight in weights:
            part = None
            for parameter_name, weight_name, stacked_part in stacked:
                if weight_name in name:
                    name, part = name.replace(weight_name, parameter_name), stacked_part
                    break
            if name not in parameters:
                raise ValueError(
                    f"vllm_model.py has no parameter for the exported weight {name!r}: map the "
                    "names of build_model()'s state_dict in load_weights()"
                )
            parameter = parameters[name]
            if part is None:
                getattr(parameter, "weight_loader", default_weight_loader)(parameter, weight)
            else:
                parameter.weight_loader(parameter, weight, part)
            loaded.add(name)
        return loaded
