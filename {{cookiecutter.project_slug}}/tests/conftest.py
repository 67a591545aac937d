"""Shared test setup: the `npu` marker, and the MRE run once for the whole suite."""

# Before torch: the package switches off torch's device-backend autoload (see its __init__.py),
# which would otherwise make `import torch` fail where torch_npu is installed but CANN is not.
import {{ cookiecutter.package_name }}  # noqa: F401

# isort: split
import contextlib
import gc
import io
from typing import NamedTuple

import pytest
import torch
from torch._dynamo.utils import counters

from {{ cookiecutter.package_name }}.backend import npu_status
from {{ cookiecutter.package_name }}.mre import infer_one_step

# Hide what is imported so far (torch's large object graph) from the garbage collector: every full
# collection, and pytest runs several, would walk it again, for over half a second in all.
gc.freeze()


class MreRun(NamedTuple):
    output: torch.Tensor
    report: str
    graphs: int
    """How many graphs Dynamo captured while the MRE ran."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip tests marked `npu` unless an NPU can run npugraph_ex here, and say why not."""
    npu_ok, why = npu_status()
    if npu_ok:
        return
    skip = pytest.mark.skip(reason=f"needs an Ascend NPU: {why}")
    for item in items:
        if item.get_closest_marker("npu"):
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def mre_run(tmp_path_factory: pytest.TempPathFactory) -> MreRun:
    """The MRE's output, report and graph count: compiled once, first, for every test.

    It runs in an empty folder, so that a cache_compile cache (relative to the working directory)
    is always built afresh, never loaded from an earlier run.
    """
    torch._dynamo.reset()  # a fresh compile, whatever ran before
    printed = io.StringIO()
    graphs_before = counters["stats"]["unique_graphs"]
    with contextlib.chdir(tmp_path_factory.mktemp("mre")), contextlib.redirect_stdout(printed):
        output = infer_one_step()
    return MreRun(output, printed.getvalue(), counters["stats"]["unique_graphs"] - graphs_before)
