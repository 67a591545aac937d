"""mre.py with select_backend()'s choice written as a target's literals: export's MRE.

`backend = select_backend()` goes; each `if backend.is_npugraph_ex:` becomes the branch the
target takes, and the backend's fields their values: the seed's literal form for an NPU
(`backend="npugraph_ex"`, `.npu()`, the options written out), the aot_eager stand-in on the CPU
for the portable target.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from typing import Any

from . import project
from .bundle import LINE_LENGTH, BundleError, Module, body_text, comments_above


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

    def __init__(self, mre: Module, backend: str, device: str, options: Callable[[], dict]) -> None:
        self.device, self.npu, self.options = device, device == "npu", options
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
