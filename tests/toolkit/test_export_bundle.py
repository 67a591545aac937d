"""export's bundling, on small stand-in projects: what travels into the one file, in which order,
how its imports read, how mre.py's backend becomes a target's literals, and what is refused with
which words."""

import importlib
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from forward_project.toolkit import bundle, export

STAND_IN = "snippet"
"""The stand-in project's package: export bundles it in place of this project."""
ENTRY = """\
\"\"\"The MRE of the stand-in: its docstring stays behind.\"\"\"

from .model import build_model


def infer_one_step():
    return build_model()


if __name__ == "__main__":
    infer_one_step()
"""
BACKEND = """\
NPUGRAPH_EX_OPTIONS: dict[str, object] = {"frozen_parameter": True}


def select_backend():
    raise AssertionError("the file never calls it")
"""
"""The stand-in's toolkit/backend.py: the options the npu target writes."""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Iterator[Callable[..., Path]]:
    """Write a stand-in project, {file path: text}, that export bundles instead of this one.

    Each folder of modules gets an empty __init__.py unless given; mre.py is ENTRY and
    toolkit/backend.py BACKEND unless given.
    """
    root = tmp_path / "src"
    monkeypatch.syspath_prepend(root)
    for module in (bundle, export):  # export reads them from bundle, and so binds them too
        monkeypatch.setattr(module, "PACKAGE", STAND_IN)
        monkeypatch.setattr(module, "TOOLKIT", f"{STAND_IN}.toolkit")
        monkeypatch.setattr(module, "ENTRY", f"{STAND_IN}.mre")

    def write(sources: dict[str, str]) -> Path:
        package = root / STAND_IN
        defaults = {"mre.py": ENTRY, "toolkit/backend.py": BACKEND}
        sources = {
            **{name: text for name, text in defaults.items() if not (package / name).exists()},
            **sources,
        }
        for name, text in sources.items():
            path = package / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        for folder in {path.parent for path in package.rglob("*.py")}:
            (folder / "__init__.py").touch()
        importlib.invalidate_caches()
        return package

    yield write
    for name in [name for name in sys.modules if name.partition(".")[0] == STAND_IN]:
        del sys.modules[name]


def body(text: str, target: str = "portable") -> str:
    """The exported file after its header and the prelude every file starts with."""
    head = export.header(target, "mre_export.py", False) + "\n" + export.PRELUDE + "\n"
    assert text.startswith(head)
    return text[len(head) :]


def mre_of(text: str) -> str:
    """The exported file from mre.py's first definition on: its class Cached, or infer_one_step."""
    return text[text.index("\nclass Cached" if "\nclass Cached" in text else "\ndef infer_one_step") + 1 :]


# What travels, in which order.


def test_your_modules_travel_whole_as_written_after_the_imports(project):
    """Your module travels whole, as you wrote it, comments and blank lines and all: not its
    docstring, its imports (the file's import block holds them) or its __main__ guard."""
    project(
        {
            "model.py": '''\
"""Your model: its module docstring stays behind."""

import os
from collections import OrderedDict

# The width, and the comment above it.
WIDTH: int = 4
"""The width: this docstring travels with it."""
SIZES = [1]
SIZES += [2]


def build_model():
    return OrderedDict(width=WIDTH, sep=os.sep, sizes=SIZES)


# A comment on what follows the import below.
import json


def unused():
    return json.dumps("unused, yet it travels")


if __name__ == "__main__":
    print(build_model())
''',
        }
    )
    assert (
        body(export.export("portable"))
        == '''\
import json
from collections import OrderedDict

# The width, and the comment above it.
WIDTH: int = 4
"""The width: this docstring travels with it."""
SIZES = [1]
SIZES += [2]


def build_model():
    return OrderedDict(width=WIDTH, sep=os.sep, sizes=SIZES)


def unused():
    return json.dumps("unused, yet it travels")


def infer_one_step():
    return build_model()


if __name__ == "__main__":
    infer_one_step()
'''
    )


