"""Write what the MRE runs as one self-contained .py file for a bug report, and verify it.

    python -m <package> export [-o FILE] [--target npu|portable]

The file is mre.py itself, bundled with everything of this project it imports, transitively:
your model.py and its sibling modules (relative or absolute imports), the custom operator's
registration, and the few helpers of this toolkit that the MRE calls. Third-party imports stay
imports (`import transformers`). It keeps the seed's shape: imports, definitions, then
def infer_one_step() with its fixed names, then the __main__ guard.

`--target npu` (default) writes the literal npugraph_ex form (.npu(), backend="npugraph_ex", or
under cache_compile torch.npu.npugraph_ex.inference.cache_compile) for a machine with torch_npu
and CANN; `portable` keeps the fallback to the aot_eager stand-in, so the same file also runs on a
CPU. Either way the file holds this project's settings as the code it runs: a branch on a setting
(`if project.DECODE:`) keeps only the side this project takes.

Before it writes the file, the tool runs it: in a fresh process, in an empty folder, with this
project unimportable, while the project's MRE runs here; the outputs must match within each
dtype's tolerance (contract.tolerances). Off an NPU the npu target's literals cannot run, so its
portable rendering (the same bundle, the stand-in backend) runs in its place, and the message says
so. Exit 0: written, ran and matched. Exit 1, and nothing written: it cannot be bundled (a name
defined twice, a data file beside your modules: one file cannot carry it), or the file fails or
differs when run; the message starts with the root cause. Exit 2, written: the file fails exactly
as the MRE fails here, which is the failure a bug report shows.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import importlib
import importlib.metadata
import importlib.util
import io
import json
import os
import platform
import re
import subprocess
import symtable
import sys
import tempfile
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import project

PACKAGE = __package__.rpartition(".")[0]
TOOLKIT = __package__
ENTRY = f"{PACKAGE}.mre"
LINE_LENGTH = 100
HOW = {
    "npu": "Runs on an Ascend NPU: torch_npu installed and CANN's set_env.sh sourced.",
    "portable": "Runs anywhere: npugraph_ex on a usable Ascend NPU, the aot_eager stand-in elsewhere.",
}


NPU_BACKEND = 'Backend("npugraph_ex", "npu", "the npu target of the export")'
"""What select_backend() decides on an NPU, as the npu target writes it."""


def npu_form(statement: str, path: Path, first_line: int) -> str:
    """The statement as the npu target writes it: select_backend()'s decision on an NPU in the
    seed's literal form. It reads the statement's structure, not its text, so any formatting
    reads alike:

    - `select_backend()` becomes the Backend it returns on an NPU, and of a name bound to it,
    - `.options` becomes NPUGRAPH_EX_OPTIONS and, but for cache_compile, `.name` "npugraph_ex";
    - `x.to(<it or the ranks of tensor_parallel()>.device)` becomes `x.npu()`.

    A use of select_backend() that is not a plain call is refused, naming its line: the file
    would choose its backend where it runs, which the npu target promises not to do.
    """
    tree = ast.parse(statement)
    backends, devices = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and is_call_of(node.value, "select_backend"):
            names = {target.id for target in node.targets if isinstance(target, ast.Name)}
            backends |= names
            devices |= names
        elif (
            isinstance(node, ast.withitem)
            and is_call_of(node.context_expr, "tensor_parallel")
            and isinstance(node.optional_vars, ast.Name)
        ):
            devices.add(node.optional_vars.id)
    calls = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    edits: list[tuple[ast.AST, ast.AST, str]] = []  # (from the start of, to the end of, new text)
    for node in ast.walk(tree):
        if is_call_of(node, "select_backend"):
            if node.args or node.keywords:
                refuse_backend_choice(path, first_line + node.lineno - 1)
            edits.append((node, node, NPU_BACKEND))
        elif isinstance(node, ast.Name) and node.id == "select_backend" and id(node) not in calls:
            refuse_backend_choice(path, first_line + node.lineno - 1)
        elif isinstance(node, ast.Attribute) and is_name_in(node.value, backends):
            if node.attr == "options":
                edits.append((node, node, "NPUGRAPH_EX_OPTIONS"))
            elif node.attr == "name" and not project.CACHE_COMPILE:
                edits.append((node, node, '"npugraph_ex"'))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "to"
            and not node.keywords
            and len(node.args) == 1
            and isinstance(device := node.args[0], ast.Attribute)
            and device.attr == "device"
            and is_name_in(device.value, devices)
        ):
            edits.append((node.func.value, node, ".npu()"))
    return replaced(statement, edits)


def is_call_of(node: ast.AST, function: str) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function
    )


def is_name_in(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def refuse_backend_choice(path: Path, line: int) -> None:
    raise BundleError(
        f"{path.name}:{line}: the npu target writes select_backend()'s choice on an NPU where it "
        "is called, and this use of it is not a call without arguments; call it plainly "
        "(`backend = select_backend()`), or export --target portable"
    )


def replaced(text: str, edits: list[tuple[ast.AST, ast.AST, str]]) -> str:
    """text with each edit made: from the start of its first node (or, where the two differ, the
    end of the first: the `.to(...)` after a value) to the end of the second."""
    spans = []
    for first, last, new in edits:
        begin = (
            offset(text, first.lineno, first.col_offset)  # type: ignore[attr-defined]
            if first is last
            else offset(text, first.end_lineno, first.end_col_offset)  # type: ignore[attr-defined]
        )
        spans.append((begin, offset(text, last.end_lineno, last.end_col_offset), new))  # type: ignore[attr-defined]
    for begin, end, new in sorted(spans, reverse=True):
        text = text[:begin] + new + text[end:]
    return text


# Where the names that the npu form writes are defined (npu_form).
LITERAL_NAMES = {"Backend": f"{TOOLKIT}.backend", "NPUGRAPH_EX_OPTIONS": f"{TOOLKIT}.backend"}
SCRIPT_NAMES = {"__file__", "__builtins__", "__cached__", "__annotations__"}
"""What Python defines in every script beside the builtins (which hold __name__, __spec__, ...)."""
PORTABLE_PRELUDE = """\
import os

