"""The projects the toolkit's tests import: one bake per configuration, each a package of its own.

Without torch or pytest, so that `nox -s mutation_score` bakes them too (tests/mutation_score.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from conftest import bake

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


def build_projects(root: Path) -> Path:
    """Bake every project of PROJECTS into root; the folder to put on sys.path."""
    source = root / "src"
    source.mkdir()
    for package, answers in PROJECTS.items():
        with quiet():  # the post-gen hook's next steps, printed by a process of its own
            project = bake(root / package, project_slug=package, package_name=package, **answers)
        shutil.move(project / "src" / package, source / package)
    return source
