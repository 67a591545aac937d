"""This project's settings: the answers it was baked with, which the tools read at run time.

The toolkit (toolkit/) is the same file for file in every project the template makes; what
differs between projects is here and in what model.py declares. Each value below came from one
answer to the template's prompts and goes with the files that answer brought, so change one only
together with them (the template's README lists which files each answer brings).
"""

PROJECT = "decode_project"
"""The distribution's name: export's bug report names the project it came from."""

TORCH_NPU = "2.13.0"
"""The torch_npu release pyproject.toml pins: the doctor compares the installed one with it."""

MODE = "npugraph_ex"
"""npugraph_ex: torch.compile(backend="npugraph_ex") compiles the model on every start."""

WORKLOAD = "decode"
"""decode: one graph-mode step is a language model's decode step over its static KV cache, after
an eager prefill (model.py declares MAX_BATCH, MAX_SEQ_LEN and CAPTURE_SIZES)."""

PARALLEL = "none"
"""none: one device runs the whole model."""

CUSTOM_OP = "none"
"""none: the model calls built-in operators only."""
