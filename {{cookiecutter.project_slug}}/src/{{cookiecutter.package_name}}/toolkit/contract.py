"""The model contract every tool follows, and the pytree helpers that let outputs be any shape.

model.py defines `build_model() -> torch.nn.Module` and `example_inputs() -> tuple`: the positional
inputs of one inference step, on the CPU. Outputs may be any pytree of tensors: a tensor, a
tuple, a dict, or an output object such as transformers' ModelOutput. model.py may also set
`TOLERANCES`, how far graph mode may be from eager for a dtype (`tolerances()`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from . import project


class ContractError(TypeError):
    """model.py does not keep the contract: the message names what it returned and the fix."""


class PromptTooLong(ContractError):
    """A decode project's prompt that leaves the cache no position for the decode step after it."""


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


def non_tensors(tree: Any) -> list[tuple[str, Any]]:
    """(path, value) of every leaf but tensors and None, the value an optional leaf leaves out."""
    return [
        (path, leaf)
        for path, leaf in leaves(tree)
        if leaf is not None and not isinstance(leaf, torch.Tensor)
    ]


def non_tensor_leaves(tree: Any) -> list[str]:
    """The paths of output leaves that are not tensors: graph mode hands back tensors."""
    return [f"{path or 'output'}: {type(leaf).__name__}" for path, leaf in non_tensors(tree)]


def constant_inputs(inputs: Any) -> list[tuple[str, Any]]:
    """(path, value) of each input graph mode bakes into the graph: its non-tensors.

    Dynamo (dynamic=False) guards on the value of a Python number, bool or string that forward
    reads. None is left out: it is how an optional input is left out, and has no other value.
    """
    return non_tensors(inputs)


def constant_note(path: str, value: Any) -> tuple[str, str]:
    """What graph mode does with the constant input `value` at `path`, and the fix."""
    what = f"{path}: {describe(value)} is baked into the graph as a constant where forward reads it"
    cached = ""
    if project.CACHE_COMPILE:
        # README, "The compile cache": a recompile deletes it, and a loaded cache checks no guards.
        cached = (
            "; under cache_compile that deletes the cache, and a loaded cache checks no guards: it "
            "keeps the value it was written with"
        )
    if isinstance(value, bool):
        # Two values: never more graphs than the limit, and a 0-d tensor is no fix where forward
        # branches on it (an `if` on a tensor value is a graph break).
        fix = (
            "fine for a setting that stays fixed; one that changes per call: pass a bool tensor "
            "and pick with torch.where instead of `if`"
        )
        return f"{what}: the other value compiles a second graph{cached}", fix
    limit = torch._dynamo.config.recompile_limit
    what += (
        f": each new value compiles another graph{cached}, and after {limit} graphs the next new "
        f"value fails under fullgraph=True (FailOnRecompileLimitHit; "
        f"torch._dynamo.config.recompile_limit = {limit})"
    )
    if isinstance(value, int | float | complex):
        fix = f"pass a 0-d tensor, torch.tensor({value!r}): an input, so new values reuse the graph"
    else:
        fix = "keep it the same on every call, or pass what it selects as a tensor"
    return what, fix


Tolerance = dict[str, float]
"""{"rtol": ..., "atol": ...}: as torch.testing.assert_close takes them."""

