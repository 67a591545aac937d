"""Which project a tool serves: its package, the answers it was baked with, and its model.py.

The toolkit is the same files in every project the template makes, and imports nothing of the
project around it. The project's command line (`python -m <package>`, __main__.py) describes its
project (Project.of) and hands it to the tool it runs (using()). A tool called without one (the
MRE's report, a test) serves the package the toolkit sits in.

The toolkit reads the project when it runs, never at import: `project.model()` is model.py, and
`project.DECODE`, `project.TENSOR_PARALLEL`, ... are the answers of the project served now. A test
may set one (monkeypatch.setattr(project, "DECODE", True)); that value holds until it is undone.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Project:
    """A project: its import name and its settings.py (the answers), and its model.py."""

    package: str
    settings: Any

    @classmethod
    def of(cls, package: str) -> Project:
        """The project whose package is `package`, importable by that name."""
        return cls(package, importlib.import_module(f"{package}.settings"))

    @property
    def folder(self) -> Path:
        """The package's folder: yours, wherever it is installed."""
        return Path(importlib.import_module(self.package).__file__).resolve().parent

    @property
    def pyproject(self) -> Path:
        """The project's configuration beside src/ (none where the package is installed as a wheel)."""
        return self.folder.parent.parent / "pyproject.toml"

    @property
    def model(self) -> ModuleType:
        """model.py, imported when first asked for: a tool that reports a model.py that fails to
        import (check, the doctor) asks for it where it can say so."""
        return importlib.import_module(f"{self.package}.model")

    def answer(self, name: str, default: Any = None) -> Any:
        return getattr(self.settings, name, default)


SERVED: ContextVar[Project | None] = ContextVar("project", default=None)


@functools.cache
def home() -> Project:
    """The project of the package this toolkit sits in: who a tool serves when none is given."""
    return Project.of(__package__.rpartition(".")[0])


def current() -> Project:
    """The project served now: the one using() gives, else home()."""
    return SERVED.get() or home()


@contextlib.contextmanager
def using(project: Project) -> Iterator[Project]:
    """Serve `project` in the block: what the command line does around the tool it runs."""
    token = SERVED.set(project)
    try:
        yield project
    finally:
        SERVED.reset(token)


def model() -> ModuleType:
    """model.py of the project served now: build_model(), example_inputs(), its settings."""
    return current().model


def from_model(*names: str) -> Any:
    """What `from .model import <names>` would give (a value, or a tuple of several), and the
    ImportError it would raise for a name model.py lacks: the one each tool words for you."""
    module = model()
    for name in names:
        if not hasattr(module, name):
            raise ImportError(
                f"cannot import name {name!r} from {module.__name__!r} ({module.__file__})",
                name=module.__name__,
                path=module.__file__,
            )
    values = tuple(getattr(module, name) for name in names)
    return values[0] if len(values) == 1 else values


# The answers, by the names the toolkit reads (PEP 562: read when asked, from current()).
ANSWERS = {
    "PACKAGE": lambda project: project.package,
    "PROJECT": lambda project: project.answer("PROJECT"),
    "TORCH_NPU": lambda project: project.answer("TORCH_NPU"),
    "MODE": lambda project: project.answer("MODE"),
    "CACHE_COMPILE": lambda project: project.answer("MODE") == "cache_compile",
    "CACHE_DIR": lambda project: project.answer("CACHE_DIR"),
    "DECODE": lambda project: project.answer("WORKLOAD") == "decode",
    "TENSOR_PARALLEL": lambda project: project.answer("PARALLEL") == "tensor_parallel",
    "CUSTOM_OP": lambda project: project.answer("CUSTOM_OP", "none"),
    "OP_REGISTRATION": lambda project: project.answer("OP_REGISTRATION"),
    "OP_PLUGIN": lambda project: project.answer("OP_REGISTRATION") == "op_plugin",
    "OP": lambda project: (
        f"{project.answer('OP_NAMESPACE')}::{project.answer('OP_NAME')}"
        if project.answer("CUSTOM_OP", "none") != "none"
        else None
    ),
}
"""PACKAGE: the import name. PROJECT: the distribution's. TORCH_NPU: the pinned release. MODE:
npugraph_ex or cache_compile; CACHE_DIR its folder (None in npugraph_ex mode). DECODE,
TENSOR_PARALLEL, CACHE_COMPILE: the answers as switches. CUSTOM_OP: none, out_of_place or
in_place; OP_REGISTRATION: torch_library or op_plugin (None without an op); OP: the op as its
schema names it, namespace::name (None without)."""


def __getattr__(name: str) -> Any:
    if name in ANSWERS:
        return ANSWERS[name](current())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
