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
from dataclasses import dataclass

import torch
import torch._dynamo

BACKEND_ENV = "NPUGRAPH_BACKEND"
"""Set to a torch.compile backend name (npugraph_ex, aot_eager, eager, inductor, ...) to force it."""

STAND_IN = "aot_eager"
# SoCs that cannot capture aclgraphs: torch_npu's own npugraph_ex tests skip the first Ascend 910
# generation (these names are whole: Ascend910B1..B4 are A2 parts that can), and vllm-ascend
# turns npugraph_ex off on every 310P.
NO_CAPTURE_SOCS = (
    "Ascend910A",
    "Ascend910ProA",
    "Ascend910PremiumA",
    "Ascend910ProB",
    "Ascend910B",
)
NO_CAPTURE_PREFIXES = ("Ascend310P",)
CANN_HINT = "source the CANN set_env.sh (e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh)"


def can_capture(soc: str) -> bool:
    """Whether this SoC can capture aclgraphs, as npugraph_ex needs."""
    return soc not in NO_CAPTURE_SOCS and not soc.startswith(NO_CAPTURE_PREFIXES)


def import_failure(error: BaseException) -> str:
    """Why torch_npu failed to import, in one line with the fix."""
    first_line = (str(error).splitlines() or [type(error).__name__])[0]
    if "libhccl" in first_line or "libascend" in first_line or "ASCEND" in first_line:
        return f"CANN is not sourced ({first_line}); {CANN_HINT}"
    return f"torch_npu failed to import ({first_line})"


# npugraph_ex options. Only names that every torch_npu release with npugraph_ex accepts: an unknown
# name fails the first call with "Invalid option".
NPUGRAPH_EX_OPTIONS: dict[str, object] = {
    # Inference weights never move: treat their addresses as fixed instead of re-checking them.
    "frozen_parameter": True,
    # Hand back a copy of each output, which the next replay would otherwise overwrite.
    "clone_output": True,
    # Copy each call's inputs into the graph's static input buffers (the default).
    "clone_input": True,
    # Captures per FX graph before falling back to eager (with dynamic=False, one per input shape).
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
    except (ImportError, OSError, RuntimeError) as error:
        return False, import_failure(error)
    if not torch.npu.is_available():
        return False, "torch_npu sees no NPU (check npu-smi info and ASCEND_RT_VISIBLE_DEVICES)"
    soc = torch.npu.get_device_name(0)
    if not can_capture(soc):
        return False, f"{soc} cannot capture aclgraphs"
    return True, f"{soc}, torch_npu {importlib.import_module('torch_npu').__version__}"


@functools.cache
def npu_status() -> tuple[bool, str]:
    """probe_npu(), once per process: the hardware does not change while we run."""
    return probe_npu()


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


def check_forced(name: str, npu_ok: bool, why: str) -> str:
    """Return a forced backend name, or raise with the value and the fix."""
    if name == "npugraph_ex" and not npu_ok:
        raise RuntimeError(
            f"{BACKEND_ENV}=npugraph_ex needs a usable NPU, but {why}; unset {BACKEND_ENV}"
        )
    known = torch._dynamo.list_backends(exclude_tags=())
    if name not in known and name != "npugraph_ex":
        raise ValueError(
            f"{BACKEND_ENV}={name!r} is not a torch.compile backend; use one of {', '.join(known)}"
        )
    return name
