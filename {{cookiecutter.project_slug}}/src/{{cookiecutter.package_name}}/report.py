"""The short report the MRE prints: what ran, where, why, and how long the first call took."""

from __future__ import annotations

import time

import torch

from .backend import Backend


def synchronize(device: str) -> None:
    """Wait for queued device work, so that wall-clock time covers it."""
    if device == "npu":
        torch.npu.synchronize()


def describe(tensor: torch.Tensor) -> str:
    return f"{tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')} on {tensor.device}"


def print_report(
    backend: Backend,
    config: dict[str, object] | None,
    dummy_input: torch.Tensor,
    output: torch.Tensor,
    started: float,
) -> None:
    """Print the report; `started` is the perf_counter() reading taken just before the first call."""
    synchronize(backend.device)
    seconds = time.perf_counter() - started
    rows = {
        "backend": f"{backend.name} ({backend.reason})",
        "options": config if config else "none (only npugraph_ex takes options)",
        "input": describe(dummy_input),
        "output": describe(output),
        "first call": f"{seconds:.2f} s (compile and capture included)",
    }
    for name, value in rows.items():
        print(f"{name:<11} {value}")
