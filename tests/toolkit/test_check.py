"""check on small models of its own: a graph break is found, located and explained; constant
inputs and outputs that differ from eager are named, with the numbers; each rung starts from the
state eager started from; in each kind of project (decode, tensor-parallel) alike."""

import contextlib
import functools
import importlib
import json
import logging
import re
import traceback
import types
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch
from torch import nn
from torch._dynamo.backends.registry import register_backend
from torch._dynamo.utils import counters
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

from decode_project import model as decode_model
from decode_project.toolkit import check as decode_check
from forward_project.toolkit import check
from forward_project.toolkit.backend import BACKEND_ENV, NPUGRAPH_EX_OPTIONS, Backend
from forward_project.toolkit.contract import Mismatch, tolerances

READY = f"{check.READY} under the aot_eager stand-in; {check.NOTHING_REFUSED}"
"""check's summary for a model with no problem, off an NPU."""
EVERY_KIND = ["forward_project", "decode_project", "parallel_project", "decode_parallel_project"]
"""A project of each kind that check runs differently: decode (a prefill first), tensor-parallel
(the plan rehearsed, the model sharded), both."""
PARALLEL = ["parallel_project", "decode_parallel_project"]
WHEN = {False: "during the first call", True: "during the first decode step"}
"""Which eager call check names, in a forward project and in a decode one (the project fixture's
decode projects run no prefill: their first call is the decode step)."""


def line_of(marker: str) -> int:
    """The line of this file that holds `marker` (in a comment)."""
    source = Path(__file__).read_text().splitlines()
    return next(number for number, text in enumerate(source, 1) if marker in text)


class Project(NamedTuple):
    """A project's model.py and check, for a model of a test's own."""

    model: types.ModuleType
    check: types.ModuleType
    use: Callable[..., None]
    """use(build_model, *inputs): model.py builds this model on these example inputs."""


@pytest.fixture(params=EVERY_KIND)
def project(request, monkeypatch) -> Project:
    """Each kind of project (unless a test names its own), for a small model of the test's own:
    a tensor-parallel project's parallel_plan() is empty, which the sample's plan would not fit;
    a decode project runs the example inputs as the step, with no prefill, and new data from seed
    1 as the step after (as a forward project does)."""
    name = request.param
    model = importlib.import_module(f"{name}.model")
    tool = importlib.import_module(f"{name}.toolkit.check")
    if "parallel" in name:
        monkeypatch.setattr(model, "parallel_plan", lambda world_size: {})
    if "decode" in name:
        decode = importlib.import_module(f"{name}.toolkit.decode")

        def new_data(*inputs):
            torch.manual_seed(1)
            device = next(x.device for x in inputs if isinstance(x, torch.Tensor))
            return tool.to_device(model.example_inputs(), device)

        # check imports them from decode when it runs. No second request either: these models
        # take whatever inputs a test gives them, not a prompt.
        monkeypatch.setattr(decode, "first_step", lambda model, *inputs: inputs)
        monkeypatch.setattr(decode, "next_step", new_data)
        monkeypatch.setattr(decode, "carried_over", lambda model, *inputs: None)

    def use(build_model: Callable[[], nn.Module], *inputs: Any) -> None:
        monkeypatch.setattr(model, "build_model", build_model)
        monkeypatch.setattr(model, "example_inputs", lambda: inputs)

    return Project(model, tool, use)


def run_check(capsys, project: Project, build_model, *inputs) -> tuple[int, dict]:
    """check --json on a model.py whose build_model and example_inputs are these: exit code, JSON."""
    project.use(build_model, *inputs)
    code = project.check.main(["--json"])
    return code, json.loads(capsys.readouterr().out)


class PrintsInForward(nn.Module):
    def forward(self, x):
        print("debugging")  # the break check must point here
        return x * 2


def test_a_syntax_error_is_placed_at_the_line_it_could_not_parse():
    """A file that does not parse is placed at its file:line, which the import's frames miss."""
    with pytest.raises(SyntaxError) as raised:
        compile("x = 1\ny = (\n", "model.py", "exec")
    assert check.error_frame(raised.value) == "model.py:2"


def test_a_graph_break_is_listed_with_its_line_and_a_hint(capsys, project):
    """A print() in forward is one problem, the break at its file:line with the fix, exit 1; the
    rungs that fail on it say so on their lines, not in findings of their own."""
    code, result = run_check(capsys, project, PrintsInForward, torch.ones(2))
    assert code == 1
    (found,) = result["findings"]
    assert found["what"] == "graph break"
    assert found["where"].startswith(f"{__file__}:{line_of('the break check must')}")
    assert "print()" in found["hint"]
    assert {rung["name"]: rung["status"] for rung in result["rungs"]} == {
        "eager backend": "fail",
        "aot_eager": "fail",
        "npugraph_ex rungs": "skipped",
    }
    assert result["summary"].startswith("1 problem(s)")


def test_float_token_ids_get_the_dtype_hint(capsys, project):
    """An embedding fed floats cannot run at all: exit 2, and the hint says token ids are integers."""
    project.use(lambda: nn.Embedding(16, 4), torch.zeros(2, 3))
    assert project.check.main([]) == 2
    assert "token ids must be integers" in capsys.readouterr().out


COUNTS = {"steps": 0}
"""A count kept outside the model, in a global dict, where no tool's watch over its state looks
(the watch sees the numbers in the globals of the model's module, not inside their containers)."""


class CountsOutside(nn.Module):
    """Dynamo guards on the count in the global COUNTS, which changes on every call."""

    def forward(self, x):
        COUNTS["steps"] += 1  # Dynamo's guard is on the value read here
        return x * COUNTS["steps"]


def test_a_recompile_on_the_next_call_is_a_problem(capsys, project):
    """A model that compiles again on its second call is named as recompiling: exit 1."""
    code, result = run_check(capsys, project, CountsOutside, torch.ones(3))
    assert code == 1
    assert "aot_eager recompiled" in {finding["what"] for finding in result["findings"]}


class CountsCalls(nn.Module):
    """Counts its calls in a Python int it holds: state that no tool can save and put back."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


class CountsCallsAndTokens(CountsCalls):
    """Counts its calls, and its tokens two at a time, in two Python ints."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = 0

    def forward(self, x):
        self.tokens += 2
        return super().forward(x)


@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
def test_every_number_a_call_advances_is_named_on_a_line_of_its_own(capsys, project):
    """Two numbers that the eager call advances by different steps: a line for each."""
    _, result = run_check(capsys, project, CountsCallsAndTokens, torch.ones(3))
    (found,) = result["findings"]
    assert found["reason"].split("\n            ") == [
        "calls went from 0 to 1 during the first call",
        "tokens went from 0 to 2 during the first call",
    ]


def test_a_number_a_call_advances_is_refused_by_its_path(capsys, project):
    """A Python number that the eager call advances is named with how it went, and with the fix;
    nothing is compared, since no rung could start where eager started: exit 2."""
    code, result = run_check(capsys, project, CountsCalls, torch.ones(3))
    when = WHEN["decode" in project.model.__name__]
    assert (code, result["model"], result["rungs"]) == (2, "CountsCalls", [])
    assert result["summary"] == "nothing was compared: no run can start from eager's state"
    (found,) = result["findings"]
    assert (found["what"], found["reason"]) == (
        "state the tools cannot save",
        f"calls went from 0 to 1 {when}",
    )
    assert found["hint"].startswith("hold what a call advances in a tensor, written in place")


class WritesAPlainCache(nn.Module):
    """Writes its input into a cache held in a plain tensor attribute, neither a buffer nor marked:
    a graph that corrupted it would go unseen, since no tool saves it."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = torch.zeros(3)

    def forward(self, x):
        self.cache.copy_(x)
        return x * 2


def test_a_plain_tensor_attribute_a_call_writes_is_refused_by_its_path(capsys, project):
    """A cache in a plain tensor attribute that the eager call writes is named, with the fix of
    registering it as a buffer; nothing is compared, as no rung could start from eager's state."""
    code, result = run_check(capsys, project, WritesAPlainCache, torch.ones(3))
    when = WHEN["decode" in project.model.__name__]
    assert (code, result["rungs"]) == (2, [])
    (found,) = result["findings"]
    assert (found["what"], found["reason"]) == (
        "state the tools cannot save",
        f"cache changed {when}, held in a plain attribute",
    )
    assert found["hint"].startswith("register each as a buffer where the module makes it")


class Layer:
    """A cache layer as transformers' StaticCache holds one: allocated at its first update unless
    allocated early."""

    def __init__(self) -> None:
        self.is_initialized = False

    def update(self, x: torch.Tensor) -> torch.Tensor:
        if not self.is_initialized:
            self.keys = torch.zeros_like(x)
            self.is_initialized = True
        self.keys.copy_(x)
        return self.keys