# torch would import an installed torch_npu itself and die without CANN; the probe below does it.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
"""


# Data files: a module that finds files through its own location (these names and modules) reads
# the files beside it, which one exported file cannot carry.
LOCATING_NAMES = {"__file__", "__spec__", "__path__", "__loader__"}
LOCATING_MODULES = {"importlib.resources", "importlib_resources", "pkgutil"}
CODE_SUFFIXES = {".py", ".pyc", ".pyi", ".pyd", ".so"}


def not_data() -> set[str]:
    """Files of the package that are not data the model reads: a marker, and with an op-plugin op
    the yaml whose schema the bundle holds as a string (inline_calls)."""
    return {"py.typed", "op_plugin_functions.yaml"} if project.OP_PLUGIN else {"py.typed"}


class BundleError(Exception):
    """The project cannot be bundled into one file: the message says where and why."""


@dataclass
class Definition:
    """One top-level statement of a project module, with what it binds and what it needs."""

    module: str
    text: str
    binds: set[str]
    needs: set[str] = field(default_factory=set)


@dataclass
class Module:
    name: str
    path: Path
    definitions: list[Definition] = field(default_factory=list)
    # Local name → (project module, name there): `from .model import build_model as build`.
    project_names: dict[str, tuple[str, str]] = field(default_factory=dict)
    project_modules: list[str] = field(default_factory=list)
    """Project modules imported whole (`from . import layers`): run for their side effects."""
    # Local name → the import statement that binds it, for everything outside the project.
    external: dict[str, ast.stmt] = field(default_factory=dict)
    future_annotations: bool = False
    settings: set[str] = field(default_factory=set)
    """Local names of the toolkit's project module (`from . import project`): the file holds the
    values it reads (specialize)."""
    type_only: set[str] = field(default_factory=set)
    """Names imported under `if TYPE_CHECKING:`, for annotations only (drop_annotations)."""


def is_project(module: str) -> bool:
    return module == PACKAGE or module.startswith(f"{PACKAGE}.")


def absolute(module: Module, node: ast.ImportFrom) -> str:
    """The absolute module name of a (possibly relative) `from ... import`."""
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    # A module's own package is its name minus the last part (a package's __init__ aside).
    base = base[: len(base) - node.level + (module.path.name == "__init__.py")]
    return ".".join([*base, *([node.module] if node.module else [])])


def source_of(name: str) -> Path:
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its package is missing
        spec = None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise BundleError(f"{name} is not a Python source file this tool can bundle")
    return Path(spec.origin)


def is_module(name: str) -> bool:
    """Whether `name` is a module (`pkg.layers`), not a name in one (`pkg.model.build_model`).

    Only packages hold modules: a plain module is not imported to find that out, so bundling
    imports no model (nor torch) and a refusal comes at once.
    """
    parent = name.rpartition(".")[0]
    try:
        if parent:
            spec = importlib.util.find_spec(parent)
            if spec is None or spec.submodule_search_locations is None:
                return False
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def global_reads(text: str) -> set[str]:
    """Every global name the code reads, at any depth: not its parameters or local variables."""
    table = symtable.symtable(text, "<bundle>", "exec")
    reads, pending = set(), [table]
    while pending:
        scope = pending.pop()
        pending.extend(scope.get_children())
        for symbol in scope.get_symbols():
            if symbol.is_referenced() and (scope is table or symbol.is_global()):
                reads.add(symbol.get_name())
    return reads


def names_bound(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    return {
        child.id for target in targets for child in ast.walk(target) if isinstance(child, ast.Name)
    }


def is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def segment(lines: list[str], node: ast.stmt) -> str:
    """The statement's source with its decorators and the comment lines right above it."""
    return "\n".join(lines[segment_start(lines, node) - 1 : node.end_lineno])


def segment_start(lines: list[str], node: ast.stmt) -> int:
    """The line its segment starts on: the first comment line right above the statement or its
    first decorator."""
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    while start > 1 and lines[start - 2].lstrip().startswith("#"):
        start -= 1
    return start


def load(name: str, target: str) -> Module:
    """Parse one project module into its definitions and imports."""
    path = source_of(name)
    module = Module(name, path)
    text = path.read_text()
    # Named, so that a syntax error in your module is told as its file and line.
    tree = ast.parse(text, filename=str(path))
    lines = text.splitlines()
    for node in tree.body:
        if is_docstring(node) and node is tree.body[0]:
            continue  # the module docstring
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            module.future_annotations = True
        elif isinstance(node, ast.Import | ast.ImportFrom):
            add_import(module, node)
        elif is_type_checking(node):
            for child in node.body:
                if isinstance(child, ast.Import | ast.ImportFrom):
                    names = [alias.asname or alias.name.split(".")[0] for alias in child.names]
                    module.type_only.update(names)
        else:
            toolkit = is_toolkit(name)
            if not toolkit and (nested := project_imports(node)):
                lines = ", ".join(str(line) for line in sorted({n.lineno for n in nested}))
                what = "a project import" if len(nested) == 1 else "project imports"
                raise BundleError(
                    f"{path.name}:{lines}: {what} inside a function or block cannot be bundled; "
                    f"move {'it' if len(nested) == 1 else 'them'} to the top of the module"
                )
            if is_docstring(node) and module.definitions:
                # An attribute docstring belongs to the assignment right above it.
                previous = module.definitions[-1]
                previous.text += "\n" + segment(lines, node)
                continue
            statement = specialize(segment(lines, node), module.settings)
            if toolkit:
                statement = hoist_imports(module, statement)
            if not statement:
                continue  # a branch on a setting this project does not take
            if target == "npu":
                statement = npu_form(statement, path, segment_start(lines, node))
                if name == f"{TOOLKIT}.compile_cache":
                    statement = literal_cache_compile(statement)
            statement = inline_calls(name, statement)
            parsed = ast.parse(statement).body[0]
            module.definitions.append(
                Definition(name, statement, names_bound(parsed), global_reads(statement))
            )
    return module


