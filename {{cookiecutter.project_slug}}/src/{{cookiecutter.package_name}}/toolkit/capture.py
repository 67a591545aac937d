"""What aclgraph capture refuses, found in the graph a compile made, at the line of yours.

npugraph_ex records each graph Dynamo captures as an aclgraph: the device's work, captured once
and replayed. Off an NPU the stand-in (aot_eager) runs what capture refuses without a word, so
the graph itself is read instead, once: each node capture refuses is named with its cause and a
fix, at the line of yours that made it (its stack trace), as PyTorch's
torch/_inductor/cudagraph_utils.py names why a graph cannot be a CUDA graph. The codes, each
with its sources (README, section 'What capture refuses'):

- CAP001 random numbers drawn in the graph (randn, dropout in training mode, ...). cache_compile
  refuses graphs with them; in compile mode TorchAir's documentation says capture refuses them,
  while the torch_npu wheels register the generator's state with the graph, so that each replay
  may draw new numbers: a warning, which the NPU rungs settle.
- CAP002 a copy from the device to the host (.cpu(), .to("cpu")): a synchronous copy inside a
  capture fails (rtMemcpy ErrCode=107030, 107027 "Not allow to synchronize captured-stream").
- CAP003 a value the host reads (.item(), int(t), a size that depends on values: x[mask],
  nonzero()): the host waits for the device, which a capture cannot record.
- CAP004 a tensor built from Python values and copied to the device (torch.tensor([...],
  device=...)): npugraph_ex keeps it on the host and copies it at every call, synchronously.
- CAP005 one of torch_npu's own operators with an aclop kernel alone for this torch version
  (aclop_ops.py): "Cannot run aclop operators during NPU graph capture".
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from types import CodeType
from typing import Any

import torch
from torch import fx

from .aclop_ops import aclop_only
from .backend import ACLOP_CAPTURE_ERROR, Backend
from .frames import traced_frame

PROBLEM, WARNING = "problem", "warning"


@dataclass(frozen=True)
class Refusal:
    """One kind of node that aclgraph capture refuses, at one line of yours."""

    code: str
    what: str
    reason: str
    where: str
    hint: str
    severity: str = PROBLEM


def name_of(node: fx.Node) -> str:
    """The operation a node calls: `randn`, `dropout`, `cpu`, `npu_silu`."""
    target = node.target
    if node.op == "call_method":
        return str(target)
    if node.op != "call_function":
        return ""
    if isinstance(target, torch._ops.OpOverload):
        return target._opname
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.partition("::")[2]
    return getattr(target, "__name__", "")


def argument(node: fx.Node, position: int, keywords: tuple[str, ...], default: Any) -> Any:
    """A call's argument, given by position or by one of its keyword names."""
    for keyword in keywords:
        if keyword in node.kwargs:
            return node.kwargs[keyword]
    return node.args[position] if len(node.args) > position else default


# Operations that draw only when a switch is on: (position, keyword names, default) of the
# switch. A dropout draws its mask in training mode, attention draws one when dropout_p > 0.
SWITCHED: dict[str, tuple[int, tuple[str, ...], Any]] = {
    "dropout": (2, ("training", "train"), True),
    "dropout1d": (2, ("training",), True),
    "dropout2d": (2, ("training",), True),
    "dropout3d": (2, ("training",), True),
    "feature_dropout": (2, ("train",), True),
    "alpha_dropout": (2, ("training", "train"), False),
    "feature_alpha_dropout": (2, ("training", "train"), False),
    "rrelu": (3, ("training",), False),
    "scaled_dot_product_attention": (4, ("dropout_p",), 0.0),
}
# ATen tags these as seeded because of a dropout argument that inference leaves at 0; Dynamo
# stops at the recurrent layers before they reach a graph.
SEEDED_BUT_SWITCHED = re.compile(r"attention|^_?(lstm|gru|rnn_tanh|rnn_relu|cudnn_rnn|miopen_rnn)$")
ALSO_RANDOM = {"gumbel_softmax", "random_"}


