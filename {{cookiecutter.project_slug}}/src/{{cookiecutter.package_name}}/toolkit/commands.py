"""The project's commands, each with what it answers in one line: what `python -m <package>`
lists, and what the README's tools table says (written from here by cog, `nox -s readme`).

A command is offered where its module is in the project: a bake leaves out the modules of the
answers not chosen (generate.py in a forward project, toolkit/opschema.py without an op-plugin op).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    module: str
    """Its module, relative to the package; it has main(arguments, prog)."""
    answers: str
    """What it answers, in one line."""
    options: str = ""
    """Its options, as the README's table shows them."""
    section: str = ""
    """The README section that says more."""
    ranks: bool = False
    """Whether it takes --nproc-per-node under tensor parallelism."""


COMMANDS = {
    "check": Command(
        "toolkit.check",
        "is my model ready for graph mode? one compile as the MRE's, the ladder if it fails",
        "[--json] [--ladder]",
        "`check`: is my model ready for graph mode?",
        ranks=True,
    ),
    "doctor": Command(
        "toolkit.doctor",
        "why won't graph mode run on this machine? OK / WARN / FAIL, each FAIL with its fix",
        "[--json]",
        "On an Ascend machine",
        ranks=True,
    ),
    "generate": Command(
        "generate",
        "your loop (generate.py): greedy tokens in graph mode against eager's, then your sampler's",
        "[--new-tokens N] [--batch B] [--json]",
        "Generation",
    ),
    "bench": Command(
        "toolkit.bench",
        "eager against graph mode on the same model and inputs: outputs compared, then p50/p95",
        "[--json] [--iters N] [--warmup N] [--backend B]",
    ),
    "profile": Command(
        "toolkit.profile",
        "where a step's time goes, eager against graph mode, in a profiler trace",
        "[--steps N] [--out DIR] [--plot FILE.png] [--json]",
        "Profiling",
    ),
    "export": Command(
        "toolkit.export",
        "your code and the MRE as one verified file for a bug report",
        "[-o FILE] [--target npu|portable]",
        "Exporting a bug report",
    ),
    "export-hf": Command(
        "toolkit.export_hf",
        "your model as a Hugging Face folder for vLLM, and the vllm serve command for an NPU",
        "DIR",
        "Serving with vLLM",
    ),
    "vllm-check": Command(
        "toolkit.vllm_check",
        "does vLLM, given your weights, generate your greedy tokens?",
        "[--offline | --serve | --url URL] [--model-dir DIR] [--new-tokens N] [--json]",
        "Serving with vLLM",
    ),
    "opschema": Command(
        "toolkit.opschema",
        "op_plugin_functions.yaml files checked before a torch_npu build",
        "[--strict] [FILE ...]",
        "The op-plugin operator",
    ),
}


def offered(package: str) -> dict[str, Command]:
    """The commands whose module `package` holds, in COMMANDS' order."""
    return {
        name: command
        for name, command in COMMANDS.items()
        if importlib.util.find_spec(f"{package}.{command.module}") is not None
    }
