"""Is my model ready for graph mode? One compile as the MRE's, and the ladder only if it fails.

    python -m <package> check [--json] [--ladder]

It builds build_model() and example_inputs() as the MRE does and runs them eagerly; in a decode
project the prompt as prefill, then the first decode step, which is what graph mode runs. With
tensor parallelism the model is sharded by parallel_plan() as the MRE shards it, so Dynamo traces
the DTensor layers and their collectives: over one rank under plain python, over N under `torchrun
--nproc-per-node N -m <package> check` (rank 0 prints); parallel_plan() is rehearsed first, in this
process, for --nproc-per-node ranks.

Then it compiles the model once, with the backend the MRE runs (select_backend(): npugraph_ex on
an NPU, the aot_eager stand-in elsewhere, or one forced with $NPUGRAPH_BACKEND), and calls it
twice: each call's output, and the state it leaves, must match eager's within the tolerance of
its dtype (contract.tolerances()), and the second call, on new inputs of the same shapes, must not
recompile (check prints the guard Dynamo names). The graph that compile made is read for what
aclgraph capture refuses (capture.py: random numbers, copies to and from the host, values the host
reads, aclop-only operators), each named at the line of yours that made it; on an NPU before
npugraph_ex captures it. Only when that compile fails or differs does check climb the npugraph_ex
fault-isolation ladder, to name the first stage at fault: the `eager` backend (Dynamo only),
`aot_eager`, and on an NPU npugraph_ex with force_eager, with force_recapture, then plain; and when
the compile stopped at a graph break it lists every break (torch._dynamo.explain) with file:line,
the reason and a one-line hint. `--ladder` climbs every rung anyway, for a support case.

Each rung starts from the state the eager run started from (its buffers: a KV cache, a step
counter), and must leave the state eager left as well as return its output. A model whose eager
calls make a tensor, or set or change a Python number, outside that state (state.watching()) is
checked no further: no rung could start from the state eager started from. Each non-tensor input
is a warning: graph mode bakes its value in, so new values recompile. Each problem is listed once,
at the line of yours where it arises (and the library's line beneath it, if it arose inside one).

Exit 0 when the model is ready, 1 when problems were found, 2 when the model cannot run at all,
keeps state that no run can be started from, or $NPUGRAPH_BACKEND names no backend that can run
here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
import traceback
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch._dynamo
from torch._dynamo.utils import counters, guard_failures
from torch._subclasses.fake_tensor import UnsupportedOperatorException
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from . import project
from .backend import (
    ACLOP_CAPTURE_ERROR,
    ACLOP_CAPTURE_HINT,
    BACKEND_ENV,
    DETERMINISTIC_RECOMPILE,
    NPUGRAPH_EX_OPTIONS,
    Backend,
    npu_status,
    select_backend,
)
from .capture import CaptureRefused, Recorder, Refusal, recorder_for
from .contract import (
    ContractError,
    Mismatch,
    PromptTooLong,
    clone,
    constant_inputs,
    constant_note,
    input_mismatches,
    mismatches,
    non_tensor_leaves,
    own_tolerances,
    to_device,
)
from .frames import caller_of_torch, error_frame, first_line, traced_frame, user_frame
from .state import (
    DECODE_STEP,
    FIRST_CALL,
    SECOND_CALL,
    State,
    StateCarriedOver,
    StateOutOfSight,
    restore,
    save,
    state_mismatches,
    watching,
)
from .warnings_as_tests import as_the_tests_do, first_warning, warning_hint

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .parallel import Ranks

# (pattern in the error or break reason, the hint a first-day user needs).
HINTS: tuple[tuple[str, str], ...] = (
    (
        r"Expected tensor for argument #1 'indices'|indices.* scalar types: Long, Int",
        (
            "an embedding got a float tensor: token ids must be integers, e.g. "
            "torch.randint(0, vocab_size, shape) in example_inputs()"
        ),
    ),
    (
        r"Data-dependent branching|generic_jump|data dependent operator",
        (
            "a Python `if` or `while` on a tensor value: compute both sides and pick with "
            "torch.where, use torch.cond, or decide on shapes and settings instead of values"
        ),
    ),
    (
        r"(guard on|extract specialized integer from) data-dependent expression",
        (
            "a Python number taken from a tensor's value (int(t[0]), a slice bound, a size): "
            "keep it a tensor and index with it (x[:, positions], torch.index_select): a new "
            "value is then new data for the same graph"
        ),
    ),
    (
        r"builtin operator `print`|\bprint\b",
        "print() inside the model breaks the graph: remove it, or print outside the model",
    ),
    (
        r"\.item\(\)|_local_scalar_dense|capture_scalar_outputs",
        ".item() copies a value to the host: keep it a tensor (x + t.sum(), not x + t.sum().item())",
    ),
    (
        r"unsupported operator|fake tensor|FakeTensor|Meta",
        (
            "a custom operator's Meta/fake function is missing or fails: register one that "
            "returns what the kernel returns (register_fake with torch.library; "
            "@impl(Library('npu', 'IMPL', 'Meta'), ...) with op-plugin)"
        ),
    ),
    (re.escape(ACLOP_CAPTURE_ERROR), ACLOP_CAPTURE_HINT),
    (
        r"non-Tensor|non-tensor|returned a non-tensor",
        "graph mode hands back tensors: return tensors (or tuples, dicts, dataclasses of them)",
    ),
)
# Stable codes, one per kind of finding, which tests and scripts read instead of the wording. What
# aclgraph capture refuses is CAP001-CAP005 (capture.py).
GRAPH_BREAK = "CHK001"
BUILD_FAILS = "CHK002"
EAGER_FAILS = "CHK003"
DIFFERS = "CHK004"
"""A rung's output, the state it left or an input it wrote differs from eager's."""
RECOMPILED = "CHK005"
CONSTANT_INPUT = "CHK006"
NON_TENSOR_OUTPUT = "CHK007"
FAKE_FUNCTION = "CHK008"
"""A custom operator's fake (Meta) function or schema does not match its kernel."""
STATE_OUT_OF_SIGHT = "CHK009"
STATE_CARRIED = "CHK010"
SETTINGS = "CHK011"
"""model.py's TOLERANCES, or a decode project's MAX_BATCH, MAX_SEQ_LEN and CAPTURE_SIZES."""
PLAN = "CHK012"
BACKEND = "CHK013"
"""$NPUGRAPH_BACKEND names no backend that can run here."""
RUNG_FAILS = "CHK014"
"""A rung's compile or call raises, other than at a graph break."""
GENERATION = "README, section 'Generation'"

