"""Which project this toolkit serves: the package it sits in, and that package's settings.

The toolkit is the same in every project the template makes. What differs is read here, at run
time, from the project's settings module (the answers it was baked with); the rest of the toolkit
asks `project.DECODE`, `project.TENSOR_PARALLEL`, ... when it runs, never at import, so that its
own tests can set them.
"""

from __future__ import annotations

from .. import settings

PACKAGE = __package__.rpartition(".")[0]
"""The project's import name, the package that holds this toolkit."""

PROJECT: str = settings.PROJECT
TORCH_NPU: str = settings.TORCH_NPU
MODE: str = settings.MODE
CACHE_COMPILE = MODE == "cache_compile"
CACHE_DIR: str | None = getattr(settings, "CACHE_DIR", None)
"""cache_compile's folder; None in npugraph_ex mode, which caches nothing."""
DECODE = settings.WORKLOAD == "decode"
TENSOR_PARALLEL = settings.PARALLEL == "tensor_parallel"
CUSTOM_OP: str = settings.CUSTOM_OP
"""none, out_of_place or in_place."""
OP_REGISTRATION: str | None = getattr(settings, "OP_REGISTRATION", None)
"""torch_library or op_plugin; None without a custom op."""
OP_PLUGIN = OP_REGISTRATION == "op_plugin"
OP: str | None = f"{settings.OP_NAMESPACE}::{settings.OP_NAME}" if CUSTOM_OP != "none" else None
"""The custom operator the model calls, as its schema names it (namespace::name); None without."""
