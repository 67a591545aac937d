"""Stand-in torch_npu whose import fails like the real one on a half-sourced CANN.

Copied from torch-npu 2.13.0 (same in 2.14.0): torch_npu/_init/registry/registry_manager.py,
_cann_package_check(), which `import torch_npu` runs; torch-npu 2.12.0.post3 has it in
torch_npu/utils/npu_intercept.py. Compare the texts with each new release. The real messages end
with pta_error(ErrCode.NOT_FOUND), a second line imitated by PTA_ERROR.
"""

# Upstream code kept as written, so that it can be compared line by line with the next release.
# ruff: noqa: PTH110, PTH118, TRY002

import os

PTA_ERROR = "\n[ERROR] 2026-01-01-00:00:00 (PID:1, Device:-1, RankID:-1) ERR00008 PTA resource not found"


def _cann_package_check():
    if "ASCEND_HOME_PATH" in os.environ:
        ascend_home_path = os.environ["ASCEND_HOME_PATH"]
        if not os.path.exists(ascend_home_path):
            raise Exception(
                f"ASCEND_HOME_PATH : {ascend_home_path} does not exist. "
                "Please run 'source set_env.sh' in the CANN installation path." + PTA_ERROR
            )

        # check whether environment variables are correctly configured
        if "ASCEND_OPP_PATH" not in os.environ:
            raise Exception(
                "ASCEND_OPP_PATH environment variable is not set. "
                "Please check whether the opp package has been installed. If exist, please run "
                "'source set_env.sh' in the CANN installation path." + PTA_ERROR
            )

        ascend_opp_path = os.environ["ASCEND_OPP_PATH"]
        if not os.path.exists(ascend_opp_path):
            raise Exception(
                f"ASCEND_OPP_PATH : {ascend_opp_path} does not exist. "
                "Please check whether the opp package has been installed. If exist, please run "
                "'source set_env.sh' in the CANN installation path." + PTA_ERROR
            )

        ascend_runtime_path = os.path.join(ascend_home_path, "runtime")
        if not os.path.exists(ascend_runtime_path):
            raise Exception(
                f"ASCEND_RUNTIME_PATH : {ascend_runtime_path} does not exist. "
                "Please check whether the runtime package has been installed. If exist, please run "
                "'source set_env.sh' in the CANN installation path." + PTA_ERROR
            )

        ascend_compiler_path = os.path.join(ascend_home_path, "compiler")
        if not os.path.exists(ascend_compiler_path):
            raise Exception(
                f"ASCEND_COMPILER_PATH : {ascend_compiler_path} does not exist. "
                "Please check whether the compiler package has been installed. If exist, please run "
                "'source set_env.sh' in the CANN installation path." + PTA_ERROR
            )


_cann_package_check()
# Past the check, the real import needs CANN's libraries (libhccl.so), which are not here either.
raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")
