"""A model's state (buffers, tensors marked static such as a KV cache) is found, saved, put back in
place, and compared: one run's state never leaks into the next."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from forward_project.toolkit import bench
from forward_project.toolkit.state import (
    APPEARED_FIX,
    CHANGED_FIX,
    SET_FIX,
    UNKEPT_FIX,
    StateOutOfSight,
    restore,
    save,
    sighting,
    state_mismatches,
    state_tensors,
    watching,
)


class Layer:
    """A cache layer as transformers' StaticCache holds it: a plain object, not a module."""

    def __init__(self) -> None:
        self.keys = torch.zeros(2, 3)
        torch._dynamo.mark_static_address(self.keys)
        self.scratch = torch.zeros(2)  # not marked: not state


class HoldsACache(nn.Module):
    """Writes row `position` of a marked cache in a list of layers, and counts its calls in a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.layers = [Layer()]
        self.proj = nn.Linear(3, 3)

    def forward(self, x, position):
        self.calls += 1
        self.layers[0].keys.index_copy_(0, position, x)
        return self.proj(self.layers[0].keys).sum(0)


def test_the_state_is_the_buffers_and_the_marked_tensors():
    """Buffers and mark_static_address tensors held in attributes are state; parameters and
    unmarked tensors are not."""
    assert sorted(state_tensors(HoldsACache())) == ["calls", "layers[0].keys"]


def marked() -> torch.Tensor:
    """A tensor marked as a static address, as a cache is."""
    tensor = torch.zeros(2)
    torch._dynamo.mark_static_address(tensor)
    return tensor


def nested(kind: str, levels: int) -> object:
    """A marked tensor inside `levels` containers of one kind: lists, dicts or plain objects."""
    held = marked()
    for _ in range(levels):
        held = {"list": [held], "dict": {"a": held}, "object": SimpleNamespace(a=held)}[kind]
    return held


class HoldsNested(nn.Module):
    """Marked tensors four containers deep, and five, in each kind of container."""

    def __init__(self) -> None:
        super().__init__()
        for kind in ("list", "dict", "object"):
            setattr(self, f"{kind}4", nested(kind, 4))
            setattr(self, f"{kind}5", nested(kind, 5))


def test_the_state_is_searched_four_containers_deep():
    """A marked tensor is found as deep as a cache object, its list, a layer and the layer's dict
    hold it, in any kind of container; deeper is not looked at (the search ends, cycles too)."""
    paths = ["dict4['a']['a']['a']['a']", "list4[0][0][0][0]", "object4.a.a.a.a"]
    assert sorted(state_tensors(HoldsNested())) == paths


def test_a_setting_beside_the_state_is_passed_over():
    """An attribute that is neither a tensor nor a container of them (a dtype) is no state."""
    model = HoldsACache()
    model.dtype = torch.bfloat16
    assert sorted(state_tensors(model)) == ["calls", "layers[0].keys"]


def test_a_cache_behind_a_private_attribute_is_state():
    """A marked tensor is state under any attribute name, a private one too."""
    model = nn.Module()
    model._cache = [marked()]
    assert list(state_tensors(model)) == ["_cache[0]"]


def test_the_state_of_a_submodule_is_named_by_its_path():
    """A submodule's buffers and marked tensors are named from the model down."""
    model = nn.Sequential(HoldsACache())
    assert sorted(state_tensors(model)) == ["0.calls", "0.layers[0].keys"]


