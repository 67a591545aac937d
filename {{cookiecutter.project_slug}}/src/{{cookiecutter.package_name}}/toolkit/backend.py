"""Choose the torch.compile backend: npugraph_ex on a usable Ascend NPU, a stand-in elsewhere.

The stand-in is the first step of the official npugraph_ex fault isolation: aot_eager with
fullgraph=True and dynamic=False checks graph breaks, functionalization and Meta/fake functions
exactly as graph mode needs them, on any machine.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch._dynamo

from .socs import (
    CAPTURE_SOCS,
    NO_CAPTURE_PREFIXES,
    NO_CAPTURE_SOCS,
    NO_NPUGRAPH_EX_PREFIX,
    WHY_NOT_ON_310P,
    can_capture,
)

BACKEND_ENV = "NPUGRAPH_BACKEND"
"""Set to a torch.compile backend name (npugraph_ex, aot_eager, eager, inductor, ...) to force it."""

STAND_IN = "aot_eager"
CANN_HINT = "source the CANN set_env.sh (e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh)"
ACLOP_CAPTURE_ERROR = "Cannot run aclop operators during NPU graph capture"
ACLOP_CAPTURE_HINT = (
    f'if a capture fails with "{ACLOP_CAPTURE_ERROR}", set '
    "torch.npu.config.allow_internal_format = False before compiling; if it still fails, that "
    "operator has no aclnn implementation and cannot be captured"
)
"""torch_npu's own advice for its aclop capture error (NPUGraphsUtils.h), for tools that see it."""
DETERMINISTIC_RECOMPILE = (
    "keep the NPU deterministic level fixed between calls: torch_npu recompiles on a change "
    "(torch_npu.npu.set_deterministic_level, torch.use_deterministic_algorithms), and under "
    "cache_compile that recompile deletes the cache"
)
"""For tools that explain a recompile. From the 26.2 releases (torch_npu 2.12.0.post3, 2.13.0 and
2.14.0, the ones this template pins) npugraph_ex and cache_compile guard every graph on the NPU
deterministic level (torch_npu/dynamo/_deterministic_guard.py, a guard that reads
`torch_npu.npu._get_deterministic_level() == <level>`): a change recompiles, and cache_compile
takes any recompile for a reason to delete its cache ("Skip cache as ... recompiled")."""


def capture_refusal(soc: str) -> str:
    """Why a SoC that can_capture() refuses falls back, naming it and what npugraph_ex needs."""
    needs = f"npugraph_ex needs {CAPTURE_SOCS}"
    if soc.startswith(NO_NPUGRAPH_EX_PREFIX):
        return f"{soc}: npugraph_ex is not supported on 310P ({WHY_NOT_ON_310P}; {needs})"
    if soc in NO_CAPTURE_SOCS or soc.startswith(NO_CAPTURE_PREFIXES):
        return f"{soc} cannot capture aclgraphs ({needs})"
    return f"{soc} is not a SoC known to capture aclgraphs ({needs})"


# torch_npu's import checks a half-sourced CANN itself and raises a bare Exception (torch_npu
# 2.13 and 2.14 _init/registry/registry_manager.py _cann_package_check(); 2.12 post3:
# utils/npu_intercept.py): each message's first line, what it means, and the fix.
SET_ENV_OF_FULL_CANN = "source the set_env.sh of a complete CANN install"
CANN_STATES = (
    (
        r"ASCEND_HOME_PATH : (.*) does not exist",
        "ASCEND_HOME_PATH={} does not exist",
        f"{CANN_HINT}, or unset ASCEND_HOME_PATH",
    ),
    (
        r"ASCEND_OPP_PATH environment variable is not set",
        "ASCEND_OPP_PATH is not set, though ASCEND_HOME_PATH is",
        f"{CANN_HINT}: it sets both",
    ),
    (
        r"ASCEND_OPP_PATH : (.*) does not exist",
        "ASCEND_OPP_PATH={} does not exist",
        f"install CANN's opp package, or {SET_ENV_OF_FULL_CANN}",
    ),
    (
        r"ASCEND_RUNTIME_PATH : (.*) does not exist",
        "ASCEND_HOME_PATH has no runtime/ ({} is missing)",
        f"install CANN's runtime package there, or {SET_ENV_OF_FULL_CANN}",
    ),
    (
        r"ASCEND_COMPILER_PATH : (.*) does not exist",
        "ASCEND_HOME_PATH has no compiler/ ({} is missing)",
        f"install CANN's compiler package there, or {SET_ENV_OF_FULL_CANN}",
    ),
)