class AllocatesAtFirstCall(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = [Layer(), Layer()]

    def forward(self, x):
        return sum(layer.update(x * index) for index, layer in enumerate(self.layers))


def test_a_tensor_made_at_the_first_call_is_refused_by_its_path(capsys, project):
    """Tensors that appear during the eager call are named by their paths, in one line, with the
    fix (their flags, set beside them, are not named apart); nothing is compared: exit 2."""
    code, result = run_check(capsys, project, AllocatesAtFirstCall, torch.ones(3))
    when = WHEN["decode" in project.model.__name__]
    assert (code, result["rungs"]) == (2, [])
    (found,) = result["findings"]
    assert found["reason"] == f"layers[0].keys, layers[1].keys appeared {when}"
    assert found["hint"].startswith("allocate every tensor the model keeps when build_model()")


class Scale(nn.Module):
    def forward(self, x, scale: float):
        return x * scale


def test_a_non_tensor_input_is_a_warning_naming_its_path(capsys, project):
    """A float input is named by its path and value as baked into the graph, with the 0-d tensor
    fix: a warning, since the model runs, so the exit stays 0."""
    code, result = run_check(capsys, project, Scale, torch.ones(3), 0.5)
    assert code == 0
    (found,) = [f for f in result["findings"] if f["what"] == "non-tensor input"]
    assert (found["path"], found["severity"]) == ("[1]", "warning")
    assert found["reason"].startswith("[1]: float 0.5 is baked into the graph as a constant")
    assert f"recompile_limit = {torch._dynamo.config.recompile_limit}" in found["reason"]
    assert "torch.tensor(0.5)" in found["hint"]


class OffUnderCompile(nn.Module):
    """Eager returns its input; any compiled rung adds 0.5 to the positive elements of `hidden`."""

    def forward(self, x):
        # Dynamo folds is_compiling() to True: no graph break, a graph that computes something else.
        off = 0.5 * (x > 0) if torch.compiler.is_compiling() else 0
        return {"logits": x.clone(), "hidden": x + off}


def test_a_differing_output_names_the_leaf_and_the_numbers(capsys, project):
    """A rung whose output differs names the leaf, the elements beyond the tolerance of how many,
    and the largest differences against rtol and atol, as JSON fields: exit 1."""
    code, result = run_check(capsys, project, OffUnderCompile, torch.arange(-3.0, 5.0))
    assert code == 1
    (found,) = [f for f in result["findings"] if f["what"] == "aot_eager differs from eager"]
    assert found["path"] == "['hidden']"
    (mismatch,) = found["mismatches"]
    assert (mismatch["path"], mismatch["mismatched"], mismatch["total"]) == ("['hidden']", 4, 8)
    # 1, 2, 3 and 4 become 1.5 ... 4.5: the worst relative difference is 0.5 off a 1.
    assert (mismatch["max_abs"], mismatch["max_rel"]) == (0.5, 0.5)
    assert {mismatch["rtol"], mismatch["atol"]} == set(tolerances(torch.float32).values())


class DoublesItsInput(nn.Module):
    """Writes its input in place before using it; under compile, when `off`, writes it otherwise."""

    def __init__(self, off: bool = False) -> None:
        super().__init__()
        self.off = off

    def forward(self, x):
        x.mul_(3 if self.off and torch.compiler.is_compiling() else 2)
        return x + 1


def test_a_model_that_writes_its_input_in_place_is_ready(capsys, project):
    """A forward that writes its input in place: every run, eager's and each rung's, starts from
    its own copy of the inputs, so each matches eager: exit 0."""
    code, result = run_check(capsys, project, DoublesItsInput, torch.ones(3))
    assert (code, result["summary"], result["findings"]) == (0, READY, [])


def test_an_input_a_graph_writes_otherwise_than_eager_is_named(capsys, project):
    """A graph that writes an input in place otherwise than eager does: the input is named beside
    the output, exit 1."""
    code, result = run_check(capsys, project, lambda: DoublesItsInput(off=True), torch.ones(3))
    (found,) = [f for f in result["findings"] if f["what"] == "aot_eager differs from eager"]
    assert code == 1
    assert [mismatch["path"] for mismatch in found["mismatches"]] == ["output", "input [0]"]


class Noisy(nn.Module):
    """Adds noise it draws in forward, as a diffusion sampler's step does."""

    def forward(self, x):
        return x + torch.randn_like(x)  # noise drawn here


def test_random_numbers_in_the_graph_are_a_warning_at_their_line(capsys, project):
    """In compile mode random numbers drawn in the graph are a warning at their line (the docs
    say capture refuses them, the wheels that each replay draws anew); every rung starts from
    eager's random number generator's state, so it draws eager's numbers and matches: exit 0."""
    code, result = run_check(capsys, project, Noisy, torch.ones(3))
    (found,) = result["findings"]
    assert (code, found["code"], found["severity"]) == (0, "CAP001", "warning")
    assert found["where"] == f"{__file__}:{line_of('noise drawn here')} (forward)"
    assert result["summary"] == f"{READY}; read the 1 warning(s) above"


def test_a_differing_output_is_one_finding_with_the_hint(capsys, project):
    """The finding for a rung that differs in one leaf far beyond rounding: the leaf and its
    numbers, nothing after them, and the hint to read the ladder, not to loosen TOLERANCES."""
    code, result = run_check(capsys, project, OffUnderCompile, torch.arange(-3.0, 5.0))
    (found,) = [f for f in result["findings"] if f["what"] == "aot_eager differs from eager"]
    rtol, atol = tolerances(torch.float32)["rtol"], tolerances(torch.float32)["atol"]
    assert (code, found["hint"]) == (1, check.FAR_OFF_HINT)
    assert found["reason"] == (
        f"['hidden']: 4 of 8 elements differ beyond the tolerance: max abs difference 0.5 "
        f"(atol {atol:g}), max relative 0.5 (rtol {rtol:g})"
    )


def test_the_table_shows_how_an_output_differs(capsys, project):
    """The report names the differing leaf, its count and its largest differences, not just
    'not close'."""
    project.use(OffUnderCompile, torch.arange(-3.0, 5.0))
    assert project.check.main([]) == 1
    report = capsys.readouterr().out
    atol = tolerances(torch.float32)["atol"]
    assert (
        "aot_eager differs from eager: ['hidden']: 4 of 8 elements differ beyond the tolerance: "
        f"max abs difference 0.5 (atol {atol:g}), max relative 0.5 (rtol "
    ) in report


class RoundsUnderCompile(nn.Module):
    """Any compiled rung is 1e-5 off eager, relatively: rounding, for float32."""

    def forward(self, x):
        return x * (1 + 1e-5) if torch.compiler.is_compiling() else x.clone()


class OffOnReplay(nn.Module):
    """A buffer counts the calls; any compiled rung goes wrong from its second call on, as a
    replayed graph whose first run was right may."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.calls.add_(1)
        off = (self.calls >= 2).to(x.dtype) if torch.compiler.is_compiling() else 0
        return x + off


def test_a_rung_that_goes_wrong_on_its_second_call_differs(capsys, project):
    """Each rung's second call, on new inputs from the state its first left, is compared with
    eager's second call too: a model right on its first call and wrong on its replay is not ready."""
    code, result = run_check(capsys, project, OffOnReplay, torch.ones(3))
    found = {f["what"]: f["reason"] for f in result["findings"]}
    assert code == 1
    assert found["aot_eager differs from eager on its second call"].startswith(
        "output: 3 of 3 elements differ beyond the tolerance: max abs difference 1"
    )
    assert "aot_eager differs from eager" not in found


class JustBeyondUnderCompile(nn.Module):
    """Any compiled rung is 5e-4 off eager, relatively: five times float32's tolerance."""

    def forward(self, x):
        return x * (1 + 5e-4) if torch.compiler.is_compiling() else x.clone()


def test_an_output_just_beyond_the_tolerance_is_offered_tolerances(capsys, project):
    """A float leaf off by a few times its tolerance may be a device's rounding: the hint offers
    TOLERANCES, beside the ladder."""
    code, result = run_check(capsys, project, JustBeyondUnderCompile, torch.linspace(1, 4, 8))
    (found,) = [f for f in result["findings"] if f["what"] == "aot_eager differs from eager"]
    assert (code, found["hint"]) == (1, check.NEAR_HINT)


def test_check_compares_within_the_dtypes_tolerance(capsys, monkeypatch, project):
    """A rounding difference passes float32's tolerance; model.py's TOLERANCES, exact, fails it."""
    project.use(RoundsUnderCompile, torch.linspace(1, 4, 8))
    assert project.check.main([]) == 0
    exact = {torch.float32: {"rtol": 0.0, "atol": 0.0}}
    monkeypatch.setattr(project.model, "TOLERANCES", exact, raising=False)
    assert project.check.main([]) == 1
    assert "aot_eager differs from eager: output: 8 of 8 elements" in capsys.readouterr().out


class CountsSteps(nn.Module):
    """A buffer updated in forward, as a KV cache is: each call sees the calls before it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        self.steps.add_(1)  # in place, as a cache write: the graph must make it
        return x * self.steps


def test_each_rung_starts_from_the_state_eager_started_from(capsys, project):
    """A buffer that forward updates does not leak from the eager reference into the rungs: each
    computes the first step, as eager did, so the model is ready."""
    project.use(CountsSteps, torch.ones(3))
    assert project.check.main([]) == 0, capsys.readouterr().out


class AddsATable(nn.Module):
    """Reads a tensor it holds as a plain attribute, not a buffer: a constant, not state."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.arange(3.0)

    def forward(self, x):
        return x + self.table


def test_a_constant_tensor_attribute_is_not_taken_for_state(capsys, project):
    """A tensor attribute that forward only reads is ready for graph mode: compiling marks it as a
    static address, and check does not take it for state that eager lacked."""
    project.use(AddsATable, torch.ones(3))
    assert project.check.main([]) == 0, capsys.readouterr().out


def drops_state_writes(graph, example_inputs):
    """A backend that loses every in-place write to the graph's inputs, the buffers among them:
    the output of this call is right, the state left for the next one is not."""
    return lambda *inputs: graph(*(x.clone() if torch.is_tensor(x) else x for x in inputs))


register_backend(name="check_test_drops_writes")(drops_state_writes)


def test_a_graph_that_drops_a_state_write_differs_from_eager(capsys, monkeypatch, project):
    """The state after the call is compared as well as the output: a lost buffer update is named
    by the buffer's path, exit 1."""
    monkeypatch.setenv(BACKEND_ENV, "check_test_drops_writes")
    code, result = run_check(capsys, project, CountsSteps, torch.ones(3))
    assert code == 1
    (found,) = [f for f in result["findings"] if f["what"].endswith(" differs from eager")]
    assert found["what"].startswith("check_test_drops_writes")
    assert found["path"] == "state steps"


class CountsTwice(nn.Module):
    """Two buffers updated in forward, as a KV cache's keys and values are."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x):
        self.steps.add_(1)
        self.total.add_(x)
        return x * self.steps


def test_a_backend_forced_for_the_mre_is_the_last_rung(capsys, monkeypatch, project):
    """A backend forced with NPUGRAPH_BACKEND, which the MRE runs, is checked too, as the last
    rung: one that loses the model's buffer writes is not ready, each lost write named, exit 1."""
    monkeypatch.setenv(BACKEND_ENV, "check_test_drops_writes")
    code, result = run_check(capsys, project, CountsTwice, torch.ones(3))
    name = f"check_test_drops_writes (forced by {BACKEND_ENV})"
    assert (code, result["rungs"][-1]["name"], result["rungs"][-1]["status"]) == (1, name, "fail")
    (found,) = [f for f in result["findings"] if f["what"] == f"{name} differs from eager"]
    assert [mismatch["path"] for mismatch in found["mismatches"]] == ["state steps", "state total"]
    assert result["summary"] != READY


@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
@pytest.mark.parametrize("forced", ["eager", "aot_eager"])
def test_a_forced_backend_the_ladder_climbs_is_not_run_again(capsys, monkeypatch, project, forced):
    """A backend forced with NPUGRAPH_BACKEND that is a rung of the ladder already is checked
    there, once: the rungs are those of the unforced ladder."""
    monkeypatch.setenv(BACKEND_ENV, forced)
    code, result = run_check(capsys, project, lambda: nn.Linear(3, 3), torch.ones(2, 3))
    assert code == 0
    assert [rung["name"] for rung in result["rungs"]] == ["eager backend", "aot_eager", "npugraph_ex rungs"]


def test_check_names_the_backend_the_mre_reports(capsys, monkeypatch):
    """The MRE and check's last rung name the same backend, forced by NPUGRAPH_BACKEND."""
    from forward_project import mre
    from forward_project.model import example_inputs
    from forward_project.toolkit.report import report

    monkeypatch.setenv(BACKEND_ENV, "check_test_drops_writes")
    report(mre.infer_one_step, example_inputs)
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("backend ")]
    assert check.main(["--json"]) == 0  # the sample model keeps no state: nothing to lose
    last = json.loads(capsys.readouterr().out)["rungs"][-1]
    assert row.split(maxsplit=1)[1] == last["name"]


