"""The model contract every tool follows, and the pytree helpers that let outputs be any shape.

model.py defines `build_model() -> torch.nn.Module` and `example_inputs() -> tuple`: the positional
inputs of one inference step, on the CPU. Outputs may be any pytree of tensors: a tensor, a
tuple, a dict, or an output object such as transformers' ModelOutput.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree


class ContractError(TypeError):
    """model.py does not keep the contract: the message names what it returned and the fix."""


def to_device(inputs: Any, device: str) -> tuple[Any, ...]:
    """example_inputs() checked against the contract, with every tensor in it moved to `device`."""
    if not isinstance(inputs, tuple):
        raise ContractError(
            f"example_inputs() must return a tuple of positional inputs, got "
            f"{type(inputs).__name__}; for one input write `return (x,)`"
        )
    return pytree.tree_map_only(torch.Tensor, lambda tensor: tensor.to(device), inputs)


def leaves(tree: Any) -> list[tuple[str, Any]]:
    """Every leaf of an output or input pytree, with its path (`[0]`, `['logits']`, `.logits`)."""
    flat, _ = pytree.tree_flatten_with_path(tree)
    return [(pytree.keystr(path), leaf) for path, leaf in flat]


def describe(value: Any) -> str:
    """One leaf in a few words: shape, dtype and device for a tensor, the type otherwise."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{tuple(value.shape)} {dtype} on {value.device}"
    return f"{type(value).__name__} {value!r}"[:80]


def describe_tree(tree: Any) -> str:
    """A pytree in one line: a lone tensor as itself, else each leaf after its path."""
    if isinstance(tree, torch.Tensor):
        return describe(tree)
    return ", ".join(f"{path} {describe(leaf)}" for path, leaf in leaves(tree)) or "nothing"


def clone(tree: Any) -> Any:
    """A copy of every tensor in `tree`: the next replay of a captured graph overwrites outputs."""
    return pytree.tree_map_only(torch.Tensor, torch.Tensor.clone, tree)


def non_tensor_leaves(tree: Any) -> list[str]:
    """The paths of leaves that are not tensors (None aside): graph mode hands back tensors."""
    return [
        f"{path or 'output'}: {type(leaf).__name__}"
        for path, leaf in leaves(tree)
        if leaf is not None and not isinstance(leaf, torch.Tensor)
    ]


def assert_same(actual: Any, expected: Any, **tolerances: float) -> None:
    """Raise AssertionError unless both pytrees have one structure and close tensors at each leaf."""
    actual_leaves, actual_spec = pytree.tree_flatten(actual)
    expected_leaves, expected_spec = pytree.tree_flatten(expected)
    if actual_spec != expected_spec:
        raise AssertionError(f"output structure differs: {actual_spec} != {expected_spec}")
    for index, (got, want) in enumerate(zip(actual_leaves, expected_leaves, strict=True)):
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(
                got, want, msg=lambda message, i=index: f"output leaf {i}: {message}", **tolerances
            )
        elif got != want:
            raise AssertionError(f"output leaf {index}: {got!r} != {want!r}")