def add_import(module: Module, node: ast.Import | ast.ImportFrom) -> None:
    """Record what a top-level import binds: a project name, a project module or an import."""
    if isinstance(node, ast.ImportFrom) and (node.level or is_project(node.module or "")):
        origin = absolute(module, node)
        for alias in node.names:
            local = alias.asname or alias.name
            if f"{origin}.{alias.name}" == f"{TOOLKIT}.project":
                module.settings.add(local)
            elif is_module(f"{origin}.{alias.name}"):
                module.project_modules.append(f"{origin}.{alias.name}")
                module.project_names[local] = (f"{origin}.{alias.name}", "")
            else:
                module.project_names[local] = (origin, alias.name)
    elif isinstance(node, ast.Import):
        for alias in node.names:
            if is_project(alias.name):
                raise BundleError(
                    f"{module.path.name}:{node.lineno}: `import {alias.name}` binds a module "
                    "object, which one file cannot hold; import names instead "
                    f"(from {alias.name} import ...)"
                )
            module.external[alias.asname or alias.name.split(".")[0]] = node
    else:
        for alias in node.names:
            module.external[alias.asname or alias.name] = node


def project_imports(node: ast.AST) -> list[ast.ImportFrom]:
    """The imports of this project's modules inside `node`, at any depth."""
    return [
        child
        for child in ast.walk(node)
        if isinstance(child, ast.ImportFrom) and (child.level or is_project(child.module or ""))
    ]


def is_type_checking(node: ast.stmt) -> bool:
    """`if TYPE_CHECKING:` (or typing.TYPE_CHECKING) with no else: imports for type hints only."""
    return (
        isinstance(node, ast.If)
        and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}
        and not node.orelse
    )


def inline_calls(module: str, statement: str) -> str:
    """Replace calls that read this project's files by their values, so the file stands alone."""
    if module == f"{TOOLKIT}.op_plugin":  # op-plugin projects only: the hook prunes it otherwise
        # From opschema, not op_plugin, which imports torch: export bundles without torch.
        from .opschema import schema

        # Calls only, not the definition: the yaml's func becomes a string in the file.
        literal = json.dumps(schema()).replace("\\", "\\\\")
        statement = re.sub(r"(?<!def )\bschema\(\)", literal, statement)
    return statement


def specialize(statement: str, settings: set[str]) -> str:
    """The statement as this project runs it, reading no setting: each `project.NAME` it reads
    (`project` among `settings`) written as its value, then what that decides cut to the side
    this project takes (`if`, `x if ... else y`, `and`, `or`, `not`, comparisons). Empty if the
    whole statement is a branch not taken."""
    if not settings:
        return statement
    while (step := fold_once(statement, settings)) is not None:
        statement = step
    return statement


def fold_once(text: str, settings: set[str]) -> str | None:
    """`text` with one setting, decided expression or branch folded; None if none is left."""
    tree = ast.parse(text)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):  # outer first: an f-string before the setting it holds
        if isinstance(node, ast.JoinedStr) and (folded := fold_fstring(text, node, settings)):
            return folded
        in_fstring = any(isinstance(parent, ast.JoinedStr) for parent in ancestors(node, parents))
        if not in_fstring and (value := setting(node, settings)):
            return replace(text, node, python_literal(value[0]))
        if isinstance(node, ast.BoolOp) and (kept := decided(text, node)) is not None:
            return replace(text, node, kept)
        not_ = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
        if (not_ or isinstance(node, ast.Compare)) and (known := constant(node)):
            return replace(text, node, python_literal(known[0]))
        if isinstance(node, ast.IfExp) and (known := constant(node.test)):
            return replace(text, node, source(text, node.body if known[0] else node.orelse))
        if isinstance(node, ast.If) and (known := constant(node.test)):
            return cut_branch(text, node, bool(known[0]), parents[node])
    return None


def ancestors(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> list[ast.AST]:
    found = []
    while node in parents:
        node = parents[node]
        found.append(node)
    return found


def setting(node: ast.AST, settings: set[str]) -> tuple[Any] | None:
    """(value,) of `project.NAME`, a setting of a plain type; None for anything else."""
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in settings
        and isinstance(node.ctx, ast.Load)
        and hasattr(project, node.attr)
    ):
        value = getattr(project, node.attr)
        if value is None or isinstance(value, bool | int | str):
            return (value,)
    return None