def test_a_forced_backend_that_cannot_run_stops_check(capsys, monkeypatch, project):
    """NPUGRAPH_BACKEND naming no backend stops the MRE, and check with it: one finding with the
    value and the fix, no rung, exit 2."""
    monkeypatch.setenv(BACKEND_ENV, "no_such_backend")
    code, result = run_check(capsys, project, lambda: nn.Linear(3, 3), torch.ones(2, 3))
    (found,) = result["findings"]
    assert (code, result["rungs"], found["what"]) == (2, [], "the MRE's backend")
    assert found["reason"].startswith(f"{BACKEND_ENV}='no_such_backend' is not a torch.compile backend")
    assert found["hint"] == f"unset {BACKEND_ENV} or fix its value"
    assert result["summary"] == f"the MRE cannot choose its backend: fix {BACKEND_ENV} first"


def test_a_ready_model_passes_the_mres_rung_and_climbs_no_other(capsys, project):
    """A model with no problem: no finding, the MRE's rung (the stand-in here) matches eager, the
    rest of the ladder is not climbed, the NPU rungs are skipped with the reason, exit 0."""
    code, result = run_check(capsys, project, lambda: nn.Linear(3, 3), torch.ones(2, 3))
    assert (code, result["verdict"], result["summary"]) == (0, 0, READY)
    assert (result["model"], result["findings"]) == ("Linear", [])
    assert result["rungs"] == [
        {"name": "eager backend", "status": "skipped", "detail": check.NOT_CLIMBED},
        {"name": "aot_eager", "status": "ok", "detail": "matches eager"},
        {
            "name": "npugraph_ex rungs",
            "status": "skipped",
            "detail": f"need an NPU: {project.check.npu_status()[1]}",
        },
    ]


class Fails(nn.Module):
    def forward(self, x):
        raise ValueError("bad input")  # check must point at this line


class FailsToDecode(nn.Module):
    def forward(self, tokens, input_pos):
        raise ValueError("bad input")


def test_a_decode_model_that_fails_at_prefill_is_named_as_built(capsys, monkeypatch):
    """A decode model that builds and fails at its prefill is named, and its eager run, not its
    build, is what fails: exit 2."""
    monkeypatch.setattr(decode_model, "build_model", FailsToDecode)
    assert decode_check.main(["--json"]) == 2
    result = json.loads(capsys.readouterr().out)
    (found,) = result["findings"]
    assert (result["model"], found["code"], found["reason"]) == (
        "FailsToDecode",
        check.EAGER_FAILS,
        "ValueError: bad input",
    )


@pytest.mark.parametrize(
    ("sizes", "told"),
    [
        ((4, 2), "CAPTURE_SIZES = (4, 2) must be positive and strictly increasing"),
        (None, "CAPTURE_SIZES must be a tuple of ints, got None"),
    ],
)
def test_decode_settings_that_generate_refuses_are_refused_before_anything_runs(
    capsys, monkeypatch, sizes, told
):
    """CAPTURE_SIZES that generate, bench and the tests refuse: check refuses them too, naming the
    rule, before the model runs: exit 2, never "ready"."""
    monkeypatch.setattr(decode_model, "CAPTURE_SIZES", sizes)
    assert decode_check.main(["--json"]) == 2
    (found,) = json.loads(capsys.readouterr().out)["findings"]
    assert found["code"] == check.SETTINGS
    assert found["reason"].startswith(told)


def test_tolerances_that_break_the_contract_are_refused_in_one_finding(capsys, project):
    """A TOLERANCES entry with a misspelt key: exit 2, one finding quoting the rule, and no
    traceback from the comparison that would have read it."""
    project.use(lambda: nn.Linear(3, 3), torch.ones(2, 3))
    tolerances = {torch.float32: {"rtol": 1e-3, "atl": 1e-4}}
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(project.model, "TOLERANCES", tolerances, raising=False)
        code = project.check.main(["--json"])
    result = json.loads(capsys.readouterr().out)
    (found,) = result["findings"]
    assert (code, result["rungs"], found["what"]) == (2, [], "TOLERANCES")
    assert found["reason"].startswith("TOLERANCES[torch.float32] must be a dict with rtol and/or atol")
    assert result["summary"] == "model.py's settings are wrong: fix them first"


def test_a_model_that_does_not_build_is_named_so(capsys, project):
    """build_model() raising: the report says the model did not build, and where: exit 2."""

    def broken():
        raise ValueError("no such layer")  # check names this line

    code, result = run_check(capsys, project, broken, torch.ones(3))
    assert (code, result["model"], result["summary"]) == (
        2,
        "",
        "the model does not build: fix that first",
    )
    (found,) = result["findings"]
    assert (found["what"], found["reason"]) == ("build fails", "ValueError: no such layer")
    assert found["where"] == f"{__file__}:{line_of('check names this line')} (broken)"


def test_a_model_that_fails_eagerly_is_checked_no_further(capsys, project):
    """A model that cannot run eagerly gets one finding, where it failed, and no rung: exit 2."""
    code, result = run_check(capsys, project, Fails, torch.ones(3))
    assert code == 2
    assert result == {
        "verdict": 2,
        "summary": "the model does not run eagerly: fix that first",
        "model": "Fails",
        "findings": [
            {
                "what": "eager run fails",
                "reason": "ValueError: bad input",
                "where": f"{__file__}:{line_of('check must point at this line')} (forward)",
                "hint": "it fails before graph mode runs: fix model.py at the line named (`where`)",
                "severity": "problem",
                "code": check.EAGER_FAILS,
                "path": "",
                "mismatches": [],
            }
        ],
        "rungs": [],
    }


class PrintsMidway(nn.Module):
    def forward(self, x):
        doubled = x * 2
        print("debugging")  # the graph break is here
        return doubled + 1