def test_a_module_travels_after_the_modules_it_imports_relative_absolute_and_renamed(project):
    """Absolute and relative imports of your names, from subpackages and their __init__.py, and
    renamed ones (`import ... as build`): each module once, after what it imports; a renamed
    name is an alias after its definition."""
    project(
        {
            "mre.py": '''\
"""The MRE of the stand-in."""

from __future__ import annotations

from snippet.model import build_model as build

from .layers import Attention


def infer_one_step():
    return Attention(build())
''',
            "layers/__init__.py": "from .attention import Attention\n",
            "layers/attention.py": """\
from ..model import WIDTH


class Attention:
    width = WIDTH
""",
            "model.py": """\
WIDTH = 4


def build_model():
    return WIDTH
""",
        }
    )
    assert export.export("portable").endswith(
        """\
WIDTH = 4


def build_model():
    return WIDTH


class Attention:
    width = WIDTH


build = build_model


def infer_one_step():
    return Attention(build())


if __name__ == "__main__":
    infer_one_step()
"""
    )


def test_of_the_toolkit_only_what_your_modules_read_travels_and_what_registers(project):
    """Of a toolkit module only the definitions your code reads travel, each after what it reads,
    with its comments and decorators; one imported whole (`from .toolkit import registry`) brings
    its statements that run for their effect (calls, `_private = ...`). A __future__ import
    travels with what uses it."""
    project(
        {
            "model.py": """\
from .toolkit import registry  # noqa: F401  (registers)
from .toolkit.helpers import show


def build_model():
    return show(1)
""",
            "toolkit/helpers.py": '''\
"""A toolkit module."""

from __future__ import annotations

import functools
import json

PREFIX = "> "


# The comment above the decorator travels with it.
@functools.cache
def show(value):
    return PREFIX + json.dumps(value)


def unused():
    return "stays behind"
''',
            "toolkit/registry.py": """\
REGISTRY = {}
_registered = REGISTRY.setdefault("snippet", "ready")
print("registered")


def lookup():
    return REGISTRY
""",
        }
    )
    text = export.export("portable")
    assert text.startswith(
        export.header("portable", "mre_export.py", False) + "\nfrom __future__ import annotations\n"
    )
    assert text.endswith(
        """\
import functools
import json

REGISTRY = {}


_registered = REGISTRY.setdefault("snippet", "ready")


print("registered")


PREFIX = "> "


# The comment above the decorator travels with it.
@functools.cache
def show(value):
    return PREFIX + json.dumps(value)


def build_model():
    return show(1)


def infer_one_step():
    return build_model()


if __name__ == "__main__":
    infer_one_step()
"""
    )


def test_imports_merge_into_one_block_sorted_as_isort_sorts_them(project):
    """The imports of every module merge: standard library, then third party, each sorted, names
    in isort's order (CONSTANTS, Classes, functions), case aside, a renamed one on a line of its
    own, a line longer than 100 characters wrapped; imports spelled two ways that bind the same
    thing (`import os`, `import os.path`) are one, the prelude's `import os`."""
    project(
        {
            "mre.py": """\
import os

import torch.nn.functional as F

from .model import build_model


def infer_one_step():
    return F.relu(build_model()), os.sep
""",
            "model.py": """\
import os.path
import sys as system
from collections.abc import Awaitable, Callable, Collection, Container, Coroutine, Hashable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, Literal, NamedTuple, Protocol, TypeVar, cast

import numpy as np
import PIL
import torch
import torchaudio
from numpy import typing as npt
from PIL import Image
from torch import is_tensor, isfinite
from torch.nn import functional as F
from units import kilo, Meter, G, PI as pi, meter as m


def build_model():
    return (
        os, system, Awaitable, Callable, Collection, Container, Coroutine, Hashable, Mapping,
        TYPE_CHECKING, Any, ClassVar, Final, Generic, Literal, NamedTuple, Protocol, TypeVar, cast,
        np, PIL, torch, torchaudio, npt, Image, is_tensor, isfinite, F, kilo, Meter, G, pi, m,
    )
""",
        }
    )
    text = body(export.export("portable"))
    assert (
        text.partition("\n\n\ndef build_model():")[0] + "\n"
        == """\
import sys as system
from collections.abc import Awaitable, Callable, Collection, Container, Coroutine, Hashable, Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Final,
    Generic,
    Literal,
    NamedTuple,
    Protocol,
    TypeVar,
    cast,
)

import numpy as np
import PIL
import torch
import torch.nn.functional as F
import torchaudio
from numpy import typing as npt
from PIL import Image
from torch import is_tensor, isfinite
from units import PI as pi
from units import G, Meter, kilo
from units import meter as m
"""
    )