def constant(node: ast.AST) -> tuple[Any] | None:
    """(value,) of an expression of literals only (`"none" == "in_place"`); None otherwise."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        operand = constant(node.operand)
        return None if operand is None else (not operand[0],)
    if isinstance(node, ast.Compare):
        values = [constant(each) for each in [node.left, *node.comparators]]
        if None in values or any(type(op) not in COMPARISONS for op in node.ops):
            return None
        pairs = zip(node.ops, values, values[1:], strict=False)
        return (all(COMPARISONS[type(op)](a[0], b[0]) for op, a, b in pairs),)  # type: ignore[index]
    try:
        return (ast.literal_eval(node),)
    except (ValueError, TypeError, SyntaxError):
        return None


COMPARISONS = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,  # codespell:ignore notin
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


def decided(text: str, node: ast.BoolOp) -> str | None:
    """What `and`/`or` whose first operand is a literal comes to: that operand if it decides
    (`False and x`), else the other operands (`True and x` is x); None if it is no literal."""
    first = constant(node.values[0])
    if first is None:
        return None
    if bool(first[0]) == isinstance(node.op, ast.Or):
        return source(text, node.values[0])
    joiner = " or " if isinstance(node.op, ast.Or) else " and "
    return joiner.join(source(text, value) for value in node.values[1:])


def fold_fstring(text: str, node: ast.JoinedStr, settings: set[str]) -> str | None:
    """The f-string with each plain `{project.NAME}` written into its text, as the Jinja template
    once wrote it; an f-string left with no field loses its f."""
    fields = [
        part.value
        for part in node.values
        if isinstance(part, ast.FormattedValue)
        and part.conversion == -1
        and part.format_spec is None
        and setting(part.value, settings)
    ]
    if not fields:
        return None
    segment = source(text, node)
    for attribute in fields:
        assert isinstance(attribute, ast.Attribute)
        assert isinstance(attribute.value, ast.Name)
        value = str(getattr(project, attribute.attr))
        # An f-string's own braces are doubled (written so, as this file holds no Jinja).
        escaped = value.replace("\\", "\\\\").replace("{", "{" * 2).replace("}", "}" * 2)
        name = r"\{\s*" + re.escape(attribute.value.id) + r"\s*\.\s*" + attribute.attr + r"\s*\}"
        segment = re.sub(name, escaped.replace("\\", "\\\\"), segment)
    folded = ast.parse(f"({segment})").body[0]
    assert isinstance(folded, ast.Expr)
    if not any(isinstance(part, ast.FormattedValue) for part in ast.walk(folded.value)):
        segment = drop_f_prefixes(segment)
    return replace(text, node, segment)


def drop_f_prefixes(segment: str) -> str:
    """The (implicitly concatenated) string `segment` with its f prefixes removed."""
    starts = {tokenize.STRING, getattr(tokenize, "FSTRING_START", tokenize.STRING)}
    lines = segment.split("\n")
    cuts = []
    for token in tokenize.generate_tokens(io.StringIO(f"({segment})").readline):
        prefix = re.match(r"[a-zA-Z]*", token.string)
        if token.type in starts and prefix and "f" in prefix.group().lower():
            line, column = token.start
            column -= line == 1  # the opening parenthesis added above
            cuts.append((line, column + prefix.group().lower().index("f")))
    for line, column in sorted(cuts, reverse=True):
        lines[line - 1] = lines[line - 1][:column] + lines[line - 1][column + 1 :]
    return "\n".join(lines)


def python_literal(value: Any) -> str:
    """`value` as ruff format writes it: a string in double quotes."""
    text = repr(value)
    if isinstance(value, str) and text.startswith("'") and '"' not in value:
        text = f'"{text[1:-1]}"'
    return text


def cut_branch(text: str, node: ast.If, taken: bool, parent: ast.AST) -> str:
    """`text` with the `if` statement `node` replaced by the branch its decided test takes; the
    comment lines right above it, which speak of the test, go with the test."""
    lines = text.split("\n")
    indent = node.col_offset
    if taken:
        header_end = node.test.end_lineno or node.lineno
        while lines[header_end].lstrip().startswith(")"):  # a test over several lines
            header_end += 1
        block = lines[header_end : node.body[-1].end_lineno]
        kept = dedent(block, node.body[0].col_offset - indent)
    elif not node.orelse:
        return remove_statement(text, node, parent)
    elif isinstance(elif_ := node.orelse[0], ast.If) and is_elif(lines, elif_):
        line = lines[elif_.lineno - 1]
        kept = [line[:indent] + line[indent:].replace("elif", "if", 1)]
        kept += lines[elif_.lineno : node.end_lineno]
    else:
        between = range(node.body[-1].end_lineno or 0, node.orelse[0].lineno)
        else_line = max(at for at in between if lines[at - 1].strip().startswith("else"))
        block = lines[else_line : node.orelse[-1].end_lineno]
        kept = dedent(block, node.orelse[0].col_offset - indent)
    start = comments_above(lines, node.lineno)
    return "\n".join([*lines[: start - 1], *kept, *lines[node.end_lineno :]])


def comments_above(lines: list[str], line: int) -> int:
    """The first of the comment lines right above `line` (from 1), or `line` itself."""
    while line > 1 and lines[line - 2].lstrip().startswith("#"):
        line -= 1
    return line


def is_elif(lines: list[str], node: ast.If) -> bool:
    return lines[node.lineno - 1].lstrip().startswith("elif")


def remove_statement(text: str, node: ast.stmt, parent: ast.AST) -> str:
    """`text` without the statement `node` and the comment lines right above it; `pass` in its
    place if its block holds nothing else, and empty if it was the whole text."""
    lines = text.split("\n")
    start = comments_above(lines, node.lineno)
    blocks = [getattr(parent, name, []) for name in ("body", "orelse", "finalbody")]
    block = next(block for block in blocks if any(statement is node for statement in block))
    if len(block) > 1:
        kept = []
    elif isinstance(parent, ast.Module):
        return ""
    else:
        kept = [" " * node.col_offset + "pass"]
    end = node.end_lineno or node.lineno
    before = lines[start - 2].rstrip() if start > 1 else ""
    blank_after = end < len(lines) and not lines[end].strip()
    if not kept and blank_after and (not before or before.endswith(":")):
        end += 1  # no blank line left at the start of a block, nor two in a row
    return "\n".join([*lines[: start - 1], *kept, *lines[end:]])


def dedent(lines: list[str], by: int) -> list[str]:
    return [line[min(by, len(line) - len(line.lstrip(" "))) :] for line in lines]


def source(text: str, node: ast.AST) -> str:
    return ast.get_source_segment(text, node) or ""


def offset(text: str, line: int, column: int) -> int:
    """Where in `text` the ast position (line from 1, column in UTF-8 bytes) is."""
    lines = text.split("\n")
    before = sum(len(each) + 1 for each in lines[: line - 1])
    return before + len(lines[line - 1].encode()[:column].decode())


def replace(text: str, node: ast.AST, new: str) -> str:
    start = offset(text, node.lineno, node.col_offset)  # type: ignore[attr-defined]
    end = offset(text, node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
    return text[:start] + new + text[end:]


def hoist_imports(module: Module, statement: str) -> str:
    """A toolkit statement without the project imports inside it (`from .decode import
    first_step` in the branch that needs it): their names are the module's, for the bundle to
    define; the file runs where the project is not."""
    while True:
        tree = ast.parse(statement)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        nested = project_imports(tree)
        if not nested:
            return statement
        add_import(module, nested[0])
        statement = remove_statement(statement, nested[0], parents[nested[0]])


def literal_cache_compile(statement: str) -> str:
    """compile_cache's cache_compile(...) as the seed writes it on an NPU: npugraph_ex's own with
    the npugraph_ex options; a rank's keywords (**ranks) only with tensor parallelism, which
    alone passes any."""
    while call := next(
        (
            node
            for node in ast.walk(ast.parse(statement))
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "cache_compile"
        ),
        None,
    ):
        line = statement.split("\n")[call.lineno - 1]
        indent = " " * (len(line) - len(line.lstrip(" ")))
        arguments = [source(statement, argument) for argument in call.args]
        arguments += [source(statement, kw) for kw in call.keywords if kw.arg is not None]
        arguments.append("options=NPUGRAPH_EX_OPTIONS")
        if project.TENSOR_PARALLEL:
            arguments += [source(statement, kw) for kw in call.keywords if kw.arg is None]
        inner = "".join(f"{indent}    {argument},\n" for argument in arguments)
        literal = f"torch.npu.npugraph_ex.inference.cache_compile(\n{inner}{indent})"
        statement = replace(statement, call, literal)
    return statement


def drop_annotations(text: str, names: set[str]) -> str:
    """`text` without the annotations that name one of `names`: types imported for type hints
    only, from a module the file does not carry (parallel.py in a project without tensor
    parallelism), which would be undefined names in it."""
    while True:
        tree = ast.parse(text)
        found = next(
            (
                (owner, annotation)
                for owner in ast.walk(tree)
                for annotation in annotations_of(owner)
                if names & {name.id for name in ast.walk(annotation) if isinstance(name, ast.Name)}
            ),
            None,
        )
        if found is None:
            return text
        owner, annotation = found
        end = offset(text, annotation.end_lineno, annotation.end_col_offset)  # type: ignore[arg-type]
        default = ""
        if isinstance(owner, ast.arg):  # `ranks: Ranks | None = None` becomes `ranks=None`
            start = offset(text, owner.lineno, owner.col_offset) + len(owner.arg)
            if text.startswith(" = ", end):
                default, end = "=", end + 3
        else:  # the return annotation: `) -> Ranks:` becomes `):`
            start = text.rindex("->", 0, offset(text, annotation.lineno, annotation.col_offset))
            start = len(text[:start].rstrip(" "))
        text = text[:start] + default + text[end:]


def annotations_of(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.arg) and node.annotation:
        return [node.annotation]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
        return [node.returns]
    return []


class Bundler:
    """Collects the definitions the entry module needs, each after what it needs, in one file."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.modules: dict[str, Module] = {}
        self.emitted: list[Definition] = []
        self.seen: set[int] = set()
        self.started: set[int] = set()
        """Definitions being emitted: what they read comes first, they follow it."""
        self.waiting: list[Definition] = []
        """Definitions that read one being emitted (a table filled with a class's method, after
        the class): each follows it."""
        self.bound: dict[str, str] = {}
        """Top-level name → the module whose definition it is, to catch two of one name."""
        self.imports: dict[str, tuple[ast.stmt, str]] = {}
        self.entered: set[str] = set()

    def module(self, name: str) -> Module:
        if name not in self.modules:
            self.modules[name] = load(name, self.target)
        return self.modules[name]

    def enter(self, name: str) -> None:
        """A module is used: first run the project modules it imports whole (their side effects)."""
        if name in self.entered:
            return
        self.entered.add(name)
        for whole in self.module(name).project_modules:
            self.whole(whole)

    def whole(self, name: str) -> None:
        self.enter(name)
        module = self.module(name)
        self.refuse_module_objects(module)
        for definition in module.definitions:
            if name.startswith(f"{TOOLKIT}.") and not side_effect(definition):
                continue  # the rest of a toolkit module travels only where it is needed
            self.emit(definition)

    def refuse_module_objects(self, module: Module) -> None:
        """A module object (`from . import layers`, then `layers.X`) has no place in one file."""
        for definition in module.definitions:
            used = {
                local
                for local, (origin, attribute) in module.project_names.items()
                if attribute == "" and local in definition.needs
            }
            if used:
                objects = f"object{'s' * (len(used) > 1)} {', '.join(sorted(used))}"
                raise BundleError(
                    f"{module.path.name} uses the module {objects}: one file has no "
                    "modules; import the names you use instead (from .module import name)"
                )

    def emit(self, definition: Definition) -> None:
        if id(definition) in self.seen:
            return
        self.seen.add(id(definition))
        self.started.add(id(definition))
        module = self.module(definition.module)
        self.enter(definition.module)
        for name in sorted(definition.needs - definition.binds):
            self.resolve(module, name)
        for name in definition.binds:
            owner = self.bound.setdefault(name, definition.module)
            if owner != definition.module:
                raise BundleError(
                    f"`{name}` is defined in both {owner} and {definition.module}: one file holds "
                    f"one of each name; {renaming(name, owner, definition.module)}"
                )
        self.emitted.append(definition)
        self.started.discard(id(definition))
        # One at a time: emitting one may emit others that waited.
        while ready := next((d for d in self.waiting if not self.reads_one_started(d)), None):
            self.waiting = [d for d in self.waiting if d is not ready]
            self.emit(ready)

    def reads_one_started(self, definition: Definition) -> bool:
        """Whether `definition` reads a name of its module whose definition is being emitted."""
        module = self.module(definition.module)
        return any(
            id(other) in self.started
            for other in module.definitions
            if other.binds & (definition.needs - definition.binds)
        )

    def resolve(self, module: Module, name: str) -> None:
        """Make `name`, as `module` means it, defined in the bundle."""
        local = [d for d in module.definitions if name in d.binds]
        if local:
            for definition in local:
                if self.reads_one_started(definition):
                    if all(d is not definition for d in self.waiting):
                        self.waiting.append(definition)
                else:
                    self.emit(definition)
        elif name in module.project_names:
            origin, attribute = module.project_names[name]
            if not origin.startswith(f"{TOOLKIT}."):
                # Your modules travel whole: a statement of theirs may register something.
                self.whole(origin)
            if attribute:
                self.resolve(self.module(origin), attribute)
                if attribute != name:
                    # It needs nothing more: `attribute` is resolved above, as `origin` means it.
                    self.emit(Definition(module.name, f"{name} = {attribute}", {name}))
        elif name in LITERAL_NAMES and name not in module.external:
            # A name the npu target's literal form brings in (npu_form).
            self.resolve(self.module(LITERAL_NAMES[name]), name)
        elif name in module.external:
            statement = module.external[name]
            known = self.imports.setdefault(name, (statement, module.name))
            if binding(known[0], name) != binding(statement, name):
                raise BundleError(
                    f"`{name}` is imported differently in {known[1]} and {module.name}; "
                    "import it the same way in both"
                )

    def bundle(self) -> str:
        entry = self.module(ENTRY)
        self.enter(ENTRY)
        self.refuse_module_objects(entry)
        for definition in entry.definitions:
            self.emit(definition)
        self.refuse_data_files()
        for definition in self.emitted:
            # Type hints of a module the file does not carry: without them it holds no such name.
            missing = self.module(definition.module).type_only - {*self.bound, *self.imports}
            if missing:
                definition.text = drop_annotations(definition.text, missing)
        return render(self.target, self.emitted, self.imports, self.future_annotations)

    def refuse_data_files(self) -> None:
        """Your modules find files beside them and the package holds some: name each, and refuse.

        The exported file travels alone, to a bug tracker: nothing would be beside it.
        """
        yours = [self.modules[name] for name in sorted(self.entered) if not is_toolkit(name)]
        locating = [use for module in yours if (use := locates_files(module))]
        folder = source_of(PACKAGE).parent
        if locating and (found := data_files(folder)):
            raise BundleError(
                f"the exported file cannot carry the data files your modules read: "
                f"{', '.join(found)} (in {folder}, found at {', '.join(locating)}). Build what they "
                "hold from the seed instead: random weights from the torch.manual_seed(0) the MRE "
                "runs before build_model() show a graph-mode bug as well, and small values (a "
                "config) can be written into model.py"
            )

    @property
    def future_annotations(self) -> bool:
        return any(self.modules[d.module].future_annotations for d in self.emitted)