class SlicesAtAValue(nn.Module):
    """Attends over a mask sliced at a position taken from a tensor's value, as a decode step
    might slice its causal mask at int(input_pos[0])."""

    def forward(self, mask, input_pos):
        start = int(input_pos[0])
        query, keys = torch.ones(1, 1, 1, 4), torch.ones(1, 1, 4, 4)
        window = mask[None, None, :1, start : start + 4]
        return nn.functional.scaled_dot_product_attention(query, keys, keys, attn_mask=window)  # sliced here


def test_a_slice_at_a_tensors_value_gets_the_hint_to_index_with_the_tensor(capsys, project):
    """A Python number taken from a tensor's value, then used as a slice bound: one problem at
    that line, which says to keep it a tensor and index with it (and one where int() reads it)."""
    code, result = run_check(capsys, project, SlicesAtAValue, torch.ones(2, 8), torch.tensor([0]))
    problems = {f["what"]: f for f in result["findings"] if f["severity"] == "problem"}
    assert (code, problems.keys()) == (1, {"graph break", "a value the host reads in the graph"})
    read, failed = problems["a value the host reads in the graph"], problems["graph break"]
    # One read: the slice only passes on the number int() read.
    assert [finding["code"] for finding in result["findings"]].count("CAP003") == 1
    assert read["where"] == f"{__file__}:{line_of('start = int(input_pos[0])')} (forward)"
    assert failed["where"].startswith(f"{__file__}:{line_of('sliced here')}")
    assert failed["hint"].startswith("a Python number taken from a tensor's value")


def test_a_graph_break_is_named_by_its_first_line(capsys, project):
    """A break inside forward is listed as a graph break at its line, in the words of the error
    the failing rung (and the MRE) raises for it, without the error's name."""
    code, result = run_check(capsys, project, PrintsMidway, torch.ones(2))
    (found,) = result["findings"]
    assert (code, found["what"], found["severity"]) == (1, "graph break", "problem")
    assert found["where"] == f"{__file__}:{line_of('the graph break is here')} (forward)"
    assert found["hint"] == check.hint_for("print")
    assert "\n" not in found["reason"]
    rungs = {rung["name"]: rung for rung in result["rungs"]}
    assert rungs["aot_eager"] == {
        "name": "aot_eager",
        "status": "fail",
        "detail": f"Unsupported: {found['reason']}",
    }