# mre.py's backend, as a target's literals.

LITERAL_MRE = """\
import torch

from .model import build_model
from .toolkit.backend import select_backend
from .toolkit.compile_cache import CACHE_DIR, keyed


class Cached(torch.nn.Module):
    def __init__(self, model, chosen, scale):
        super().__init__()
        # Only npugraph_ex caches.
        if chosen.is_npugraph_ex:
            self.forward = torch.npu.npugraph_ex.inference.cache_compile(
                model.forward, cache_dir=keyed(CACHE_DIR, model), options=chosen.options
            )
        else:  # the stand-in caches nothing
            self.forward = torch.compile(model.forward, backend=chosen.name)


def infer_one_step():
    chosen = select_backend()
    settings = chosen.options
    x = torch.ones(2).to(chosen.device)
    model = build_model().to(chosen.device).eval()
    return Cached(model, chosen, 2)(x), torch.zeros(1, device=chosen.device), settings
"""
"""An MRE that names its backend `chosen` and its options `settings`, formatted its own way."""


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_mre_py_s_backend_is_written_as_the_target_s_literals(project, snapshot, monkeypatch, target):
    """The backend however named: its choice gone, its branch cut to the target's side, its name,
    device and options literal (.npu(), npugraph_ex, the options; the stand-in on the CPU), the
    cache folder literal; a class that took it takes config where it reads config, else nothing."""
    monkeypatch.setattr(export.project, "CACHE_DIR", ".cache")
    project(
        {
            "mre.py": LITERAL_MRE,
            "model.py": "import torch\n\n\ndef build_model():\n    return torch.nn.Identity()\n",
            "toolkit/compile_cache.py": "CACHE_DIR = None\n\n\ndef keyed(folder, model):\n    return folder\n",
        }
    )
    assert mre_of(export.export(target)) == snapshot


@pytest.mark.parametrize(
    "use",
    [
        "print(backend.reason)",
        "backend = select_backend(verbose=True)",
        "choose = select_backend",
        "print(backend)",
    ],
)
def test_a_use_of_the_backend_no_target_can_write_is_refused_naming_it(project, use):
    """A use of select_backend() or its choice that is not a plain call, nor a read of its name,
    device, options or is_npugraph_ex, nor a pass to mre.py's own: refused, the line quoted, the fix."""
    mre = ENTRY.replace(
        "from .model import build_model",
        "from .model import build_model\nfrom .toolkit.backend import select_backend",
    ).replace(
        "    return build_model()", f"    backend = select_backend()\n    {use}\n    return build_model()"
    )
    message = refusal(project, {"mre.py": mre})
    assert message.startswith(
        "mre.py: export writes select_backend()'s choice as the target's literals, and cannot write `"
    )
    assert f"`{use.partition(' = ')[2] or use}" in message or f"`{use}`" in message
    assert message.endswith(
        "so: call it plainly (`backend = select_backend()`) and read its .name, .device, .options "
        "and .is_npugraph_ex, or pass it to a class or function of mre.py"
    )


def refusal(project, sources: dict[str, str]) -> str:
    """Why export refuses the stand-in project written from `sources`."""
    project(sources)
    with pytest.raises(export.BundleError) as refused:
        export.export("portable")
    return str(refused.value)


USES_MODULE_OBJECTS = """\
from . import layers, blocks


def build_model():
    return layers.WIDTH + blocks.DEPTH
"""


@pytest.mark.parametrize("module", ["model.py", "mre.py"])
def test_a_module_object_of_yours_is_refused_with_the_fix(project, module):
    """`from . import layers` and then `layers.X`, in your model.py or the MRE: one file has no
    modules; every such name, and the fix."""
    entry = ENTRY.replace("from .model import build_model", USES_MODULE_OBJECTS)
    sources = {"model.py": USES_MODULE_OBJECTS} if module == "model.py" else {"mre.py": entry}
    message = refusal(project, {**sources, "layers.py": "WIDTH = 4\n", "blocks.py": "DEPTH = 2\n"})
    assert message == (
        f"{module} uses the module objects blocks, layers: one file has no modules; import the names you "
        "use instead (from .module import name)"
    )


