"""Write your model and the MRE as one self-contained .py file for a bug report, and verify it.

    python -m <package> export [-o FILE] [--target npu|portable]

The file holds your code and the MRE, nothing else, in the plain style of the repro.py that
PyTorch's minifier writes: a header comment, the imports, your modules (model.py, the modules of
yours it imports, relatively or absolutely, and the few toolkit definitions they import, such as
KVCacheParallel or npu_status), then mre.py in the seed's shape: its definitions,
def infer_one_step() with its fixed names, and the __main__ guard calling it. Third-party imports
stay imports.

mre.py's `backend = select_backend()` is written out as the target decides it (LiteralMre).
`--target npu` (default) writes the seed's literal npugraph_ex form for a machine with torch_npu
and CANN; the file imports torch_npu first and, where it cannot, says so in one sentence and
exits 2. `--target portable` writes the aot_eager stand-in on the CPU, which runs anywhere. A
tensor-parallel MRE runs under torchrun: its guard starts the process group, calls
infer_one_step() and destroys the group, in plain sequence as the seed writes a step (a rank that
fails exits with its traceback, and torchrun ends the job).

Before it writes the file, the tool runs it: in a fresh process, in an empty folder, with this
project unimportable, while the project's MRE runs here; the outputs must match within each
dtype's tolerance (contract.tolerances). Off an NPU the npu target's literals cannot run, so its
portable rendering runs in its place, and the message says so. Exit 0: written, ran and matched.
Exit 1, and nothing written: it cannot be bundled (a name defined twice, a data file beside your
modules: one file cannot carry it), or the file fails or differs when run; the message starts
with the root cause. Exit 2, written: the file fails exactly as the MRE fails here, which is the
failure a bug report shows.
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
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from . import project

PACKAGE = __package__.rpartition(".")[0]
TOOLKIT = __package__
ENTRY = f"{PACKAGE}.mre"
LINE_LENGTH = 100
TORCHRUN_RANKS = 2
"""The ranks of the header's torchrun command for a tensor-parallel MRE."""
# What select_backend() decides, as each target writes it: (backend, device, where it runs).
TARGETS = {
    "npu": ("npugraph_ex", "npu", "an Ascend NPU, with torch_npu and CANN's set_env.sh sourced"),
    "portable": ("aot_eager", "cpu", "any machine, with the aot_eager stand-in on the CPU"),
}
# torch imports an installed torch_npu itself ("device backend autoload"), and dies with a
# RuntimeError where CANN is not sourced: the file switches that off first.
PRELUDE = """\
import os

# An installed torch_npu is imported below, if at all, not by `import torch`.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
"""
# The npu file's import of torch_npu: where it fails, one sentence and exit 2, not a traceback.
TORCH_NPU_IMPORT = """\
try:
    import torch_npu  # noqa: F401  (the npu device and npugraph_ex)
except ImportError:
    print(
        "This MRE needs torch_npu with CANN sourced; its `--target portable` export runs anywhere.",
        file=sys.stderr,
    )
    sys.exit(2)
"""
# What the guard and the npu file's import of torch_npu read: imported so where mre.py does not.
PLAIN_IMPORTS = {
    "sys": "import sys",
    "torch": "import torch",
    "dist": "import torch.distributed as dist",
}
SCRIPT_NAMES = {"__file__", "__builtins__", "__cached__", "__annotations__"}
"""What Python defines in every script beside the builtins (which hold __name__, __spec__, ...)."""

# Data files: a module that finds files through its own location (these names and modules) reads
# the files beside it, which one exported file cannot carry.
LOCATING_NAMES = {"__file__", "__spec__", "__path__", "__loader__"}
LOCATING_MODULES = {"importlib.resources", "importlib_resources", "pkgutil"}
CODE_SUFFIXES = {".py", ".pyc", ".pyi", ".pyd", ".so"}


class BundleError(Exception):
    """The project cannot be bundled into one file: the message says where and why."""


# Reading the project's modules.