# How far graph mode may be from eager, by dtype. A graph computes the same sums in another order
# (a fused or retiled kernel), and so does tensor parallelism (an all-reduce of partial sums): each
# order rounds differently, so a correct result is off by rounding, the more so the fewer its bits.
# A leaf passes where |graph - eager| <= atol + rtol * |eager|. model.py's TOLERANCES overrides any.
DEFAULT_TOLERANCES: dict[torch.dtype, Tolerance] = {
    # float32 (a rounding step, eps, of 1.2e-7) accumulates in float32: a sum of thousands of
    # terms split two ways, through 16 layers, stays within a few 1e-6. rtol 1e-4 (some 800
    # steps) leaves room for deeper and wider models; atol 1e-5 for values near 0, where terms of
    # size ~1 cancel and their rounding remains.
    torch.float32: {"rtol": 1e-4, "atol": 1e-5},
    # bfloat16 (eps 7.8e-3) rounds every op's output to 8 bits, and a difference grows layer by
    # layer: a 16-layer stack split two ways ended up to 5 steps off. rtol 4e-2, 5 steps; atol
    # the same, for values near 0 that a sum of terms of size ~1 produced.
    torch.bfloat16: {"rtol": 4e-2, "atol": 4e-2},
    # float16 (eps 9.8e-4): the same 5 steps, for the same reasons.
    torch.float16: {"rtol": 5e-3, "atol": 5e-3},
    # float64 (eps 2.2e-16): torch.testing.assert_close's defaults, already far beyond rounding.
    torch.float64: {"rtol": 1e-7, "atol": 1e-7},
}
EXACT: Tolerance = {"rtol": 0.0, "atol": 0.0}
"""Integers and bools: nothing rounds, so nothing may differ."""


def default_tolerance(dtype: torch.dtype) -> Tolerance:
    """The default for `dtype`: complex as its real part, other floats (float8, ...) 5 steps."""
    if dtype.is_complex:
        dtype = dtype.to_real()
    if dtype in DEFAULT_TOLERANCES:
        return DEFAULT_TOLERANCES[dtype]
    if dtype.is_floating_point:
        steps = 5 * torch.finfo(dtype).eps
        return {"rtol": steps, "atol": steps}
    return EXACT


def own_tolerances() -> dict[torch.dtype, Tolerance]:
    """model.py's TOLERANCES, checked: {dtype: {"rtol": ..., "atol": ...}}, either key optional."""
    # Looked up at each comparison, so a model.py a test patches counts. Not an import statement:
    # here export would refuse it (it bundles this module), and at the top a broken model.py
    # would stop every tool at import instead of being reported.
    model = project.model()
    own = getattr(model, "TOLERANCES", {})
    example = 'e.g. TOLERANCES = {torch.bfloat16: {"rtol": 5e-2, "atol": 5e-2}}'
    if not isinstance(own, dict):
        raise ContractError(
            f"TOLERANCES in model.py must be a dict, got {type(own).__name__}; {example}"
        )
    for dtype, tolerance in own.items():
        if not isinstance(dtype, torch.dtype):
            raise ContractError(f"TOLERANCES key {dtype!r} is not a torch.dtype; {example}")
        if not isinstance(tolerance, dict) or not set(tolerance) <= {"rtol", "atol"}:
            raise ContractError(
                f"TOLERANCES[{dtype}] must be a dict with rtol and/or atol, got {tolerance!r}; {example}"
            )
    return own


def tolerances(dtype: torch.dtype) -> Tolerance:
    """rtol and atol for comparing a `dtype` tensor with eager's: model.py's TOLERANCES, else the
    default (DEFAULT_TOLERANCES, whose comments give the reasons)."""
    return {**default_tolerance(dtype), **own_tolerances().get(dtype, {})}


@dataclass
class Mismatch:
    """How one output leaf differs from eager's: its path, and for values the numbers."""

    path: str
    """The leaf (`[0]`, `['logits']`, `.logits`), or `output` for a lone tensor or the structure."""
    text: str
    """The difference in one line."""
    mismatched: int | None = None
    """Elements beyond the tolerance, of `total`; None for a structure, shape or dtype difference."""
    total: int | None = None
    max_abs: float | None = None
    """The greatest |graph - eager|."""
    max_rel: float | None = None
    """The greatest |graph - eager| / |eager| of the elements beyond the tolerance: infinite
    where eager's value is 0."""
    rtol: float | None = None
    atol: float | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.text}"


