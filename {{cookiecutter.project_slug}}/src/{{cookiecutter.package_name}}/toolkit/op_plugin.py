"""Development stand-in for the npu:: operator of op_plugin_functions.yaml where torch_npu lacks it.

op_plugin_functions.yaml is the single source of truth: the op is defined from its `func`, with
the plain-torch kernel of op_reference.py, so the Meta function, the model and the compile path
run on any machine. On an NPU whose torch_npu lacks the op, importing this fails with the steps
that add it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.library import Library

from .backend import npu_status
from .opschema import schema


def define_if_missing(
    name: str, func: str, kernel: Callable[..., object], npu_ok: bool
) -> Library | None:
    """Define npu::<name> from `func` with `kernel` for the CPU, unless torch_npu already has it.

    On a usable NPU a missing op means torch_npu was not rebuilt with it: that is an error, with
    the steps, rather than a silent fallback to the reference kernel.
    """
    if hasattr(torch.ops.npu, name):
        existing = getattr(torch.ops.npu, name).default._schema
        if existing != torch._C.parse_schema(f"npu::{func}"):
            raise RuntimeError(
                f"torch_npu already has an npu::{name} with another schema ({existing}); "
                "give this op another name in op_plugin_functions.yaml"
            )
        return None
    if npu_ok:
        raise RuntimeError(
            f"torch_npu has no npu::{name}. Add the entry of op_plugin_functions.yaml under "
            "`custom:` in op-plugin's op_plugin_functions.yaml, deploy your Ascend C kernel and "
            "rebuild torch_npu: README, section 'The op-plugin operator'."
        )
    library = Library("npu", "FRAGMENT")
    library.define(func)
    # The CPU key alone, as torch_npu registers an op-plugin kernel for the NPU's key alone: the
    # meta device and fake tensors then need the project's Meta function here as on an NPU, so a
    # missing one fails graph mode off an NPU too (CompositeExplicitAutograd would stand in for it).
    library.impl(name, kernel, "CPU")
    return library


FUNC = schema()
OP_NAME = FUNC.split("(")[0]


def define(reference: Callable[..., object]) -> Library | None:
    """npu::<op> of op_plugin_functions.yaml, with `reference` (op_reference.py, yours) as its CPU
    kernel, where torch_npu lacks it; keep what it returns: the definition lasts as long as its
    Library object."""
    return define_if_missing(OP_NAME, FUNC, reference, npu_status()[0])
