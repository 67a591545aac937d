"""The capture check: what aclgraph capture refuses is found in the graph Dynamo compiled, once
per kind and line of yours, with its code; what capture takes raises nothing."""

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from forward_project.toolkit.capture import PROBLEM, WARNING, CaptureRefused, Recorder


def line_of(marker: str) -> int:
    """The line of this file that ends with `marker` (in a comment)."""
    source = Path(__file__).read_text().splitlines()
    return next(number for number, text in enumerate(source, 1) if text.endswith(marker))


class Forward(nn.Module):
    """A model whose forward is `step`, with a Linear before it as a real model has."""

    def __init__(self, step: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.linear, self.step = nn.Linear(4, 4), step

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.step(self.linear(x))


def compiled_through(recorder: Recorder, model: nn.Module, *inputs: torch.Tensor) -> None:
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=recorder, fullgraph=True, dynamic=False)(*inputs)


def found_in(step: Callable, *, cache_compile: bool = False, training: bool = False) -> list[tuple]:
    """(code, severity, line) of each refusal in the graph of a model that runs `step`."""
    recorder = Recorder("aot_eager", on_npu=False, cache_compile=cache_compile)
    model = Forward(step).train(training)
    compiled_through(recorder, model, torch.ones(2, 4))
    return [(each.code, each.severity, int(each.where.split(":")[1].split()[0])) for each in recorder.found]


def noise(y):
    return y + torch.randn_like(y)  # CAP001 randn_like


def uniform(y):
    return y * torch.rand(2, 4)  # CAP001 rand


def dropped(y):
    return F.dropout(y, p=0.1, training=True)  # CAP001 dropout


def bernoulli(y):
    return y * torch.bernoulli(torch.full_like(y, 0.5))  # CAP001 bernoulli


def sampled(y):
    return y + torch.multinomial(y.softmax(-1), 1)  # CAP001 multinomial


def filled(y):
    return y + torch.empty_like(y).normal_()  # CAP001 normal_


def to_host(y):
    return y * y.abs().amax().cpu()  # CAP002 cpu


def to_cpu(y):
    return y + y.float().to("cpu").mean(-1, keepdim=True)  # CAP002 to cpu


def to_cpu_by_keyword(y):
    return y + y.to(device="cpu")  # CAP002 to device=cpu


def to_a_cpu_device(y):
    return y + y.to(torch.device("cpu"))  # CAP002 torch.device cpu


def item(y):
    return y * y.sum().item()  # CAP003 item


def as_int(y):
    return y * int(y.sum())  # CAP003 int


def masked(y):
    return y + y[y > 0].sum()  # CAP003 mask


def listed(y):
    return y + sum((y > 0).long()[0].tolist())  # CAP003 tolist


def host_values(y):
    return y * torch.tensor([1.0, 2.0, 3.0, 4.0], device=y.device)  # CAP004 tensor


def new_values(y):
    return y * y.new_tensor([1.0, 2.0, 3.0, 4.0])  # CAP004 new_tensor


REFUSED = {
    "randn_like": (noise, "CAP001"),
    "rand": (uniform, "CAP001"),
    "dropout": (dropped, "CAP001"),
    "bernoulli": (bernoulli, "CAP001"),
    "multinomial": (sampled, "CAP001"),
    "normal_": (filled, "CAP001"),
    "cpu": (to_host, "CAP002"),
    "to cpu": (to_cpu, "CAP002"),
    "to device=cpu": (to_cpu_by_keyword, "CAP002"),
    "torch.device cpu": (to_a_cpu_device, "CAP002"),
    "item": (item, "CAP003"),
    "int": (as_int, "CAP003"),
    "mask": (masked, "CAP003"),
    "tolist": (listed, "CAP003"),
    "tensor": (host_values, "CAP004"),
    "new_tensor": (new_values, "CAP004"),
}


@pytest.mark.parametrize(("step", "code"), REFUSED.values(), ids=REFUSED.keys())
def test_what_capture_refuses_is_found_at_its_line(step, code):
    """Each operation aclgraph capture refuses is one finding, with its code, at the line that
    made it."""
    marker = next(f"{code} {name}" for name, (each, _) in REFUSED.items() if each is step)
    (found,) = found_in(step)
    assert (found[0], found[2]) == (code, line_of(marker))


def test_random_numbers_are_a_warning_in_compile_mode_and_a_problem_under_cache_compile():
    """cache_compile refuses graphs that draw random numbers; in compile mode the sources
    disagree, so it is a warning that the NPU rungs settle."""
    assert found_in(noise)[0][1] == WARNING
    assert found_in(noise, cache_compile=True)[0][1] == PROBLEM


def test_a_dropout_module_in_training_mode_draws_and_in_eval_mode_does_not():
    """nn.Dropout draws a mask only in training mode: a model left in it is told, one in eval
    mode is not."""
    dropout = nn.Dropout(0.1)
    assert [code for code, *_ in found_in(dropout, training=True)] == ["CAP001"]
    assert found_in(dropout, training=False) == []


