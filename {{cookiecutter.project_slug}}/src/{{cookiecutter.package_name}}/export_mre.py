{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set has_op = cookiecutter.custom_op != "none" -%}
{%- set op_plugin = has_op and cookiecutter.op_registration == "op_plugin" -%}
"""Write the MRE as one self-contained .py file for a bug report.

    python -m {{ cookiecutter.package_name }}.export_mre [-o FILE] [--target npu|portable]

The file holds the model, the custom operator's registration (if any) and the MRE in the seed's
shape (imports, then def infer_one_step(), then the __main__ guard) with its fixed names. It needs
only torch, and torch_npu on an NPU, never this project. `--target npu` (default) writes the
literal npugraph_ex form (.npu(), backend="npugraph_ex"{{ ", cache_compile" if cache else "" }}); `portable` keeps the fallback
to the aot_eager stand-in, so the same file also runs on a CPU.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
{%- if op_plugin %}
import json
{%- endif %}
import platform
{%- if op_plugin %}
import re
{%- endif %}
import sys
{%- if has_op %}
import textwrap
{%- endif %}
from importlib.resources import files
from pathlib import Path
from string import Template

SOURCES = files(__package__)
STDLIB = sys.stdlib_module_names
PROJECT = "{{ cookiecutter.project_slug }}"
MODEL_CLASS = "{{ cookiecutter.model_class }}"
SETUP = "mode {{ cookiecutter.mode }}, custom op {{ cookiecutter.custom_op }}
{%- if has_op %} ({{ cookiecutter.op_registration }}){% endif %}"

HEADER = Template('''\
"""Minimal reproducible example: one graph-mode inference step of $model.

Exported by $project for target $target.
Project setup: $setup.
Versions: Python $python, torch $torch, torch_npu $torch_npu.
$how
"""
''')
HOW = {
    "npu": "Runs on an Ascend NPU: torch_npu installed and CANN's set_env.sh sourced.",
    "portable": "Runs anywhere: npugraph_ex on a usable Ascend NPU, the aot_eager stand-in elsewhere.",
}
NPU_AVAILABLE = '''\
def npu_available() -> bool:
    """Whether torch_npu loads and sees an NPU that captures aclgraphs; else the stand-in runs."""
    try:
        import torch_npu  # noqa: F401
    except (ImportError, OSError, RuntimeError):
        return False
    return torch.npu.is_available() and can_capture(torch.npu.get_device_name(0))


NPU = npu_available()
'''
PORTABLE_PRELUDE = """\
import os

# torch would import an installed torch_npu itself and die without CANN; npu_available() does it.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

"""
{%- if cache %}
PORTABLE_CACHE_COMPILE = '''\
def cache_compile(method, *, dynamic, cache_dir, options):
    """npugraph_ex's cache_compile on an NPU; elsewhere the stand-in, which writes no cache."""
    if NPU:
        return torch.npu.npugraph_ex.inference.cache_compile(
            method, dynamic=dynamic, cache_dir=cache_dir, options=options
        )
    return torch.compile(method, backend="aot_eager", fullgraph=True, dynamic=dynamic)
'''
MRE = {
    "npu": Template('''\
def infer_one_step():
    """
    One inference step of $model through its cache_compile graph.

    Key settings:
    - torch.npu.npugraph_ex.inference.cache_compile replaces torch.compile: the first run writes
      the compiled graph under cache_dir, later runs load it and skip Dynamo
    - dynamic=False: fixed shapes; aclgraph has no dynamic shapes
    - options=NPUGRAPH_EX_OPTIONS: the npugraph_ex options, each commented above
    - .eval() and torch.no_grad(): inference only; torch.manual_seed(0): the same run every time
    """
    torch.manual_seed(0)
    config = NPUGRAPH_EX_OPTIONS
    model = $model().npu().eval()
    dummy_input = torch.randn(INPUT_SHAPE).npu()
    with torch.no_grad():
        output = model(dummy_input)
    torch.npu.synchronize()
    print(f"output {tuple(output.shape)} {output.dtype} on {output.device}, options {config}")
    return output
'''),
    "portable": Template('''\
def infer_one_step():
    """
    One inference step of $model through its cache_compile graph (the stand-in off NPU).

    Key settings:
    - cache_compile: npugraph_ex's compile cache on an NPU; off NPU the aot_eager stand-in
    - dynamic=False: fixed shapes; aclgraph has no dynamic shapes
    - options=NPUGRAPH_EX_OPTIONS on an NPU (config), None for the stand-in
    - .eval() and torch.no_grad(): inference only; torch.manual_seed(0): the same run every time
    """
    torch.manual_seed(0)
    config = NPUGRAPH_EX_OPTIONS if NPU else None
    device = "npu" if NPU else "cpu"
    model = $model().to(device).eval()
    dummy_input = torch.randn(INPUT_SHAPE).to(device)
    with torch.no_grad():
        output = model(dummy_input)
    print(f"output {tuple(output.shape)} {output.dtype} on {output.device}, options {config}")
    return output
'''),
}
{%- else %}
MRE = {
    "npu": Template('''\
