"""One rank of a two-rank run under torchrun, for the tensor-parallel tests (not a test itself).

    torchrun --standalone --nproc-per-node 2 tests/two_ranks.py FOLDER [FILE]

Runs infer_one_step() of the project's MRE, or of FILE (an exported MRE), and saves what the
tests check into FOLDER/rank<RANK>.pt: the output and the graphs this rank compiled.
"""

import os
import runpy
import sys
from pathlib import Path

# Off before torch is imported (the package does this too): where torch_npu is installed without
# CANN, torch's device-backend autoload would make `import torch` fail.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

# isort: split
import torch
from torch._dynamo.utils import counters


def infer_one_step():
    """The MRE's infer_one_step(): from FILE when given, else from the project."""
    if len(sys.argv) > 2:
        return runpy.run_path(sys.argv[2], run_name="exported")["infer_one_step"]()
    from {{ cookiecutter.package_name }}.mre import infer_one_step

    return infer_one_step()


if __name__ == "__main__":
    output = infer_one_step()
    result = {"output": output, "graphs": counters["stats"]["unique_graphs"]}
    torch.save(result, Path(sys.argv[1]) / f"rank{os.environ['RANK']}.pt")
