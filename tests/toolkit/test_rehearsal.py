"""Before any tool compiles, the MRE's eager calls, watched: bench, generate and profile refuse a
model that fails eagerly in one line, as check does, and one that keeps state the tools cannot save
(a tensor made at the first call, a Python number a call advances) naming it and the fix; a model
that passes is left as it was."""

import contextlib
import importlib
import io
import types
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn
from torch._C._distributed_c10d import _get_work_registry_size
from torch._dynamo.utils import counters
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from decode_project.model import VOCAB
from forward_project.toolkit.backend import BACKEND_ENV
from forward_project.toolkit.rehearsal import EagerFailure, GraphFailure, graph_failures, rehearse
from parallel_project.toolkit.parallel import fake_ranks

TOOLS = [
    ("bench", "forward_project"),
    ("bench", "decode_project"),
    ("profile", "forward_project"),
    ("profile", "decode_project"),
    ("generate", "decode_project"),
]
"""Each tool that compares graph mode with eager or runs a model many times, in each kind of
project that has it."""


def line_of(marker: str) -> int:
    """The line of this file that holds `marker` (in a comment)."""
    source = Path(__file__).read_text().splitlines()
    return next(number for number, text in enumerate(source, 1) if marker in text)


def module(project: str, name: str) -> types.ModuleType:
    return importlib.import_module(f"{project}.{name}")


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """No forced backend, and whatever a run writes (profile's traces) in the test's own folder."""
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    monkeypatch.chdir(tmp_path)


def run_tool(monkeypatch, tool: str, project: str, build_model: Callable[[], nn.Module]) -> tuple[int, str]:
    """`python -m <project> <tool>` on a model.py whose build_model() is `build_model`: the exit
    code and what it printed on stderr. Nothing may compile before it refuses."""
    # Every tool reads build_model from model.py when it runs.
    monkeypatch.setattr(module(project, "model"), "build_model", build_model)
    graphs = counters["stats"]["unique_graphs"]
    told = io.StringIO()
    with contextlib.redirect_stderr(told), contextlib.redirect_stdout(io.StringIO()):
        code = module(project, "__main__").main([tool])
    assert counters["stats"]["unique_graphs"] == graphs, "compiled before it refused"
    return code, told.getvalue()


class Fails(nn.Module):
    """Fails in forward, whatever it is called with."""

    def forward(self, *inputs):
        raise ValueError("bad input")  # every tool must point at this line


@pytest.mark.parametrize(("tool", "project"), TOOLS)
def test_a_model_that_fails_eagerly_is_refused_in_one_line(monkeypatch, tool, project):
    """A model that builds and fails eagerly: exit 2, one line with the error, where it arose and
    the command that says more, before anything compiles."""
    code, told = run_tool(monkeypatch, tool, project, Fails)
    assert code == 2
    assert told.splitlines() == [
        (
            f"{tool}: the model fails eagerly, so graph mode cannot be judged: ValueError: bad input; "
            f"at {__file__}:{line_of('every tool must point at this line')} (forward); "
            f"`python -m {project} check` says more"
        )
    ]


def does_not_build() -> nn.Module:
    raise ValueError("no such layer")  # every tool must point at this build


@pytest.mark.parametrize(("tool", "project"), TOOLS)
def test_a_model_that_does_not_build_is_refused_in_one_line(monkeypatch, tool, project):
    """A build_model() that raises: exit 2, one line with the error, where it arose and the
    command that says more, as check refuses it."""
    code, told = run_tool(monkeypatch, tool, project, does_not_build)
    assert code == 2
    assert told.splitlines() == [
        (
            f"{tool}: build_model() fails, so graph mode cannot be judged: ValueError: no such "
            f"layer; at {__file__}:{line_of('every tool must point at this build')} "
            f"(does_not_build); `python -m {project} check` says more"
        )
    ]


class BreaksTheGraph(nn.Module):
    """Runs eagerly, but branches on a tensor's value: a graph break under fullgraph=True."""

    def forward(self, x, *positions):
        if x.sum() > 1e9:  # every tool must name this graph break
            x = x * 2
        return logits(x)


@pytest.mark.parametrize(
    ("tool", "project"),
    [*TOOLS, ("bench", "parallel_project"), ("generate", "decode_parallel_project")],
)
def test_a_graph_break_fails_in_one_line_naming_the_users_line_and_the_fix(monkeypatch, tool, project):
    """A model that runs eagerly but breaks the graph: exit 1, one line with Dynamo's reason, the
    user's line, the fix check gives for it and the command that lists every break."""
    if "parallel" in project:
        # One rank, in this process: nothing of the model to split.
        monkeypatch.setattr(module(project, "model"), "parallel_plan", lambda size: {})
    code, told = run_tool(monkeypatch, tool, project, BreaksTheGraph)
    assert code == 1
    assert told.splitlines() == [
        (
            f"{tool}: graph mode fails on the model that runs eagerly: Unsupported: Data-dependent "
            f"branching; at {__file__}:{line_of('every tool must name this graph break')} "
            "(forward); a Python `if` or `while` on a tensor value: compute both sides and pick "
            "with torch.where, use torch.cond, or decide on shapes and settings instead of values; "
            f"`python -m {project} check` lists every graph break"
        )
    ]