def infer_one_step():
    """
    One inference step of $model in npugraph_ex graph mode.

    Key settings:
    - backend="npugraph_ex": capture & replay moves task dispatch onto the device
    - fullgraph=True: capture the whole model; a graph break is an error
    - dynamic=False: fixed shapes; aclgraph has no dynamic shapes
    - options=config: the npugraph_ex options, each commented above
    - .eval() and torch.no_grad(): inference only; torch.manual_seed(0): the same run every time
    """
    torch.manual_seed(0)
    config = NPUGRAPH_EX_OPTIONS
    model = $model().npu().eval()
    compiled_model = torch.compile(
        model,
        backend="npugraph_ex",
        fullgraph=True,
        dynamic=False,
        options=config,
    )
    dummy_input = torch.randn(INPUT_SHAPE).npu()
    with torch.no_grad():
        output = compiled_model(dummy_input)
    torch.npu.synchronize()
    print(f"output {tuple(output.shape)} {output.dtype} on {output.device}")
    return output
'''),
    "portable": Template('''\
def infer_one_step():
    """
    One inference step of $model in npugraph_ex graph mode (the aot_eager stand-in off NPU).

    Key settings:
    - backend="npugraph_ex" on an NPU; elsewhere "aot_eager", which checks the same graph
    - fullgraph=True: capture the whole model; a graph break is an error
    - dynamic=False: fixed shapes; aclgraph has no dynamic shapes
    - options=config: the npugraph_ex options on an NPU, None for the stand-in
    - .eval() and torch.no_grad(): inference only; torch.manual_seed(0): the same run every time
    """
    torch.manual_seed(0)
    config = NPUGRAPH_EX_OPTIONS if NPU else None
    device = "npu" if NPU else "cpu"
    model = $model().to(device).eval()
    compiled_model = torch.compile(
        model,
        backend="npugraph_ex" if NPU else "aot_eager",
        fullgraph=True,
        dynamic=False,
        options=config,
    )
    dummy_input = torch.randn(INPUT_SHAPE).to(device)
    with torch.no_grad():
        output = compiled_model(dummy_input)
    print(f"output {tuple(output.shape)} {output.dtype} on {output.device}, options {config}")
    return output