def import_diagnosis(error: BaseException) -> tuple[str, str]:
    """Why torch_npu failed to import, and the fix: the two halves of import_failure()."""
    first_line = (str(error).splitlines() or [type(error).__name__])[0]
    for pattern, state, fix in CANN_STATES:
        if match := re.match(pattern, first_line):
            return f"CANN is half-sourced: {state.format(*match.groups())}", fix
    if "libhccl" in first_line or "libascend" in first_line or "ASCEND" in first_line:
        return f"CANN is not sourced ({first_line})", CANN_HINT
    what = f"torch_npu failed to import ({type(error).__name__}: {first_line})"
    return what, "run `python -c 'import torch_npu'` for the traceback"


def import_failure(error: BaseException) -> str:
    """Why torch_npu failed to import, in one line with the fix."""
    return "; ".join(import_diagnosis(error))


# npugraph_ex options. Only names that every torch_npu release with npugraph_ex accepts: an unknown
# name fails the first call with "Invalid option".
NPUGRAPH_EX_OPTIONS: dict[str, object] = {
    # The inference weights, and a decode project's KV cache, never move: treat their addresses as
    # fixed instead of hashing every parameter's address into the graph key on each call. It
    # covers buffers and tensors marked with torch._dynamo.mark_static_address, such as
    # transformers' StaticCache (torch_npu dynamo/npugraph_ex/_acl_concrete_graph/acl_graph.py
    # get_unupdated_input_fn; TorchAir docs npugraph_ex/frozen_parameter.md).
    "frozen_parameter": True,
    # Hand back a copy of each output, which the next replay would otherwise overwrite.
    "clone_output": True,
    # Copy each call's inputs into the graph's static input buffers (the default). In a decode
    # project the tokens and input_pos are such user inputs; the cache is not: Dynamo marks a
    # module's buffers static, and npugraph_ex never copies a static input, so the graph writes
    # the cache at its own address (_acl_concrete_graph/fx2acl_converter.py parse_input).
    "clone_input": True,
    # inplace_pass and input_inplace_pass stay at their default, True: the second turns Dynamo's
    # out-of-place update plus copy_ of an input such as a decode project's KV cache back into one
    # in-place write (graph_pass.py _reinplace_input_mutated_ops; TorchAir docs
    # npugraph_ex/inplace_pass.md). vllm-ascend sets inplace_pass=False, as a fallback when a
    # reinplaced op misbehaves.
    # aclgraphs per FX graph before that graph falls back to eager. With dynamic=False each FX graph
    # holds exactly one, so this never triggers: a new input shape is a Dynamo recompile instead,
    # bounded by torch._dynamo.config.recompile_limit (8).
    "capture_limit": 64,
    # True runs the optimized FX graph without capture: step 2 of npugraph_ex fault isolation.
    "force_eager": False,
}


@dataclass(frozen=True)
class Backend:
    """What torch.compile should use here, on which device, and why."""

    name: str
    device: str
    reason: str

    @property
    def is_npugraph_ex(self) -> bool:
        return self.name == "npugraph_ex"

    @property
    def options(self) -> dict[str, object] | None:
        """The npugraph_ex options, or None: the other backends take none."""
        return dict(NPUGRAPH_EX_OPTIONS) if self.is_npugraph_ex else None


def probe_npu() -> tuple[bool, str]:
    """Whether npugraph_ex can run here, and a one-line reason either way."""
    if importlib.util.find_spec("torch_npu") is None:
        return False, "torch_npu is not installed"
    try:
        importlib.import_module("torch_npu")
    except Exception as error:  # noqa: BLE001  (a half-sourced CANN raises a bare Exception)
        return False, import_failure(error)
    if not torch.npu.is_available():
        return False, "torch_npu sees no NPU (check npu-smi info and ASCEND_RT_VISIBLE_DEVICES)"
    soc = torch.npu.get_device_name(0)
    if not can_capture(soc):
        return False, capture_refusal(soc)
    return True, f"{soc}, torch_npu {importlib.import_module('torch_npu').__version__}"


@functools.cache
def npu_status() -> tuple[bool, str]:
    """probe_npu(), once per process: the hardware does not change while we run."""
    return probe_npu()


def npu_versions() -> str:
    """The torch_npu and CANN releases npugraph_ex compiles with in this process, in one line:
    "torch_npu 2.14.0, CANN 9.1.0"; "torch_npu not loaded" where torch_npu did not load (off an
    NPU), the same on every run."""
    npu_status()  # the probe imports torch_npu wherever it loads
    loaded = sys.modules.get("torch_npu")
    if loaded is None:
        return "torch_npu not loaded"
    return f"torch_npu {loaded.__version__}, CANN {cann_version(loaded)}"


def cann_version(loaded: object) -> str:
    """CANN's release as the loaded torch_npu reads it, or "unknown".

    torch_npu.utils.get_cann_version() (in every torch_npu this template pins) asks CANN's runtime
    (aclsysGetCANNVersion, no device needed) and answers "" before CANN 8.1.RC1.
    """
    try:
        return loaded.utils.get_cann_version() or "unknown"
    except (AttributeError, RuntimeError):  # a torch_npu without it, or a CANN that cannot say
        return "unknown"