def logits(tokens: torch.Tensor) -> torch.Tensor:
    """Logits (batch, n, VOCAB) for tokens (batch, n) of a decode project, or the input itself."""
    if tokens.dtype.is_floating_point:
        return tokens
    return nn.functional.one_hot(tokens, VOCAB).float()


class CountsCalls(nn.Module):
    """Counts its calls in a Python int: a forward model's step, or a decode model's."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x, *positions):
        self.calls += 1
        return logits(x) * self.calls


@pytest.mark.parametrize(("tool", "project"), TOOLS)
def test_a_number_a_call_advances_is_refused_naming_it(monkeypatch, tool, project):
    """A Python number the model's first call advances: exit 2, a few lines naming its path, how
    it went and the fix, before anything compiles."""
    code, told = run_tool(monkeypatch, tool, project, CountsCalls)
    assert code == 2
    assert told.splitlines() == [
        (
            f"{tool}: the model keeps state that the tools cannot save and put back, so no run can "
            "start from the state another started from:"
        ),
        "  calls went from 0 to 1 during the first call",
        (
            "  fix: hold what a call advances in a tensor, written in place: graph mode bakes a Python "
            "number into the graph, and every new value compiles another"
        ),
    ]


class CountsInAPlainTensor(CountsCalls):
    """Counts its calls in a tensor held in a plain attribute: neither a buffer nor marked."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = torch.zeros(())


@pytest.mark.parametrize(("tool", "project"), TOOLS)
def test_a_plain_tensor_attribute_a_call_changes_is_refused_naming_it(monkeypatch, tool, project):
    """A tensor in a plain attribute that the model's first call changes: exit 2, its path and the
    fix of registering it as a buffer, before anything compiles (no tool could put it back)."""
    code, told = run_tool(monkeypatch, tool, project, CountsInAPlainTensor)
    assert code == 2
    assert told.splitlines()[1:] == [
        "  calls changed during the first call, held in a plain attribute",
        (
            "  fix: register each as a buffer where the module makes it, self.register_buffer(name, "
            "tensor), so that .to(device) moves it and the tools keep it (or, in a cache object that "
            "is no module, mark it with torch._dynamo.mark_static_address)"
        ),
    ]


class Layer:
    """A cache layer allocated at its first update, as transformers' StaticCache allocates one
    where nothing allocates it first."""

    def update(self, x: torch.Tensor) -> torch.Tensor:
        if not hasattr(self, "keys"):
            self.keys = torch.zeros_like(x)
        return self.keys.copy_(x)


class AllocatesAtFirstCall(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cache = types.SimpleNamespace(layers=[Layer()])

    def forward(self, x, *positions):
        return self.cache.layers[0].update(logits(x))


@pytest.mark.parametrize(("tool", "project"), TOOLS)
def test_a_tensor_made_at_the_first_call_is_refused_naming_it(monkeypatch, tool, project):
    """A tensor the model's first call makes: exit 2, naming its path and the fix, before
    anything compiles."""
    code, told = run_tool(monkeypatch, tool, project, AllocatesAtFirstCall)
    assert code == 2
    assert told.splitlines()[1:] == [
        "  cache.layers[0].keys appeared during the first call",
        (
            "  fix: allocate every tensor the model keeps when build_model() builds it, not at its "
            "first call (a transformers StaticCache: run one token through the model there, then "
            "empty the cache with its reset(); its early_initialization() gives keys and values one "
            "width and allocates no recurrent layer's states: README, section 'A transformers Llama "
            "with a StaticCache')"
        ),
    ]


class CountsDecodeSteps(nn.Module):
    """Counts its decode steps (calls of one token) in a Python int: prefill leaves it alone."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def forward(self, tokens, input_pos):
        if tokens.shape[1] == 1:
            self.steps += 1
        return logits(tokens) * (self.steps + 1)


@pytest.mark.parametrize("tool", ["bench", "generate"])
def test_a_number_the_decode_step_advances_is_refused_naming_the_step(monkeypatch, tool):
    """A number only the decode step advances is caught there, and named as the first decode
    step's doing, not the prefill's."""
    code, told = run_tool(monkeypatch, tool, "decode_project", CountsDecodeSteps)
    assert code == 2
    assert told.splitlines()[1] == "  steps went from 0 to 1 during the first decode step"


@pytest.mark.parametrize("project", ["forward_project", "decode_project"])
def test_a_rehearsal_leaves_the_state_as_it_was(project):
    """After the rehearsal, the sample's state (a decode model's KV cache, which its prefill and
    decode step write) holds what it held before."""
    model_py = module(project, "model")
    state = module(project, "toolkit.state")
    torch.manual_seed(0)
    built = model_py.build_model()
    before = state.save(built)
    module(project, "toolkit.rehearsal").rehearse(built, model_py.example_inputs())
    assert state.state_mismatches(state.save(built), before) == []


class Draws(nn.Module):
    """Draws a random number on every call, as a sampler inside forward would."""

    def forward(self, x):
        return x + 0 * torch.rand(())


def test_a_rehearsal_leaves_the_random_generator_where_it_was():
    """A model that draws random numbers: after the rehearsal the generator draws what it would
    have drawn without it, so a tool's next draw (its inputs) is the MRE's."""
    drawn = torch.get_rng_state()
    rehearse(Draws(), (torch.ones(2),))
    assert torch.equal(torch.get_rng_state(), drawn)


class RowParallelOutput(nn.Module):
    """Linear, GELU, Linear, whose output is the second layer's own: sharded column- then
    row-parallel, a call hands it back with its all-reduce still in flight. Given token ids (a
    decode project's prompt, then its steps, with their positions), it embeds them first."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 8)
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, VOCAB)

    def forward(self, x, input_pos=None):
        return self.down(nn.functional.gelu(self.up(self.embed(x) if input_pos is not None else x)))


