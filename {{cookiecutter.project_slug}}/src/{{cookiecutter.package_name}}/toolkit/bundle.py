"""Your modules, and the toolkit definitions they read, as the code of one file: export's bundler.

A module of yours travels whole (a statement of yours may register something, as the custom
operator's files do), after the modules whose names it reads; of the toolkit's, only the
definitions your code reads. Third-party imports stay imports, gathered at the top and sorted as
isort sorts them. What one file cannot hold is refused, naming it: a name defined twice, a module
object, a data file beside your modules, a project import inside a function.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import json
import re
import symtable
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import project

PACKAGE = __package__.rpartition(".")[0]
TOOLKIT = __package__
ENTRY = f"{PACKAGE}.mre"
LINE_LENGTH = 100
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


# Bundling.


class Bundler:
    """Collects what the MRE needs into one file: your modules whole, each after what it reads,
    and only the toolkit definitions they read (export adds mre.py's, as the target writes them)."""

    def __init__(self) -> None:
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

    def check(self) -> None:
        """Refuse what one file cannot hold, once everything is in: your modules' data files, and
        a name imported in one module and defined in another."""
        self.refuse_data_files()
        for imported, (_, importer) in self.imports.items():
            if owner := self.owners.get(imported):
                raise BundleError(
                    f"`{imported}` is imported in {importer} and defined in {owner}: one file "
                    f"holds one of each name; {renaming(imported, importer, owner)}"
                )

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


# The import block.


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