def is_toolkit(module: str) -> bool:
    return module.startswith(f"{TOOLKIT}.")


def locates_files(module: Module) -> str:
    """Where `module` first finds files through its own location: `model.py:5 through __file__`."""
    uses = []
    for node in ast.walk(ast.parse(module.path.read_text())):
        if isinstance(node, ast.Name) and node.id in LOCATING_NAMES:
            uses.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and ast.unparse(node) in LOCATING_MODULES:
            uses.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            uses.extend((node.lineno, name) for name in names if name in LOCATING_MODULES)
    if not uses:
        return ""
    line, name = min(uses)
    return f"{module.path.name}:{line} through {name}"


def data_files(folder: Path) -> list[str]:
    """The files in the package `folder` that are data, not code, relative to it."""
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        hidden = any(part.startswith(".") or part == "__pycache__" for part in relative.parts)
        known = path.suffix in CODE_SUFFIXES or path.name in not_data()
        if path.is_file() and not hidden and not known:
            found.append(relative.as_posix())
    return found


def side_effect(definition: Definition) -> bool:
    """A toolkit module's statements that run for their effect: bare calls and `_private = ...`."""
    return all(name.startswith("_") for name in definition.binds)


def renaming(name: str, *modules: str) -> str:
    """Which of two modules that both define `name` to rename it in: the user's, where the other
    is the toolkit's (the template's file, which an update would overwrite)."""
    yours = [module for module in modules if ".toolkit." not in f"{module}."]
    if len(yours) == 1:
        return (
            f"rename `{name}` in {yours[0]}: the other is the toolkit's, which the template keeps"
        )
    return "rename one of them"


