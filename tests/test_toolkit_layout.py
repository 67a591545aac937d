"""The toolkit is one plain library: no Jinja, the same bytes in every bake, imports pointing one way."""

from __future__ import annotations

import ast
import re

import pytest
from conftest import CODE_VARIANTS, TEMPLATE, package_of
from test_bake import LONG_NAMES, SORTING_NAMES

TOOLKIT = TEMPLATE / "{{cookiecutter.project_slug}}" / "src" / "{{cookiecutter.package_name}}" / "toolkit"
JINJA = re.compile(r"\{\{|\{%|%\}|\{#|#\}")
# The user's rooms: theirs to edit, so no tool may depend on what they hold.
USER_ROOMS = {"generate", "mre"}


def toolkit_files() -> list[str]:
    return sorted(path.name for path in TOOLKIT.glob("*.py"))


def test_the_template_toolkit_holds_no_jinja():
    """No file under the template's toolkit/ has a Jinja tag: it is copied, never rendered."""
    tagged = [
        f"{name}:{number}"
        for name in toolkit_files()
        for number, line in enumerate((TOOLKIT / name).read_text().splitlines(), 1)
        if JINJA.search(line)
    ]
    assert tagged == []


def test_a_kept_toolkit_file_is_the_template_file_byte_for_byte(baked):
    """Every bake that keeps a toolkit file keeps it unchanged, whatever the answers and names."""
    variants = [*CODE_VARIANTS, *({**answers, **LONG_NAMES} for answers in CODE_VARIANTS[:2])]
    variants += [{"package_name": name} for name in SORTING_NAMES.values()]
    differ = set()
    for answers in variants:
        project = baked(**answers)
        kept = project / "src" / package_of(project) / "toolkit"
        for path in kept.iterdir():
            if path.read_bytes() != (TOOLKIT / path.name).read_bytes():
                differ.add(path.name)
    assert sorted(differ) == []


@pytest.mark.parametrize("name", toolkit_files())
def test_the_toolkit_never_imports_the_users_rooms(name):
    """Imports point from the user's files into the toolkit, never back: a user's edit to mre.py or
    generate.py cannot silently change what a tool does."""
    tree = ast.parse((TOOLKIT / name).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 2:
            module = (node.module or "").split(".")[0]
            imported |= {module} if module else {alias.name for alias in node.names}
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            imported |= {
                arg.value.lstrip(".").split(".")[0]
                for arg in node.args
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            }
    assert imported & USER_ROOMS == set()
