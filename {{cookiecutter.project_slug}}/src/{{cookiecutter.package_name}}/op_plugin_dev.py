{%- set in_place = cookiecutter.custom_op == "in_place" -%}
"""Development stand-in for npu::{{ cookiecutter.op_name }} where torch_npu does not have it.

op_plugin_functions.yaml is the single source of truth: the op is defined from its `func`, with a
plain-torch reference kernel, so the Meta function, the model and the compile path run on any
machine. On an NPU whose torch_npu lacks the op, importing this fails with the steps that add it.
"""

from importlib.resources import files

import torch
import yaml
from torch.library import Library

from .backend import npu_status

SCHEMA_FILE = files(__package__) / "op_plugin_functions.yaml"


def schema() -> str:
    """The op's `func` from op_plugin_functions.yaml."""
    (entry,) = yaml.safe_load(SCHEMA_FILE.read_text())["custom"]
    return entry["func"]


OP_NAME = schema().split("(")[0]
{%- if in_place %}


def reference(x: torch.Tensor, y: torch.Tensor) -> None:
    """What the op computes, in plain torch: x += y, in place (a fused residual add)."""
    x.add_(y)
{%- else %}


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """What the op computes, in plain torch: x + y in a new tensor (a fused residual add)."""
    return x + y
{%- endif %}


def define_if_missing(name: str, func: str, npu_ok: bool) -> Library | None:
    """Define npu::<name> from `func` with the reference kernel, unless torch_npu already has it.

    On a usable NPU a missing op means torch_npu was not rebuilt with it: that is an error, with
    the steps, rather than a silent fallback to the reference kernel.
    """
    if hasattr(torch.ops.npu, name):
        existing = getattr(torch.ops.npu, name).default._schema
        if existing != torch._C.parse_schema(f"npu::{func}"):
            raise RuntimeError(
                f"torch_npu already has an npu::{name} with another schema ({existing}); "
                f"give this op another name in {SCHEMA_FILE.name}"
            )
        return None
    if npu_ok:
        raise RuntimeError(
            f"torch_npu has no npu::{name}. Add the entry of {SCHEMA_FILE.name} under `custom:` "
            "in op-plugin's op_plugin_functions.yaml, deploy your Ascend C kernel and rebuild "
            "torch_npu: README, section 'The op-plugin operator'."
        )
    library = Library("npu", "FRAGMENT")
    library.define(func)
    library.impl(name, reference, "CompositeExplicitAutograd")
    return library


# Kept: the definition lasts as long as its Library object.
_library = define_if_missing(OP_NAME, schema(), npu_status()[0])
