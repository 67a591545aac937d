"""A model's state: what a call leaves behind for the next one, such as a KV cache or a step count.

The state is every buffer of the module, and every tensor that `torch._dynamo.mark_static_address`
marked and the module holds in an attribute (transformers' StaticCache keeps its caches so, in
lists of layer objects). A graph must leave the same state as eager: a dropped or misplaced cache
write changes no output of this call, only the next one's. So every comparison of graph mode
with eager starts each side from the same saved state and compares the state after it too.

What a call makes or changes outside that state, save() cannot keep and restore() cannot put back:
a tensor that appears at the first call (a cache allocated lazily, as transformers' StaticCache is
where nothing allocates it first), a Python number that a call sets for the first time (a counter
started at the first call), or one that a call advances (transformers' sliding-window cache layers
count tokens in one; a counter on the model's class, or in its module's globals). Runs compared from "the same state" would then start from different ones,
and Dynamo bakes each such number into the graph, so every new value compiles another. The same
holds for a tensor the model keeps in a plain attribute, neither a buffer nor marked (a cache
made with `self.k = torch.zeros(...)`), which a call changes: save() does not keep it, and
`.to(device)` leaves it behind. watching() looks for all four around a call, and refuses the
model naming each.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from .contract import ContractError, Mismatch, leaf_mismatch

State = dict[str, torch.Tensor]
"""Each state tensor by its path in the model: `layers.0.k_cache`, `cache.layers[0].keys`."""

# How deep to look inside attributes that are not modules: cache object, its list, a layer, a tensor.
DEPTH = 4
# What every module holds: its parameters, buffers and submodules (found otherwise) and its hooks.
# Any other attribute, a private one too, may hold a cache.
MODULE_OWN = frozenset(vars(nn.Module()))
NUMBER = (bool, int, float)
"""The Python numbers Dynamo guards on where forward reads them."""


def state_tensors(model: nn.Module) -> State:
    """The model's own state tensors, live (not copies)."""
    found: State = dict(model.named_buffers(remove_duplicate=False))
    seen = {id(tensor) for tensor in found.values()}
    for path, value in held(model):
        if is_marked(value) and id(value) not in seen:
            seen.add(id(value))
            found[path] = value
    return found


def is_marked(value: Any) -> bool:
    """Whether `value` is a tensor that mark_static_address marked (a parameter is no state)."""
    return (
        isinstance(value, torch.Tensor)
        and hasattr(value, "_dynamo_static_input_type")
        and not isinstance(value, nn.Parameter)
    )


def held(model: nn.Module) -> Iterator[tuple[str, Any]]:
    """Each tensor and Python number that the model's modules hold in attributes of their own
    (not their parameters, buffers or submodules), with its path."""
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        for attribute, value in vars(module).items():
            if attribute in MODULE_OWN:
                continue
            yield from reachable(value, f"{prefix}{attribute}", DEPTH)


