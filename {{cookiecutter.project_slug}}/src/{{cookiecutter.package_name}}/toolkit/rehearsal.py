"""What the MRE runs eagerly, run once by a tool before it compiles anything, and watched.

bench, generate and profile compare graph mode with eager or run a model many times, and the doctor
says whether a model runs: each first runs the model eagerly as the MRE does (in a decode project
the prompt's prefill, then the first decode step; elsewhere one step) through rehearse(). A model
that fails there is refused in one line, as `check` refuses it, rather than failing later inside a
compile with a traceback. One whose calls make a tensor, or set or change a Python number, outside
the state the tools save and put back is refused naming each and the fix (state.watching()).
Otherwise the model's state and the random number generator are put back, and the tool goes on as
if nothing ran. Graph mode failing afterwards on the model that ran (a graph break under
fullgraph=True, a compile or a fake-tensor run that raises) is said in one line too, with your line
and the fix (graph_failures()), as `check` says it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch._dynamo.exc import FailOnRecompileLimitHit, TorchDynamoException

from . import project
from .contract import ContractError
from .state import DECODE_STEP, FIRST_CALL, restore, save, watching


class EagerFailure(ContractError):
    """The model fails to build, or to run eagerly on example_inputs(), so graph mode cannot be
    judged: the message names the error, where it arose, and the command that says more."""


def said(error: BaseException) -> str:
    """An error in check's own words: its first line, and where in your code it arose (every tool
    names an error as check does)."""
    from .check import error_frame, first_line

    where = error_frame(error)
    return f"{first_line(error)}; at {where}" if where else first_line(error)


def eager_failure(error: BaseException, what: str = "the model fails eagerly") -> EagerFailure:
    """The one-line refusal of a model whose build or eager run raised `error`."""
    return EagerFailure(
        f"{what}, so graph mode cannot be judged: {said(error)}; "
        f"`python -m {project.PACKAGE} check` says more"
    )


class GraphFailure(RuntimeError):
    """Graph mode fails on a model that ran eagerly: the message names the error, your line, the
    fix, and the command that lists every graph break."""


@contextmanager
def graph_failures() -> Iterator[None]:
    """Raise GraphFailure, in one line, for an error Dynamo raises in the block: a graph break,
    a guard on a tensor's value, a fake-tensor run or a backend's compile that fails, a step
    that compiles again on every call until Dynamo's limit (naming the guard that failed). Anything
    else (a bug of this toolkit's, an error only a device raises) keeps its traceback."""
    try:
        yield
    except FailOnRecompileLimitHit as error:
        from .check import RECOMPILE_HINT, guards_failed

        failed, where = guards_failed()
        why = f": {failed}" if failed else ""
        at = f" at {where}" if where else ""
        raise GraphFailure(
            f"graph mode compiled again on every call until Dynamo's limit{why}{at}; "
            f"{RECOMPILE_HINT}; `python -m {project.PACKAGE} check` says more"
        ) from error
    except TorchDynamoException as error:
        from .check import hint_for

        raise GraphFailure(
            f"graph mode fails on the model that runs eagerly: {said(error)}; "
            f"{hint_for(str(error))}; `python -m {project.PACKAGE} check` lists every graph break"
        ) from error


def built(build_model: Callable[[], nn.Module]) -> nn.Module:
    """build_model()'s model; a build_model() that raises is refused in one line (EagerFailure),
    as check refuses it."""
    try:
        return build_model()
    except ContractError:
        raise
    except Exception as error:  # the user's code may raise anything: refuse it in one line
        raise eager_failure(error, "build_model() fails") from error


def finished(output: Any) -> Any:
    """`output` with nothing of its call left running. With tensor parallelism a sharded layer run
    eagerly hands back its collective still in flight (parallel.wait_collectives), awaited only
    when something reads it: a call whose output nobody reads must wait for it here, or torch warns
    at exit of an unwaited collective on every rank."""
    if project.TENSOR_PARALLEL:
        # parallel.py is only in tensor-parallel projects.
        from .parallel import wait_collectives

        return wait_collectives(output)
    return output


def rehearse(model: nn.Module, inputs: tuple[Any, ...]) -> None:
    """Run `model` eagerly on `inputs` as the MRE runs it (a decode project's inputs are
    (prompt,)), each call watched; raise EagerFailure if it fails, StateOutOfSight if it keeps
    state out of the tools' sight. Afterwards the model holds the state it held before, the
    random number generator is where it was, and nothing a call started is left running (its
    collectives: finished())."""
    start = save(model)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        try:
            if project.DECODE:
                from .decode import first_step

                (prompt,) = inputs
                with watching(model, FIRST_CALL):
                    step = first_step(model, prompt)
                with watching(model, DECODE_STEP):
                    finished(model(*step))
            else:
                with watching(model, FIRST_CALL):
                    finished(model(*inputs))
        except ContractError:
            raise  # already a refusal in its own words: state out of sight, or a contract broken
        except Exception as error:  # the user's code may raise anything: refuse it in one line
            raise eager_failure(error) from error
    restore(model, start)
