"""export-hf: the project's model as a Hugging Face folder, the form vLLM loads.

    python -m <package> export-hf DIR

Seeded as the MRE seeds it (torch.manual_seed(0), then build_model()), so the weights are the ones
every tool of this project runs. It writes config.json (with `architectures`, which tells vLLM the
class that serves it), model.safetensors and generation_config.json, for either kind of model:

- a transformers model behind the contract (a PreTrainedModel, or a module holding one, such as
  the README's Llama behind a StaticCache): the model itself, through its save_pretrained(); vLLM
  serves its architecture with its own implementation, no port needed;
- a model of your own, such as the sample: model.py's hf_config() is config.json (the
  architecture that vllm_model.py registers, and the sizes the port reads), and build_model()'s
  state_dict, as it is, the weights; vllm_model.py's load_weights() reads those names.

Then it prints the `vllm serve` command for an Ascend machine, with the project's settings in
vLLM's terms (toolkit/serving.py). The folder holds no tokenizer: requests send token ids.

Exit 0: written. 2: nothing written; the model cannot be exported, and the message says what is
missing.

A decode project's own: the template leaves this file out of forward projects.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from . import project
from .contract import ContractError
from .decode import limits
from .serving import render, serve_command, translation

DESCRIPTION = (
    "Write build_model(), seeded as the MRE seeds it, as a Hugging Face folder (config.json, "
    "model.safetensors, generation_config.json) for vLLM, and print the `vllm serve` command for "
    "an Ascend machine."
)
FILES = ("config.json", "model.safetensors", "generation_config.json")


class ExportError(ValueError):
    """The model cannot be exported: the message says what is missing."""


@dataclass
class Exported:
    """What export() wrote, and what vllm-check and the command line need of it."""

    directory: Path
    architecture: str
    kind: str
    """`transformers` (save_pretrained) or `own` (hf_config() and the state_dict)."""
    dtype: torch.dtype
    head_dim: int
    """Each attention head's width, as vLLM computes it from config.json."""


def transformers_model(model: nn.Module) -> nn.Module | None:
    """The outermost transformers PreTrainedModel in `model` (itself or a submodule), if any."""
    if "transformers" not in sys.modules:
        # A model built without transformers holds none of its models.
        return None
    from transformers import PreTrainedModel

    return next((m for m in model.modules() if isinstance(m, PreTrainedModel)), None)


def own_config() -> dict | None:
    """model.py's hf_config(), checked: a dict naming its architecture; None where it has none."""
    model = project.model()
    function = getattr(model, "hf_config", None)
    if function is None:
        return None
    config = function()
    architectures = config.get("architectures") if isinstance(config, dict) else None
    if not (
        isinstance(architectures, list) and architectures and isinstance(architectures[0], str)
    ):
        raise ExportError(
            f"hf_config() in model.py must return a dict with 'architectures': [name], got "
            f"{config!r:.80}; name the class vllm_model.py registers, as the sample does"
        )
    return config


def head_dim_of(config: dict | object) -> int:
    """The width of one attention head, as vLLM's models read it: head_dim, else hidden / heads.
    `config` is config.json's dict, or a transformers config, which reads another family's
    names as these (GPT-2's config.json says n_embd and n_head)."""
    if isinstance(config, dict):
        config = SimpleNamespace(**config)
    if getattr(config, "head_dim", None):
        return int(config.head_dim)
    return int(config.hidden_size) // int(config.num_attention_heads)


def dtype_of(model: nn.Module) -> torch.dtype:
    """The dtype of the model's floating-point weights (float32 if it has none)."""
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


def generation_config() -> dict:
    """generation_config.json: greedy, and no end of sequence (generate.py's EOS_ID is yours)."""
    return {"do_sample": False, "eos_token_id": None, "bos_token_id": None}


def export(directory: Path) -> Exported:
    """Write build_model(), seeded as the MRE seeds it, into `directory`: a Hugging Face folder."""
    build_model = project.from_model("build_model")

    torch.manual_seed(0)
    model = build_model().eval()
    inner = transformers_model(model)
    config = own_config() if inner is None else None
    if inner is None and config is None:
        raise ExportError(
            f"build_model() returns a {type(model).__name__}, which holds no transformers model, "
            "and model.py has no hf_config(): add hf_config() (config.json, naming the "
            "architecture) and a vLLM port in vllm_model.py, as the sample has, or wrap a "
            "transformers model"
        )
    directory.mkdir(parents=True, exist_ok=True)
    if inner is not None:
        inner.save_pretrained(directory)
        config = json.loads((directory / "config.json").read_text())
        kind = "transformers"
    else:
        from safetensors.torch import save_file

        # The state_dict as build_model() names it: the names vllm_model.py's load_weights() reads.
        # Contiguous copies: safetensors stores no views; shared tensors are saved once each name.
        weights = {
            name: tensor.detach().contiguous().clone()
            for name, tensor in model.state_dict().items()
        }
        save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})
        (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (directory / "generation_config.json").write_text(
            json.dumps(generation_config(), indent=2) + "\n"
        )
        kind = "own"
    # A transformers model's own config reads its family's names as vLLM's transformers does.
    head_dim = head_dim_of(config if inner is None else inner.config)
    return Exported(directory, config["architectures"][0], kind, dtype_of(model), head_dim)


def parse_args(argv: Sequence[str] | None, prog: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    parser.add_argument("directory", type=Path, help="the folder to write (created if missing)")
    if project.TENSOR_PARALLEL:
        parser.add_argument(
            "--tensor-parallel-size",
            type=int,
            default=2,
            help="ranks in the printed command, as torchrun's --nproc-per-node (default: 2)",
        )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Export, print what was written and the serve command; the exit status."""
    arguments = parse_args(argv, prog)
    try:
        exported = export(arguments.directory)
        bounds = limits()
    except (ExportError, ContractError) as error:
        print(f"export-hf: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a folder that cannot be made: a file by that name, no permission
        print(f"export-hf: cannot write {arguments.directory}: {error.strerror}", file=sys.stderr)
        return 2
    size = getattr(arguments, "tensor_parallel_size", None)
    written = ", ".join(name for name in FILES if (exported.directory / name).exists())
    print(f"wrote {exported.directory}: {written} ({exported.architecture}, {exported.kind})")
    print(f"\nvLLM {'' if size is None else 'with tensor parallelism '}on an Ascend machine:")
    print(serve_command(str(exported.directory), bounds, exported.dtype, size))
    print("\nthe project's settings in vLLM's terms:")
    print(render(translation(bounds, exported.dtype, size)))
    return 0