class HoldsTwice(nn.Module):
    """A marked buffer also held in a list, and a marked tensor in that list and an attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("keys", marked())
        self.caches = [self.keys, marked()]
        self.values = self.caches[1]


def test_a_tensor_held_twice_is_state_once():
    """A state tensor reachable by two paths is one state tensor, named by the first path found."""
    assert sorted(state_tensors(HoldsTwice())) == ["caches[1]", "keys"]


def test_restore_puts_the_state_back_in_place():
    """After a call, restore() brings back the saved values at the same addresses, which a
    captured graph keeps reading."""
    model = HoldsACache()
    saved = save(model)
    address = model.layers[0].keys.data_ptr()
    model(torch.ones(1, 3), torch.tensor([1]))
    restore(model, saved)
    assert model.layers[0].keys.data_ptr() == address
    assert not model.layers[0].keys.any()
    assert model.calls == 0


class Counts(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.tensor([1, 2]))


@pytest.mark.parametrize(
    "replacement",
    [torch.zeros(3, dtype=torch.long), torch.zeros(2), None],
    ids=["another shape", "another dtype", "None"],
)
def test_restore_puts_back_a_buffer_that_forward_replaced(replacement):
    """A buffer that forward replaced instead of writing it in place (by a tensor of another
    shape or dtype, or by None) is put back, in a module two levels down too."""
    model = nn.Sequential(nn.Sequential(Counts()))
    saved = save(model)
    model[0][0].steps = replacement
    restore(model, saved)
    steps = model[0][0].steps
    assert (steps.dtype, steps.tolist()) == (torch.long, [1, 2])


def test_restore_puts_back_a_shared_buffer_in_each_module_sharing_it():
    """A buffer that two modules share is state under both names: forward replacing it in the
    second module is undone too."""
    first, second = Counts(), Counts()
    second.steps = first.steps
    model = nn.Sequential(first, second)
    saved = save(model)
    second.steps = torch.zeros(2, dtype=torch.long)
    restore(model, saved)
    assert second.steps.tolist() == [1, 2]


def test_a_state_tensor_missing_after_the_call_is_named():
    """A state tensor that eager leaves and graph mode does not is named, with eager's state."""
    eager = {"calls": torch.ones(()), "layers[0].keys": torch.zeros(2)}
    (found,) = state_mismatches({"calls": torch.ones(())}, eager)
    assert str(found) == (
        "state: tensors ['layers[0].keys'] missing after the call; eager leaves ['calls', 'layers[0].keys']"
    )


def test_a_tensor_only_graph_mode_leaves_is_no_difference():
    """A compile marks the tensor attributes forward reads as static: a constant that looks like
    state afterwards only is not taken for a difference."""
    eager = {"calls": torch.ones(())}
    assert state_mismatches({**eager, "table": torch.arange(3.0)}, eager) == []


def test_bench_refuses_a_graph_that_leaves_another_state():
    """bench compares the state after the call as well as the output: a graph that writes the
    cache row off by one is named by the cache's path, and the model's state is left as it was."""
    model = HoldsACache()

    def off_by_one(x, position):
        return model(x, position + 1)

    inputs = (torch.ones(1, 3), torch.tensor([0]))
    mismatch = bench.compare_outputs(model, off_by_one, inputs)
    assert "state layers[0].keys: 6 of 6 elements differ" in mismatch
    assert not model.layers[0].keys.any()


def refusal(model: nn.Module, call) -> StateOutOfSight | None:
    """What watching() raises around `call()` of `model`, or None."""
    try:
        with watching(model, "during the call"):
            call()
    except StateOutOfSight as error:
        return error
    return None


class SlidingLayer:
    """A cache layer as transformers' sliding-window one: it counts tokens in a Python int."""

    def __init__(self) -> None:
        self.cumulative_length_int = 0


