"""Stand-in torch_npu._C: the option store behind the two switches that send operators to aclop.

The real one is the C extension (torch-npu 2.13.0; Ascend/pytorch torch_npu/csrc/npu/Module.cpp):
_npu_setOption sets options (torch.npu.set_compile_mode sets "jitCompile", and
torch.npu.config.allow_internal_format "ALLOW_INTERNAL_FORMAT"), and _npu_getOption returns one
as bytes, or None where never set. _npu_init initialises the device, which sets the defaults of
an Atlas A2 or A3, the SoCs npugraph_ex runs on (csrc/core/npu/sys_ctrl/npu_sys_ctrl.cpp):
"jitCompileInit", CANN's default, "disable" there, unless "jitCompile" is set already; and
"ALLOW_INTERNAL_FORMAT" "disable" unless set.
"""

_OPTIONS: dict[str, str] = {}


def _npu_setOption(options):  # the real name
    _OPTIONS.update(options)


def _npu_getOption(name):  # the real name
    value = _OPTIONS.get(name)
    return None if value is None else value.encode()


def _npu_init():
    if not _OPTIONS.get("jitCompile"):
        _OPTIONS["jitCompileInit"] = "disable"
    if not _OPTIONS.get("ALLOW_INTERNAL_FORMAT"):
        _OPTIONS["ALLOW_INTERNAL_FORMAT"] = "disable"
