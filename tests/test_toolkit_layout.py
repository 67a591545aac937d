"""The toolkit is one plain library: no Jinja, the same bytes in every bake, imports pointing one way."""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys

import pytest
from conftest import CODE_VARIANTS, TEMPLATE, package_of
from test_bake import LONG_NAMES, SORTING_NAMES
from toolkit.projects import FOLDERS, PROJECTS, package_files

TOOLKIT = TEMPLATE / "{{cookiecutter.project_slug}}" / "src" / "{{cookiecutter.package_name}}" / "toolkit"
JINJA = re.compile(r"\{\{|\{%|%\}|\{#|#\}")
# The user's rooms: theirs to edit, so no tool may depend on what they hold.
# vllm_model.py imports vLLM, which only vLLM's environment has.
USER_ROOMS = {"generate", "mre", "vllm_model"}


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


@pytest.mark.parametrize("name", PROJECTS)
def test_the_toolkit_tests_projects_are_what_a_bake_makes(baked, name):
    """tests/toolkit/projects/<name> holds a fresh bake's package files, the toolkit left out:
    after a change to the template's files, `nox -s toolkit_projects` writes them anew."""
    project = baked(project_slug=name, package_name=name, **PROJECTS[name])
    fresh = package_files(project / "src" / name)
    assert package_files(FOLDERS / name) == fresh, "run `nox -s toolkit_projects`"


def test_the_toolkit_tests_run_where_nothing_can_bake(tmp_path):
    """tests/toolkit collects and runs where neither cookiecutter nor copier imports: it bakes
    nothing, and tests the template's toolkit in place."""
    for name in ("cookiecutter", "copier"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    environment = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider"]
    command += ["tests/toolkit", "-k", "test_frames"]
    result = subprocess.run(
        command, cwd=TEMPLATE, env=environment, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout.splitlines()[-1]


def assignments(tree: ast.AST, name: str) -> list[ast.AST]:
    """What `name` is set to anywhere in the module: assigned, or iterated over by a loop."""
    values = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, (ast.For, ast.comprehension)):
            targets, value = [node.target], node.iter
        else:
            continue
        bound = {part.id for target in targets for part in ast.walk(target) if isinstance(part, ast.Name)}
        if name in bound:
            values.append(value)
    return values


@functools.cache
def parsed(source: str) -> ast.AST:
    """A module's tree, parsed once: a sibling read twice is the same module."""
    return ast.parse(source)


def imported_from(tree: ast.AST, siblings: dict[str, str]) -> dict[str, ast.AST]:
    """The names a module imports from a sibling module (`from .bundle import ENTRY`), each with
    the sibling's parsed source."""
    return {
        alias.asname or alias.name: parsed(siblings[node.module])
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in siblings
        for alias in node.names
    }


def named_modules(tree: ast.AST, argument: ast.AST, siblings: dict[str, str], seen: set) -> set[str]:
    """Every dotted part of a module name that `argument` can spell: its strings and f-strings'
    text split at the dots, and through each variable, the variable's name and what it is set to,
    in the module or in the sibling it is imported from. `seen`: the (module, name) pairs followed
    already, each once."""
    parts = set()
    for node in ast.walk(argument):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            parts |= {part.strip() for part in node.value.split(".")}
        elif isinstance(node, ast.Name) and (id(tree), node.id) not in seen:
            seen.add((id(tree), node.id))
            parts.add(node.id)
            origin = imported_from(tree, siblings).get(node.id)
            where = tree if origin is None else origin
            for value in assignments(where, node.id):
                parts |= named_modules(where, value, siblings, seen)
    return parts


def imported_rooms(source: str, siblings: dict[str, str] | None = None) -> set[str]:
    """The user's rooms a module's source imports: `from .. import mre`, `from ..mre import x`,
    or importlib.import_module() of a string, an f-string or a variable naming one, set in the
    module or in a sibling (`siblings`: name → source) it imports it from."""
    tree = ast.parse(source)
    imported, seen = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 2:
            module = (node.module or "").split(".")[0]
            imported |= {module} if module else {alias.name for alias in node.names}
        elif isinstance(node, ast.Call) and "import_module" in (
            getattr(node.func, "attr", None),
            getattr(node.func, "id", None),
        ):
            for argument in node.args:
                imported |= named_modules(tree, argument, siblings or {}, seen)
    return imported & USER_ROOMS


@pytest.mark.parametrize(
    ("source", "rooms"),
    [
        ("from ..mre import infer_one_step", {"mre"}),
        ("from .. import generate, model", {"generate"}),
        ('importlib.import_module("..mre", __package__)', {"mre"}),
        ('import_module(f"{PACKAGE}.generate")', {"generate"}),
        ('ENTRY = f"{PACKAGE}.mre"\nimportlib.import_module(ENTRY)', {"mre"}),
        ("importlib.import_module(mre)", {"mre"}),
        ('for name in ("mre", "bench"):\n    importlib.import_module(f".{name}", "pkg")', {"mre"}),
        ('importlib.import_module("..model", __package__)', set()),
        ('importlib.import_module(f".{name}", __package__)\nname = "backend"', set()),
        ('print("python -m pkg.mre shows the traceback")', set()),
    ],
)
def test_an_import_of_the_users_rooms_is_found_however_it_is_written(source, rooms):
    """The check below sees through f-strings and variables: an import of mre.py or generate.py
    cannot hide behind a name."""
    assert imported_rooms(source) == rooms


def test_an_import_of_the_users_rooms_is_found_through_a_name_from_a_sibling():
    """A module name set in another toolkit module and imported from there is seen through too."""
    source = "from .names import ENTRY\nimportlib.import_module(ENTRY)"
    assert imported_rooms(source, {"names": 'ENTRY = f"{PACKAGE}.mre"'}) == {"mre"}
    assert imported_rooms(source, {"names": 'ENTRY = f"{PACKAGE}.model"'}) == set()


# The modules whose input is a room: export bundles mre.py itself, reading it as a document and
# running it to verify the bundle, and refuses loudly what it cannot read; the project's test
# fixtures (testing.py) and its two-rank worker run the MRE, as your tests are of it.
READS_A_ROOM = {"export.py": {"mre"}, "two_ranks.py": {"mre"}, "testing.py": {"mre"}}


@pytest.mark.parametrize("name", toolkit_files())
def test_the_toolkit_never_imports_the_users_rooms(name):
    """Imports point from the user's files into the toolkit, never back: a user's edit to mre.py or
    generate.py cannot silently change what a tool does."""
    siblings = {path.stem: path.read_text() for path in TOOLKIT.glob("*.py")}
    assert imported_rooms((TOOLKIT / name).read_text(), siblings) == READS_A_ROOM.get(name, set())