class BranchesOnAValue(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # branches on a value
            x = x * 2
        return x + 1


def test_a_branch_on_a_tensors_value_is_one_problem_in_the_words_the_mre_prints(capsys, project):
    """A Python `if` on a tensor's value is one problem at its line, named as the MRE's error names
    it (explain() words the same break `generic_jump TensorVariable()`), with the torch.where hint."""
    code, result = run_check(capsys, project, BranchesOnAValue, torch.ones(2))
    (found,) = result["findings"]
    assert (code, found["what"], found["reason"]) == (1, "graph break", "Data-dependent branching")
    assert found["where"] == f"{__file__}:{line_of('branches on a value')} (forward)"
    assert "torch.where" in found["hint"]


class BranchesOnANumberOfATensor(nn.Module):
    def forward(self, x):
        n = x[0].item()
        if n > 100:  # branches on a number read from a tensor
            x = x * 2
        return x + 1


class LoopsANumberOfATensor(nn.Module):
    def forward(self, x):
        for _ in range(int(x[0]) % 3):  # loops a number read from a tensor
            x = x * 2
        return x + 1


@pytest.mark.parametrize(
    ("model", "marker", "reason", "hint"),
    [
        (
            BranchesOnANumberOfATensor,
            "branches on a number read",
            "a Python `if` or `while` on a number read from a tensor's value (.item(), int(t))",
            "a Python `if` or `while` on a tensor value",
        ),
        (
            LoopsANumberOfATensor,
            "loops a number read",
            (
                "a Python number read from a tensor's value (.item(), int(t)) decides what the "
                "graph does (a range(), a size, an index)"
            ),
            "a Python number taken from a tensor's value",
        ),
    ],
    ids=["if", "range"],
)
@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
def test_a_number_read_from_a_tensor_that_steers_the_code_is_a_break_in_a_users_words(
    capsys, project, model, marker, reason, hint
):
    """A Python number taken from a tensor that decides an `if` or a range() is a graph break at
    that line, in words a user knows, not Dynamo's (generic_jump SymNodeVariable(), a
    torch._check*() suggestion), with the hint that fits it."""
    code, result = run_check(capsys, project, model, torch.ones(3, dtype=torch.long))
    (found,) = [f for f in result["findings"] if f["what"] == "graph break"]
    assert (code, found["reason"]) == (1, reason)
    assert found["where"] == f"{__file__}:{line_of(marker)} (forward)"
    assert found["hint"].startswith(hint)


class PrintsTwice(nn.Module):
    def forward(self, x):
        x = x * 2
        print("first")  # the first break
        x = x + 1
        print("second")  # the second break
        return x * 3


def test_every_graph_break_is_listed(capsys, project):
    """Two breaks in forward are two findings, each at its own line, in the order Dynamo met them."""
    code, result = run_check(capsys, project, PrintsTwice, torch.ones(2))
    found = [f["where"] for f in result["findings"] if f["what"] == "graph break"]
    assert code == 1
    assert found == [
        f"{__file__}:{line_of('the first break')} (forward)",
        f"{__file__}:{line_of('the second break')} (forward)",
    ]


def test_what_the_model_prints_goes_to_stderr(capsys, project):
    """The model's own prints go to stderr: stdout holds the JSON alone, indented by 2."""
    project.use(PrintsMidway, torch.ones(2))
    project.check.main(["--json"])
    printed = capsys.readouterr()
    assert printed.out == json.dumps(json.loads(printed.out), indent=2) + "\n"
    assert "debugging" in printed.err


class ItemInForward(nn.Module):
    def forward(self, x):
        total = x.sum()  # a method call too, on a line of its own
        return x * total.item()  # .item() is here


def test_item_in_the_graph_is_a_problem_at_its_line(capsys, project):
    """.item() that fullgraph keeps in the graph is a problem at its line, with the fix: the
    stand-in runs it, but it fails aclgraph's capture on an NPU, so the model is not ready."""
    code, result = run_check(capsys, project, ItemInForward, torch.ones(2))
    assert (code, result["summary"]) == (1, "1 problem(s): fix them, then run check again")
    (found,) = result["findings"]
    assert (found["code"], found["severity"]) == ("CAP003", "problem")
    assert found["where"] == f"{__file__}:{line_of('.item() is here')} (forward)"
    assert found["hint"] == check.hint_for(".item()")


class ItemsInForward(nn.Module):
    def forward(self, x):
        low = x.min().item()  # the first .item()
        high = x.max().item()  # the second .item()
        return x * (high - low)


def test_every_item_in_the_graph_is_a_problem(capsys, project):
    """Two .item() calls are two problems, each at its own line, and the summary counts both."""
    code, result = run_check(capsys, project, ItemsInForward, torch.arange(3.0))
    found = [f["where"] for f in result["findings"] if f["code"] == "CAP003"]
    assert (code, result["summary"]) == (1, "2 problem(s): fix them, then run check again")
    assert found == [
        f"{__file__}:{line_of('the first .item()')} (forward)",
        f"{__file__}:{line_of('the second .item()')} (forward)",
    ]


class ScaledAndShifted(nn.Module):
    def forward(self, x, scale: float, shift: int):
        return x * scale + shift


def test_every_non_tensor_input_is_a_warning(capsys, project):
    """Two constant inputs are two warnings, each naming its path and value."""
    code, result = run_check(capsys, project, ScaledAndShifted, torch.ones(3), 0.5, 2)
    found = [f for f in result["findings"] if f["what"] == "non-tensor input"]
    assert code == 0
    assert [(f["path"], f["hint"]) for f in found] == [
        ("[1]", "pass a 0-d tensor, torch.tensor(0.5): an input, so new values reuse the graph"),
        ("[2]", "pass a 0-d tensor, torch.tensor(2): an input, so new values reuse the graph"),
    ]


def test_every_rung_that_recompiles_is_named(capsys, project):
    """A model that recompiles on its second call does so on every rung: each is a finding."""
    code, result = run_check(capsys, project, CountsOutside, torch.ones(3))
    found = [f["what"] for f in result["findings"] if f["what"].endswith(" recompiled")]
    assert (code, found) == (1, ["eager backend recompiled", "aot_eager recompiled"])


RECOMPILE_HINT = (
    "keep forward() free of values that change between calls: a number read from a tensor, a "
    "Python attribute or global that a call changes"
)


@pytest.mark.parametrize(
    ("project", "hint"),
    [
        ("forward_project", RECOMPILE_HINT),
        ("cache_project", f"{RECOMPILE_HINT}; a cache_compile recompile also deletes its cache"),
    ],
    indirect=["project"],
)
def test_a_recompile_is_explained(capsys, project, hint):
    """A rung that compiles again on the second call says why and what to do (in cache_compile
    mode, that the recompile deletes its cache); its row names each of its findings."""
    code, result = run_check(capsys, project, CountsOutside, torch.ones(3))
    (found,) = [f for f in result["findings"] if f["what"] == "aot_eager recompiled"]
    where = f"{__file__}:{line_of('the value read here')} (forward)"
    assert (code, found["severity"], found["where"]) == (1, "problem", where)
    # Dynamo's own guard, on the value the first call compiled for.
    assert re.fullmatch(
        r"a second call on new inputs of the same shapes compiled again: Dynamo's guard "
        r"G\['COUNTS'\]\['steps'\] == \d+ failed",
        found["reason"],
    )
    assert found["hint"] == hint
    (rung,) = [rung for rung in result["rungs"] if rung["name"] == "aot_eager"]
    # CountsOutside also differs: its count is no state a rung can put back.
    assert rung == {
        "name": "aot_eager",
        "status": "fail",
        "detail": "aot_eager differs from eager; aot_eager recompiled",
    }


class OffInThree(nn.Module):
    """Every compiled rung adds 1 to each of three outputs."""

    def forward(self, x):
        off = 1 if torch.compiler.is_compiling() else 0
        return {"a": x + off, "b": x + off, "c": x + off}


def test_every_differing_leaf_is_named(capsys, project):
    """A rung that differs in several leaves names the first with its numbers and the others
    after it; the report adds a line for each of the others."""
    code, result = run_check(capsys, project, OffInThree, torch.ones(3))
    (found,) = [f for f in result["findings"] if f["what"] == "aot_eager differs from eager"]
    assert code == 1
    assert found["reason"] == (
        "['a']: 3 of 3 elements differ beyond the tolerance: max abs difference 1 (atol 1e-05), "
        "max relative 1 (rtol 0.0001); and ['b'], ['c']"
    )
    assert [mismatch["path"] for mismatch in found["mismatches"]] == ["['a']", "['b']", "['c']"]


class ScaledAndCounted(nn.Module):
    """A constant input, two non-tensor outputs, and any compiled rung off by 1."""

    def forward(self, x, scale: float):
        off = 1 if torch.compiler.is_compiling() else 0
        return x * scale + off, 3, "done"


def test_problems_and_warnings_are_counted_apart(capsys, project):
    """The summary counts the problems (a rung that differs) and, after them, the warnings
    (a non-tensor output, a constant input), each finding in the order check met it: exit 1."""
    code, result = run_check(capsys, project, ScaledAndCounted, torch.ones(3), 0.5)
    assert code == 1
    assert result["summary"] == "2 problem(s): fix them, then run check again; read the 2 warning(s) above"
    found = [(finding["what"], finding["severity"]) for finding in result["findings"]]
    assert found == [
        ("non-tensor output", "warning"),
        ("non-tensor input", "warning"),
        ("eager backend differs from eager", "problem"),
        ("aot_eager differs from eager", "problem"),
    ]
    assert result["findings"][0] == {
        "what": "non-tensor output",
        "reason": "the output holds [1]: int, [2]: str",
        "where": "",
        "hint": check.hint_for("non-tensor"),
        "severity": "warning",
        "code": check.NON_TENSOR_OUTPUT,
        "path": "",
        "mismatches": [],
    }


class DoublesUnderCompile(nn.Module):
    def forward(self, x):
        return x * 2 if torch.compiler.is_compiling() else x.clone()


def test_the_model_and_inputs_come_from_seed_0(capsys, monkeypatch, project):
    """check builds the model and example inputs after torch.manual_seed(0), as the MRE does:
    the difference it reports is that of the MRE's random inputs."""
    torch.manual_seed(0)
    expected = float(torch.randn(4).abs().max())
    monkeypatch.setattr(project.model, "build_model", DoublesUnderCompile)
    monkeypatch.setattr(project.model, "example_inputs", lambda: (torch.randn(4),))
    project.check.main(["--json"])
    result = json.loads(capsys.readouterr().out)
    (found,) = [f for f in result["findings"] if f["what"] == "aot_eager differs from eager"]
    assert found["mismatches"][0]["max_abs"] == pytest.approx(expected)


COMPILES: list[dict] = []
"""What each compile with the `check_test_recorder` backend was given."""


@register_backend(name="check_test_recorder")
def recorder(graph, example_inputs, **options):
    """A backend that records its options, and whether the shapes it is given are symbolic."""
    symbolic = any(isinstance(each, torch.SymInt) for each in example_inputs)
    COMPILES.append({**options, "symbolic": symbolic})
    return graph.forward


def test_a_rung_compiles_one_static_graph_with_its_options(capsys, monkeypatch, project):
    """Each rung compiles as the MRE does: its backend with its options, static shapes, one graph
    for both calls."""
    COMPILES.clear()
    rung = ("recorded", "check_test_recorder", {"force_eager": True})
    monkeypatch.setattr(project.check, "rungs_here", lambda npu_ok: [rung])
    project.use(lambda: nn.Linear(3, 3), torch.ones(2, 3))
    code = project.check.main(["--json", "--ladder"])
    result = json.loads(capsys.readouterr().out)
    assert COMPILES == [{"options": {"force_eager": True}, "symbolic": False}]
    assert (code, result["rungs"][0]) == (
        0,
        {"name": "recorded", "status": "ok", "detail": "matches eager"},
    )


def test_the_ladder_runs_the_npu_rungs_only_on_an_npu():
    """The fault-isolation ladder in the guide's order: the eager and aot_eager backends, then on
    an NPU npugraph_ex with force_eager, with force_recapture, then plain."""
    here = [("eager backend", "eager", None), ("aot_eager", "aot_eager", None)]
    assert check.rungs_here(False) == here
    assert check.rungs_here(True) == [
        *here,
        ("npugraph_ex force_eager", "npugraph_ex", {**NPUGRAPH_EX_OPTIONS, "force_eager": True}),
        (
            "npugraph_ex force_recapture",
            "npugraph_ex",
            {**NPUGRAPH_EX_OPTIONS, "force_recapture": True},
        ),
        ("npugraph_ex", "npugraph_ex", NPUGRAPH_EX_OPTIONS),
    ]


# A forward project's: a decode project's next inputs come from next_step() (the fixture's stand-in
# here), a tensor-parallel project's device from its ranks (parallel.start()).
@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
def test_on_an_npu_the_model_and_inputs_go_to_the_npu_and_climb_its_rungs(capsys, monkeypatch, project):
    """Where npugraph_ex can run, check moves the model, the inputs and the next step's inputs to
    the npu, and climbs the whole ladder (recorded here: off an NPU nothing can move there)."""
    moved, asked = [], []

    class Recorded(nn.Linear):
        def to(self, device):
            moved.append(("model", device))
            return self

    def to_device(value, device):
        moved.append(("inputs", device))
        return value

    cpu_rungs = project.check.rungs_here(False)
    monkeypatch.setattr(project.check, "npu_status", lambda: (True, ""))
    monkeypatch.setattr(project.check, "to_device", to_device)
    monkeypatch.setattr(project.check, "rungs_here", lambda npu_ok: asked.append(npu_ok) or cpu_rungs)
    code, result = run_check(capsys, project, lambda: Recorded(3, 3), torch.ones(2, 3))
    assert moved == [("model", "npu"), ("inputs", "npu"), ("inputs", "npu")]
    assert asked == [True]
    assert code == 0, result


def test_the_report_lays_out_findings_then_rungs_then_the_summary(snapshot):
    """The report: the model, each finding (its code, its reason, each of the other leaves,
    where, the hint), each rung, a blank line, the summary: the reviewed layout."""
    differs = check.Finding(
        "aot_eager differs from eager",
        "['a']: far off; and ['b'], ['c']",
        hint="set TOLERANCES",
        mismatches=[
            Mismatch("['a']", "far off"),
            Mismatch("['b']", "off too"),
            Mismatch("['c']", "off as well"),
        ],
        code=check.DIFFERS,
    )
    broken = check.Finding("graph break", "print", "model.py:3 (forward)", "remove it", code="CHK001")
    quiet = check.Finding("non-tensor output", "an int", severity="warning", code="CHK007")
    rungs = [check.Rung("eager", "ok", "matches eager"), check.Rung("aot_eager", "fail")]
    result = check.Result(1, "2 problem(s)", "Tiny", [differs, broken, quiet], rungs)
    assert check.render(result) == snapshot


def test_the_report_says_when_the_model_did_not_build():
    """A model.py that cannot build a model is reported as such."""
    assert check.render(check.Result(2, "fix it")).splitlines()[0] == "model       (did not build)"


@pytest.mark.parametrize(
    ("package", "options"),
    [("forward_project", []), ("parallel_project", ["--nproc-per-node"])],
)
def test_help_names_the_command_and_what_it_does(help_of, package, options):
    """--help shows the command it was given, the first line of check's description, --json,
    --ladder (and with tensor parallelism --nproc-per-node)."""
    tool = importlib.import_module(f"{package}.toolkit.check")
    shown = help_of(tool.main, f"python -m {package} check")
    assert shown.startswith(f"usage: python -m {package} check ")
    assert tool.__doc__.splitlines()[0] in shown
    for option in ["--json", "--ladder", *options]:
        assert f"[{option}" in shown


def test_a_reason_is_named_by_its_first_line():
    """An error is named by its type and first non-blank line, or its type alone."""
    assert check.first_line(ValueError("\n\nbad axis: X\nmore")) == "ValueError: bad axis: X"
    assert check.first_line(RuntimeError()) == "RuntimeError"


def test_an_unknown_error_gets_the_fallback_hint():
    """An error no hint knows points at the reason and the guide."""
    assert check.hint_for("something new") == "see the reason; README, section 'Fault isolation'"


TORCH_FILE = Path(torch.__file__).parent / "_dynamo" / "convert_frame.py"


def test_where_is_the_innermost_frame_of_your_code_that_dynamo_names():
    """Of the frames Dynamo's message names, the innermost one outside torch and this toolkit."""
    message = "\n".join(
        f'  File "{file}", line {line}, in {name}'
        for file, line, name in [
            (TORCH_FILE, 1, "compile"),
            ("/project/model.py", 10, "forward"),
            ("/project/model.py", 20, "block"),
            ("/project/layers.py", 30, "attend"),
            (Path(check.__file__), 40, "run_rung"),
            (TORCH_FILE, 2, "trace"),
        ]
    )
    assert check.error_frame(RuntimeError(message)) == "/project/layers.py:30 (attend)"


def raises():
    raise ValueError("no frame named")  # where is this line


def test_where_is_else_the_innermost_frame_of_your_code_it_went_through():
    """An error whose message names no frame is placed by its traceback, your innermost frame."""
    try:
        raises()
    except ValueError as error:
        where = check.error_frame(error)
    assert where == f"{__file__}:{line_of('where is this line')} (raises)"


def test_an_error_only_in_torch_is_placed_nowhere():
    """An error that went through no frame of yours has no place to show."""
    frames = [traceback.FrameSummary(str(TORCH_FILE), 1, "compile")]
    assert check.user_frame(frames) == ""


# --- with tensor parallelism: parallel_plan() is rehearsed, then shards the model


@pytest.mark.parametrize("project", PARALLEL, indirect=True)
def test_the_model_is_sharded_as_the_mre_shards_it(capsys, monkeypatch, project):
    """check shards build_model() by parallel_plan(): a key that names nothing stops it, exit 2."""
    plan = {"no_such_layer": ColwiseParallel()}
    monkeypatch.setattr(project.model, "parallel_plan", lambda world_size: plan)
    assert project.check.main([]) == 2
    assert "'no_such_layer' names no submodule" in capsys.readouterr().out


@pytest.mark.parametrize("project", PARALLEL, indirect=True)
def test_a_plan_that_cannot_run_is_refused_first(capsys, monkeypatch, project):
    """check runs the plan for 2 ranks in this process before anything compiles: one that fails
    (Megatron's styles swapped: every split divides, nothing can run) is refused in a few lines
    naming its entry and shapes, exit 2."""
    project.use(lambda: nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4)), torch.ones(3, 4))
    plan = {"0": RowwiseParallel(), "1": ColwiseParallel()}
    monkeypatch.setattr(project.model, "parallel_plan", lambda world_size: plan)
    # A decode project's rehearsal runs the small model once, as the step, with no prefill.
    parallel = importlib.import_module(f"{project.model.__package__}.toolkit.parallel")
    monkeypatch.setattr(parallel, "first_step", lambda model, *inputs: inputs)
    assert project.check.main(["--nproc-per-node", "2"]) == 2
    report = capsys.readouterr().out
    assert "the plan cannot run on 2 ranks" in report
    assert "plan entry '0' (RowwiseParallel) on 0: Linear, weight (8, 4)" in report
    assert len(report.splitlines()) <= 10


