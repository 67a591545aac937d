"""Stand-in torch_npu.npu (torch.npu): the calls the backend probe and the doctor make.

The real ones are in torch-npu 2.13.0 torch_npu/npu/__init__.py: is_available(), device_count(),
and get_device_name(), which returns aclrtGetSocName(), e.g. "Ascend910B1" (the names are in
torch_npu/csrc/core/npu/NpuVariables.cpp). A test swaps SOC, or sets SIMULATED_NPU_SOC.
"""

import os

SOC = os.environ.get("SIMULATED_NPU_SOC", "Ascend910B1")


def is_available():
    return True


def device_count():
    return 1


def get_device_name(device_name=None):
    return SOC