'''),
}
{%- endif %}
{%- if op_plugin %}
OP_NAME = "{{ cookiecutter.op_name }}"
OP_STAND_IN = """\
# Off NPU, or before torch_npu is rebuilt with the op: define it from its schema.
if not hasattr(torch.ops.npu, $name):
    _library = Library("npu", "FRAGMENT")
    _library.define($func)
    _library.impl($name, reference, "CompositeExplicitAutograd")
"""
{%- endif %}
MAIN = """\
if __name__ == "__main__":
    infer_one_step()
"""


def source(module: str) -> str:
    return (SOURCES / f"{module}.py").read_text()


def find(module: str, name: str, body: list[ast.stmt] | None = None) -> ast.stmt:
    """The top-level statement (or one in `body`) that defines `name`."""
    for node in body if body is not None else ast.parse(source(module)).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return node
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(target, ast.Name) and target.id == name for target in targets):
                return node
    raise LookupError(f"{name} is not defined at the top of {module}.py")


def first_line(node: ast.stmt) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])


def segment(module: str, name: str, *, comments: bool = True) -> str:
    """The source of a definition, with its decorators and (if `comments`) the comments above it."""
    lines = source(module).splitlines()
    node = find(module, name)
    start = first_line(node)
    while comments and start > 1 and lines[start - 2].lstrip().startswith("#"):
        start -= 1
    return "\n".join(lines[start - 1 : node.end_lineno]) + "\n"
{%- if has_op and not op_plugin %}


def npu_kernel() -> tuple[str, str]:
    """The custom op's NPU kernel (registered under `if npu_status()[0]:`): its source and body."""
    text = source("custom_op")
    guard = next(node for node in ast.parse(text).body if isinstance(node, ast.If))
    (kernel,) = guard.body
    lines = text.splitlines()[first_line(kernel) - 1 : kernel.end_lineno]
    signature_end = next(i for i, line in enumerate(lines) if line.rstrip().endswith(":"))
    whole = textwrap.dedent("\n".join(lines)) + "\n"
    return whole, textwrap.dedent("\n".join(lines[signature_end + 1 :])) + "\n"


def custom_op_block(target: str) -> str:
    """The op: torch.library.custom_op + register_fake, and its NPU kernel."""
    op_name = "{{ cookiecutter.__op }}"
    fake_name = "{{ cookiecutter.__op.rstrip('_') }}_fake"
    parts = [segment("custom_op", "OP_NAME"), segment("custom_op", "reference")]
    kernel, kernel_body = npu_kernel()
    if target == "npu":
        # The seed's form: the op is the NPU kernel itself, device_types="npu".
        op = segment("custom_op", op_name, comments=False)
        signature = op[: op.index(":\n", op.index("def ")) + 2]
        signature = signature.replace("device_types=None", 'device_types="npu"')
        parts += [signature + textwrap.indent(kernel_body, "    ")]
        parts.append(segment("custom_op", fake_name))
    else:
        parts += [segment("custom_op", op_name), segment("custom_op", fake_name)]
        parts.append("if NPU:\n\n" + textwrap.indent(kernel, "    "))
    return "\n\n".join(parts)
{%- elif op_plugin %}


def custom_op_block(target: str) -> str:
    """The op-plugin op: its yaml entry as a comment, its Meta function, and (portable) a stand-in."""
    schema_file = (SOURCES / "op_plugin_functions.yaml").read_text()
    entry = schema_file[re.search(r"^custom:", schema_file, re.MULTILINE).start() :]
    comment = "# The op's entry in op-plugin's op_plugin_functions.yaml:\n"
    comment += textwrap.indent(entry, "# ", lambda line: True).replace("# \n", "#\n")
    meta = segment("meta_registrations", "m") + "\n\n"
    meta += segment("meta_registrations", "{{ cookiecutter.op_name }}_meta")
    if target == "npu":
        return comment + "\n\n" + meta
    func = entry.split("func:", 1)[1].splitlines()[0].strip()
    stand_in = Template(OP_STAND_IN).substitute(name=json.dumps(OP_NAME), func=json.dumps(func))
    blocks = [comment, segment("op_plugin_dev", "reference"), stand_in, meta]
    return "\n\n".join(block.rstrip("\n") + "\n" for block in blocks)
{%- endif %}


def model_module() -> tuple[list[str], str]:
    """model.py as its absolute imports, and everything after its imports (helpers included)."""
    text = source("model")
    body = ast.parse(text).body
    imports = [node for node in body if isinstance(node, ast.Import | ast.ImportFrom)]
    absolute = [
        ast.get_source_segment(text, node)
        for node in imports
        if not (isinstance(node, ast.ImportFrom) and node.level)
    ]
    after = max(node.end_lineno for node in imports)
    return absolute, "\n".join(text.splitlines()[after:]).strip("\n") + "\n"


def model_block(target: str) -> str:
    _, model = model_module()
{%- if cache %}
    # The project's wrapper adds the options itself; the exported call names them.
    options = "NPUGRAPH_EX_OPTIONS" if target == "npu" else "NPUGRAPH_EX_OPTIONS if NPU else None"
    named = f"cache_dir=CACHE_DIR,\n{' ' * 12}options={options},\n"
    model = model.replace("cache_dir=CACHE_DIR,\n", named)
    if target == "npu":
        model = model.replace("cache_compile(", "torch.npu.npugraph_ex.inference.cache_compile(")
{%- endif %}
    return model


def versions() -> dict[str, str]:
    def version(distribution: str) -> str:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    python = platform.python_version()
    return {"python": python, "torch": version("torch"), "torch_npu": version("torch-npu")}


def imports(target: str) -> str:
    lines = ["import torch", "import torch.nn.functional as F"]
    if target == "npu":
        lines.append("import torch_npu  # noqa: F401  (the npu device and npugraph_ex)")
    lines.append("from torch import nn")
{%- if op_plugin %}
    lines.append("from torch.library import Library, impl")
{%- endif %}
    # Whatever else model.py imports (your model's helpers), in isort's order: standard library
    # first, then the rest with `import` before `from`.
    extra = [line for line in model_module()[0] if line not in lines]
    stdlib = sorted(line for line in extra if line.split()[1].split(".")[0] in STDLIB)
    lines = sorted({*lines, *extra} - set(stdlib), key=lambda line: (line.startswith("from"), line))
    block = ("\n".join(stdlib) + "\n\n" if stdlib else "") + "\n".join(lines) + "\n"
    return PORTABLE_PRELUDE + block if target == "portable" else block


def export(target: str) -> str:
    """The whole MRE file for `target` ("npu" or "portable")."""
    how = HOW[target]
    header = HEADER.substitute(
        model=MODEL_CLASS, project=PROJECT, setup=SETUP, target=target, how=how, **versions()
    )
    blocks = []
    if target == "portable":
        capture = ("NO_CAPTURE_SOCS", "NO_CAPTURE_PREFIXES")
        blocks += ["".join(segment("backend", name) for name in capture)]
        blocks += [segment("backend", "can_capture"), NPU_AVAILABLE]
    blocks.append(segment("backend", "NPUGRAPH_EX_OPTIONS"))
{%- if has_op %}
    blocks.append(custom_op_block(target))
{%- endif %}
{%- if cache %}
    if target == "portable":
        blocks.append(PORTABLE_CACHE_COMPILE)
{%- endif %}
    blocks += [model_block(target), MRE[target].substitute(model=MODEL_CLASS), MAIN]
    body = "\n\n".join(block.rstrip("\n") + "\n" for block in blocks)
    # isort keeps one blank line after the imports before a statement, ruff format two before a def.
    gap = "\n\n" if body.startswith(("def ", "@", "class ")) else "\n"
    return header + "\n" + imports(target) + gap + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("mre_export.py"))
    parser.add_argument("--target", choices=["npu", "portable"], default="npu")
    arguments = parser.parse_args(argv)
    arguments.output.write_text(export(arguments.target))
    print(f"wrote {arguments.output} ({arguments.target} target)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
