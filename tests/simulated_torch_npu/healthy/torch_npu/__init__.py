"""Stand-in torch_npu that imports and reports one NPU, whose SoC name a test chooses.

Like torch-npu 2.13.0's torch_npu/_init/registry/backend.py register_privateuse1_backend(), it
makes its own `npu` module torch.npu. No compile can run: npugraph_ex itself is not here. Its profiler
(torch_npu.profiler) records how it is called and writes stand-in profiles; _C holds the options
torch.npu's switches set, and utils reports a CANN release.
"""

import sys

import torch

from . import _C, npu, profiler, utils  # noqa: F401  (torch_npu imports its profiler and utils too)

__version__ = "2.13.0"

# Upstream: torch.utils.rename_privateuse1_backend("npu") and torch._register_device_module("npu",
# torch_npu.npu). A pure-Python stand-in cannot back a renamed privateuse1 device (Dynamo then
# asks that accelerator for its streams), so set what _register_device_module would.
torch.npu = npu
sys.modules["torch.npu"] = npu