def test_import_of_a_module_of_yours_is_refused_with_the_fix(project):
    """`import snippet.model` binds a module object too: refused at its line, with the fix."""
    message = refusal(
        project,
        {
            "mre.py": """\
\"\"\"The MRE.\"\"\"

import json
import snippet.model


def infer_one_step():
    return snippet.model.build_model()
""",
        },
    )
    assert message == (
        "mre.py:4: `import snippet.model` binds a module object, which one file cannot hold; "
        "import names instead (from snippet.model import ...)"
    )


@pytest.mark.parametrize("statement", ["from .layers import WIDTH", "from snippet.layers import WIDTH"])
def test_a_project_import_inside_a_function_is_refused_at_its_line(project, statement):
    """An import of your modules inside a function or block cannot be bundled: its line, the fix.
    Other imports there are fine."""
    message = refusal(
        project,
        {
            "model.py": f"""\
def build_model():
    import json
    from torch import nn

    {statement}
    return json, nn, WIDTH
""",
            "layers.py": "WIDTH = 4\n",
        },
    )
    assert message == (
        "model.py:5: a project import inside a function or block cannot be bundled; move it to "
        "the top of the module"
    )


def test_every_project_import_inside_a_function_is_refused_at_its_line(project):
    """Two imports of your modules inside a function: both lines named, and the fix."""
    message = refusal(
        project,
        {
            "model.py": """\
def build_model():
    from .layers import WIDTH

    from .blocks import DEPTH
    return WIDTH, DEPTH
""",
            "layers.py": "WIDTH = 4\n",
            "blocks.py": "DEPTH = 2\n",
        },
    )
    assert message == (
        "model.py:2, 4: project imports inside a function or block cannot be bundled; move them "
        "to the top of the module"
    )


def test_a_name_two_of_your_modules_define_is_refused(project):
    """One file holds one of each name: both modules named, and the fix."""
    message = refusal(
        project,
        {
            "model.py": """\
from .layers import scale

WIDTH = 4


def build_model():
    return scale(WIDTH)
""",
            "layers.py": """\
WIDTH = 8


def scale(x):
    return x * WIDTH
""",
        },
    )
    assert message == (
        "`WIDTH` is defined in both snippet.layers and snippet.model: one file holds one of each "
        "name; rename one of them"
    )


def test_a_name_of_yours_that_a_toolkit_definition_you_import_defines_too_is_yours_to_rename(project):
    """Your `scale` and the toolkit's, which a toolkit definition your model reads brings along:
    refused, the fix in your module (the toolkit's is the template's)."""
    message = refusal(
        project,
        {
            "model.py": """\
from .toolkit.helpers import double

scale = 3


def build_model():
    return double(scale)
""",
            "toolkit/helpers.py": "def scale(x):\n    return x\n\n\ndef double(x):\n    return 2 * scale(x)\n",
        },
    )
    assert message == (
        "`scale` is defined in both snippet.toolkit.helpers and snippet.model: one file holds one "
        "of each name; rename `scale` in snippet.model: the other is the toolkit's, which the "
        "template keeps"
    )


def test_a_name_one_module_defines_and_another_imports_is_refused(project):
    """`F` defined in your model.py and imported as torch.nn.functional in your layers.py: one file
    holds one of each name."""
    message = refusal(
        project,
        {
            "model.py": "from .layers import relu\n\nF = 2\n\n\ndef build_model():\n    return relu(F)\n",
            "layers.py": "import torch.nn.functional as F\n\n\ndef relu(x):\n    return F.relu(x)\n",
        },
    )
    assert message == (
        "`F` is imported in snippet.layers and defined in snippet.model: one file holds one of each "
        "name; rename one of them"
    )