@pytest.mark.parametrize(
    ("project", "inputs"),
    [
        ("parallel_project", (torch.ones(3, 8),)),
        ("decode_parallel_project", (torch.randint(0, VOCAB, (2, 4)),)),
    ],
    ids=["forward", "decode"],
)
def test_a_rehearsal_leaves_no_collective_in_flight(project, inputs):
    """With tensor parallelism, the rehearsal waits for the collectives of each call it makes,
    whose output nobody reads: none is left unwaited (torch warns of one at exit on every rank)."""
    with fake_ranks(2) as mesh:
        plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
        sharded = parallelize_module(RowParallelOutput(), mesh, plan)
        in_flight = _get_work_registry_size()
        module(project, "toolkit.rehearsal").rehearse(sharded, inputs)
        assert _get_work_registry_size() == in_flight


def test_generate_s_prompt_is_the_mre_s_after_the_rehearsal(monkeypatch):
    """generation.build() rehearses on example_inputs(), yet the prompt its callers draw next is
    the one the MRE draws after build_model()."""
    model_py = module("decode_project", "model")
    generation = module("decode_project", "toolkit.generation")
    backend = module("decode_project", "toolkit.backend").select_backend()
    torch.manual_seed(0)
    model_py.build_model()
    (expected,) = model_py.example_inputs()
    torch._dynamo.reset()
    generation.build(backend)
    (prompt,) = model_py.example_inputs()
    assert torch.equal(prompt, expected)


def test_an_error_no_line_of_yours_raised_is_refused_without_a_place():
    """A model of torch's own (nn.Linear) on an input of the wrong width fails in torch alone: the
    refusal names the error, and no place."""
    with pytest.raises(EagerFailure) as refused:
        rehearse(nn.Linear(4, 2), (torch.ones(1, 3),))
    assert str(refused.value) == (
        "the model fails eagerly, so graph mode cannot be judged: RuntimeError: mat1 and mat2 "
        "shapes cannot be multiplied (1x3 and 4x2); `python -m forward_project check` says more"
    )


def test_a_rehearsal_leaves_every_accelerators_generator_alone(monkeypatch):
    """Only the CPU's generator is forked: on a machine of 8 accelerators (stood in for by CUDA's
    module, counting 8 on this CPU build), none is initialized for its random state, nor warned
    about."""
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *args: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    rehearse(nn.Linear(3, 2), (torch.ones(1, 3),))


def test_a_step_that_recompiles_to_dynamos_limit_fails_in_one_line(monkeypatch):
    """A step that compiles again on every call stops at Dynamo's limit in one line naming the
    guard that failed, not in Dynamo's traceback."""
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 2)
    torch._dynamo.reset()
    step = torch.compile(lambda x, n: x + n, backend="eager", fullgraph=True, dynamic=False)

    def steps() -> None:
        for n in range(4):
            step(torch.ones(1), n)

    with pytest.raises(GraphFailure) as failed, graph_failures():
        steps()
    message = str(failed.value)
    assert message.startswith("graph mode compiled again on every call until Dynamo's limit: ")
    assert "n == " in message
    assert "\n" not in message
