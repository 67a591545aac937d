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


if not hasattr(torch.ops.npu, OP_NAME):
    npu_ok, _ = npu_status()
    if npu_ok:
        raise RuntimeError(
            f"torch_npu has no npu::{OP_NAME}. Add the entry of {SCHEMA_FILE.name} under `custom:` "
            "in op-plugin's op_plugin_functions.yaml, deploy your Ascend C kernel and rebuild "
            "torch_npu: README, section 'The op-plugin operator'."
        )
    # Keep a reference: the definition lasts as long as this Library object.
    _library = Library("npu", "FRAGMENT")
    _library.define(schema())
    _library.impl(OP_NAME, reference, "CompositeExplicitAutograd")