def test_a_name_two_modules_import_differently_is_refused(project):
    """`encode` from json in one module and from pickle in another: both named, and the fix."""
    message = refusal(
        project,
        {
            "mre.py": """\
from json import dumps as encode

from .model import build_model


def infer_one_step():
    return encode(build_model())
""",
            "model.py": """\
from pickle import dumps as encode


def build_model():
    return encode(1)
""",
        },
    )
    assert message == (
        "`encode` is imported differently in snippet.model and snippet.mre; import it the same way in both"
    )


def test_a_name_the_file_would_not_define_is_refused(project):
    """A name your code reads and nothing defines (an import forgotten) is found before the file
    is written, and named."""
    message = refusal(
        project,
        {"model.py": "def build_model():\n    return np.zeros(3) + Missing\n"},
    )
    assert message == (
        "the bundled file would use undefined names: Missing, np; define or import them at the "
        "top of your modules"
    )


def test_undefined_names_are_found():
    """The verifier finds a name read but never bound, at module level and inside functions."""
    text = "import torch\n\nX = torch.ones(1)\n\n\ndef f(a):\n    return a + Missing + X\n\nprint(Other)\n"
    assert bundle.undefined_names(text) == ["Missing", "Other"]


def test_file_is_defined_in_every_script():
    """__file__ is no undefined name: Python defines it in every script, the exported one too."""
    text = "from pathlib import Path\n\nHERE = Path(__file__).parent\n"
    assert bundle.undefined_names(text) == []


def test_a_module_that_is_not_python_source_is_refused():
    """A module this tool cannot read as source (built in, or missing) is named."""
    for name in ["sys", "a_module_nowhere", "a_package_nowhere.module"]:
        with pytest.raises(export.BundleError) as refused:
            bundle.source_of(name)
        assert str(refused.value) == f"{name} is not a Python source file this tool can bundle"


def test_bundling_imports_none_of_your_modules(project):
    """Telling a module from a name in one imports no plain module: bundling runs no model code."""
    project(
        {
            "mre.py": """\
from . import layers  # noqa: F401
from .model import build_model


def infer_one_step():
    return build_model()
""",
            "model.py": "raise SystemExit('imported')\n\n\ndef build_model():\n    return 1\n",
            "layers/__init__.py": "",
        }
    )
    text = export.export("portable")
    assert "def build_model():" in text
    assert f"{STAND_IN}.model" not in sys.modules


DATA_FILES = {
    "weights.pt": "",
    "assets/vocab.txt": "",
    "assets/.cache/hidden.bin": "",
    ".hidden": "",
    "__pycache__/stale.dat": "",
    "py.typed": "",
    "stub.pyi": "",
    "compiled.pyc": "",
}
"""Files beside the stand-in's modules: only the first two are data a model may read."""


@pytest.mark.parametrize(
    ("finds", "line", "through"),
    [
        ("HERE = Path(__file__).parent\n", 3, "__file__"),
        ("HERE = Path(__spec__.origin).parent\n", 3, "__spec__"),
        ("from importlib.resources import files\n", 3, "importlib.resources"),
        ("from importlib import resources\n", 3, "importlib.resources"),
        ("import importlib.resources\n", 3, "importlib.resources"),
        (
            "import importlib\n\nHERE = importlib.resources.files(__package__)\n",
            5,
            "importlib.resources",
        ),
        ("import pkgutil\n", 3, "pkgutil"),
    ],
)
def test_data_files_your_modules_read_are_named_and_refused(project, finds, line, through):
    """A module of yours that finds files through its own location, in a package that holds data
    files: refused, every data file named (not code, markers or hidden files), where the package
    is, the first line that finds files, and the fix."""
    package = project(
        {
            "model.py": f"from pathlib import Path\n\n{finds}\n\ndef build_model():\n    return 1\n",
            **DATA_FILES,
        }
    )
    message = refusal(project, {})
    assert message == (
        "the exported file cannot carry the data files your modules read: assets/vocab.txt, "
        f"weights.pt (in {package}, found at model.py:{line} through {through}). Build what they "
        "hold from the seed instead: random weights from the torch.manual_seed(0) the MRE runs "
        "before build_model() show a graph-mode bug as well, and small values (a config) can be "
        "written into model.py"
    )


