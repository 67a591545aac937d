"""The projects the toolkit's tests import: one per configuration, each a package of its own.

Each is a plain folder in tests/toolkit/projects/<name>/: a baked project's package files, but its
toolkit, which install() links to the template's own (`{{cookiecutter.project_slug}}/src/...`), so
that the tests import the toolkit from the template's tree and bake nothing.
`nox -s toolkit_projects` writes the folders anew from fresh bakes after a change to the template's
files; tests/test_toolkit_layout.py checks that they are what a bake makes.

Without torch or pytest, so that `nox -s mutation_score` installs them too (tests/mutation_score.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[2]
TOOLKIT = TEMPLATE / "{{cookiecutter.project_slug}}" / "src" / "{{cookiecutter.package_name}}" / "toolkit"
FOLDERS = Path(__file__).resolve().with_name("projects")
"""tests/toolkit/projects/: each project's package files, the toolkit left out."""

PROJECTS: dict[str, dict[str, str]] = {
    "forward_project": {},
    "decode_project": {"workload": "decode"},
    "parallel_project": {"parallel": "tensor_parallel"},
    "decode_parallel_project": {"workload": "decode", "parallel": "tensor_parallel"},
    "cache_project": {"mode": "cache_compile"},
    "op_project": {"custom_op": "in_place", "op_registration": "torch_library"},
    # op-plugin ops live in torch.ops.npu, one namespace for the process: one such project.
    "plugin_project": {"custom_op": "in_place", "op_registration": "op_plugin"},
    # test_compile_cache.py: each rank of the tensor-parallel MRE asks for a cache of its own.
    "parallel_cache_project": {"parallel": "tensor_parallel", "mode": "cache_compile"},
}
"""Package name → answers over the defaults (the package name is also the project's slug)."""


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Standard output, this process's and its children's, goes nowhere meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with Path(os.devnull).open("w") as nowhere:
            os.dup2(nowhere.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def package_files(package: Path) -> dict[str, bytes]:
    """A baked package's files but its toolkit's (and what Python writes), by relative path."""
    return {
        path.relative_to(package).as_posix(): path.read_bytes()
        for path in sorted(package.rglob("*"))
        if path.is_file()
        and path.relative_to(package).parts[0] != "toolkit"
        and "__pycache__" not in path.parts
    }


def baked(root: Path) -> dict[str, Path]:
    """Every project of PROJECTS baked into root, by name: its package folder."""
    from conftest import bake

    packages = {}
    for package, answers in PROJECTS.items():
        with quiet():  # the post-gen hook's next steps, printed by a process of its own
            project = bake(root / package, project_slug=package, package_name=package, **answers)
        packages[package] = project / "src" / package
    return packages


def write(scratch: Path) -> None:
    """tests/toolkit/projects/ anew, from fresh bakes in scratch."""
    shutil.rmtree(FOLDERS, ignore_errors=True)
    for name, package in baked(scratch).items():
        for relative, data in package_files(package).items():
            (FOLDERS / name / relative).parent.mkdir(parents=True, exist_ok=True)
            (FOLDERS / name / relative).write_bytes(data)


def install(root: Path, toolkit: Path | None = TOOLKIT) -> Path:
    """Each project of tests/toolkit/projects/ as a package under root/src, its toolkit a link to
    `toolkit` (the template's), or none (mutation_score.py links each module to its copy); the
    folder to put on sys.path."""
    source = root / "src"
    for name in PROJECTS:
        shutil.copytree(FOLDERS / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        if toolkit is not None:
            (source / name / "toolkit").symlink_to(toolkit, target_is_directory=True)
    return source


if __name__ == "__main__":  # `nox -s toolkit_projects`
    import tempfile

    sys.path.insert(0, str(TEMPLATE / "tests"))
    with tempfile.TemporaryDirectory() as scratch:
        write(Path(scratch))
    print(f"wrote {FOLDERS.relative_to(TEMPLATE)}/ from fresh bakes")