def value_mismatch(
    path: str, got: torch.Tensor, want: torch.Tensor, tolerance: Tolerance
) -> Mismatch | None:
    """Elements of `got` beyond the tolerance of `want`'s (same shape and dtype), with the numbers."""
    # On the host, in double precision: the numbers must not round themselves.
    wide = torch.complex128 if want.dtype.is_complex else torch.float64
    got, want = got.detach().cpu().to(wide), want.detach().cpu().to(wide)
    rtol, atol = tolerance["rtol"], tolerance["atol"]
    # A NaN where eager has a NaN is the same result.
    beyond = ~torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    mismatched = int(beyond.sum())
    if not mismatched:
        return None
    difference = (got - want).abs()
    max_abs = float(difference.max())
    # Over the elements beyond the tolerance: infinite where eager has 0 (or one side a NaN).
    relative = difference[beyond] / want[beyond].abs()
    max_rel = float(relative.nan_to_num(nan=math.inf, posinf=math.inf).max())
    text = (
        f"{mismatched} of {want.numel()} elements differ beyond the tolerance: max abs difference "
        f"{max_abs:.3g} (atol {atol:g}), max relative {max_rel:.3g} (rtol {rtol:g})"
    )
    return Mismatch(path, text, mismatched, want.numel(), max_abs, max_rel, rtol, atol)


def leaf_mismatch(path: str, got: Any, want: Any, override: Tolerance) -> Mismatch | None:
    """How graph mode's leaf `got` differs from eager's `want`, or None if it does not."""
    if not isinstance(want, torch.Tensor) or not isinstance(got, torch.Tensor):
        same = type(got) is type(want) and got == want
        return None if same else Mismatch(path, f"{describe(got)} where eager has {describe(want)}")
    for aspect in ("shape", "dtype", "device"):
        if getattr(got, aspect) != getattr(want, aspect):
            return Mismatch(path, f"{describe(got)} where eager has {describe(want)}")
    return value_mismatch(path, got, want, {**tolerances(want.dtype), **override})


def mismatches(actual: Any, expected: Any, **override: float) -> list[Mismatch]:
    """Every leaf where graph mode's output `actual` differs from eager's `expected`.

    Each tensor leaf is compared with the tolerance of its dtype (tolerances()); an rtol or atol
    given here applies to every leaf instead.
    """
    actual_leaves, actual_spec = pytree.tree_flatten_with_path(actual)
    expected_leaves, expected_spec = pytree.tree_flatten_with_path(expected)
    if actual_spec != expected_spec:
        # One line each: torch prints a TreeSpec over as many lines as it has children.
        got, want = (" ".join(str(spec).split()) for spec in (actual_spec, expected_spec))
        return [Mismatch("output", f"structure differs: {got} where eager has {want}")]
    found = []
    for (path, got), (_, want) in zip(actual_leaves, expected_leaves, strict=True):
        if mismatch := leaf_mismatch(pytree.keystr(path) or "output", got, want, override):
            found.append(mismatch)
    return found


def input_mismatches(actual: tuple[Any, ...], expected: tuple[Any, ...]) -> list[Mismatch]:
    """Every input tensor that graph mode's call left other than eager's call left its copy of
    it: forward may write an input in place (`x.mul_(2)`), and a graph must write it alike."""
    found = []
    for (path, got), (_, want) in zip(*map(leaves, (actual, expected)), strict=True):
        if isinstance(want, torch.Tensor) and (
            mismatch := leaf_mismatch(f"input {path}", got, want, {})
        ):
            found.append(mismatch)
    return found


def assert_same(actual: Any, expected: Any, **override: float) -> None:
    """Raise AssertionError unless both pytrees have one structure and close leaves, each within
    the tolerance of its dtype (tolerances()); an rtol or atol given here applies to every leaf."""
    if found := mismatches(actual, expected, **override):
        raise AssertionError("\n".join(map(str, found)))