class Windows(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = [SlidingLayer(), SlidingLayer()]
        self.scale = 1.0

    def forward(self, tokens: int) -> None:
        for layer in self.layers:
            layer.cumulative_length_int += tokens
        self.scale *= 2


def test_numbers_that_went_alike_are_named_in_one_line():
    """Numbers a call changed alike are named together, each way they went on its own line."""
    model = Windows()
    found = refusal(model, lambda: model(8))
    assert found.found == [
        ("layers[0].cumulative_length_int, layers[1].cumulative_length_int went from 0 to 8 during the call"),
        "scale went from 1.0 to 2.0 during the call",
    ]


class CountsOnTheClass(nn.Module):
    """A counter kept on the class, which every instance shares."""

    calls = 0

    def forward(self) -> None:
        type(self).calls += 1


STEPS = 0
"""A counter kept in this module's globals, as a model.py might keep one."""


class CountsInAGlobal(nn.Module):
    def forward(self) -> None:
        global STEPS
        STEPS += 1


def test_a_counter_on_the_models_class_is_named():
    """A number in a class attribute that a call changes is state out of sight too: named by
    its class, with the fix of holding it in a tensor."""
    model = CountsOnTheClass()
    found = refusal(model, model)
    calls = CountsOnTheClass.calls
    assert found.found == [f"CountsOnTheClass.calls went from {calls - 1} to {calls} during the call"]
    assert found.fix == CHANGED_FIX


def test_a_counter_in_the_globals_of_the_models_module_is_named():
    """A number in the globals of the module that defines the model's class, which a call
    changes, is named by that module's name."""
    model = CountsInAGlobal()
    found = refusal(model, model)
    assert found.found == [f"test_state.STEPS went from {STEPS - 1} to {STEPS} during the call"]


def test_a_sliding_window_count_gets_the_window_fix():
    """A count named cumulative_length_int, transformers' sliding-window token count, adds the fix
    of turning the window off where the cache fits in it."""
    model = Windows()
    fix = refusal(model, lambda: model(8)).fix
    assert "turn the sliding window off when MAX_SEQ_LEN fits in it" in fix
    plain = nn.Module()
    plain.count = 0

    def advance() -> None:
        plain.count += 1

    assert "sliding window" not in refusal(plain, advance).fix


class RecurrentLayer:
    """A cache layer as transformers' recurrent one (Mamba2's): its states, and a flag per state
    that its first call sets, saying they hold earlier tokens."""

    def __init__(self) -> None:
        self.recurrent_states = {0: marked()}
        self.has_previous_state = {0: False}


def test_a_recurrent_layers_flag_gets_the_recurrent_fix():
    """A has_previous_state flag that a call sets, as a recurrent layer's first call does, is
    named, with the fix of setting it at build and zeroing the states at each new request, not
    the sliding window's."""
    model = nn.Module()
    model.cache = SimpleNamespace(layers=[RecurrentLayer(), RecurrentLayer()])

    def prefill() -> None:
        for layer in model.cache.layers:
            layer.has_previous_state[0] = True

    found = refusal(model, prefill)
    assert found.found == [
        (
            "cache.layers[0].has_previous_state[0], cache.layers[1].has_previous_state[0] went from "
            "False to True during the call"
        )
    ]
    assert "has_previous_state says they hold earlier tokens: set it True when" in found.fix
    assert "zero the states in place at each call from position 0" in found.fix
    assert "sliding window" not in found.fix
    model.count = 0
    assert "has_previous_state" not in refusal(model, lambda: setattr(model, "count", 1)).fix


def test_a_buffer_that_forward_replaced_is_no_state_out_of_sight():
    """A buffer that forward replaced by a new tensor is state restore() puts back: not refused."""
    model = Counts()

    def replace() -> None:
        model.steps = model.steps + 1

    assert refusal(model, replace) is None


def test_a_tensor_held_before_under_another_path_is_no_new_tensor():
    """A tensor the model already held, now held under another path too, appeared nowhere."""
    model = HoldsACache()

    def alias() -> None:
        model.latest = model.layers[0].keys

    assert refusal(model, alias) is None


def test_a_number_that_stays_nan_is_unchanged():
    """A float attribute that is NaN before and after a call did not change."""
    model = nn.Module()
    model.threshold = float("nan")
    assert refusal(model, lambda: None) is None


def test_a_number_that_becomes_nan_changed():
    """A float attribute that a call turns from a number into NaN is named: NaN equals only NaN."""
    model = nn.Module()
    model.threshold = 1.0

    def diverge() -> None:
        model.threshold = float("nan")

    assert refusal(model, diverge).found == ["threshold went from 1.0 to nan during the call"]


def test_a_number_a_call_sets_for_the_first_time_is_named():
    """A Python number that the model holds only from its first call on (a counter started there)
    is named with its value, and the fix is to set it when build_model() builds the model."""
    model = nn.Module()

    def count() -> None:
        model.calls = getattr(model, "calls", 0) + 1

    found = refusal(model, count)
    assert found.found == ["calls first set to 1 during the call"]
    assert found.fix == SET_FIX


class LazyLayer:
    """A cache layer allocated at its first call, as transformers' lazy StaticCache layers are:
    a flag says so, and its size is set then too; `count` is a number it advances as well."""

    def __init__(self) -> None:
        self.keys = None
        self.is_initialized = False
        self.count = 0

    def allocate(self) -> None:
        self.keys = torch.zeros(2)
        self.batch_size = 2
        self.is_initialized = True
        self.count += 1


class LazyCache:
    """A cache of lazy layers, with a flag of its own."""

    def __init__(self) -> None:
        self.layers = [LazyLayer()]
        self.ready = False


def test_a_flag_beside_a_tensor_that_appeared_is_part_of_it_and_a_count_is_not():
    """A flag set beside a tensor that appeared allocates it, and is not named on its own; a
    count there that went up is; both fixes are given, one after the other."""
    model = nn.Module()
    model.cache = LazyCache()
    found = refusal(model, model.cache.layers[0].allocate)
    assert found.found == [
        "cache.layers[0].keys appeared during the call",
        "cache.layers[0].count went from 0 to 1 during the call",
    ]
    assert found.fix == f"{APPEARED_FIX}; and {CHANGED_FIX}"


class CountingLazyLayer:
    """A cache layer as transformers' lazy StaticLayer: a count of tokens in a plain tensor,
    marked only when its first call allocates its keys, then written."""

    def __init__(self) -> None:
        self.keys = None
        self.cumulative_length = torch.zeros((), dtype=torch.long)

    def update(self) -> None:
        if self.keys is None:
            self.keys = marked()
            torch._dynamo.mark_static_address(self.cumulative_length)
        self.cumulative_length.add_(8)


def test_a_count_marked_beside_a_tensor_that_appeared_is_part_of_it():
    """A tensor in a plain attribute that a call marks beside a tensor it allocates, then
    writes (transformers' cumulative_length), is named by the allocation alone, and its fix; one
    that stays unmarked is named as changed."""
    model = nn.Module()
    model.cache = SimpleNamespace(layers=[CountingLazyLayer()])
    found = refusal(model, model.cache.layers[0].update)
    assert found.found == ["cache.layers[0].keys appeared during the call"]
    assert found.fix == APPEARED_FIX

    layer = CountingLazyLayer()
    model.cache = SimpleNamespace(layers=[layer])

    def unmarked_count() -> None:
        layer.keys = marked()
        layer.cumulative_length.add_(8)

    assert refusal(model, unmarked_count).found == [
        "cache.layers[0].cumulative_length changed during the call, held in a plain attribute",
        "cache.layers[0].keys appeared during the call",
    ]


def test_a_size_set_beside_a_tensor_that_appeared_is_part_of_it():
    """A number first set beside a tensor that appeared (transformers' lazy layers set batch_size)
    allocates it, and is not named on its own."""
    model = nn.Module()
    model.cache = LazyCache()
    found = refusal(model, model.cache.layers[0].allocate).found
    assert not any("batch_size" in line for line in found)
    assert "cache.layers[0].keys appeared during the call" in found


def test_a_number_set_elsewhere_than_beside_the_tensor_that_appeared_is_named():
    """Only the numbers of the object that holds the new tensor are part of allocating it: one that
    its container set for the first time is named."""
    model = nn.Module()
    model.cache = LazyCache()

    def allocate() -> None:
        model.cache.layers[0].allocate()
        model.cache.length = 8

    assert "cache.length first set to 8 during the call" in refusal(model, allocate).found


def test_a_flag_elsewhere_than_beside_the_tensor_that_appeared_is_named():
    """Only the flags of the object that holds the new tensor are part of allocating it: one that
    its container set is a change of its own."""
    model = nn.Module()
    model.cache = LazyCache()

    def allocate() -> None:
        model.cache.layers[0].allocate()
        model.cache.ready = True

    assert "cache.ready went from False to True during the call" in refusal(model, allocate).found


def test_a_buffer_two_modules_share_is_seen_under_each_path():
    """What a model holds is seen under every path that reaches it, a shared buffer included."""
    first, second = Counts(), Counts()
    second.steps = first.steps
    seen = sighting(nn.Sequential(first, second))
    assert sorted(path for path, value in seen.items() if isinstance(value, torch.Tensor)) == [
        "0.steps",
        "1.steps",
    ]


class PlainCache(nn.Module):
    """Keeps its cache and its call count in plain tensor attributes: neither buffers nor marked."""

    def __init__(self) -> None:
        super().__init__()
        self.keys = torch.zeros(2, 3)
        self.count = torch.zeros(())

    def write(self, x: torch.Tensor) -> None:
        self.keys[0] = x

    def advance(self) -> None:
        self.count = self.count + 1


def test_a_plain_tensor_attribute_a_call_writes_in_place_is_named():
    """A tensor held in a plain attribute that a call writes in place (a cache made with
    torch.zeros in __init__) is named, with the fix of registering it as a buffer: save() does not
    keep it, so runs compared from one state would start from two."""
    model = PlainCache()
    found = refusal(model, lambda: model.write(torch.ones(3)))
    assert found.found == ["keys changed during the call, held in a plain attribute"]
    assert found.fix == UNKEPT_FIX


def test_a_plain_tensor_attribute_a_call_replaces_with_another_value_is_named():
    """A plain tensor attribute that a call replaces by a tensor of another value (a count kept as
    `self.count = self.count + 1`) is named as changed, not passed over as a new tensor."""
    model = PlainCache()
    assert refusal(model, model.advance).found == ["count changed during the call, held in a plain attribute"]


def test_a_plain_tensor_attribute_a_call_only_reads_is_no_state():
    """A constant table in a plain attribute, read by the call and left as it was, is not refused;
    nor one that holds a NaN before and after."""
    model = PlainCache()
    model.keys[1, 0] = float("nan")
    assert refusal(model, lambda: model.keys.sum()) is None


@pytest.mark.parametrize(
    ("replace", "changed"),
    [
        (lambda table: table.clone(), False),
        (lambda table: table + 1, True),
        (lambda table: table.double(), True),
        (lambda table: table[:1], True),
    ],
    ids=["same-value", "other-value", "other-dtype", "other-shape"],
)
def test_an_integer_tensor_attribute_a_call_replaces_is_named_unless_it_holds_the_same_value(
    replace, changed
):
    """A plain integer tensor attribute (a position table) that a call replaces is named unless
    the new tensor holds the same value: same shape, same dtype and every element."""
    model = PlainCache()
    model.table = torch.arange(4)

    def call() -> None:
        model.table = replace(model.table)

    found = refusal(model, call)
    assert (found.found if found else []) == (
        ["table changed during the call, held in a plain attribute"] if changed else []
    )


def test_a_buffer_and_a_marked_tensor_a_call_writes_are_no_state_out_of_sight():
    """The state the tools keep (a buffer, a marked cache), written by a call, is not refused."""
    model = HoldsACache()
    assert refusal(model, lambda: model(torch.ones(1, 3), torch.tensor([0]))) is None