@dataclass
class Statement:
    """A top-level statement of a module, but an import, with the names it binds."""

    text: str
    binds: set[str]


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: list[str]
    statements: list[Statement] = field(default_factory=list)
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Local name → (project module, name there; "" for the module itself)."""
    external: dict[str, ast.Import | ast.ImportFrom] = field(default_factory=dict)
    """Local name → the import that binds it, for everything outside the project."""
    future_annotations: bool = False


def is_project(module: str) -> bool:
    return module == PACKAGE or module.startswith(f"{PACKAGE}.")


def is_toolkit(module: str) -> bool:
    return module.startswith(f"{TOOLKIT}.")


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
    table = symtable.symtable(text, "<export>", "exec")
    reads, pending = set(), [table]
    while pending:
        scope = pending.pop()
        pending.extend(scope.get_children())
        for symbol in scope.get_symbols():
            if symbol.is_referenced() and (scope is table or symbol.is_global()):
                reads.add(symbol.get_name())
    return reads


def names_bound(text: str) -> set[str]:
    """The top-level names the code binds, but by an import."""
    table = symtable.symtable(text, "<export>", "exec")
    return {s.get_name() for s in table.get_symbols() if s.is_assigned() and not s.is_imported()}


def is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(getattr(node.value, "value", None), str)


def is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"


def comments_above(lines: list[str], line: int) -> int:
    """The first of the comment lines right above `line` (from 1), or `line` itself."""
    while line > 1 and lines[line - 2].lstrip().startswith("#"):
        line -= 1
    return line


def load(name: str) -> Module:
    """Parse one project module into its imports and its other statements."""
    path = source_of(name)
    text = path.read_text()
    # Named, so that a syntax error in your module is told as its file and line.
    module = Module(name, path, ast.parse(text, filename=str(path)), text.splitlines())
    for node in module.tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            module.future_annotations = True
        elif isinstance(node, ast.Import | ast.ImportFrom):
            add_import(module, node)
        elif not (node is module.tree.body[0] and is_docstring(node)):
            nested = [
                child.lineno
                for child in ast.walk(node)
                if isinstance(child, ast.ImportFrom)
                and (child.level or is_project(child.module or ""))
            ]
            if nested and not is_toolkit(name):
                one = len(nested) == 1
                raise BundleError(
                    f"{path.name}:{', '.join(map(str, sorted(set(nested))))}: "
                    f"{'a project import' if one else 'project imports'} inside a function or "
                    f"block cannot be bundled; move {'it' if one else 'them'} to the top of the "
                    "module"
                )
            add_statement(module, node)
    return module


def add_import(module: Module, node: ast.Import | ast.ImportFrom) -> None:
    """Record what a top-level import binds: a project name, a project module or an import."""
    if isinstance(node, ast.ImportFrom) and (node.level or is_project(node.module or "")):
        origin = node.module or ""
        if node.level:  # relative: to the package of the module (a package's own __init__ is one)
            parts = module.name.split(".")
            parts = parts[: len(parts) - node.level + (module.path.name == "__init__.py")]
            origin = ".".join([*parts, *([origin] if origin else [])])
        for alias in node.names:
            whole = is_module(f"{origin}.{alias.name}")
            found = (f"{origin}.{alias.name}", "") if whole else (origin, alias.name)
            module.imported[alias.asname or alias.name] = found
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


def add_statement(module: Module, node: ast.stmt) -> None:
    """A statement with its decorators and the comment lines right above it."""
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    text = "\n".join(module.lines[comments_above(module.lines, start) - 1 : node.end_lineno])
    if is_docstring(node) and module.statements:
        # An attribute docstring belongs to the assignment right above it.
        module.statements[-1].text += "\n" + text
        return
    if module.name == f"{TOOLKIT}.op_plugin":  # an op-plugin op's schema: read from the yaml
        # From opschema, not op_plugin, which imports torch: export bundles without torch.
        from .opschema import schema

        # Calls only, not the definition: the yaml's func becomes a string in the file.
        text = re.sub(r"(?<!def )\bschema\(\)", json.dumps(schema()).replace("\\", "\\\\"), text)
    module.statements.append(Statement(text, names_bound(text)))


def body_text(module: Module) -> str:
    """The module's source as it travels whole: without its docstring, its imports (they go to
    the file's imports at its top) and its __main__ guard (which would run in the middle of the
    file)."""
    left_out = set()
    for node in module.tree.body:
        docstring = node is module.tree.body[0] and is_docstring(node)
        if docstring or is_main_guard(node) or isinstance(node, ast.Import | ast.ImportFrom):
            start = node.lineno if docstring else comments_above(module.lines, node.lineno)
            left_out.update(range(start, (node.end_lineno or node.lineno) + 1))
    kept = [line for n, line in enumerate(module.lines, 1) if n not in left_out]
    # No more than two blank lines in a row, as ruff format keeps them.
    return re.sub(r"\n(\s*\n){3,}", "\n\n\n", "\n".join(kept)).strip("\n")


# Writing mre.py's backend as literals.


def offset(text: str, line: int, column: int) -> int:
    """Where in `text` the ast position (line from 1, column in UTF-8 bytes) is."""
    lines = text.split("\n")
    before = sum(len(each) + 1 for each in lines[: line - 1])
    return before + len(lines[line - 1].encode()[:column].decode())


def span(text: str, node: ast.AST) -> tuple[int, int]:
    start = offset(text, node.lineno, node.col_offset)
    return start, offset(text, node.end_lineno, node.end_col_offset)


def edited(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each span (start, end) replaced by its new text."""
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def python_literal(value: Any, column: int = 0, indent: int = 0) -> str:
    """`value` (None, a bool, a number, a string or a dict of them) as ruff format writes it at
    `column` of a line indented by `indent`: on that line if it fits, else a dict an item a line."""
    if isinstance(value, dict):
        items = [f"{python_literal(key)}: {python_literal(each)}" for key, each in value.items()]
        flat = "{" + ", ".join(items) + "}"
        if column + len(flat) <= LINE_LENGTH or not items:
            return flat
        inner = "".join(f"{' ' * (indent + 4)}{item},\n" for item in items)
        return "{\n" + inner + " " * indent + "}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # double quotes, as ruff format writes them
    return repr(value)