def binding(statement: ast.stmt, name: str) -> str:
    """What an import statement that binds `name` binds it to: `torch.nn.functional`, `torch`, ..."""
    names = statement.names  # type: ignore[attr-defined]
    alias = next(alias for alias in names if (alias.asname or alias.name.split(".")[0]) == name)
    if isinstance(statement, ast.Import):
        return alias.name if alias.asname else name  # `import torch.nn` binds torch
    return f"{statement.module}.{alias.name}"


def import_lines(imports: dict[str, tuple[ast.stmt, str]], target: str) -> list[list[str]]:
    """The import block as isort sorts it: standard library, then third party."""
    plain: set[str] = set()
    from_imports: dict[str, set[str]] = {}
    for name, (statement, _) in imports.items():
        for alias in statement.names:  # type: ignore[attr-defined]
            if (alias.asname or alias.name.split(".")[0]) != name:
                continue
            as_part = f" as {alias.asname}" if alias.asname else ""
            if isinstance(statement, ast.Import):
                plain.add(f"{alias.name}{as_part}")
            else:
                from_imports.setdefault(statement.module, set()).add(f"{alias.name}{as_part}")
    if target == "npu":
        plain.add("torch_npu  # noqa: F401  (the npu device and npugraph_ex)")
    sections: list[list[str]] = [[], []]
    for module in sorted(plain, key=lambda text: text.lower()):
        sections[third_party(module)].append(f"import {module}")
    for module in sorted(from_imports, key=str.lower):
        for names in from_statements(from_imports[module]):
            line = f"from {module} import {', '.join(names)}"
            if len(line) > LINE_LENGTH:
                inner = "".join(f"    {name},\n" for name in names)
                line = f"from {module} import (\n{inner})"
            sections[third_party(module)].append(line)
    return [section for section in sections if section]


def from_statements(names: set[str]) -> list[list[str]]:
    """The names one module gives, as isort's statements: one for the plain names, one for each
    renamed one (`name as other`, isort's default), each in its order by its first name."""
    ordered = sorted(names, key=isort_key)
    plain = [name for name in ordered if " as " not in name]
    renamed = [[name] for name in ordered if " as " in name]
    return sorted([plain, *renamed] if plain else renamed, key=lambda names: isort_key(names[0]))


def third_party(module: str) -> int:
    return int(module.split(".")[0].split()[0] not in sys.stdlib_module_names)


