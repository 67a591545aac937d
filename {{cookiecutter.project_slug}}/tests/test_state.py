"""A model's state (buffers, tensors marked static such as a KV cache) is found, saved, put back in
place, and compared: one run's state never leaks into the next."""

import torch
from torch import nn

from {{ cookiecutter.package_name }}.toolkit import bench
from {{ cookiecutter.package_name }}.toolkit.state import restore, save, state_tensors


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
