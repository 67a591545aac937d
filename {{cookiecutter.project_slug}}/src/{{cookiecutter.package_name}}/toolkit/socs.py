"""Which Ascend SoCs npugraph_ex runs on, by the name torch.npu.get_device_name() gives.

The one list: backend.py decides by it, the doctor names it, and the READMEs state it (written
from here by cog, `nox -s readme`). Sources: TorchAir's product list for the SoCs npugraph_ex
supports; torch_npu's IsCaptureSupported() (csrc/core/npu/interface/AclInterface.cpp) for those
aclgraph captures on.
"""

A2 = ("Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4")
"""Atlas A2: these names, alone or with a variant that starts with no digit (Ascend910B2C,
Ascend910B4-1). torch_npu's aclgraph tests admit the prefix "Ascend910B", which also admits the
first generation's "Ascend910B" itself: hence the four names."""
CAPTURE_PREFIXES = ("Ascend910_93", "Ascend910_95", "Ascend950")
"""Atlas A3 (Ascend910_93xx) and Ascend 950 (Ascend950xx, Ascend910_95xx)."""
FAMILIES = (
    ("Atlas A2", "`Ascend910B1`..`Ascend910B4`, with variants such as `Ascend910B2C`"),
    ("Atlas A3", "`Ascend910_93xx`"),
    ("Ascend 950", "`Ascend950xx`, `Ascend910_95xx`"),
)
"""The families npugraph_ex runs on, with the names their SoCs go by, as the READMEs list them."""
CAPTURE_SOCS = "Atlas A2 (Ascend910B1-B4), Atlas A3 (Ascend910_93xx) or Ascend 950"
"""The same, in the one line a fallback reason or a doctor fix has room for."""

NO_CAPTURE_SOCS = (
    "Ascend910A",
    "Ascend910ProA",
    "Ascend910PremiumA",
    "Ascend910ProB",
    "Ascend910B",
)
"""The first generation of Ascend 910, including the exact name "Ascend910B" (no Atlas A2 part):
aclgraph captures on none of them. Named in the fallback reason; an unknown name falls back too."""
NO_CAPTURE_PREFIXES = ("Ascend310B",)
"""310B: no aclgraph capture either."""
NO_NPUGRAPH_EX_PREFIX = "Ascend310P"
WHY_NOT_ON_310P = (
    "aclgraph captures there from torch_npu 26.1.0, but TorchAir's product list has no 310P and "
    "vllm-ascend turns npugraph_ex off on it"
)
"""310P: from torch_npu 26.1.0 (every release this template pins) aclgraph captures there
(Ascend/pytorch 1dde879bd adds Ascend310P1..P7 to IsCaptureSupported()), but npugraph_ex is not
supported ("npugraph_ex is not supported on Ascend 310P", vllm-ascend's ascend_config.py)."""


def can_capture(soc: str) -> bool:
    """Whether npugraph_ex captures aclgraphs on this SoC: an allowlist."""
    if soc[:11] in A2 and not soc[11:12].isdigit():
        return True
    return soc.startswith(CAPTURE_PREFIXES)
