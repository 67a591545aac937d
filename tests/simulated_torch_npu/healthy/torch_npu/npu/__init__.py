"""Stand-in torch_npu.npu (torch.npu): the calls the backend probe and the doctor make.

The real ones are in torch-npu 2.13.0 torch_npu/npu/__init__.py: is_available(), device_count(),
and get_device_name(), which returns aclrtGetSocName(), e.g. "Ascend910B1" (the names are in
torch_npu/csrc/core/npu/NpuVariables.cpp). A test swaps SOC, or sets SIMULATED_NPU_SOC.
The switches that send operators to aclop are those of torch_npu/npu/npu_config.py:
set_compile_mode(), and config, whose allow_internal_format can be set but not read; init()
initialises the device.
"""

import os

from .. import _C

SOC = os.environ.get("SIMULATED_NPU_SOC", "Ascend910B1")


def is_available():
    return True


def device_count():
    return 1


def get_device_name(device_name=None):
    return SOC


def init():
    _C._npu_init()


def set_compile_mode(jit_compile=False):
    _C._npu_setOption({"jitCompile": "enable" if jit_compile else "disable"})


class _npuConfig:  # the real name
    @classmethod
    def __setattr__(cls, name, value):
        if name == "allow_internal_format":
            _C._npu_setOption({"ALLOW_INTERNAL_FORMAT": "enable" if value else "disable"})


config = _npuConfig()