# The run-time switches that send an operator with both an aclnn and an aclop kernel (777 of
# op-plugin's official operators for torch 2.13 and 2.14) to aclop, which capture refuses: its
# generated kernels take aclnn only when JIT compile is off and every tensor input is in a base
# format (op-plugin torchnpugen/gen.py).


def jit_compile_on() -> bool:
    """Whether torch_npu JIT-compiles operators, read as its dispatch reads it (torch_npu
    EnvVariables.cpp): the "jitCompile" option where set (torch.npu.set_compile_mode), else
    "jitCompileInit", CANN's default that initialising the device records, else the SoC's default,
    off from Ascend910B1, the only SoCs this is read on. torch.npu.is_jit_compile_false() would
    not do: it answers True when jitCompileInit is "disable" though jitCompile was set to "enable"
    (torch_npu Module.cpp, THNPModule_is_jit_compile_false_wrap)."""
    torch_npu = importlib.import_module("torch_npu")
    torch.npu.init()
    for option in ("jitCompile", "jitCompileInit"):
        if value := torch_npu._C._npu_getOption(option):
            return value.decode() != "disable"
    return False


def internal_format_on() -> bool:
    """Whether torch.npu.config.allow_internal_format is on. That attribute can be set but not
    read (torch_npu's npu_config._npuConfig has no getter): read the option it sets as torch_npu's
    CheckForbidInternalFormat() does, unset meaning on. Initialising the device sets it off on
    Ascend910B1 and later unless set (torch_npu npu_sys_ctrl.cpp), so initialise it first."""
    torch_npu = importlib.import_module("torch_npu")
    torch.npu.init()
    value = torch_npu._C._npu_getOption("ALLOW_INTERNAL_FORMAT")
    return (value.decode() if value is not None else "enable") != "disable"


@dataclass(frozen=True)
class AclopSwitch:
    """A torch_npu setting that, when on, sends operators to aclop."""

    code: str
    """The doctor's name for its line."""
    name: str
    effect: str
    """What it does when on."""
    fix: str
    is_on: Callable[[], bool]
    """Reads it from torch_npu, on an NPU."""

    @property
    def on(self) -> str:
        return f"{self.name} is on: {self.effect}"


ACLOP_SWITCHES = (
    AclopSwitch(
        "jit-compile",
        "JIT compile",
        "every operator with both an aclnn and an aclop kernel runs on aclop, which capture "
        "refuses",
        "torch.npu.set_compile_mode(jit_compile=False) before compiling, as vllm-ascend does",
        jit_compile_on,
    ),
    AclopSwitch(
        "internal-format",
        "torch.npu.config.allow_internal_format",
        "an operator given an NZ or 5HD tensor (after a conv or a matmul) runs on aclop unless it "
        "has an internal-format aclnn kernel, and capture refuses aclop",
        "torch.npu.config.allow_internal_format = False before compiling, as torch_npu's capture "
        "error advises",
        internal_format_on,
    ),
)


def aclop_switches() -> list[tuple[str, str]]:
    """(what is on, the fix) for each switch in ACLOP_SWITCHES that is on; empty where npugraph_ex
    does not run. For the NPU preflight, just before npugraph_ex compiles: it reads what this
    process has set, where the doctor, in a process of its own, reads the defaults."""
    if not npu_status()[0]:
        return []
    return [(switch.on, switch.fix) for switch in ACLOP_SWITCHES if switch.is_on()]


def select_backend() -> Backend:
    """npugraph_ex on a usable NPU, else the aot_eager stand-in; $NPUGRAPH_BACKEND overrides both."""
    npu_ok, why = npu_status()
    device = "npu" if npu_ok else "cpu"
    forced = os.environ.get(BACKEND_ENV, "").strip()
    if forced:
        return Backend(check_forced(forced, npu_ok, why), device, f"forced by {BACKEND_ENV}")
    if npu_ok:
        return Backend("npugraph_ex", device, f"Ascend NPU ready: {why}")
    return Backend(STAND_IN, device, f"no usable NPU ({why}); {STAND_IN} stands in for npugraph_ex")


def check_forced(name: str, npu_ok: bool, why: str, given: str = BACKEND_ENV) -> str:
    """Return a forced backend name, or raise with the value and the fix. `given` names where the
    user set it: $NPUGRAPH_BACKEND, or a tool's --backend."""
    if name == "npugraph_ex" and not npu_ok:
        fix = f"unset {BACKEND_ENV}" if given == BACKEND_ENV else f"leave out {given}"
        raise RuntimeError(f"{given}=npugraph_ex needs a usable NPU, but {why}; {fix}")
    known = torch._dynamo.list_backends(exclude_tags=())
    if name not in known and name != "npugraph_ex":
        raise ValueError(
            f"{given}={name!r} is not a torch.compile backend; use one of {', '.join(known)}"
        )
    return name