def isort_key(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions and modules."""
    bare = name.split(" as ")[0]
    kind = 0 if bare.isupper() and len(bare) > 1 else 1 if bare[:1].isupper() else 2
    return kind, bare.lower()


def setup() -> str:
    """The answers the code depends on, as the header names them: `mode npugraph_ex, custom op
    in_place (op_plugin)`."""
    op = project.CUSTOM_OP
    if op != "none":
        op += f" ({project.OP_REGISTRATION})"
    return f"mode {project.MODE}, custom op {op}"


def header(target: str) -> str:
    def version(distribution: str) -> str:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return (
        '"""Minimal reproducible example: one graph-mode inference step of the model.\n\n'
        f"Exported by {project.PROJECT} (python -m {PACKAGE} export) for target {target}.\n"
        f"Project setup: {setup()}.\n"
        f"Versions: Python {platform.python_version()}, torch {version('torch')}, "
        f"torch_npu {version('torch-npu')}.\n"
        f'{HOW[target]}\n"""\n'
    )


def render(
    target: str,
    definitions: list[Definition],
    imports: dict[str, tuple[ast.stmt, str]],
    future_annotations: bool,
) -> str:
    blocks = []
    if future_annotations:
        blocks.append("from __future__ import annotations\n")
    if target == "portable":
        blocks.append(PORTABLE_PRELUDE)
        # The prelude imports os itself, before torch: isort keeps it there.
        imports = {name: value for name, value in imports.items() if name != "os"}
    sections = import_lines(imports, target)
    blocks.extend("\n".join(section) + "\n" for section in sections)
    body = "\n\n\n".join(definition.text for definition in definitions) + "\n"
    # isort leaves one blank line after the imports before a statement, ruff format two before a def.
    gap = "\n\n" if body.startswith(("def ", "@", "class ")) else "\n"
    return header(target) + "\n" + "\n".join(blocks) + gap + body


def undefined_names(text: str) -> list[str]:
    """Names the file reads but never binds, at any scope (a small pyflakes, from symtable)."""
    table = symtable.symtable(text, "<export>", "exec")
    bound = {
        symbol.get_name()
        for symbol in table.get_symbols()
        if symbol.is_assigned() or symbol.is_imported()
    }
    return sorted(global_reads(text) - bound - set(dir(builtins)) - SCRIPT_NAMES)


def verify(text: str, target: str) -> None:
    """Raise BundleError unless `text` compiles and every name it reads is defined."""
    try:
        compile(text, f"<export --target {target}>", "exec")
    except SyntaxError as error:
        raise BundleError(f"the bundled file does not compile: {error}") from error
    if missing := undefined_names(text):
        raise BundleError(
            f"the bundled file would use undefined names: {', '.join(missing)}; "
            "define or import them at the top of your modules"
        )


def export(target: str) -> str:
    """The whole MRE file for `target` ("npu" or "portable"), checked without running it."""
    text = Bundler(target).bundle()
    verify(text, target)
    return text


@dataclass
class Run:
    """One run of the MRE: its output as {leaf path: value}, or the error it raised."""

    output: dict[str, Any] | None = None
    error: str = ""
    """`Type: message` of what it raised, empty if it ran."""
    where: str = ""
    """Where in the file the error arose: ` (at mre_export.py:12: output = model(x))`."""


# The file, run as `python FILE` runs it (the guard calls infer_one_step(): this calls it itself, to
# keep its output), with this project unimportable. The output is saved leaf by leaf, on the CPU.
RUNNER = """\
import importlib.util, json, re, sys, traceback

path, result, package = sys.argv[1:]
sys.argv = [path]
sys.modules[package] = None  # the file must not need this project: importing it raises
try:
    # A module that stays in sys.modules, as `python FILE`'s __main__ does: Dynamo imports the
    # module whose globals a function it inlines reads (a submodule's forward).
    spec = importlib.util.spec_from_file_location("__export__", path)
    module = sys.modules["__export__"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    output = module.infer_one_step()
except BaseException as error:
    # Dynamo names the traced line of the file in its message, a traceback the calling line.
    pattern = 'File "' + re.escape(path) + '", line ([0-9]+)'
    traced = [int(line) for line in re.findall(pattern, str(error))] or [
        frame.lineno
        for frame in traceback.extract_tb(error.__traceback__)
        if frame.filename == path
    ]
    failure = {"error": f"{type(error).__name__}: {error}", "line": (traced or [None])[-1]}
    with open(result + ".json", "w") as file:
        json.dump(failure, file)
    sys.exit(1)
import torch
import torch.utils._pytree as pytree

leaves = pytree.tree_leaves_with_path(output)
flat = {pytree.keystr(key) or "output": value for key, value in leaves}
torch.save(pytree.tree_map_only(torch.Tensor, torch.Tensor.cpu, flat), result)
"""
ISOLATED = "in a fresh process, in an empty folder, with this project unimportable"
"""How export runs the file it is about to write."""
ERROR_LINES = 8
"""Lines of an error message shown: the first, `Type: message`, is the root cause."""


def short(error: str) -> str:
    lines = [line for line in error.splitlines() if line.strip()][:ERROR_LINES]
    return "\n    ".join(lines)


def first_line(error: str) -> str:
    return next((line for line in error.splitlines() if line.strip()), error)


def rehearsal(target: str, text: str) -> tuple[str, str, str]:
    """What runs here to prove the file for `target`: its text, what it is, and what is not run.

    The npu target's literals (.npu(), npugraph_ex) need an NPU. Off one, its portable rendering,
    the same bundle with the stand-in backend, runs in its place.
    """
    if target == "npu":
        from .backend import npu_status

        npu_ok, why = npu_status()
        if not npu_ok:
            unrun = f"the npu literals (.npu(), npugraph_ex) were not run: they need an NPU ({why})"
            return export("portable"), "its portable rendering", unrun
    return text, "the file", ""


