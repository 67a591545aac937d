"""This project's settings: the answers it was baked with, which the tools read at run time.

The toolkit (toolkit/) is the same file for file in every project the template makes; what
differs between projects is here and in what model.py declares. Each value below came from one
answer to the template's prompts and goes with the files that answer brought, so change one only
together with them (the template's README lists which files each answer brings).
"""

PROJECT = "plugin_project"
"""The distribution's name: export's bug report names the project it came from."""

TORCH_NPU = "2.13.0"
"""The torch_npu release pyproject.toml pins: the doctor compares the installed one with it."""

MODE = "npugraph_ex"
"""npugraph_ex: torch.compile(backend="npugraph_ex") compiles the model on every start."""

WORKLOAD = "forward"
"""forward: one graph-mode step is one forward of the inputs example_inputs() returns."""

PARALLEL = "none"
"""none: one device runs the whole model."""

CUSTOM_OP = "in_place"
"""in_place: the model's custom operator writes into an input and returns nothing."""

OP_REGISTRATION = "op_plugin"
"""op_plugin: an op_plugin_functions.yaml schema and a Meta function, as op-plugin builds ops."""

OP_NAMESPACE = "npu"
OP_NAME = "my_op"
"""The operator the model calls, torch.ops.<OP_NAMESPACE>.<OP_NAME>."""