FALLBACK_HINT = "see the reason; README, section 'Fault isolation'"
EAGER_HINT = "it fails before graph mode runs: fix model.py at the line named (`where`)"
"""For a model that fails to build or to run eagerly: graph mode's fault isolation cannot help."""
RECOMPILE_HINT = (
    "keep forward() free of values that change between calls: a number read from a tensor, a "
    "Python attribute or global that a call changes"
)
FAR_OFF_HINT = (
    "far beyond rounding: the first rung that differs is the stage at fault (README, section "
    "'Fault isolation')"
)
NEAR_HINT = (
    "just beyond the tolerance: if that is your device's rounding, set TOLERANCES in model.py "
    "(README, section 'Tolerances'); if not, the first rung that differs is the stage at fault "
    "(README, section 'Fault isolation')"
)
# How far past its tolerance a floating-point leaf may be and still read as rounding: an NPU's
# matrix units may round float32 products more coarsely than a CPU (HF32).
ROUNDING_REACH = 10


# (pattern in Dynamo's break reason, the same reason in a user's words): Dynamo names some breaks
# by its internals (generic_jump over a SymNodeVariable), or after a torch._check*() suggestion.
PLAIN_REASONS: tuple[tuple[str, str], ...] = (
    (
        r"generic_jump SymNodeVariable",
        "a Python `if` or `while` on a number read from a tensor's value (.item(), int(t))",
    ),
    (
        r"extract specialized integer from data-dependent expression",
        (
            "a Python number read from a tensor's value (.item(), int(t)) decides what the graph "
            "does (a range(), a size, an index)"
        ),
    ),
)


def plain_reason(text: str) -> str:
    """The first line of a break reason, in a user's words where Dynamo's are its internals."""
    return next(
        (plain for pattern, plain in PLAIN_REASONS if re.search(pattern, text)),
        text.splitlines()[0],
    )


def hint_for(text: str, fallback: str = FALLBACK_HINT) -> str:
    """The first hint whose pattern occurs in `text`, else `fallback`."""
    return next((hint for pattern, hint in HINTS if re.search(pattern, text)), fallback)


def hint_of(error: BaseException, fallback: str = FALLBACK_HINT) -> str:
    """The hint for an error: for a warning your tests raise as an error, the filter that lets
    it through; else hint_for() its message."""
    warning = first_warning(error)
    return warning_hint(warning) if warning else hint_for(str(error), fallback)


@dataclass
class Finding:
    """One graph break, failed rung or other problem: where, why, and what to do."""

    what: str
    reason: str
    where: str = ""
    hint: str = ""
    severity: str = "problem"
    """problem (exit 1) or warning (shown, exit unchanged)."""
    code: str = ""
    """The kind of finding, stable whatever the wording: CHK001 (a graph break), ..., CAP001 (what
    capture refuses), ...; in the report before the finding's words."""
    path: str = ""
    """The input or output leaf it is about (`[1]`, `['logits']`), if it is about one."""
    mismatches: list[Mismatch] = field(default_factory=list)
    """For an output that differs from eager: every leaf that differs, with the numbers."""