@pytest.mark.parametrize("project", ["parallel_project"], indirect=True)
def test_a_plan_that_raises_is_the_finding_at_its_line(monkeypatch, project):
    """parallel_plan() raising for the ranks asked for: the finding names the call, the error's
    first line and the line that raised, as a model's own error is named."""

    def refuses(world_size):
        raise ValueError(f"8 heads cannot be split across {world_size} ranks\nmore")  # the plan's line

    monkeypatch.setattr(project.model, "parallel_plan", refuses)
    finding = project.check.plan_problem(3)
    line = next(
        n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1) if "the plan's line" in text
    )
    assert (finding.what, finding.reason) == (
        "parallel_plan(3) fails",
        "ValueError: 8 heads cannot be split across 3 ranks",
    )
    assert finding.where == f"{__file__}:{line} (refuses)"


@pytest.mark.parametrize("project", ["parallel_project"], indirect=True)
def test_the_plan_is_asked_for_the_ranks_after_the_mre_s_seed(monkeypatch, project):
    """parallel_plan(N) for the N ranks asked for, after seed 0, as the MRE calls it."""
    calls = []
    monkeypatch.setattr(
        project.model,
        "parallel_plan",
        lambda world_size: calls.append((world_size, torch.initial_seed())) or {},
    )
    assert project.check.plan_problem(3) is None
    assert calls == [(3, 0)]


@pytest.mark.parametrize("project", ["parallel_project"], indirect=True)
def test_a_plan_that_cannot_run_is_what_and_where_apart(monkeypatch, project, snapshot):
    """The plan's refusal splits at its first ": ", so --json's `what` is the verdict and its
    `reason` the entry, the layer and the shapes, then the error; its fix is the hint."""
    project.use(lambda: nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4)), torch.ones(3, 4))
    monkeypatch.setattr(
        project.model, "parallel_plan", lambda world_size: {"0": RowwiseParallel(), "1": ColwiseParallel()}
    )
    finding = project.check.plan_problem(2)
    assert finding.what == "the plan cannot run on 2 ranks"
    assert finding.reason.startswith("plan entry '0' (RowwiseParallel) on 0: Linear, weight (8, 4)")
    # The error's other lines follow, the fix apart as the hint.
    assert asdict(finding) == snapshot


def test_no_failed_guard_is_no_guard_and_no_place():
    """With no guard failed since Dynamo was reset: no guards, and no place in the user's code."""
    torch._dynamo.reset()
    assert check.failed_guards() == ([], "")


@pytest.mark.parametrize(
    ("guards", "why"),
    [
        (["G['A'] == 1", "G['B'] == 2"], "Dynamo's guard G['A'] == 1; G['B'] == 2 failed"),
        ([], "Dynamo guards on a value that changes (a Python number from a tensor, a changing attribute)"),
    ],
)
@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
def test_a_recompile_names_each_failed_guard_or_else_the_likely_cause(
    capsys, monkeypatch, project, guards, why
):
    """A recompile's reason names every guard Dynamo says failed; where it names none, what
    usually fails one."""
    monkeypatch.setattr(project.check, "failed_guards", lambda: (guards, ""))
    _, result = run_check(capsys, project, CountsOutside, torch.ones(3))
    (found,) = [f for f in result["findings"] if f["what"] == "aot_eager recompiled"]
    assert found["reason"] == f"a second call on new inputs of the same shapes compiled again: {why}"


@pytest.mark.parametrize("project", ["parallel_project"], indirect=True)
def test_the_model_is_built_on_the_ranks_device_and_planned_for_their_number(monkeypatch, project):
    """With ranks, build_model() goes to their device before it is sharded, by parallel_plan() for
    as many ranks as there are (the meta device stands in for a rank's NPU)."""
    seen = []
    monkeypatch.setattr(project.model, "parallel_plan", lambda world_size: seen.append(world_size) or {})
    project.use(lambda: nn.Linear(3, 3), torch.ones(3))

    def shard(model, plan):
        seen.append(next(model.parameters()).device)
        raise RuntimeError("seen: no need to run it")

    project.check.check(types.SimpleNamespace(device=torch.device("meta"), size=3, shard=shard))
    assert seen == [3, torch.device("meta")]


def raises_a_hinted_error():
    raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types")


@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
def test_a_build_that_fails_gets_the_hint_for_its_error(capsys, project):
    """build_model() raising: the finding carries the hint its error matches, as an eager failure's
    does."""
    _, result = run_check(capsys, project, raises_a_hinted_error, torch.ones(3))
    (found,) = result["findings"]
    assert found["what"] == "build fails"
    assert "token ids must be integers" in found["hint"]


@pytest.mark.parametrize("project", ["decode_project"], indirect=True)
def test_a_number_the_prefill_advances_is_named_as_set_in_the_first_call(capsys, monkeypatch, project):
    """In a decode project the prefill is the first call: a number it advances is named as
    changed then, not in the decode step."""
    decode = importlib.import_module("decode_project.toolkit.decode")
    monkeypatch.setattr(decode, "first_step", lambda model, *inputs: (model(*inputs), inputs)[1])
    _, result = run_check(capsys, project, CountsCalls, torch.ones(3))
    (found,) = result["findings"]
    assert found["reason"] == f"calls went from 0 to 1 {WHEN[False]}"


# --- main() with tensor parallelism: the plan first, then the ranks on the device npu_status picks


@pytest.mark.parametrize("as_json", [False, True], ids=["report", "json"])
@pytest.mark.parametrize("project", ["parallel_project"], indirect=True)
def test_a_plan_that_raises_stops_check_before_the_ranks_as_its_snapshot(
    capsys, monkeypatch, project, as_json, snapshot
):
    """A plan that cannot be made for the ranks asked for: nothing else is checked, exit 2, and the
    report (or --json) says so in words a reviewer has read."""

    def refuses(world_size):
        raise ValueError(f"8 heads cannot be split across {world_size} ranks")

    monkeypatch.setattr(project.model, "parallel_plan", refuses)
    monkeypatch.setattr(project.check, "error_frame", lambda error: "model.py:1 (parallel_plan)")
    monkeypatch.delenv("RANK", raising=False)
    assert project.check.main(["--nproc-per-node", "3", *(["--json"] if as_json else [])]) == 2
    assert capsys.readouterr().out == snapshot


