"""A rank that fails under torchrun shows its root cause first and once, in a few lines.

Left to themselves, every rank prints its whole traceback (hundreds of lines once torch.compile
wraps an error), torchrun's summary prints each of them again, and the cause sits deep inside.
Instead, when an error ends a rank: the first rank to fail (the ranks agree on it through
torchrun's store) prints the root cause, where in your code it arose, a hint, and the file that
holds the full traceback; a later rank failing the same way prints nothing. The error file that
torchrun's summary reads holds the cause as its message and points at those lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import TracebackType

import torch.distributed as dist
from torch._dynamo.exc import TorchDynamoException

from . import project
from .frames import user_frame

# Asking torchrun's store which rank failed first: a loaded machine answers in well under this,
# and a store that is gone (torchrun is stopping) makes this rank report as the first.
STORE_TIMEOUT = timedelta(seconds=30)
TOLD_TIMEOUT = timedelta(seconds=10)
"""How long a later rank waits for the first rank's cause to be printed before its own line."""
LONGEST = 600
"""The longest cause shown, in characters: a shape message is shorter, a repr of a graph longer."""


def chain(error: BaseException) -> list[BaseException]:
    """`error` and the errors it wraps, outermost first, as Python's traceback links them.
    torch.compile wraps the real error (a sharding rule, a shape) and suppresses it: followed too."""
    links = [error]
    while True:
        last = links[-1]
        hidden = last.__suppress_context__ and not isinstance(last, TorchDynamoException)
        inner = last.__cause__ or (None if hidden else last.__context__)
        if inner is None or inner in links:
            return links
        links.append(inner)


def root_cause(links: list[BaseException]) -> BaseException:
    """The innermost error, or the one wrapping it that adds to its message (DTensor adds the
    sharding rule and the shapes to a shape error)."""
    root = links[-1]
    for outer in reversed(links[:-1]):
        if type(outer) is not type(root) or not str(outer).startswith(str(root)):
            break
        root = outer
    return root


def one_line(error: BaseException, first_only: bool = False) -> str:
    """`Type: message`, its lines joined (or its first line), at most LONGEST characters."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " ".join(lines[:1] if first_only else lines)
    if len(text) > LONGEST:
        text = text[: LONGEST - 3] + "..."
    return f"{type(error).__name__}: {text}".rstrip(": ")


def where(links: list[BaseException]) -> str:
    """Where in your code the error arose: the line torch.compile was tracing, else the
    innermost traceback's."""
    for link in links:
        if traced := user_frame(getattr(link, "real_stack", None) or []):
            return traced
    for link in reversed(links):
        if found := user_frame(traceback.extract_tb(link.__traceback__)):
            return found
    return ""


def hint(cause: str, size: int) -> str:
    """What to run next for a cause this module knows; empty for any other."""
    if "Sharding propagation" in cause or "DTensor" in cause:
        return (
            f"a sharded layer met inputs its plan entry does not fit: `python -m "
            f"{project.PACKAGE} check --nproc-per-node {size}` runs parallel_plan() "
            "in one process and names the entry and its shapes"
        )
    return ""


def torchruns_store() -> dist.TCPStore:
    """A client of torchrun's store (an exception where it cannot be reached)."""
    return dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        is_master=False,
        timeout=STORE_TIMEOUT,
    )


def key(name: str) -> str:
    """A key of this project's in torchrun's store, which keeps keys of its own there."""
    return f"{project.PACKAGE}/{name}"


def first_to_fail(rank: int, cause: str) -> tuple[int, str]:
    """The rank that failed first and its cause, claimed atomically in torchrun's store; this
    rank and its cause when the store cannot be reached."""
    claim = f"{rank}\n{cause}"
    with contextlib.suppress(Exception):  # no store: this rank says it all rather than nothing
        claim = torchruns_store().compare_set(key("first_failure"), "", claim).decode()
    first, _, first_cause = claim.partition("\n")
    return int(first), first_cause


def told() -> None:
    """Mark that the first rank to fail has printed its cause."""
    with contextlib.suppress(Exception):
        torchruns_store().set(key("told"), "1")


def after_the_cause() -> None:
    """Wait, at most TOLD_TIMEOUT, until the first rank to fail has printed its cause: a
    consequence's line comes after it (that rank may have caught its error, and print none)."""
    with contextlib.suppress(Exception):
        torchruns_store().wait([key("told")], TOLD_TIMEOUT)


def cause_of(error: BaseException) -> str:
    """The root cause of `error` in one line, as the ranks compare it."""
    return one_line(root_cause(chain(error)))


def report(
    error: BaseException,
    rank: int,
    size: int,
    error_file: Path,
    claimed: tuple[int, str] | None = None,
) -> list[str]:
    """What this rank prints for `error`: nothing when an earlier rank failed the same way.
    Writes the full traceback beside torchrun's error file, and the error file itself.
    `claimed`: first_to_fail()'s answer, where the rank asked already; else it asks now."""
    links = chain(error)
    root = root_cause(links)
    cause, at = one_line(root), where(links)
    first, first_cause = claimed or first_to_fail(rank, cause)
    full = error_file.with_name("traceback.txt")
    full.write_text("".join(traceback.format_exception(error)))
    if first != rank:
        # Most often a consequence (a collective whose peer is gone): one line, if not the same.
        same = first_cause == cause
        lines = [] if same else [f"failed after rank {first}: {cause[: LONGEST // 3]}"]
        shown = (
            f"the same {type(root).__name__} as rank {first}, printed on its stderr"
            if same
            else f"{type(root).__name__} after rank {first} failed, printed on rank {rank}'s stderr"
        )
    else:
        lines = [cause]
        if at and at not in cause:
            lines.append(f"  at {at}")
        if error is not root:
            lines.append(f"  raised as {one_line(error, first_only=True)}")
        if tip := hint(cause, size):
            lines.append(f"  hint: {tip}")
        lines.append(f"  full traceback (the first of {size} ranks to fail): {full}")
        shown = f"{type(root).__name__}, printed first on rank {rank}'s stderr"
    # What torchrun's summary reads: the cause for a scheduler, a pointer for people.
    message = {
        "message": f"{cause} (at {at})" if at else cause,
        "extraInfo": {
            "py_callstack": f"{shown}; full traceback: {full}",
            "timestamp": str(int(time.time())),
        },
    }
    error_file.write_text(json.dumps({"message": message}))
    return [f"[rank{rank}]: {line}" for line in lines]


def report_when_uncaught(error: BaseException, rank: int, size: int) -> None:
    """If `error` ends this process, print report()'s lines instead of its traceback.

    Only under torchrun, which gives each rank an error file (TORCHELASTIC_ERROR_FILE) and keeps
    it: the full traceback goes beside it. An error some caller catches is never reported. The
    failure is claimed at once, while this rank's process group stands: once the group is
    destroyed on the way out, the other ranks' collectives fail too, and one of them would
    claim first. A later rank prints its line after the first rank's cause.
    """
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not error_file:
        return
    claimed = first_to_fail(rank, cause_of(error))
    previous: Callable[..., None] = sys.excepthook

    def excepthook(
        kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        if value is not error:
            previous(kind, value, tb)
            return
        try:
            lines = report(error, rank, size, Path(error_file), claimed)
        except Exception:  # noqa: BLE001  (reporting must not hide the error itself)
            previous(kind, value, tb)
            return
        first = claimed[0] == rank
        if lines and not first:
            after_the_cause()
        if lines:
            print("\n".join(lines), file=sys.stderr, flush=True)
        if first:
            told()

    sys.excepthook = excepthook