def two_copies(y):
    first = y.cpu() + y.cpu()  # two copies on one line
    return first.to(y.device) + y.cpu()  # a third on another


def test_each_kind_is_one_finding_per_line():
    """Two copies on one line are one finding; a copy on another line is another."""
    lines = [line for _, _, line in found_in(two_copies)]
    assert lines == [line_of("two copies on one line"), line_of("a third on another")]


def allowed(y):
    """What capture takes: casts, tensors made on the input's device, moves to that device,
    attention without dropout, dropout switched off, numpy traced on the device."""
    y = y.float().to(torch.float16).to(y.dtype)
    y = y + torch.zeros(2, 4, device=y.device) + torch.arange(4, device=y.device)
    y = y.to(y.device) * torch.full_like(y, 2.0)
    y = F.scaled_dot_product_attention(y[None], y[None], y[None], dropout_p=0.0)[0]
    y = F.dropout(y, p=0.1, training=False) + F.dropout(y, p=0.0, training=True)
    return y + torch.from_numpy(y.numpy() * 2)


def test_what_capture_takes_is_not_refused():
    """No false alarm: casts, tensors on the input's device, attention, dropout off."""
    assert found_in(allowed) == []


@torch.library.custom_op("npu::npu_silu", mutates_args=())
def npu_silu(x: torch.Tensor) -> torch.Tensor:
    """Stands in for torch_npu's own npu_silu, which has only an aclop kernel for torch 2.13."""
    return F.silu(x)


@npu_silu.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("npu::npu_capture_test_both", mutates_args=())
def npu_both(x: torch.Tensor) -> torch.Tensor:
    """An npu operator the aclop-only table does not list."""
    return x * 2


@npu_both.register_fake
def _(x):
    return torch.empty_like(x)


def aclop(y):
    return torch.ops.npu.npu_silu(y)  # CAP005 npu_silu


def test_an_aclop_only_npu_operator_is_a_problem_and_another_is_not():
    """torch_npu's operators with only an aclop kernel for this torch are refused at their
    line; an npu operator the table does not list, or a custom op with a fake function, is not."""
    assert found_in(aclop) == [("CAP005", PROBLEM, line_of("CAP005 npu_silu"))]
    assert found_in(torch.ops.npu.npu_capture_test_both) == []


def test_before_npugraph_ex_captures_a_refused_graph_is_stopped_uncompiled(npugraph_ex_compiles):
    """With stop=True (npugraph_ex, which captures next) a graph with a problem raises
    CaptureRefused, naming it, and npugraph_ex never compiles it."""
    recorder = Recorder("npugraph_ex", on_npu=True, cache_compile=False, stop=True)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as raised:
        compiled_through(recorder, Forward(to_host), torch.ones(2, 4))
    assert isinstance(raised.value.inner_exception, CaptureRefused)
    assert [each.code for each in raised.value.inner_exception.found] == ["CAP002"]
    assert npugraph_ex_compiles == []


def test_a_warning_does_not_stop_the_capture(npugraph_ex_compiles):
    """Random numbers in compile mode are a warning: npugraph_ex still compiles the graph."""
    recorder = Recorder("npugraph_ex", on_npu=True, cache_compile=False, stop=True)
    compiled_through(recorder, Forward(noise), torch.ones(2, 4))
    assert len(npugraph_ex_compiles) == 1


def test_on_an_npu_a_device_taken_from_a_tensor_is_not_the_host():
    """Off an NPU `x.to(y.device)` names the host too: only a device the line spells "cpu"
    counts there; on an NPU every move to the host is one."""
    moved = Forward(lambda y: y + y.to(y.device))
    off = Recorder("aot_eager", on_npu=False, cache_compile=False)
    compiled_through(off, moved, torch.ones(2, 4))
    on = Recorder("aot_eager", on_npu=True, cache_compile=False)
    compiled_through(on, moved, torch.ones(2, 4))
    assert (off.found, [each.code for each in on.found]) == ([], ["CAP002"])


def test_the_recorder_stands_in_for_the_backend_for_the_rest_of_the_process(monkeypatch):
    """recorder_for() installs one recorder per backend name in torch's registry, the same one
    for every later asker; a name torch does not know (a cache_compile of its own) gets a
    recorder that reads nothing and is installed nowhere."""
    from forward_project.toolkit.backend import Backend
    from forward_project.toolkit.capture import recorder_for

    registry = torch._dynamo.backends.registry
    monkeypatch.setitem(registry._COMPILER_FNS, "aot_eager", registry.lookup_backend("aot_eager"))
    first = recorder_for(Backend("aot_eager", "cpu", "a test"), cache_compile=False)
    assert recorder_for(Backend("aot_eager", "cpu", "again"), cache_compile=False) is first
    assert registry.lookup_backend("aot_eager") is first
    unknown = recorder_for(Backend("no_such_backend", "cpu", "a test"), cache_compile=False)
    assert "no_such_backend" not in registry._COMPILER_FNS
    assert unknown.found == []