def reachable(value: Any, path: str, depth: int) -> Iterator[tuple[str, Any]]:
    """Each tensor (but parameters) and Python number under `value`, with its path."""
    if isinstance(value, torch.Tensor):
        if not isinstance(value, nn.Parameter):
            yield path, value
        return
    if isinstance(value, NUMBER):
        yield path, value
        return
    if depth == 0 or isinstance(value, nn.Module | str | bytes | type(None)):
        return  # a module's own tensors come from named_modules()
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from reachable(item, f"{path}[{index}]", depth - 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from reachable(item, f"{path}[{key!r}]", depth - 1)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        for attribute, item in vars(value).items():
            yield from reachable(item, f"{path}.{attribute}", depth - 1)


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


class StateCarriedOver(ContractError):
    """A request reads state that the request before it left (decode.carried_over()): its tokens
    depend on what was served before. The message is what differs, then the fix."""

    def __init__(self, found: str, fix: str) -> None:
        super().__init__(f"{found}; {fix}")
        self.found, self.fix = found, fix


Sighting = dict[str, Any]
"""Every tensor the model holds (its buffers, and tensors in its other attributes) and every Python
number in its attributes, by path: what a call could make or change out of save()'s sight."""

FIRST_CALL = "during the first call"
"""When a tool's first eager call made or changed it: the prompt's prefill in a decode project."""
DECODE_STEP = "during the first decode step"
"""When the eager decode step after the prefill made or changed it."""
SECOND_CALL = "during the second call"
"""When check's second eager call made or changed it: the second decode step in a decode project."""


OUT_OF_SIGHT = (
    "the model keeps state that the tools cannot save and put back, so no run can start from "
    "the state another started from:"
)
APPEARED_FIX = (
    "allocate every tensor the model keeps when build_model() builds it, not at its first call "
    "(a transformers StaticCache: run one token through the model there, then empty the cache "
    "with its reset(); its early_initialization() gives keys and values one width and allocates "
    "no recurrent layer's states: README, section 'A transformers Llama with a StaticCache')"
)
SET_FIX = "set every number the model keeps when build_model() builds it, not at its first call"
CHANGED_FIX = (
    "hold what a call advances in a tensor, written in place: graph mode bakes a Python number "
    "into the graph, and every new value compiles another"
)
UNKEPT_FIX = (
    "register each as a buffer where the module makes it, self.register_buffer(name, tensor), so "
    "that .to(device) moves it and the tools keep it (or, in a cache object that is no module, "
    "mark it with torch._dynamo.mark_static_address)"
)
WINDOW_FIX = (
    "; transformers' sliding-window cache layers count tokens in a Python int "
    "(cumulative_length_int): turn the sliding window off when MAX_SEQ_LEN fits in it (README, "
    "section 'A transformers Llama with a StaticCache')"
)
RECURRENT_FIX = (
    "; transformers' recurrent cache layers (Mamba2's) read their states only where the flag "
    "has_previous_state says they hold earlier tokens: set it True when build_model() builds "
    "the model, and zero the states in place at each call from position 0, a new request "
    "(README, section 'A transformers Llama with a StaticCache')"
)


class StateOutOfSight(ContractError):
    """A call made a tensor, or set or changed a number, that the model holds outside what save()
    keeps, so no tool can start eager and graph mode from one state. `found` names each, `fix`
    the cure."""

    def __init__(self, found: list[str], fix: str) -> None:
        self.found, self.fix = found, fix
        lines = [f"  {line}" for line in [*found, f"fix: {fix}"]]
        super().__init__("\n".join([OUT_OF_SIGHT, *lines]))


def sighting(model: nn.Module) -> Sighting:
    """What the model holds now, tensors and numbers, by path (the tensors live, not copies), and
    the numbers its classes and their modules hold."""
    return {
        **dict(model.named_buffers(remove_duplicate=False)),
        **dict(held(model)),
        **dict(shared_numbers(model)),
    }


def model_classes(model: nn.Module) -> set[type]:
    """Every class of the model's modules, with the classes they derive from."""
    return {cls for module in model.modules() for cls in type(module).__mro__}


def shared_numbers(model: nn.Module) -> Iterator[tuple[str, Any]]:
    """Each Python number in a class attribute of the model's own classes (`StaticCacheLM.calls`)
    and in the globals of the modules that define them (`model.STEP`): a call that changes one
    changes what the next call reads as surely as an attribute of the model's. torch's classes
    and modules are left out."""
    own = [
        cls for cls in model_classes(model) if not cls.__module__.startswith(("torch.", "builtins"))
    ]
    for cls in sorted(own, key=lambda cls: (cls.__module__, cls.__qualname__)):
        for attribute, value in vars(cls).items():
            if isinstance(value, NUMBER) and not attribute.startswith("__"):
                yield f"{cls.__qualname__}.{attribute}", value
    for name in sorted({cls.__module__ for cls in own}):
        globals_ = vars(sys.modules[name]) if name in sys.modules else {}
        for attribute, value in globals_.items():
            if isinstance(value, NUMBER) and not attribute.startswith("__"):
                yield f"{name.rpartition('.')[2]}.{attribute}", value


def unkept(model: nn.Module) -> State:
    """Copies of the tensors the model holds in plain attributes that save() does not keep:
    neither buffers nor marked (a constant table, or state kept where no tool can save it)."""
    kept = {id(tensor) for tensor in state_tensors(model).values()}
    return {
        path: value.detach().clone()
        for path, value in held(model)
        if isinstance(value, torch.Tensor) and id(value) not in kept
    }


def same_tensor(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether two tensors hold one value: shape, dtype and every element (a NaN stays a NaN)."""
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    if before.is_floating_point() or before.is_complex():
        return bool(
            torch.equal(before.isnan(), after.isnan())
            and torch.equal(before.nan_to_num(), after.nan_to_num())
        )
    return torch.equal(before, after)


def same_number(before: Any, after: Any) -> bool:
    """Whether two numbers are one value (a NaN stays a NaN)."""
    both_nan = isinstance(before, float) and isinstance(after, float) and math.isnan(before)
    return before == after or (both_nan and math.isnan(after))


def owner(path: str) -> str:
    """The path of what holds the attribute at `path`: `cache.layers[0]` for `cache.layers[0].keys`."""
    return path.rpartition(".")[0]


def out_of_sight(
    before: Sighting, after: Sighting, when: str, unkept_before: State
) -> StateOutOfSight | None:
    """What a call did out of save()'s sight, from what the model held `before` and `after` it:
    each tensor that appeared (at a path that held no tensor, and not one held elsewhere before:
    a buffer that forward replaced is restore()'s to put back), each number set where none was,
    each number that changed, and each tensor of `unkept_before` (copies, from unkept()) whose
    value changed; None if nothing."""
    known = {id(value) for value in before.values() if isinstance(value, torch.Tensor)}
    appeared = [
        path
        for path, value in after.items()
        if isinstance(value, torch.Tensor)
        and id(value) not in known
        and not isinstance(before.get(path), torch.Tensor)
    ]
    # A flag or a size set beside a tensor that appeared (transformers' lazy cache layers set
    # is_initialized, batch_size, num_heads) is part of allocating it: the allocation names it.
    allocated = {owner(path) for path in appeared}
    set_to: dict[str, list[str]] = {}
    changes: dict[tuple[str, str], list[str]] = {}
    for path, value in after.items():
        if not isinstance(value, NUMBER):
            continue
        if path not in before:
            if owner(path) not in allocated:
                set_to.setdefault(repr(value), []).append(path)
            continue
        old = before[path]
        flag = isinstance(value, bool) and owner(path) in allocated
        if isinstance(old, NUMBER) and not flag and not same_number(old, value):
            changes.setdefault((repr(old), repr(value)), []).append(path)
    # So is a tensor there that the allocation marks, and a call then writes (transformers' lazy
    # cache layers mark their count of tokens, cumulative_length, when they allocate their keys).
    changed_tensors = [
        path
        for path, copy in unkept_before.items()
        if isinstance(after.get(path), torch.Tensor)
        and not same_tensor(copy, after[path])
        and not (owner(path) in allocated and is_marked(after[path]))
    ]
    found, fixes = [], []
    if changed_tensors:
        found.append(f"{', '.join(changed_tensors)} changed {when}, held in a plain attribute")
        fixes.append(UNKEPT_FIX)
    if appeared:
        found.append(f"{', '.join(appeared)} appeared {when}")
        fixes.append(APPEARED_FIX)
    for value, paths in set_to.items():
        found.append(f"{', '.join(paths)} first set to {value} {when}")
    if set_to:
        fixes.append(SET_FIX)
    for (old, new), paths in changes.items():
        found.append(f"{', '.join(paths)} went from {old} to {new} {when}")
    if changes:
        changed = [path for paths in changes.values() for path in paths]
        window = any(path.endswith(".cumulative_length_int") for path in changed)
        recurrent = any(".has_previous_state[" in path for path in changed)
        fixes.append(
            CHANGED_FIX + (WINDOW_FIX if window else "") + (RECURRENT_FIX if recurrent else "")
        )
    return StateOutOfSight(found, "; and ".join(fixes)) if found else None


@contextmanager
def watching(model: nn.Module, when: str) -> Iterator[None]:
    """Raise StateOutOfSight if the block (a call of the model) makes a tensor, sets or changes a
    number, or changes a tensor in a plain attribute, that the model holds outside what save()
    keeps; `when` says which call it was."""
    before, copies = sighting(model), unkept(model)
    yield
    if refusal := out_of_sight(before, sighting(model), when, copies):
        raise refusal
