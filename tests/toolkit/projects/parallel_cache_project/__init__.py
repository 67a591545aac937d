"""Graph-mode (npugraph_ex) inference on Ascend NPUs, with a minimal reproducible example."""

import os

# Once torch_npu is installed, `import torch` imports it too ("device backend autoload") and dies
# with a RuntimeError when CANN is not sourced. toolkit/backend.py imports torch_npu itself, in a
# try, so switch the autoload off unless the user chose otherwise.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