@pytest.mark.parametrize("project", ["parallel_project"], indirect=True)
def test_a_plan_problem_is_printed_by_rank_0_alone(capsys, monkeypatch, project):
    """Under torchrun every rank finds the plan's problem; only RANK 0 prints it, all exit 2."""
    monkeypatch.setattr(project.model, "parallel_plan", lambda world_size: 1 / 0)
    monkeypatch.setenv("RANK", "1")
    assert project.check.main([]) == 2
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("project", ["parallel_project"], indirect=True)
def test_the_plan_is_rehearsed_for_torchrun_s_world_size(capsys, monkeypatch, project):
    """Without --nproc-per-node, check rehearses the plan for $WORLD_SIZE ranks, as torchrun sets
    it; what the model prints meanwhile goes to stderr, out of the report."""
    asked = []

    def plan_problem(size):
        asked.append(size)
        print("the model prints")
        return "a problem"

    monkeypatch.setattr(project.check, "plan_problem", plan_problem)
    monkeypatch.setattr(project.check, "render", lambda result: "the report")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.delenv("RANK", raising=False)
    project.check.main([])
    assert asked == [4]
    assert capsys.readouterr() == ("the report\n", "the model prints\n")


@pytest.mark.parametrize("npu", [False, True], ids=["cpu", "npu"])
@pytest.mark.parametrize("first", [True, False], ids=["first rank", "other rank"])
@pytest.mark.parametrize("project", ["parallel_project"], indirect=True)
def test_check_runs_on_the_ranks_and_the_first_prints(capsys, monkeypatch, project, npu, first):
    """With a plan that can run, check joins the ranks on the NPU if there is one, else the CPU,
    checks this rank's share, and the first rank alone prints; all exit by the verdict."""
    joined, checked = [], []
    ranks = types.SimpleNamespace(is_first=first)

    @contextlib.contextmanager
    def tensor_parallel(device_type):
        joined.append(device_type)
        yield ranks

    def check_(on, ladder):
        checked.append(on)
        print("the model prints")  # to stderr, not into the report
        return project.check.Result(verdict=1, summary="checked")

    parallel = importlib.import_module("parallel_project.toolkit.parallel")
    monkeypatch.setattr(parallel, "tensor_parallel", tensor_parallel)
    monkeypatch.setattr(project.check, "plan_problem", lambda size: None)
    monkeypatch.setattr(project.check, "npu_status", lambda: (npu, ""))
    monkeypatch.setattr(project.check, "check", check_)
    assert project.check.main(["--json"]) == 1
    assert (joined, checked) == (["npu" if npu else "cpu"], [ranks])
    printed, told = capsys.readouterr()
    assert told == "the model prints\n"
    assert printed == (
        json.dumps(asdict(project.check.Result(verdict=1, summary="checked")), indent=2) + "\n"
        if first
        else ""
    )


def test_a_tensor_parallel_help_reads_as_its_snapshot(help_of, snapshot):
    """--help of a tensor-parallel project's check, with --nproc-per-node, is the reviewed text."""
    parallel_check = importlib.import_module("parallel_project.toolkit.check")
    assert help_of(parallel_check.main, "python -m parallel_project check") == snapshot


# --- The custom operator's fake function, checked on the model's own calls: the stand-in traces
# with it but runs the kernel, so no rung can tell a wrong one.


@torch.library.custom_op("check_tests::doubled", mutates_args=())
def doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@doubled.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("check_tests::doubled_short_fake", mutates_args=())
def doubled_short_fake(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@doubled_short_fake.register_fake
def _(x):
    return x.new_empty(x.shape[:-1])  # a dimension short of the kernel's output


@torch.library.custom_op("check_tests::doubled_without_fake", mutates_args=())
def doubled_without_fake(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class CallsDoubled(nn.Module):
    def forward(self, x):
        return doubled(x) + 1


class CallsShortFake(nn.Module):
    def forward(self, x):
        return doubled_short_fake(x) + 1  # calls the op with a short fake function


@pytest.mark.parametrize("project", ["forward_project", "decode_project"], indirect=True)
def test_a_fake_function_that_disagrees_with_its_kernel_is_a_problem(capsys, project, monkeypatch):
    """The project's operator with a fake function a dimension short: a problem naming the
    operator, the two shapes and the fix, exit 1, though every rung matches eager."""
    monkeypatch.setattr(project.check.project, "OP", "check_tests::doubled_short_fake")
    code, result = run_check(capsys, project, CallsShortFake, torch.ones(2, 3))
    assert code == 1
    (found,) = [f for f in result["findings"] if f["what"].startswith("check_tests::")]
    assert found["what"] == "check_tests::doubled_short_fake's fake function"
    assert "Shapes torch.Size([2, 3]) and torch.Size([2]) are not equal!" in found["reason"]
    # opcheck's own code raises it, not a line of yours: the finding stays at the op's call.
    assert found["where"] == f"{__file__}:{line_of('with a short fake function')} (forward)"
    assert found["hint"].startswith("make the fake function (custom_op.py) return what the kernel")
    assert {rung["status"] for rung in result["rungs"]} <= {"ok", "skipped"}


class CallsWithoutFake(nn.Module):
    def forward(self, x):
        return doubled_without_fake(x) + 1  # calls the op without a fake function


@pytest.mark.parametrize("project", ["forward_project", "decode_project"], indirect=True)
def test_an_operator_without_a_fake_function_is_one_problem_at_its_call(capsys, project, monkeypatch):
    """The project's operator with no fake function: one problem, naming the operator and the line
    that calls it, with the fix; the graph break each rung meets there is not listed again."""
    monkeypatch.setattr(project.check.project, "OP", "check_tests::doubled_without_fake")
    code, result = run_check(capsys, project, CallsWithoutFake, torch.ones(2, 3))
    (found,) = result["findings"]
    assert (code, found["what"]) == (1, "check_tests::doubled_without_fake's fake function")
    assert found["reason"] == "there is none, so graph mode cannot trace the op"
    assert found["where"] == f"{__file__}:{line_of('calls the op without a fake')} (forward)"
    assert found["hint"] == "register one in custom_op.py; README, section 'The custom operator'"
    assert {rung["status"] for rung in result["rungs"]} == {"fail", "skipped"}


# As op-plugin registers an op: a kernel for one device, a Meta function by Library("IMPL").
RAISING_META = torch.library.Library("check_tests", "FRAGMENT")
RAISING_META.define("doubled_raising_meta(Tensor x) -> Tensor")
RAISING_META.impl("doubled_raising_meta", lambda x: x * 2, "CPU")


@torch.library.impl(RAISING_META, "doubled_raising_meta", "Meta")
def _(x):
    raise NameError("name 'xx' is not defined")  # the Meta function raises here


@torch.library.custom_op("check_tests::doubled_in_place_undeclared", mutates_args=())
def doubled_in_place_undeclared(x: torch.Tensor) -> torch.Tensor:
    return x.mul_(2).clone()  # writes x, which mutates_args does not name


@doubled_in_place_undeclared.register_fake
def _(x):
    return torch.empty_like(x)


class CallsRaisingMeta(nn.Module):
    def forward(self, x):
        return torch.ops.check_tests.doubled_raising_meta(x) + 1


class CallsUndeclaredWrite(nn.Module):
    def forward(self, x):
        return doubled_in_place_undeclared(x) + 1


@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
def test_a_meta_function_that_raises_is_one_problem_at_the_line_that_raised(capsys, project, monkeypatch):
    """A Meta function that raises is a problem at its own line, not at the op's call, and is
    said once: fake tensors' log of it, with its traceback, is not written."""
    logged = []
    handler = logging.Handler()
    handler.emit = logged.append
    fake_tensor_log = logging.getLogger("torch._subclasses.fake_tensor")
    monkeypatch.setattr(fake_tensor_log, "handlers", [*fake_tensor_log.handlers, handler])
    monkeypatch.setattr(project.check.project, "OP", "check_tests::doubled_raising_meta")
    monkeypatch.setattr(project.check.project, "OP_PLUGIN", True)
    code, result = run_check(capsys, project, CallsRaisingMeta, torch.ones(2, 3))
    (found,) = [f for f in result["findings"] if f["what"].startswith("check_")]
    assert (code, found["what"]) == (1, "check_tests::doubled_raising_meta's Meta function")
    assert "name 'xx' is not defined" in found["reason"]
    assert found["where"] == f"{__file__}:{line_of('the Meta function raises here')} (_)"
    assert found["hint"].startswith("make the Meta function (meta_registrations.py) return")
    assert logged == []


@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
def test_a_kernel_that_writes_an_input_it_does_not_declare_is_a_schema_problem(capsys, project, monkeypatch):
    """A kernel that writes an input the schema does not mark is a problem of the schema, with
    the fix for the schema, not for the fake function."""
    monkeypatch.setattr(project.check.project, "OP", "check_tests::doubled_in_place_undeclared")
    code, result = run_check(capsys, project, CallsUndeclaredWrite, torch.ones(2, 3))
    (found,) = [f for f in result["findings"] if f["what"].startswith("check_tests::")]
    assert (code, found["what"]) == (1, "check_tests::doubled_in_place_undeclared's schema")
    assert "x is not defined as mutable but was mutated" in found["reason"]
    assert found["hint"] == (
        "name each input the kernel writes in mutates_args (custom_op.py), or make the kernel "
        "write a new tensor; README, section 'The custom operator'"
    )


def test_a_fake_function_that_agrees_with_its_kernel_passes(capsys, monkeypatch):
    """The project's operator with a right fake function: no finding about it, ready; opcheck
    ran on that operator alone, not on each of the model's aten ops (minutes in a real model)."""
    tool = importlib.import_module("forward_project.toolkit.check")
    monkeypatch.setattr(tool.project, "OP", "check_tests::doubled")
    model = importlib.import_module("forward_project.model")
    monkeypatch.setattr(model, "build_model", CallsDoubled)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.ones(2, 3),))
    checked, opcheck = [], torch.library.opcheck
    monkeypatch.setattr(
        torch.library,
        "opcheck",
        lambda op, *rest, **more: checked.append(str(op)) or opcheck(op, *rest, **more),
    )
    code = tool.main(["--json"])
    result = json.loads(capsys.readouterr().out)
    assert (code, result["findings"]) == (0, [])
    assert checked == ["check_tests.doubled.default"]