@pytest.mark.parametrize("op_plugin", [False, True])
def test_an_op_plugin_yaml_is_data_only_without_an_op_plugin_op(project, monkeypatch, op_plugin):
    """With an op-plugin op, op_plugin_functions.yaml is the op's schema, which the file holds as
    a string: not data, as py.typed is not. Without one, a file of that name is data like any."""
    monkeypatch.setattr(export.project, "OP_PLUGIN", op_plugin)
    files = {"py.typed": "", "op_plugin_functions.yaml": "", "weights.pt": ""}
    message = refusal(
        project, {"model.py": "HERE = __file__\n\n\ndef build_model():\n    return 1\n", **files}
    )
    found = "weights.pt" if op_plugin else "op_plugin_functions.yaml, weights.pt"
    assert message.startswith(
        f"the exported file cannot carry the data files your modules read: {found} (in "
    )


def test_every_module_that_finds_files_is_named(project):
    """Two of your modules find files: the refusal names each, in module-name order, at its first
    such line."""
    project(
        {
            "model.py": """\
import pkgutil

from .layers import WIDTH

HERE = __file__


def build_model():
    return WIDTH
""",
            "layers.py": "WIDTH = 4\nSOURCE = __loader__\nFOLDER = __path__\n",
            "weights.pt": "",
        }
    )
    message = refusal(project, {})
    found_at = "layers.py:2 through __loader__, model.py:1 through pkgutil). "
    assert message.partition(", found at ")[2].startswith(found_at)


@pytest.mark.parametrize(
    "sources",
    [
        {"model.py": "def build_model():\n    return 1\n", "weights.pt": ""},
        {"model.py": "HERE = __file__\n\n\ndef build_model():\n    return 1\n", "py.typed": ""},
        {
            "mre.py": ENTRY.replace("from .model", "from .toolkit.files import HERE\nfrom .model").replace(
                "return build_model()", "return build_model(), HERE"
            ),
            "model.py": "def build_model():\n    return 1\n",
            "toolkit/files.py": "HERE = __file__\n",
            "weights.pt": "",
        },
        {
            "model.py": "from . import pkgutil  # noqa: F401\n\n\ndef build_model():\n    return 1\n",
            "pkgutil.py": "print('a module of yours, not the standard library one')\n",
            "weights.pt": "",
        },
    ],
    ids=[
        "data files that no module of yours finds",
        "no data files",
        "found by the toolkit",
        "a module of yours named like a locating one",
    ],
)
def test_what_finds_no_data_file_of_yours_bundles(project, sources):
    """Data files that no module of yours locates, a module that locates files where there are
    none, and the toolkit's own use of __file__: none stops the export."""
    project(sources)
    assert "def build_model():" in export.export("portable")


def test_an_import_from_a_package_that_does_not_exist_is_refused_naming_it(project):
    """`from .missing.deep import helper`: the module export cannot find is named, no traceback."""
    message = refusal(
        project,
        {"model.py": "from .missing.deep import helper\n\n\ndef build_model():\n    return helper()\n"},
    )
    assert message == f"{STAND_IN}.missing.deep is not a Python source file this tool can bundle"


@pytest.mark.parametrize(
    ("first", "gap"),
    [
        ("def build_model():\n    return functools\n", 2),
        ("@functools.cache\ndef build_model():\n    return 1\n", 2),
        ("class Model:\n    pass\n\n\ndef build_model():\n    return Model, functools\n", 2),
        ("# The model.\ndef build_model():\n    return functools\n", 1),
    ],
    ids=["def", "decorator", "class", "comment"],
)
def test_the_definitions_follow_the_imports_as_ruff_format_spaces_them(project, first, gap):
    """Two blank lines between the imports and a def or class (decorated or not), one before
    anything else (isort's)."""
    project({"model.py": f"import functools\n\n\n{first}"})
    text = body(export.export("portable"))
    assert text.startswith("import functools\n" + "\n" * gap + first.partition("\n")[0])


def test_a_statement_python_refuses_outside_a_function_is_named_before_the_file_is_written(project):
    """`return` at the top of a module: the compile error, in the target's file."""
    message = refusal(project, {"model.py": "def build_model():\n    return 1\n\n\nreturn\n"})
    assert re.fullmatch(
        r"the bundled file does not compile: 'return' outside function "
        r"\(<export --target portable>, line [0-9]+\)",
        message,
    )