@cache
def seeded(name: str) -> bool:
    """Whether ATen tags an operator of this name as one that draws random numbers."""
    try:
        packet = getattr(torch.ops.aten, name)
    except (AttributeError, RuntimeError):
        return False
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return False
    overloads = (getattr(packet, overload) for overload in packet.overloads())
    return any(torch.Tag.nondeterministic_seeded in overload.tags for overload in overloads)


def draws_random_numbers(node: fx.Node) -> bool:
    name = name_of(node)
    if name in SWITCHED:
        position, keywords, default = SWITCHED[name]
        switch = argument(node, position, keywords, default)
        probability = argument(node, 1, ("p",), 0.5) if "dropout" in name else 1.0
        return bool(switch) and probability != 0
    return name in ALSO_RANDOM or (seeded(name) and not SEEDED_BUT_SWITCHED.search(name))


def device_named(value: Any) -> torch.device | None:
    """The device a .to() argument names, if it names one."""
    if isinstance(value, torch.device):
        return value
    if isinstance(value, str):
        try:
            return torch.device(value)
        except RuntimeError:
            return None
    return None


def source_line(node: fx.Node) -> str:
    """The text of the innermost line of the node's stack trace."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', node.meta.get("stack_trace") or "")
    return linecache.getline(frames[-1][0], int(frames[-1][1])) if frames else ""


HOST_LITERAL = re.compile(r"""["']cpu(:\d+)?["']""")


def names_the_host(value: Any, node: fx.Node, on_npu: bool) -> bool:
    """Whether a device argument is the host's as your line wrote it. Off an NPU every tensor is
    on the host, so a device taken from a tensor (`x.to(y.device)`) is the host's there: only a
    device your line spells "cpu" counts, as it would on an NPU."""
    device = device_named(value)
    if device is None or device.type != "cpu":
        return False
    return isinstance(value, str) or on_npu or bool(HOST_LITERAL.search(source_line(node)))


def copies_to_the_host(node: fx.Node, on_npu: bool) -> bool:
    """.cpu(), or .to() the host."""
    if node.op != "call_method" or node.target not in {"cpu", "to"}:
        return False
    devices = (*node.args[1:], node.kwargs.get("device"))
    return node.target == "cpu" or any(names_the_host(each, node, on_npu) for each in devices)


def reads_on_the_host(node: fx.Node) -> bool:
    """The node makes a number the graph goes on with that only the device knows: a value
    (.item()) or a size that depends on values (x[mask], nonzero()). Not a node that only
    passes on such a number, read earlier (a slice at a position .item() read): that read is
    the one to name."""
    passed_on = any(
        isinstance(each.meta.get("example_value"), torch.SymInt | torch.SymFloat | torch.SymBool)
        for each in node.all_input_nodes
    )
    return bool(node.meta.get("unbacked_bindings")) and not passed_on


FROM_PYTHON_VALUES = {"tensor", "as_tensor", "asarray"}


def copies_host_data(node: fx.Node, on_npu: bool) -> bool:
    """torch.tensor(), torch.as_tensor() or x.new_tensor() of Python values, put on the device."""
    if node.op != "call_function" or name_of(node) not in FROM_PYTHON_VALUES:
        return False
    values = node.args[0] if node.args else node.kwargs.get("data")
    device = node.kwargs.get("device")
    if isinstance(values, fx.Node) or device is None:
        return False
    return not names_the_host(device, node, on_npu)


def calls_an_aclop_only_op(node: fx.Node, torch_version: str) -> bool:
    """A call of torch_npu's own operator (torch.ops.npu) with only an aclop kernel."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        namespace, called = target.namespace, f"{target._opname}.{target._overloadname}"
    elif isinstance(target, torch._ops.OpOverloadPacket):
        namespace, called = target._qualified_op_name.partition("::")[::2]
    else:
        return False
    return namespace == "npu" and aclop_only(called, torch_version)


HOST_HINT = (
    'keep the value on the device: leave out .cpu() / .to("cpu"), or do the host\'s work '
    "outside forward()"
)
READ_HINT = (
    ".item() copies a value to the host: keep it a tensor (x + t.sum(), not x + t.sum().item())"
)
SIZE_HINT = (
    "give the result a fixed size: torch.where(mask, x, 0) instead of x[mask], a fixed-size topk "
    "instead of nonzero()"
)
BUFFER_HINT = (
    'make it a buffer in __init__, self.register_buffer("name", torch.tensor([...]), '
    "persistent=False): .to(device) moves it once, and the graph reads it on the device"
)
RANDOM_HINT = (
    "draw the numbers outside the graph and pass them in as an input (example_inputs() makes "
    "them, seeded); in a decode step, sample outside the step, as generate.py does"
)
DROPOUT_HINT = (
    "inference draws no dropout mask: build_model() returns the model in eval mode (.eval()), "
    "or pass training=False"
)
ACLOP_HINT = (
    "call the plain torch operator, or a torch_npu operator with an aclnn kernel, instead; or "
    "keep this call out of the compiled forward"
)


def random_refusal(node: fx.Node, cache_compile: bool) -> tuple[str, str, str]:
    name = name_of(node)
    if cache_compile:
        reason = (
            f'{name}() draws them, and cache_compile refuses such graphs ("Graphs containing '
            'RNG ops are not supported")'
        )
    else:
        reason = (
            f"{name}() draws them: TorchAir's documentation says capture does not take them, "
            "while torch_npu registers the generator's state with the graph, so that each "
            "replay may draw new numbers; the npugraph_ex rungs on an NPU settle it"
        )
    hint = DROPOUT_HINT if "dropout" in name else RANDOM_HINT
    return reason, hint, PROBLEM if cache_compile else WARNING


def refusals(
    graphs: list[fx.GraphModule], *, on_npu: bool, cache_compile: bool, torch_version: str
) -> list[Refusal]:
    """Each kind of node of `graphs` that aclgraph capture refuses, once per line of yours."""
    found: dict[tuple[str, str], Refusal] = {}
    for graph in graphs:
        for node in graph.graph.nodes:
            for refusal in node_refusals(node, on_npu, cache_compile, torch_version):
                found.setdefault((refusal.code, refusal.where), refusal)
    return list(found.values())


def node_refusals(
    node: fx.Node, on_npu: bool, cache_compile: bool, torch_version: str
) -> list[Refusal]:
    where = traced_frame(node.meta.get("stack_trace") or "")
    name = name_of(node)
    found = []
    if draws_random_numbers(node):
        reason, hint, severity = random_refusal(node, cache_compile)
        found.append(
            Refusal("CAP001", "random numbers in the graph", reason, where, hint, severity)
        )
    if copies_to_the_host(node, on_npu):
        call = ".cpu()" if name == "cpu" else '.to("cpu")'
        reason = (
            f"{call} copies a tensor from the device to the host, a synchronous copy that "
            "capture cannot record (rtMemcpy ErrCode=107030; 107027 Not allow to synchronize "
            "captured-stream)"
        )
        found.append(Refusal("CAP002", "a copy to the host in the graph", reason, where, HOST_HINT))
    if reads_on_the_host(node):
        if name in {"item", "_local_scalar_dense"}:
            reason = f".{name}() reads a tensor's value on the host"
            hint = READ_HINT
        else:
            reason = f"{name} makes a tensor whose size depends on its values, read on the host"
            hint = SIZE_HINT
        reason += ": the host waits for the device, which capture cannot record (107027)"
        found.append(Refusal("CAP003", "a value the host reads in the graph", reason, where, hint))
    if copies_host_data(node, on_npu):
        reason = (
            f"torch.{name}() of Python values is copied from the host to the device at every "
            "call, a synchronous copy that capture refuses (rtMemcpy ErrCode=107030)"
        )
        found.append(
            Refusal("CAP004", "host data copied to the device", reason, where, BUFFER_HINT)
        )
    if calls_an_aclop_only_op(node, torch_version):
        reason = (
            f"torch.ops.npu.{name} has only an aclop kernel for torch {torch_version} "
            "(op-plugin's op_plugin_functions.yaml), and capture refuses aclop operators "
            f'("{ACLOP_CAPTURE_ERROR}")'
        )
        found.append(
            Refusal("CAP005", "an aclop-only operator in the graph", reason, where, ACLOP_HINT)
        )
    return found


class CaptureRefused(RuntimeError):
    """The graph holds what aclgraph capture refuses: raised before npugraph_ex captures it."""

    def __init__(self, found: list[Refusal]) -> None:
        super().__init__("; ".join(f"{each.code} {each.what} at {each.where}" for each in found))
        self.found = found


class Recorder:
    """A torch.compile backend that reads each graph Dynamo hands it for what capture refuses,
    then compiles it with `backend`. With `stop=True` (npugraph_ex, which captures next, unless
    its options say force_eager), a graph with a problem is not compiled: CaptureRefused names
    it, instead of capture's error code."""

    def __init__(
        self,
        backend: str,
        *,
        on_npu: bool,
        cache_compile: bool,
        stop: bool = False,
        compiler: Callable | None = None,
    ) -> None:
        self.backend, self.compiler = backend, compiler
        """The backend's compiler: torch's for `backend`'s name, unless given (one this recorder
        stands in for under that name)."""
        self.on_npu, self.cache_compile, self.stop = on_npu, cache_compile, stop
        self.found: list[Refusal] = []
        self.found_in: dict[CodeType, list[Refusal]] = {}
        """What each function Dynamo compiled held (a model's forward), by its code."""
        # What torch's registry keeps on a registered backend, read when it lists backends: the
        # same as the compiler's, which this recorder may stand in for under its name.
        self._tags = tuple(getattr(compiler, "_tags", ()))

    def read(self, graphs: Iterable[fx.GraphModule]) -> list[Refusal]:
        """What capture refuses in `graphs`, kept with what earlier graphs held."""
        found = refusals(
            list(graphs),
            on_npu=self.on_npu,
            cache_compile=self.cache_compile,
            torch_version=".".join(torch.__version__.split(".")[:2]),
        )
        self.found += found
        return found

    def __call__(
        self, graph: fx.GraphModule, example_inputs: list[Any], **options: Any
    ) -> Callable:
        found = self.read([graph])
        if code := compiled_code():
            self.found_in.setdefault(code, []).extend(found)
        captures = not (options.get("options") or {}).get("force_eager")
        if self.stop and captures and any(each.severity == PROBLEM for each in found):
            raise CaptureRefused(found)
        compiler = self.compiler or torch._dynamo.lookup_backend(self.backend)
        return compiler(graph, example_inputs, **options)


def compiled_code() -> CodeType | None:
    """The code of the function Dynamo is compiling now (None outside a compile)."""
    from torch._dynamo.symbolic_convert import InstructionTranslator

    translator = InstructionTranslator.current_tx() if InstructionTranslator else None
    return getattr(translator, "f_code", None)


def recorder_for(backend: Backend, *, cache_compile: bool) -> Recorder:
    """The recorder that stands in for `backend` in torch's registry of backends, installed the
    first time it is asked for and kept for the rest of the process: every compile by the
    backend's name (the MRE's, check's, bench's) is read as it compiles, and all of them are one
    backend to Dynamo, which then reuses one tool's graph for the next tool's model, compiling
    once. With npugraph_ex a graph with a problem is never captured (stop)."""
    registry = torch._dynamo.backends.registry
    try:
        current = registry.lookup_backend(backend.name)
    except torch._dynamo.exc.InvalidBackend:
        current = None  # no compile goes by that name here: a recorder of its own reads nothing
    if isinstance(current, Recorder):
        return current
    recorder = Recorder(
        backend.name,
        on_npu=backend.is_npugraph_ex,
        cache_compile=cache_compile,
        stop=backend.is_npugraph_ex,
        compiler=current,
    )
    if current is not None:
        registry._COMPILER_FNS[backend.name] = recorder
    return recorder