@dataclass
class Rung:
    name: str
    status: str
    """ok, fail, or skipped (with the reason in detail)."""
    detail: str = ""


@dataclass
class Result:
    verdict: int = 0
    summary: str = ""
    model: str = ""
    findings: list[Finding] = field(default_factory=list)
    rungs: list[Rung] = field(default_factory=list)


class OpCalls(TorchDispatchMode):
    """Notes the first call of each overload of the operator `name` (namespace::name), with its
    arguments cloned before the call (what the model really gives it) and the line of yours that
    made it."""

    def __init__(self, name: str | None) -> None:
        super().__init__()
        self.name = name
        self.calls: dict[torch._ops.OpOverload, tuple[Any, Any]] = {}
        self.where: dict[torch._ops.OpOverload, str] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = getattr(func, "_schema", None)  # operators have one; higher-order ones may not
        if schema is not None and schema.name == self.name and func not in self.calls:
            self.calls[func] = (clone(args), clone(kwargs))
            self.where[func] = caller_of_torch()
        return func(*args, **kwargs)


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error`, then each error it was raised from, the first one last."""
    while error is not None:
        yield error
        error = error.__cause__


def lacks_fake_function(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from, says the operator has no fake (or Meta)
    function: fake tensors' UnsupportedOperatorException for an operator with no Meta kernel, the
    RuntimeError of torch/_library/custom_ops.py for a custom_op with no register_fake."""
    return any(
        isinstance(cause, UnsupportedOperatorException)
        or str(cause).startswith("There was no fake impl registered")
        for cause in causes(error)
    )


def fake_problems(calls: OpCalls) -> list[Finding]:
    """The custom operator's fake (or Meta) function against its kernel, on the model's own calls:
    torch.library.opcheck's schema and fake-tensor tests. The stand-in traces with the fake
    function but runs the kernel, so only this shows a wrong one off an NPU; on an NPU,
    npugraph_ex lays out the graph's memory by it."""
    function, home, readme = (
        ("Meta", "meta_registrations.py", "README, section 'The op-plugin operator'")
        if project.OP_PLUGIN
        else ("fake", "custom_op.py", "README, section 'The custom operator'")
    )
    wrong = (
        f"make the {function} function ({home}) return what the kernel returns: shape, dtype, "
        f"device; {readme}"
    )
    missing = f"register one in {home}; {readme}"
    mark = (
        "mark each input the kernel writes Tensor(a!) in op_plugin_functions.yaml"
        if project.OP_PLUGIN
        else "name each input the kernel writes in mutates_args (custom_op.py)"
    )
    undeclared = f"{mark}, or make the kernel write a new tensor; {readme}"
    findings = []
    for op, (args, kwargs) in calls.calls.items():
        if any(
            type(leaf) is not torch.Tensor
            for leaf in tree_leaves((args, kwargs))
            if isinstance(leaf, torch.Tensor)
        ):
            continue  # a rank's DTensor shards: opcheck takes plain tensors
        try:
            torch.library.opcheck(op, args, kwargs, test_utils=("test_schema", "test_faketensor"))
        except Exception as error:  # noqa: BLE001  (the user's op may raise anything)
            what, where = f"{op._schema.name}'s {function} function", calls.where[op]
            reason = first_line(error).removesuffix(" (scroll up for stack trace)")
            if lacks_fake_function(error):
                reason, hint = "there is none, so graph mode cannot trace the op", missing
            elif "test_schema failed" in reason:
                what, hint = f"{op._schema.name}'s schema", undeclared
            else:
                hint = wrong
                # A fake function that raises: the line of yours that raised, not the op's call.
                *_, first = causes(error)
                where = user_frame(traceback.extract_tb(first.__traceback__)) or where
            findings.append(Finding(what, reason, where, hint, code=FAKE_FUNCTION))
    return findings


@contextlib.contextmanager
def meta_errors_unlogged():
    """Fake tensors log each error a fake or Meta function raises, with its traceback, before they
    raise it again: check names it once, as a finding at the line that raised."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    disabled, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = disabled


def one_per_line(findings: list[Finding]) -> list[Finding]:
    """`findings` with one problem per line of yours: under fullgraph=True every rung fails at the
    first graph break, or at an operator fake tensors cannot run, which is already listed at that
    line. A graph break listed again takes the later words: the rungs' come after explain()'s,
    and they are what the MRE prints for it."""
    first: dict[str, Finding] = {}
    kept = []
    for finding in findings:
        earlier = first.get(finding.where) if finding.severity == "problem" else None
        if earlier is None or not (
            finding.what == "graph break" or finding.what.endswith(" fails")
        ):
            kept.append(finding)
            if finding.where and finding.severity == "problem":
                first.setdefault(finding.where, finding)
        elif earlier.what == finding.what == "graph break":
            earlier.reason = finding.reason
    return kept


def graph_breaks(
    model: torch.nn.Module, inputs: tuple[Any, ...], recorder: Recorder
) -> list[Finding]:
    """Every graph break Dynamo meets in the model, as fullgraph=True sees them; `recorder` reads
    the graphs between the breaks for what capture refuses."""
    torch._dynamo.reset()
    # fullgraph=True captures .item() as a graph value: explain() should count it as fullgraph does.
    with torch._dynamo.config.patch(capture_scalar_outputs=True), torch.no_grad():
        try:
            # On a copy: forward may write its inputs in place, and the rungs start from them.
            explanation = torch._dynamo.explain(model)(*clone(inputs))
        except Exception:  # noqa: BLE001  (an error that is no graph break: each rung names it)
            return []
    recorder.read(graph for graph in explanation.graphs)
    findings = []
    for reason in explanation.break_reasons:
        text = reason.reason.strip()
        where = user_frame(reason.user_stack)
        findings.append(
            Finding("graph break", plain_reason(text), where, hint_for(text), code=GRAPH_BREAK)
        )
    return findings


def stopped(finding: Finding) -> bool:
    """Whether a rung's finding says its compile stopped (a graph break, an error), rather than
    that its graph ran and differed from eager or compiled again."""
    return finding.what == "graph break" or finding.what.endswith(" fails")


def capture_findings(found: list[Refusal]) -> list[Finding]:
    """What capture refuses, as findings: one per kind of node and line of yours."""
    return [
        Finding(each.what, each.reason, each.where, each.hint, each.severity, code=each.code)
        for each in found
    ]


def rungs_here(npu_ok: bool) -> list[tuple[str, str, dict[str, object] | None]]:
    """(name, backend, options) of each fault-isolation rung, in the guide's order."""
    # Dynamo with its eager backend: the graph Dynamo captured, run by plain PyTorch.
    ladder = [("eager backend", "eager", None), ("aot_eager", "aot_eager", None)]
    ladder += [
        ("npugraph_ex force_eager", "npugraph_ex", {**NPUGRAPH_EX_OPTIONS, "force_eager": True}),
        (
            "npugraph_ex force_recapture",
            "npugraph_ex",
            {**NPUGRAPH_EX_OPTIONS, "force_recapture": True},
        ),
        ("npugraph_ex", "npugraph_ex", dict(NPUGRAPH_EX_OPTIONS)),
    ]
    return ladder if npu_ok else ladder[:2]


def mre_rung(
    backend: Backend, ladder: list[tuple[str, str, dict[str, object] | None]]
) -> tuple[str, str, dict[str, object] | None]:
    """The rung of the backend the MRE runs: the ladder's with the same backend and options, else
    one of its own (a backend forced with $NPUGRAPH_BACKEND, which the ladder does not climb)."""
    for rung in ladder:
        if rung[1:] == (backend.name, backend.options):
            return rung
    return f"{backend.name} ({backend.reason})", backend.name, backend.options


def captures(backend: str, options: dict[str, object] | None) -> bool:
    """Whether a rung captures an aclgraph: npugraph_ex, unless force_eager runs its graph as is."""
    return backend == "npugraph_ex" and not (options or {}).get("force_eager")


@dataclass
class Eager:
    """The reference: the state eager started from, its output, the state it left, its copy of
    the inputs as the call left them (forward may write one in place), the random number
    generator's state it started from (forward may draw random numbers), and the same of its
    second call, on new inputs from the state the first left: a graph replayed may go wrong
    where its first run did not."""

    start: State
    output: Any
    end: State
    inputs: tuple[Any, ...]
    rng: torch.Tensor
    again_output: Any = None
    again_end: State | None = None
    again_inputs: tuple[Any, ...] = ()


def run_rung(
    name: str,
    backend: str,
    options: dict[str, object] | None,
    model: torch.nn.Module,
    inputs: tuple[Any, ...],
    again: tuple[Any, ...],
    expected: Eager,
    compiler: Recorder | str,
) -> tuple[Rung, list[Finding]]:
    """Compile as the MRE does with one backend, through `compiler`, which reads the graph for
    what capture refuses; call twice, compare each call's output, the state it left and the
    inputs it wrote with eager's (the second call's only if the first matched: one cause, named
    once), and count the graphs the second call compiled.

    `compiler` is a Recorder of this rung's own, compiling after a Dynamo reset; or the backend's
    name, for which a recorder stands in in torch's registry (capture.recorder_for()): then a
    graph an earlier compile in this process made of the same code (the MRE's run, in your
    tests) is reused as Dynamo's guards allow, and nothing compiles twice."""
    if isinstance(compiler, Recorder):
        torch._dynamo.reset()
    compiled = torch.compile(
        model, backend=compiler, fullgraph=True, dynamic=False, options=options
    )
    try:
        with torch.no_grad():
            # From the state the eager reference started from, not from what the last run left:
            # its state, a fresh copy of its inputs, its random number generator's state.
            restore(model, expected.start)
            given = clone(inputs)
            torch.set_rng_state(expected.rng)
            output = clone(compiled(*given))
            end = save(model)
            graphs = counters["stats"]["unique_graphs"]
            given_again = clone(again)
            output_again = clone(compiled(*given_again))
            end_again = save(model)
            recompiled = counters["stats"]["unique_graphs"] - graphs
    except Exception as error:  # noqa: BLE001  (any failure is this rung's answer)
        if any(isinstance(cause, CaptureRefused) for cause in causes(error)):
            # Its findings, with their lines, come from the recorder: not captured, not run.
            return Rung(name, "fail", "not captured: the graph holds what capture refuses"), []
        what, reason = f"{name} fails", first_line(error)
        if warning := first_warning(error):
            # Your tests raise it as an error too: name the warning, not what wraps it.
            reason = first_line(warning)
        elif isinstance(error, torch._dynamo.exc.Unsupported):
            # Under fullgraph=True this is a graph break, in the words the MRE prints for it.
            what, reason = "graph break", reason.partition(": ")[2] or reason
        code = GRAPH_BREAK if what == "graph break" else RUNG_FAILS
        finding = Finding(what, reason, error_frame(error), hint_of(error), code=code)
        return Rung(name, "fail", first_line(error)), [finding]
    findings = []
    differ = mismatches(output, expected.output) + state_mismatches(end, expected.end)
    if differ := differ + input_mismatches(given, expected.inputs):
        findings.append(differs(name, differ))
    elif differ := (
        mismatches(output_again, expected.again_output)
        + state_mismatches(end_again, expected.again_end)
        + input_mismatches(given_again, expected.again_inputs)
    ):
        findings.append(differs(name, differ, call="on its second call"))
    if recompiled:
        failed, where = guards_failed()
        if "deterministic" in failed:  # torch_npu guards the NPU's deterministic level
            hint = DETERMINISTIC_RECOMPILE
        else:
            hint = RECOMPILE_HINT
            if project.CACHE_COMPILE:
                hint += "; a cache_compile recompile also deletes its cache"
        why = failed or (
            "Dynamo guards on a value that changes (a Python number from a tensor, a changing "
            "attribute)"
        )
        findings.append(
            Finding(
                f"{name} recompiled",
                f"a second call on new inputs of the same shapes compiled again: {why}",
                where,
                hint=hint,
                code=RECOMPILED,
            )
        )
    status = "fail" if findings else "ok"
    return Rung(name, status, "; ".join(f.what for f in findings) or "matches eager"), findings


def failed_guards() -> tuple[list[str], str]:
    """The guards that failed since Dynamo was last reset, as Dynamo words them (`G['STEP'] ==
    1`, `self.cache.layers[0].cumulative_length_int == 38`), and where in your code the first
    guarded value was read, if Dynamo says."""
    reasons = [reason for each in guard_failures.values() for reason in each]
    # Each reason: "<compile id>: <guard>  # <source line>  # <where>", then the user's stack.
    guards = [
        re.sub(r"^\S+: ", "", reason.splitlines()[0]).split("  #")[0].strip() for reason in reasons
    ]
    return list(dict.fromkeys(guards)), traced_frame(reasons[0]) if reasons else ""


def guards_failed() -> tuple[str, str]:
    """failed_guards() in a sentence, "Dynamo's guard G['STEP'] == 1 failed" ("" if Dynamo
    recorded none), and where in your code the first guarded value was read."""
    guards, where = failed_guards()
    return (f"Dynamo's guard {'; '.join(guards)} failed" if guards else ""), where


def differs(name: str, differ: list[Mismatch], call: str = "") -> Finding:
    """The finding for a rung whose output differs from eager's at the leaves `differ`, on the
    call named (the first, unless `call` says otherwise)."""
    others = ", ".join(mismatch.path for mismatch in differ[1:])
    more = f"; and {others}" if others else ""
    return Finding(
        " ".join(filter(None, [f"{name} differs from eager", call])),
        f"{differ[0]}{more}",
        hint=NEAR_HINT if all(near_rounding(mismatch) for mismatch in differ) else FAR_OFF_HINT,
        path=differ[0].path,
        mismatches=differ,
        code=DIFFERS,
    )


def near_rounding(mismatch: Mismatch) -> bool:
    """Whether a leaf is off by no more than rounding might explain: floating-point values whose
    relative difference is within ROUNDING_REACH times the tolerance (never a shape, a dtype, an
    integer or a value where eager has 0)."""
    return bool(mismatch.rtol) and mismatch.max_rel <= ROUNDING_REACH * mismatch.rtol


def constants_baked_in(inputs: tuple[Any, ...]) -> list[Finding]:
    """A warning for each non-tensor input: graph mode bakes its value into the graph."""
    findings = []
    for path, value in constant_inputs(inputs):
        what, fix = constant_note(path, value)
        findings.append(
            Finding(
                "non-tensor input",
                what,
                hint=fix,
                severity="warning",
                path=path,
                code=CONSTANT_INPUT,
            )
        )
    return findings


def settings_problem() -> Finding | None:
    """What is wrong with the settings model.py declares beside the model, which the MRE runs
    without and the tools refuse: TOLERANCES, and a decode project's MAX_BATCH, MAX_SEQ_LEN and
    CAPTURE_SIZES. None if nothing."""
    try:
        own_tolerances()
    except ContractError as error:
        return Finding("TOLERANCES", str(error), hint="README, section 'Tolerances'", code=SETTINGS)
    if project.DECODE:
        from .decode import limits

        try:
            limits()
        except ContractError as error:
            return Finding("decode settings", str(error), hint=GENERATION, code=SETTINGS)
    return None


@meta_errors_unlogged()
def check(ranks: Ranks | None = None, ladder: bool = False) -> Result:
    """Run every check on the model of model.py, sharded over `ranks` if given (with tensor
    parallelism); the result holds the verdict. `ladder` climbs every rung of the
    fault-isolation ladder, not only when the MRE's backend fails."""
    npu_ok, why = npu_status()
    device = ranks.device if ranks is not None else ("npu" if npu_ok else "cpu")
    result = Result()
    try:
        build_model, example_inputs = project.from_model("build_model", "example_inputs")
        torch.manual_seed(0)
        model = build_model().to(device).eval()
        if ranks is not None:
            model = ranks.shard(model, project.from_model("parallel_plan")(ranks.size))
    except Exception as error:  # noqa: BLE001  (the user's code may raise anything)
        hint = hint_of(error, EAGER_HINT)
        found = Finding(
            "build fails", first_line(error), error_frame(error), hint, code=BUILD_FAILS
        )
        return refused(result, found, "the model does not build: fix that first")
    result.model = type(model).__name__
    if found := settings_problem():
        return refused(result, found, "model.py's settings are wrong: fix them first")
    try:
        # Each eager call watched: a tensor it makes or a number it changes out of the state's
        # sight would make every rung start from another state than eager's.
        if project.DECODE:
            from . import decode

            inputs = prompt = to_device(example_inputs(), device)
            if inputs and isinstance(inputs[0], torch.Tensor) and inputs[0].dim() == 2:
                decode.limits().check_prompt(inputs[0].shape[1])
            built = save(model)
            with torch.no_grad(), watching(model, FIRST_CALL):
                # Prefill, eagerly: the cache holds the prompt, and the graph is the decode step.
                inputs = decode.first_step(model, *inputs)
            again = decode.next_step(*inputs)
        else:
            inputs = to_device(example_inputs(), device)
            # New data of the same shapes, as the next inference step would bring.
            torch.manual_seed(1)
            again = to_device(example_inputs(), device)
        start, rng, given = save(model), torch.get_rng_state(), clone(inputs)
        calls = OpCalls(project.OP)
        with torch.no_grad(), watching(model, DECODE_STEP if project.DECODE else FIRST_CALL):
            with calls if project.OP else contextlib.nullcontext():
                output = model(*given)
            expected = Eager(start, clone(output), save(model), given, rng)
        with torch.no_grad(), watching(model, SECOND_CALL):
            given_again = clone(again)
            expected.again_output = clone(model(*given_again))
            expected.again_end, expected.again_inputs = save(model), given_again
        if project.DECODE:
            # A second request after a whole first one, from the model as built, put back nowhere.
            restore(model, built)
            with torch.no_grad():
                decode.carried_over(model, *prompt)
        # As the first call left it, for the checks below that trace the model.
        restore(model, expected.end)
    except PromptTooLong as error:
        found = Finding("decode settings", str(error), hint=GENERATION, code=SETTINGS)
        return refused(result, found, "model.py's settings are wrong: fix them first")
    except StateOutOfSight as error:
        found = Finding(
            "state the tools cannot save",
            "\n            ".join(error.found),
            hint=error.fix,
            code=STATE_OUT_OF_SIGHT,
        )
        return refused(result, found, "nothing was compared: no run can start from eager's state")
    except StateCarriedOver as error:
        found = Finding(
            "state carried to the next request", error.found, hint=error.fix, code=STATE_CARRIED
        )
        return refused(result, found, "a request depends on the one before it: fix that first")
    except Exception as error:  # noqa: BLE001  (the user's code may raise anything)
        found = Finding(
            "eager run fails",
            first_line(error),
            error_frame(error),
            hint_of(error, EAGER_HINT),
            code=EAGER_FAILS,
        )
        return refused(result, found, "the model does not run eagerly: fix that first")
    try:
        backend = select_backend()
    except (RuntimeError, ValueError) as error:
        # The MRE cannot start with this backend: nothing it would run can be checked.
        hint = f"unset {BACKEND_ENV} or fix its value"
        found = Finding("the MRE's backend", str(error), hint=hint, code=BACKEND)
        return refused(result, found, f"the MRE cannot choose its backend: fix {BACKEND_ENV} first")
    if leaves := non_tensor_leaves(expected.output):
        result.findings.append(
            Finding(
                "non-tensor output",
                f"the output holds {', '.join(leaves)}",
                hint=hint_for("non-tensor"),
                severity="warning",
                code=NON_TENSOR_OUTPUT,
            )
        )
    # The second call brings the same non-tensor values: say what new ones would do.
    result.findings += constants_baked_in(inputs)
    result.findings += fake_problems(calls)
    result.findings += climb(model, inputs, again, expected, backend, npu_ok, why, ladder, result)
    result.findings = one_per_line(result.findings)
    problems = [f for f in result.findings if f.severity == "problem"]
    warnings = len(result.findings) - len(problems)
    result.verdict = 1 if problems else 0
    if problems:
        result.summary = f"{len(problems)} problem(s): fix them, then run check again"
    elif npu_ok:
        result.summary = f"{READY}, captured by npugraph_ex"
    else:
        result.summary = f"{READY} under the {backend.name} stand-in; {NOTHING_REFUSED}"
    if warnings:
        result.summary += f"; read the {warnings} warning(s) above"
    return result


READY = (
    "ready for graph mode: one graph, no recompile on new tensors of the same shapes, same output "
    "and state as eager"
)
NOTHING_REFUSED = (
    "the graph holds nothing aclgraph capture refuses (the npugraph_ex rungs need an NPU)"
)
NOT_CLIMBED = "not needed: the MRE's backend matched eager (check --ladder climbs every rung)"


def climb(
    model: torch.nn.Module,
    inputs: tuple[Any, ...],
    again: tuple[Any, ...],
    expected: Eager,
    backend: Backend,
    npu_ok: bool,
    why: str,
    ladder: bool,
    result: Result,
) -> list[Finding]:
    """The MRE's own rung, compiled once; the graph it compiled read for what capture refuses;
    and, only when that rung fails or differs from eager (or with `ladder`), the other rungs of
    the fault-isolation ladder, to name the first stage at fault. Graph breaks are listed, every
    one, when the MRE's rung stopped at one. The rungs go into `result` in the guide's order."""
    rungs = rungs_here(npu_ok)
    mine = mre_rung(backend, rungs)
    order = [*rungs, *([mine] if mine not in rungs else [])]
    ours = recorder_for(backend, cache_compile=project.CACHE_COMPILE)
    recorders = {
        name: Recorder(
            compiler,
            on_npu=npu_ok,
            cache_compile=project.CACHE_COMPILE,
            stop=captures(compiler, options),
        )
        for name, compiler, options in order
        if name != mine[0]
    }
    recorders[mine[0]] = ours
    # What capture refuses in the graphs between the breaks, when explain() lists them.
    explained = Recorder(backend.name, on_npu=npu_ok, cache_compile=project.CACHE_COMPILE)

    def run(rung: tuple[str, str, dict[str, object] | None]) -> tuple[Rung, list[Finding]]:
        # The MRE's rung compiles as the MRE does, by the backend's name: once in a process.
        compiler = rung[1] if rung == mine else recorders[rung[0]]
        return run_rung(*rung, model, inputs, again, expected, compiler)

    outcomes = {mine[0]: run(mine)}
    failed = outcomes[mine[0]][0].status == "fail"
    breaks = []
    if any(stopped(finding) for finding in outcomes[mine[0]][1]):
        breaks = graph_breaks(model, inputs, explained)
    for rung in order:
        if rung[0] not in outcomes:
            climbing = failed or ladder
            outcomes[rung[0]] = (
                run(rung) if climbing else (Rung(rung[0], "skipped", NOT_CLIMBED), [])
            )
    result.rungs = [outcomes[name][0] for name, _, _ in order]
    if not npu_ok:
        npu_rungs = Rung("npugraph_ex rungs", "skipped", f"need an NPU: {why}")
        result.rungs.insert(len(rungs), npu_rungs)
    # The MRE's rung may reuse a graph compiled before this check, and read then: what its
    # model's code held. Each other rung's recorder reads only its own compile.
    code = getattr(type(model).forward, "__code__", None)
    read = [*ours.found_in.get(code, []), *explained.found]
    read += [each for name, r in recorders.items() if name != mine[0] for each in r.found]
    found = {(each.code, each.where): each for each in read}
    findings = [finding for name, _, _ in order for finding in outcomes[name][1]]
    return [*breaks, *capture_findings(list(found.values())), *findings]


def refused(result: Result, finding: Finding, summary: str) -> Result:
    """`result` with the one problem that stops check before any rung: exit 2."""
    result.findings.append(finding)
    result.verdict = 2
    result.summary = summary
    return result


def plan_problem(size: int) -> Finding | None:
    """With tensor parallelism, parallel_plan(size) rehearsed in this process before anything
    compiles: the sharded model runs for `size` ranks on a fake process group. None if it runs
    (or the model cannot be built at all, which check() reports)."""
    from .parallel import PlanError, rehearse

    try:
        build_model, example_inputs = project.from_model("build_model", "example_inputs")
        torch.manual_seed(0)
        inputs = to_device(example_inputs(), "cpu")
    except Exception:  # noqa: BLE001  (check() reports the model's own errors)
        return None
    try:
        plan = project.from_model("parallel_plan")(size)
    except Exception as error:  # noqa: BLE001  (your plan may refuse this many ranks)
        return Finding(
            f"parallel_plan({size}) fails", first_line(error), error_frame(error), code=PLAN
        )
    try:
        rehearse(build_model, plan, inputs, size)
    except PlanError as error:
        # The message's lines: what cannot run where, the error, the fix.
        what, _, where = str(error).splitlines()[0].partition(": ")
        rest = [line.strip() for line in str(error).splitlines()[1:]]
        fixes = [line.removeprefix("fix: ") for line in rest if line.startswith("fix: ")]
        reasons = [line for line in rest if not line.startswith("fix: ")]
        reason = "\n            ".join([where, *reasons])
        return Finding(what, reason, hint=" ".join(fixes), code=PLAN)
    except Exception:  # noqa: BLE001  (the model's own error: check() reports it)
        return None
    return None


def render(result: Result) -> str:
    lines = [f"model       {result.model or '(did not build)'}"]
    for finding in result.findings:
        lines.append(f"{finding.severity:<7}     {finding.code} {finding.what}: {finding.reason}")
        lines += [f"{'':<12}also {mismatch}" for mismatch in finding.mismatches[1:]]
        if finding.where:
            lines.append(f"{'':<12}at {finding.where}")
        if finding.hint:
            lines.append(f"{'':<12}hint: {finding.hint}")
    for rung in result.rungs:
        lines.append(f"rung        {rung.name:<28} {rung.status}  {rung.detail}".rstrip())
    return "\n".join([*lines, "", result.summary])


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument(
        "--ladder",
        action="store_true",
        help="climb every rung of the fault-isolation ladder, also when the MRE's backend works",
    )
    if project.TENSOR_PARALLEL:
        parser.add_argument(
            "--nproc-per-node",
            type=int,
            default=int(os.environ.get("WORLD_SIZE", "2")),
            help="the ranks to rehearse the plan for (default: torchrun's world size, else 2)",
        )
    arguments = parser.parse_args(argv)
    # What your model prints goes to stderr: stdout holds the report (or the JSON) alone.
    if project.TENSOR_PARALLEL:
        from .parallel import tensor_parallel

        with contextlib.redirect_stdout(sys.stderr):
            problem = plan_problem(arguments.nproc_per_node)
        if problem:
            # Sharded over real ranks, such a plan fails deep in DTensor, in hundreds of lines.
            result = Result(
                verdict=2,
                summary="fix the plan first: nothing else was checked",
                model="(not run: the plan comes first)",
                findings=[problem],
            )
            if os.environ.get("RANK", "0") == "0":
                print(json.dumps(asdict(result), indent=2) if arguments.json else render(result))
            return result.verdict
        device_type = "npu" if npu_status()[0] else "cpu"
        with (
            contextlib.redirect_stdout(sys.stderr),
            tensor_parallel(device_type) as ranks,
            as_the_tests_do(),
        ):
            result = check(ranks, arguments.ladder)
        if not ranks.is_first:
            return result.verdict
    else:
        with contextlib.redirect_stdout(sys.stderr), as_the_tests_do():
            result = check(ladder=arguments.ladder)
    print(json.dumps(asdict(result), indent=2) if arguments.json else render(result))
    return result.verdict


if __name__ == "__main__":
    sys.exit(main())