def test_a_prompt_that_fills_the_cache_is_a_settings_problem(capsys, monkeypatch):
    """MAX_SEQ_LEN no longer than example_inputs()'s prompt: one finding saying that the decode
    step after it has no position, and the fix, as bench says it; exit 2, no rung."""
    (prompt,) = decode_model.example_inputs()
    monkeypatch.setattr(decode_model, "MAX_SEQ_LEN", prompt.shape[1])
    code = decode_check.main(["--json"])
    result = json.loads(capsys.readouterr().out)
    assert (code, result["summary"], result["rungs"]) == (
        2,
        "model.py's settings are wrong: fix them first",
        [],
    )
    (found,) = result["findings"]
    assert (found["what"], found["hint"]) == ("decode settings", "README, section 'Generation'")
    assert found["reason"] == (
        f"example_inputs()'s prompt has {prompt.shape[1]} tokens: the decode step after it writes "
        f"position {prompt.shape[1]}, beyond MAX_SEQ_LEN = {prompt.shape[1]}; shorten the prompt or "
        "raise MAX_SEQ_LEN in model.py"
    )


def test_a_ready_model_is_compiled_once(capsys, project):
    """One compile per verdict: a model with no problem is traced and compiled once, by the
    MRE's backend; no other rung and no list of graph breaks runs."""
    before = counters["stats"]["unique_graphs"]
    code, _ = run_check(capsys, project, lambda: nn.Linear(3, 3), torch.ones(2, 3))
    assert (code, counters["stats"]["unique_graphs"] - before) == (0, 1)


def test_a_model_that_differs_climbs_the_ladder_to_the_stage_at_fault(capsys, project):
    """When the MRE's rung differs from eager, the rest of the ladder runs to find the first
    stage at fault: here Dynamo's, whose eager backend differs already."""
    code, result = run_check(capsys, project, OffUnderCompile, torch.ones(3))
    rungs = {rung["name"]: rung["status"] for rung in result["rungs"]}
    assert (code, rungs["eager backend"], rungs["aot_eager"]) == (1, "fail", "fail")


def test_the_ladder_option_climbs_every_rung_of_a_ready_model(capsys, project):
    """check --ladder climbs every rung here, for a support case, though the MRE's matched."""
    project.use(lambda: nn.Linear(3, 3), torch.ones(2, 3))
    assert project.check.main(["--json", "--ladder"]) == 0
    result = json.loads(capsys.readouterr().out)
    statuses = [rung["status"] for rung in result["rungs"]]
    assert statuses == ["ok", "ok", "skipped"]  # the npugraph_ex rungs need an NPU


class OnTheNpu(nn.Linear):
    """A Linear that stays where it is when moved to the npu (off an NPU nothing can go there)."""

    def to(self, device):
        return self


class CopiesToTheHost(OnTheNpu):
    def forward(self, x):
        return super().forward(x).cpu()  # copied to the host here


def on_a_simulated_npu(monkeypatch, project: Project) -> None:
    """check as on an NPU: npugraph_ex is the MRE's backend, the inputs stay where they are."""
    monkeypatch.setattr(project.check, "npu_status", lambda: (True, "a test"))
    monkeypatch.setattr(project.check, "to_device", lambda value, device: value)
    npugraph_ex = Backend("npugraph_ex", "npu", "Ascend NPU ready: a test")
    monkeypatch.setattr(project.check, "select_backend", lambda: npugraph_ex)


@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
def test_on_an_npu_a_ready_model_is_captured_once(capsys, monkeypatch, project, npugraph_ex_compiles):
    """On an NPU a model with no problem is compiled by npugraph_ex once, with the MRE's
    options: no force_eager, no force_recapture rung."""
    on_a_simulated_npu(monkeypatch, project)
    code, result = run_check(capsys, project, lambda: OnTheNpu(3, 3), torch.ones(2, 3))
    assert (code, npugraph_ex_compiles) == (0, [NPUGRAPH_EX_OPTIONS])
    assert result["summary"].startswith(check.READY)


@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
def test_on_an_npu_what_capture_refuses_is_named_before_any_capture(
    capsys, monkeypatch, project, npugraph_ex_compiles
):
    """On an NPU the capture check reads the graph before npugraph_ex captures it: the user
    reads the cause at the line, not an error code; only force_eager, which captures nothing,
    compiles."""
    on_a_simulated_npu(monkeypatch, project)
    code, result = run_check(capsys, project, lambda: CopiesToTheHost(3, 3), torch.ones(2, 3))
    (found,) = [finding for finding in result["findings"] if finding["code"].startswith("CAP")]
    assert (code, found["code"]) == (1, "CAP002")
    assert found["where"] == f"{__file__}:{line_of('copied to the host here')} (forward)"
    assert [options.get("force_eager") for options in npugraph_ex_compiles] == [True]
    rungs = {rung["name"]: rung["status"] for rung in result["rungs"]}
    assert (rungs["npugraph_ex force_recapture"], rungs["npugraph_ex"]) == ("fail", "fail")


@pytest.mark.parametrize("project", ["cache_project"], indirect=True)
def test_under_cache_compile_random_numbers_are_a_problem(capsys, project):
    """cache_compile refuses graphs that draw random numbers: a problem at the line, exit 1."""
    code, result = run_check(capsys, project, Noisy, torch.ones(3))
    (found,) = result["findings"]
    assert (code, found["code"], found["severity"]) == (1, "CAP001", "problem")


@functools.lru_cache
def scale_of(size: int) -> float:
    return 1.0 / size


class CallsACachedFunction(nn.Module):
    """Calls an lru_cache-wrapped function, as transformers' Wav2Vec2 encoder does: Dynamo warns."""

    def forward(self, x):
        return x * scale_of(x.shape[-1])  # the cached call


@pytest.mark.parametrize("project", ["forward_project"], indirect=True)
def test_a_warning_the_tests_fail_on_fails_check_with_the_filter_that_allows_it(capsys, project):
    """A warning graph mode raises, which your tests turn into an error, is a problem in check
    too, at your line, with the filterwarnings entry that lets it through if it is harmless."""
    code, result = run_check(capsys, project, CallsACachedFunction, torch.ones(3))
    (found,) = [finding for finding in result["findings"] if finding["severity"] == "problem"]
    assert code == 1
    assert found["reason"].startswith("UserWarning: Dynamo detected a call to a `functools.lru_cache`")
    assert found["where"].startswith(f"{__file__}:{line_of('the cached call')}")
    assert r"'ignore:Dynamo detected a call to a `functools\.lru_cache`-wrapped" in found["hint"]


class RemembersRequests(nn.Module):
    """A decode model whose recurrent state its prefill does not reset, as a Mamba cache whose
    flag says it holds a prompt already: the next request reads what this one left."""

    def __init__(self) -> None:
        super().__init__()
        vocab = decode_model.VOCAB
        self.embed, self.out = nn.Embedding(vocab, 8), nn.Linear(8, vocab)
        self.register_buffer("memory", torch.zeros(8))

    def forward(self, tokens, input_pos):
        hidden = self.embed(tokens) + self.memory
        self.memory.copy_(0.5 * self.memory + hidden.mean((0, 1)))
        return self.out(hidden)


def test_state_a_request_leaves_for_the_next_is_refused_by_its_path(capsys, monkeypatch):
    """check serves the prompt a second time after a whole first request, restoring nothing: a
    model whose state reaches the next request gives other tokens, and is refused naming the
    state, exit 2."""
    monkeypatch.setattr(decode_model, "build_model", RemembersRequests)
    assert decode_check.main(["--json"]) == 2
    (found,) = json.loads(capsys.readouterr().out)["findings"]
    assert found["what"] == "state carried to the next request"
    assert "state memory" in found["reason"]
