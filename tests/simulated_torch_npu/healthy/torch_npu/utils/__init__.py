"""Stand-in torch_npu.utils: get_cann_version(), which the real one (torch-npu 2.13.0
torch_npu/npu/utils.py, exported from torch_npu/utils/__init__.py) answers by asking CANN's
runtime (aclsysGetCANNVersion); here $SIMULATED_CANN_VERSION, else 9.1.0."""

import os


def get_cann_version(module="CANN"):
    return os.environ.get("SIMULATED_CANN_VERSION", "9.1.0")