def is_call_of(node: ast.AST, function: str) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == function


def names_read(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class LiteralMre:
    """mre.py's definitions with select_backend()'s choice written as a target's literals.

    The name bound to `select_backend()` (`backend`) goes, with that statement: each
    `if backend.is_npugraph_ex:` becomes the branch the target takes; `.name`, `.device` and
    `.is_npugraph_ex` become their values; `x.to(backend.device)` becomes `x.npu()` (portable:
    `x.to("cpu")`, or `x` where a method call follows); `config = backend.options` binds the
    options themselves (portable: None), and any other `backend.options` reads config;
    `keyed(CACHE_DIR, model)` becomes the cache folder. A class or function of mre.py that takes
    the backend takes config instead, or nothing where it reads none, and so does each call of
    it; a config nothing reads goes. Any other use is refused, naming it: the file would choose
    its backend where it runs, which the targets promise not to do.
    """

    def __init__(self, mre: Module, target: str, options: Callable[[], dict]) -> None:
        backend, self.device, _ = TARGETS[target]
        self.npu, self.options = target == "npu", options
        self.values = {"name": backend, "device": self.device, "is_npugraph_ex": self.npu}
        self.text = body_text(mre)
        tree = ast.parse(self.text)
        self.backends = {choice.targets[0].id for choice in choices(tree)}
        bound = [
            node.targets[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and self.is_field(node.value, "options")
        ]
        # The name the options are bound to: the seed's config, unless mre.py names them otherwise.
        self.config = getattr(bound[0], "id", "config") if bound else "config"

    def written(self) -> str:
        text = self.text
        for step in (self.cut_branches, self.literals, self.pass_config, self.drop_unread_config):
            text = step(text)
        lines = text.split("\n")
        for node in ast.walk(ast.parse(text)):
            if getattr(node, "id", None) in {*self.backends, "select_backend"}:
                raise BundleError(
                    f"mre.py: export writes select_backend()'s choice as the target's literals, "
                    f"and cannot write `{lines[node.lineno - 1].strip()}` so: call it plainly "
                    "(`backend = select_backend()`) and read its .name, .device, .options and "
                    ".is_npugraph_ex, or pass it to a class or function of mre.py"
                )
        return text

    def is_field(self, node: ast.AST, *fields: str) -> bool:
        """Whether `node` is `backend.<one of fields>`."""
        return (
            isinstance(node, ast.Attribute)
            and getattr(node.value, "id", None) in self.backends
            and node.attr in fields
        )

    def cut_branches(self, text: str) -> str:
        """Each `if backend.is_npugraph_ex:` cut to the branch the target takes, dedented."""
        while branch := next(
            (
                node
                for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.If) and self.is_field(node.test, "is_npugraph_ex")
            ),
            None,
        ):
            lines, taken, kept = text.split("\n"), branch.body if self.npu else branch.orelse, []
            if taken:
                # From the line after `if ...:` or `else:`, comments at the top of the block too.
                first = (branch.test.end_lineno or branch.lineno) + 1
                if taken is branch.orelse:
                    between = range(branch.body[-1].end_lineno or 0, taken[0].lineno)
                    first = max(n for n in between if lines[n - 1].strip().startswith("else")) + 1
                by = taken[0].col_offset - branch.col_offset
                block = lines[first - 1 : taken[-1].end_lineno]
                kept = [line[min(by, len(line) - len(line.lstrip(" "))) :] for line in block]
            start = comments_above(lines, branch.lineno)  # they speak of the test
            text = "\n".join([*lines[: start - 1], *kept, *lines[branch.end_lineno :]])
        return text

    def literals(self, text: str) -> str:
        """Each read of the backend as the target's value, and the choice gone."""
        tree, edits, done = ast.parse(text), [], set()
        for choice in choices(tree):  # the whole statement, and the comment lines above it
            start = offset(text, comments_above(text.split("\n"), choice.lineno), 0)
            edits.append((start, span(text, choice)[1] + 1, ""))
        for node in ast.walk(tree):  # outer first: a move before the device it names
            if id(node) in done:
                continue
            if self.is_move(node):
                done.add(id(node.args[0]))
                # Kept on the CPU too: a model's own .to() may do more than move (allocate a cache,
                # run a token through it) and draw random numbers the MRE's inputs then follow.
                new = ".npu()" if self.npu else f'.to("{self.device}")'
                moved = node.func.value
                edits.append((span(text, moved)[1], span(text, node)[1], new))
            elif isinstance(node, ast.Assign) and self.is_field(node.value, "options"):
                done.add(id(node.value))
                options = self.options() if self.npu else None
                value = python_literal(options, node.value.col_offset, node.col_offset)
                edits.append((*span(text, node.value), value))
            elif self.is_field(node, "options"):
                edits.append((*span(text, node), self.config))
            elif self.is_field(node, *self.values):
                edits.append((*span(text, node), python_literal(self.values[node.attr])))
            elif is_call_of(node, "keyed"):
                edits.append((*span(text, node), python_literal(project.CACHE_DIR)))
        return edited(text, edits)

    def is_move(self, node: ast.AST) -> bool:
        """Whether `node` is `x.to(backend.device)`."""
        return (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "to"
            and not node.keywords
            and [self.is_field(argument, "device") for argument in node.args] == [True]
        )

    def takers(self, tree: ast.Module) -> dict[str, ast.FunctionDef]:
        """mre.py's functions, and classes by their __init__, that take the backend, by name."""
        found = {}
        for owner in tree.body:
            function = owner
            if isinstance(owner, ast.ClassDef):
                function = next(
                    (f for f in owner.body if getattr(f, "name", "") == "__init__"), owner
                )
            if isinstance(function, ast.FunctionDef) and any(
                map(self.is_backend, function.args.args)
            ):
                found[owner.name] = function
        return found

    def pass_config(self, text: str) -> str:
        """A parameter that took the backend takes config where its function reads config, and
        goes where it reads none or takes config too; so does the argument of each call that
        passed it."""
        tree, edits = ast.parse(text), []
        for name, function in self.takers(tree).items():
            # Unless the function takes config already (then the backend only goes).
            takes = self.config in (argument.arg for argument in function.args.args)
            config = self.config if self.config in names_read(function) and not takes else ""
            calls = [node.args for node in ast.walk(tree) if is_call_of(node, name)]
            for items in [function.args.args, *calls]:
                taken = [n for n, item in enumerate(items) if self.is_backend(item)]
                edits += [passed(text, items, n, config) for n in taken]
        return edited(text, edits)

    def is_backend(self, node: ast.AST) -> bool:
        """Whether `node` is the backend: a name, or a parameter."""
        return (getattr(node, "id", None) or getattr(node, "arg", None)) in self.backends

    def drop_unread_config(self, text: str) -> str:
        """Without `config = ...` where nothing reads config: portable cache_compile's, whose
        stand-in takes no options."""
        edits = [
            (offset(text, node.lineno, 0), span(text, node)[1] + 1, "")
            for function in ast.walk(ast.parse(text))
            if isinstance(function, ast.FunctionDef) and self.config not in names_read(function)
            for node in function.body
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == self.config
        ]
        return edited(text, edits)


def choices(tree: ast.AST) -> list[ast.Assign]:
    """The statements `backend = select_backend()` in `tree`."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and is_call_of(node.value, "select_backend")
        and not (node.value.args or node.value.keywords)
    ]


def passed(text: str, items: list[ast.AST], position: int, name: str) -> tuple[int, int, str]:
    """The edit that makes item `position` of a parameter or argument list `name`, or, where
    `name` is empty, takes it out with the comma before it (after it, where it comes first)."""
    start, end = span(text, items[position])
    if name:
        return start, end, name
    if position:
        return span(text, items[position - 1])[1], end, ""
    return start, span(text, items[1])[0] if items[1:] else end, ""


# Bundling.


class Bundler:
    """Collects what the MRE needs into one file: your modules whole, each after what it reads,
    only the toolkit definitions they read, then mre.py's definitions as the target writes them."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.modules: dict[str, Module] = {}
        self.chunks: list[str] = []
        """The file's code after its imports, in order."""
        self.entered: set[str] = set()
        self.emitted: set[int] = set()
        self.owners: dict[str, str] = {}
        """Top-level name → the module whose code binds it, to catch two of one name."""
        self.imports: dict[str, tuple[ast.Import | ast.ImportFrom, str]] = {}
        self.future_annotations = False

    def module(self, name: str) -> Module:
        if name not in self.modules:
            self.modules[name] = load(name)
        return self.modules[name]

    def bundle(self, name: str) -> str:
        entry = self.module(ENTRY)
        self.entered.add(ENTRY)  # it travels as the target writes it, not whole
        # Read only where the npu target writes them: a stand-in project of the tests has none.
        options = partial(self.toolkit_literal, f"{TOOLKIT}.backend", "NPUGRAPH_EX_OPTIONS")
        mre = LiteralMre(entry, self.target, options).written()
        self.add_imported_modules(entry, mre)
        self.add(entry, mre)
        main = next((node for node in entry.tree.body if is_main_guard(node)), ast.Pass())
        parallel = any(is_call_of(node, "tensor_parallel") for node in ast.walk(main))
        self.add(entry, guard(self.target, parallel), defined=names_bound(mre))
        if self.target == "npu":
            self.resolve(entry, "sys")  # the import of torch_npu tells its failure on stderr
        self.refuse_data_files()
        for imported, (_, importer) in self.imports.items():
            if owner := self.owners.get(imported):
                raise BundleError(
                    f"`{imported}` is imported in {importer} and defined in {owner}: one file "
                    f"holds one of each name; {renaming(imported, importer, owner)}"
                )
        return render(self, header(self.target, name, parallel))

    def toolkit_literal(self, module: str, name: str) -> Any:
        """The value a toolkit module assigns to `name`, read from its source: no import."""
        for node in self.module(module).tree.body:
            targets = getattr(node, "targets", [getattr(node, "target", None)])
            if any(getattr(each, "id", None) == name for each in targets):
                return ast.literal_eval(node.value)
        raise BundleError(f"{module} assigns no {name}")

    def add(self, module: Module, text: str, defined: set[str] | None = None) -> None:
        """Code of `module` into the file, after the code of everything it reads."""
        aliases = []
        for name in sorted(global_reads(text) - names_bound(text) - (defined or set())):
            if (found := self.resolve(module, name)) != name:
                aliases.append(f"{name} = {found}")  # `from .model import build as build_model`
        for name in names_bound(text) | {alias.split(" = ")[0] for alias in aliases}:
            owner = self.owners.setdefault(name, module.name)
            if owner != module.name:
                raise BundleError(
                    f"`{name}` is defined in both {owner} and {module.name}: one file holds one "
                    f"of each name; {renaming(name, owner, module.name)}"
                )
        self.chunks.extend(["\n".join(aliases), text] if aliases else [text])

    def resolve(self, module: Module, name: str) -> str:
        """Make `name`, as `module` means it, defined in the file: the name it has there."""
        if statements := [s for s in module.statements if name in s.binds]:
            if not is_toolkit(module.name):
                self.whole(module.name)
            for statement in statements if is_toolkit(module.name) else []:
                self.toolkit_statement(module, statement)  # only what is read of the toolkit
            return name
        if name in module.imported:
            origin, attribute = module.imported[name]
            if not attribute:
                refuse_module_objects(module, [name])
            return self.resolve(self.module(origin), attribute)
        if name in module.external or (module.name == ENTRY and name in PLAIN_IMPORTS):
            statement = module.external.get(name) or ast.parse(PLAIN_IMPORTS[name]).body[0]
            known = self.imports.setdefault(name, (statement, module.name))
            if binding(known[0], name) != binding(statement, name):
                raise BundleError(
                    f"`{name}` is imported differently in {known[1]} and {module.name}; "
                    "import it the same way in both"
                )
        return name  # else a builtin, or a name verify() finds undefined

    def whole(self, name: str) -> None:
        """Your module `name` into the file, all of it: a statement of yours may register
        something, as the custom operator's files do."""
        if name in self.entered:
            return
        self.entered.add(name)
        module = self.module(name)
        self.future_annotations |= module.future_annotations
        text = body_text(module)
        self.add_imported_modules(module, text)
        self.add(module, text)

    def add_imported_modules(self, module: Module, text: str) -> None:
        """The modules `module` imports whole (`from . import custom_op`), for what they register:
        yours all of it, a toolkit module its statements that bind no public name."""
        whole = [local for local, (_, attribute) in module.imported.items() if not attribute]
        refuse_module_objects(module, sorted(set(whole) & global_reads(text)))
        for origin in (module.imported[local][0] for local in whole):
            if not is_toolkit(origin):
                self.whole(origin)
                continue
            for statement in self.module(origin).statements:
                if all(bound.startswith("_") for bound in statement.binds):
                    self.toolkit_statement(self.module(origin), statement)

    def toolkit_statement(self, module: Module, statement: Statement) -> None:
        if id(statement) not in self.emitted:
            self.emitted.add(id(statement))
            self.future_annotations |= module.future_annotations
            self.add(module, statement.text)

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


def refuse_module_objects(module: Module, used: list[str]) -> None:
    """A module object (`from . import layers`, then `layers.X`) has no place in one file."""
    if used:
        objects = f"object{'s' * (len(used) > 1)} {', '.join(sorted(used))}"
        raise BundleError(
            f"{module.path.name} uses the module {objects}: one file has no modules; import the "
            "names you use instead (from .module import name)"
        )


def locates_files(module: Module) -> str:
    """Where `module` first finds files through its own location: `model.py:5 through __file__`."""
    uses = []
    for node in ast.walk(module.tree):
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
    """The files in the package `folder` that are data, not code, relative to it: not a marker,
    nor an op-plugin op's yaml, whose schema the file holds as a string."""
    known = {"py.typed", "op_plugin_functions.yaml"} if project.OP_PLUGIN else {"py.typed"}
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        hidden = any(part.startswith(".") or part == "__pycache__" for part in relative.parts)
        code = path.suffix in CODE_SUFFIXES or path.name in known
        if path.is_file() and not hidden and not code:
            found.append(relative.as_posix())
    return found


def renaming(name: str, *modules: str) -> str:
    """Which of two modules that both define `name` to rename it in: the user's, where the other
    is the toolkit's (the template's file, which an update would overwrite)."""
    yours = [module for module in modules if not is_toolkit(module)]
    if len(yours) == 1:
        return (
            f"rename `{name}` in {yours[0]}: the other is the toolkit's, which the template keeps"
        )
    return "rename one of them"


def binding(statement: ast.stmt, name: str) -> str:
    """What an import statement that binds `name` binds it to: `torch.nn.functional`, `torch`, ..."""
    names = statement.names
    alias = next(alias for alias in names if (alias.asname or alias.name.split(".")[0]) == name)
    if isinstance(statement, ast.Import):
        return alias.name if alias.asname else name  # `import torch.nn` binds torch
    return f"{statement.module}.{alias.name}"


# Writing the file.


def guard(target: str, parallel: bool) -> str:
    """The __main__ guard: infer_one_step(); a tensor-parallel MRE's as one rank of those torchrun
    starts, in a process group of its own (hccl binds each rank to the NPU set before it)."""
    if not parallel:
        return 'if __name__ == "__main__":\n    infer_one_step()'
    lines = ['if __name__ == "__main__":', '    dist.init_process_group("gloo")']
    if target == "npu":
        lines[1:] = [
            '    torch.npu.set_device(int(os.environ["LOCAL_RANK"]))',
            '    dist.init_process_group("hccl")',
        ]
    return "\n".join([*lines, "    infer_one_step()", "    dist.destroy_process_group()"])


def header(target: str, name: str, parallel: bool) -> str:
    """A few comment lines: what the file is, for which target, how to run it, and with what."""

    def version(distribution: str) -> str:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    op = project.CUSTOM_OP + (f" ({project.OP_REGISTRATION})" if project.OP_REGISTRATION else "")
    model = f"{project.PROJECT}'s model (mode {project.MODE}, custom op {op})"
    run = f"torchrun --nproc-per-node {TORCHRUN_RANKS} {name}" if parallel else f"python {name}"
    versions = f"Python {platform.python_version()}, torch {version('torch')}, torch_npu "
    lines = [
        f"Minimal reproducible example: one graph-mode step of {model}.",
        f"Target {target}: runs on {TARGETS[target][2]}.",
        f"Run: {run}",
        f"Exported by `python -m {PACKAGE} export`; {versions}{version('torch-npu')}.",
    ]
    wrapped = (textwrap.wrap(line, LINE_LENGTH - 2, break_long_words=False) for line in lines)
    return "".join(f"# {line}\n" for each in wrapped for line in each)


def render(bundler: Bundler, head: str) -> str:
    """The file: the header, the imports as isort sorts them, then the code."""
    blocks = ["from __future__ import annotations\n"] if bundler.future_annotations else []
    blocks.append(PRELUDE)
    # The prelude imports os itself, before torch: isort keeps it there.
    imports = {name: value for name, value in bundler.imports.items() if name != "os"}
    blocks.extend("\n".join(section) + "\n" for section in import_lines(imports))
    if bundler.target == "npu":
        blocks.append(TORCH_NPU_IMPORT)
    body = "\n\n\n".join(bundler.chunks) + "\n"
    # isort leaves one blank line after the imports before a statement, ruff format two before a def.
    gap = "\n\n" if body.startswith(("def ", "@", "class ")) else "\n"
    return head + "\n" + "\n".join(blocks) + gap + body


def import_lines(imports: dict[str, tuple[ast.Import | ast.ImportFrom, str]]) -> list[list[str]]:
    """The import block as isort sorts it: standard library, then third party."""
    plain: set[str] = set()
    from_imports: dict[str, set[str]] = {}
    for name, (statement, _) in imports.items():
        for alias in statement.names:
            if (alias.asname or alias.name.split(".")[0]) != name:
                continue
            as_part = f" as {alias.asname}" if alias.asname else ""
            if isinstance(statement, ast.Import):
                plain.add(f"{alias.name}{as_part}")
            else:
                from_imports.setdefault(statement.module or "", set()).add(f"{alias.name}{as_part}")
    sections: list[list[str]] = [[], []]
    for module in sorted(plain, key=str.lower):
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
    return int(module.split(".")[0].split()[0] not in sys.stdlib_module_names)  # `sys as system`


def isort_key(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions and modules."""
    bare = name.split(" as ")[0]
    kind = 0 if bare.isupper() and len(bare) > 1 else 1 if bare[:1].isupper() else 2
    return kind, bare.lower()


def undefined_names(text: str) -> list[str]:
    """Names the file reads but never binds, at any scope (a small pyflakes, from symtable)."""
    table = symtable.symtable(text, "<export>", "exec")
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    return sorted(global_reads(text) - bound - set(dir(builtins)) - SCRIPT_NAMES)


def export(target: str, name: str = "mre_export.py") -> str:
    """The whole file `name` for `target` ("npu" or "portable"), checked without running it:
    it compiles and every name it reads is defined."""
    text = Bundler(target).bundle(name)
    try:
        compile(text, f"<export --target {target}>", "exec")
    except SyntaxError as error:
        raise BundleError(f"the bundled file does not compile: {error}") from error
    if missing := undefined_names(text):
        raise BundleError(
            f"the bundled file would use undefined names: {', '.join(missing)}; "
            "define or import them at the top of your modules"
        )
    return text


# Running the file.


@dataclass
class Run:
    """One run of the MRE: its output as {leaf path: value}, or the error it raised."""

    output: dict[str, Any] | None = None
    error: str = ""
    """`Type: message` of what it raised, empty if it ran."""
    where: str = ""
    """Where in the file the error arose: ` (at mre_export.py:12: output = model(x))`."""


# The file, run as `python FILE` runs it (the guard calls infer_one_step(): this calls it itself, to
# keep its output), with this project unimportable; a tensor-parallel file as the one rank of the
# process group its guard starts. The output is saved leaf by leaf, on the CPU.
RUNNER = """\
import importlib.util, json, re, sys, traceback

path, result, package, group = sys.argv[1:]
sys.argv = [path]
sys.modules[package] = None  # the file must not need this project: importing it raises
try:
    # A module that stays in sys.modules, as `python FILE`'s __main__ does: Dynamo imports the
    # module whose globals a function it inlines reads (a submodule's forward).
    spec = importlib.util.spec_from_file_location("__export__", path)
    module = sys.modules["__export__"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if group:
        import torch.distributed as dist

        dist.init_process_group(group, store=dist.HashStore(), rank=0, world_size=1)
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
if group:
    dist.destroy_process_group()
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
        # The process group the file's guard starts, if any: the run is its one rank.
        group = re.search(r'^\s+dist\.init_process_group\("(\w+)"\)', text, re.MULTILINE)
        command = [sys.executable, "-c", RUNNER, str(self.path), str(self.saved), PACKAGE]
        command.append(group[1] if group else "")
        output = subprocess.DEVNULL  # what it prints
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
    """The project's MRE, run here from an empty folder, a tensor-parallel one as one rank (as
    mre.py's guard runs it under plain python): its output leaf by leaf, or its error."""
    import torch

    here = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="export-mre-") as folder:
        try:
            mre = importlib.import_module(ENTRY)  # from here: the path may name where you are
            torch._dynamo.reset()  # a fresh compile, whatever this process compiled before
            os.chdir(folder)
            with contextlib.redirect_stdout(io.StringIO()), one_rank():
                output = mre.infer_one_step()
        except Exception as error:  # noqa: BLE001  (compared with the file's error)
            return Run(error=f"{type(error).__name__}: {error}")
        finally:
            os.chdir(here)
    return Run(leaves(output))


def one_rank() -> contextlib.AbstractContextManager[Any]:
    """A tensor-parallel project's process group of one rank; nothing otherwise."""
    if not project.TENSOR_PARALLEL:
        return contextlib.nullcontext()
    from .backend import select_backend
    from .parallel import tensor_parallel

    return tensor_parallel(select_backend().device)


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
    parser.add_argument("--target", choices=list(TARGETS), default="npu")
    arguments = parser.parse_args(argv)
    output, target = arguments.output, arguments.target
    # Before the bundle and its run, which take seconds: a place the file cannot go.
    if output.is_dir() or not output.absolute().parent.is_dir():
        where = "is a folder" if output.is_dir() else "is in a folder that does not exist"
        parser.error(f"argument -o/--output: {output} {where}: give a file in an existing folder")
    try:
        text = export(target, output.name)
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