class FileRun:
    """`text` run as the file `name` in a fresh process, in an empty folder, with this project
    unimportable: started at once, so that other work goes on meanwhile; result() waits for it,
    close() stops it if it is still going and removes its folder."""

    def __init__(self, text: str, name: str) -> None:
        self.text, self.name = text, name
        self.scratch = tempfile.TemporaryDirectory(prefix="export-")
        folder = Path(self.scratch.name, "empty")
        folder.mkdir()
        self.path, self.saved = folder / name, Path(self.scratch.name, "output.pt")
        self.path.write_text(text)
        self.stderr = Path(self.scratch.name, "stderr")
        command = [sys.executable, "-c", RUNNER, str(self.path), str(self.saved), PACKAGE]
        output = subprocess.DEVNULL  # the report it prints
        with self.stderr.open("w") as stderr:  # the process writes it; read once it has ended
            self.process = subprocess.Popen(command, cwd=folder, stdout=output, stderr=stderr)

    def close(self) -> None:
        """Stop the run if nothing waited for it to end, and remove its folder."""
        if self.process.returncode is None:
            self.process.kill()
        self.process.wait()
        self.scratch.cleanup()

    def result(self, timeout: float | None = None) -> Run:
        """The file's run once it has ended (subprocess.TimeoutExpired if it runs on past
        `timeout` seconds): its output leaf by leaf, or its error named by the file's line."""
        self.process.wait(timeout)
        if self.saved.exists():
            import torch

            return Run(torch.load(self.saved, weights_only=False))
        failure = Path(f"{self.saved}.json")
        if failure.exists():
            error, lines = json.loads(failure.read_text()), self.text.splitlines()
            line = error["line"]
            # The line itself: nothing is written to look it up in.
            where = f" (at {self.name}:{line}: {lines[line - 1].strip()})" if line else ""
            # Named as you will know it, not by this scratch folder's path.
            return Run(error=error["error"].replace(str(self.path), self.name), where=where)
        tail = "\n".join(self.stderr.read_text().strip().splitlines()[-ERROR_LINES:])
        return Run(error=f"the process exited {self.process.returncode}: {tail}")


def rehearse(text: str, name: str) -> tuple[Run, Run]:
    """Run `text` as the file `name` (FileRun), and meanwhile the project's MRE here: (the file's
    run, the MRE's run)."""
    with contextlib.closing(FileRun(text, name)) as file:
        mre = run_mre()
        return file.result(), mre


def leaves(output: Any) -> dict[str, Any]:
    """An MRE's output as export compares it: {leaf path: value}, each tensor on the CPU."""
    import torch
    import torch.utils._pytree as pytree

    flat = {
        pytree.keystr(key) or "output": value for key, value in pytree.tree_leaves_with_path(output)
    }
    return pytree.tree_map_only(torch.Tensor, torch.Tensor.cpu, flat)


def run_mre() -> Run:
    """The project's MRE, run here from an empty folder: its output leaf by leaf, or its error."""
    import torch

    here = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="export-mre-") as folder:
        try:
            mre = importlib.import_module(ENTRY)  # from here: the path may name where you are
            torch._dynamo.reset()  # a fresh compile, whatever this process compiled before
            os.chdir(folder)
            with contextlib.redirect_stdout(io.StringIO()):
                output = mre.infer_one_step()
        except Exception as error:  # noqa: BLE001  (compared with the file's error)
            return Run(error=f"{type(error).__name__}: {error}")
        finally:
            os.chdir(here)
    return Run(leaves(output))


def judge(file: Run, mre: Run, what: str) -> tuple[int, str]:
    """The exit status for `what`'s run against the MRE's, and why, the root cause first: 0 it
    matches; 1 it fails or differs (not written); 2 it fails as the MRE fails here."""
    from .contract import leaf_mismatch

    if file.error and first_line(file.error) == first_line(mre.error):
        same = "and so does the MRE run here in an empty folder, with the same error"
        return 2, f"{what} fails when run {ISOLATED}, {same}:\n    {short(file.error)}"
    if file.error:
        return 1, f"{short(file.error)}{file.where}\n  {what} fails when run {ISOLATED}"
    if mre.error:
        return 1, f"{short(mre.error)}\n  the MRE fails here, while {what} runs {ISOLATED}"
    if list(file.output) != list(mre.output):
        leaves = f"leaves {', '.join(file.output)} where the MRE has {', '.join(mre.output)}"
        differ = [f"the output's structure differs: {leaves}"]
    else:  # leaf by leaf, each within its dtype's tolerance (contract.tolerances)
        found = [
            leaf_mismatch(path, file.output[path], mre.output[path], {}) for path in mre.output
        ]
        differ = [str(mismatch) for mismatch in found if mismatch]
    if differ:
        shown = differ[:ERROR_LINES]
        if len(differ) > ERROR_LINES:
            shown.append(f"and {len(differ) - ERROR_LINES} more leaves differ")
        why = "\n    ".join(shown)
        return 1, f"{why}\n  {what}, run {ISOLATED}, differs from the MRE's output"
    return 0, f"{what} ran {ISOLATED}, and matches the MRE's output"


def write(path: Path, text: str) -> None:
    """Write `text` at `path` whole or not at all: a failed write leaves nothing half-made."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(text)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("mre_export.py"))
    parser.add_argument("--target", choices=["npu", "portable"], default="npu")
    arguments = parser.parse_args(argv)
    output, target = arguments.output, arguments.target
    # Before the bundle and its run, which take seconds: a place the file cannot go.
    if output.is_dir() or not output.absolute().parent.is_dir():
        where = "is a folder" if output.is_dir() else "is in a folder that does not exist"
        parser.error(f"argument -o/--output: {output} {where}: give a file in an existing folder")
    try:
        text = export(target)
        runnable, what, unrun = rehearsal(target, text)
    except BundleError as error:
        print(f"export: cannot bundle the MRE: {error}", file=sys.stderr)
        return 1
    from .contract import ContractError

    try:
        code, verdict = judge(*rehearse(runnable, output.name), what)
    except ContractError as error:  # model.py's TOLERANCES, which judge() compares within
        print(
            f"export: {error} (README, section 'Tolerances'); nothing written to {output}",
            file=sys.stderr,
        )
        return 1
    if code == 1:
        print(f"export: {verdict}; nothing written to {output}", file=sys.stderr)
        return 1
    try:
        write(output, text)
    except OSError as error:
        print(f"export: cannot write {output}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {output} ({target} target): {verdict}", file=sys.stderr)
    if unrun:
        print(f"  {unrun}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
