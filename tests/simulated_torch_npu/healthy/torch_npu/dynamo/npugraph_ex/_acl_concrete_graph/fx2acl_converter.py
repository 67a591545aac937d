"""Stand-in for the module whose warning every healthy frozen_parameter compile emits.

Copied from torch-npu 2.13.0 (same in 2.12.0.post3 and 2.14.0):
torch_npu/dynamo/npugraph_ex/_acl_concrete_graph/fx2acl_converter.py, normalize_config(), the
branch for torch >= 2.5.1. The warning's module is this file's, as in the real package.
"""

import warnings


def normalize_config(aclgraph_config_options):
    if aclgraph_config_options.get("frozen_parameter", False):
        # No stacklevel, as upstream: the warning is attributed to this module.
        warnings.warn(  # noqa: B028
            "When enable frozen_parameter, Parameters and input tensors with immutable data_ptr "
            "marked by `torch._dynamo.mark_static_address()` will be considered static. "
            "Please make sure that the Parameters data address remain the same "
            "throughout the program runtime."
        )
