{%- set op = cookiecutter.custom_op != "none" -%}
"""This project's settings: the answers it was baked with, which the tools read at run time.

The toolkit (toolkit/) is the same file for file in every project the template makes; what
differs between projects is here and in what model.py declares. Each value below came from one
answer to the template's prompts and goes with the files that answer brought, so change one only
together with them (the template's README lists which files each answer brings).
"""

PROJECT = {{ cookiecutter.project_slug | tojson }}
"""The distribution's name: export's bug report names the project it came from."""

TORCH_NPU = {{ cookiecutter.torch_npu_version | tojson }}
"""The torch_npu release pyproject.toml pins: the doctor compares the installed one with it."""
{%- if cookiecutter.mode == "cache_compile" %}

MODE = "cache_compile"
"""cache_compile: torch.npu.npugraph_ex.inference.cache_compile compiles the model's step and
keeps the compiled graph on disk, in CACHE_DIR, for the next start to load."""

CACHE_DIR = {{ cookiecutter.cache_dir | tojson }}
"""cache_compile's folder, relative to where the MRE or a tool runs."""
{%- else %}

MODE = "npugraph_ex"
"""npugraph_ex: torch.compile(backend="npugraph_ex") compiles the model on every start."""
{%- endif %}
{%- if cookiecutter.workload == "decode" %}

WORKLOAD = "decode"
"""decode: one graph-mode step is a language model's decode step over its static KV cache, after
an eager prefill (model.py declares MAX_BATCH, MAX_SEQ_LEN and CAPTURE_SIZES)."""
{%- else %}

WORKLOAD = "forward"
"""forward: one graph-mode step is one forward of the inputs example_inputs() returns."""
{%- endif %}
{%- if cookiecutter.parallel == "tensor_parallel" %}

PARALLEL = "tensor_parallel"
"""tensor_parallel: torchrun ranks each hold the slice of every layer that parallel_plan() in
model.py gives them."""
{%- else %}

PARALLEL = "none"
"""none: one device runs the whole model."""
{%- endif %}
{%- if op %}

CUSTOM_OP = {{ cookiecutter.custom_op | tojson }}
"""{{ "out_of_place: the model's custom operator returns a new tensor." if cookiecutter.custom_op == "out_of_place" else "in_place: the model's custom operator writes into an input and returns nothing." }}"""

OP_REGISTRATION = {{ cookiecutter.op_registration | tojson }}
"""{{ "torch_library: torch.library.custom_op and register_fake, in custom_op.py." if cookiecutter.op_registration == "torch_library" else "op_plugin: an op_plugin_functions.yaml schema and a Meta function, as op-plugin builds ops." }}"""

OP_NAMESPACE = {{ cookiecutter.__op_ns | tojson }}
OP_NAME = {{ cookiecutter.__op | tojson }}
"""The operator the model calls, torch.ops.<OP_NAMESPACE>.<OP_NAME>."""
{%- else %}

CUSTOM_OP = "none"
"""none: the model calls built-in operators only."""
{%- endif %}
