"""A model's state: what a call leaves behind for the next one, such as a KV cache or a step count.

The state is every buffer of the module, and every tensor that `torch._dynamo.mark_static_address`
marked and the module holds in an attribute (transformers' StaticCache keeps its caches so, in
lists of layer objects). A graph must leave the same state as eager: a dropped or misplaced cache
write changes no output of this call, only the next one's. So every comparison of graph mode
with eager starts each side from the same saved state and compares the state after it too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from .contract import Mismatch, leaf_mismatch

State = dict[str, torch.Tensor]
"""Each state tensor by its path in the model: `layers.0.k_cache`, `cache.layers[0].keys`."""

# How deep to look inside attributes that are not modules: cache object, its list, a layer, a tensor.
DEPTH = 4
# What every module holds: its parameters, buffers and submodules (found otherwise) and its hooks.
# Any other attribute, a private one too, may hold a cache.
MODULE_OWN = frozenset(vars(nn.Module()))


def state_tensors(model: nn.Module) -> State:
    """The model's own state tensors, live (not copies)."""
    found: State = dict(model.named_buffers(remove_duplicate=False))
    seen = {id(tensor) for tensor in found.values()}
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        for attribute, value in vars(module).items():
            if attribute in MODULE_OWN:
                continue
            for path, tensor in marked(value, f"{prefix}{attribute}", DEPTH):
                if id(tensor) not in seen:
                    seen.add(id(tensor))
                    found[path] = tensor
    return found


def marked(value: Any, path: str, depth: int) -> Iterator[tuple[str, torch.Tensor]]:
    """Each tensor under `value` that mark_static_address marked, with its path."""
    if isinstance(value, torch.Tensor):
        if hasattr(value, "_dynamo_static_input_type") and not isinstance(value, nn.Parameter):
            yield path, value
        return
    if depth == 0 or isinstance(value, nn.Module | str | bytes | int | float | bool | type(None)):
        return  # a module's own tensors come from named_modules()
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from marked(item, f"{path}[{index}]", depth - 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from marked(item, f"{path}[{key!r}]", depth - 1)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        for attribute, item in vars(value).items():
            yield from marked(item, f"{path}.{attribute}", depth - 1)


def save(model: nn.Module) -> State:
    """A copy of the model's state, to start another run from."""
    return {path: tensor.detach().clone() for path, tensor in state_tensors(model).items()}


def restore(model: nn.Module, saved: State) -> None:
    """Put the saved state back, in place: a captured graph keeps reading the same addresses."""
    live = state_tensors(model)
    with torch.no_grad():
        for path, value in saved.items():
            tensor = live.get(path)
            if tensor is not None and tensor.shape == value.shape and tensor.dtype == value.dtype:
                tensor.copy_(value)
            else:
                # forward replaced a buffer by another tensor (of another shape): put it back.
                module, _, attribute = path.rpartition(".")
                setattr(model.get_submodule(module), attribute, value.clone())


def state_mismatches(actual: State, expected: State) -> list[Mismatch]:
    """Every state tensor that a graph left other than eager did: missing, or its values.

    A tensor only `actual` holds is no difference: a compile marks each tensor attribute that
    forward reads as a static address (torch/_dynamo/variables/builder.py, mark_static_input),
    so after one a constant table looks like state to a save() that eager's came before.
    """
    if missing := sorted(expected.keys() - actual.keys()):
        gone = f"tensors {missing} missing after the call; eager leaves {sorted(expected)}"
        return [Mismatch("state", gone)]
    found = []
    for path, want in expected.items():
        if mismatch := leaf_mismatch(f"state {path}", actual[path], want, {}):
            found.append(mismatch)
    return found
