"""A failing rank's report, in one process: the error chain it follows, the root cause and where
in your code it arose, one line each; the first rank to fail, agreed through a store; what each
rank prints and writes for torchrun. (Two real ranks failing under torchrun run in
tests/test_tensor_parallel.py.)"""

import inspect
import json
import socket
import sys
import sysconfig
import traceback
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch._dynamo.exc import TorchDynamoException

from parallel_project.toolkit import rank_failure
from parallel_project.toolkit.frames import user_frame
from parallel_project.toolkit.rank_failure import (
    LONGEST,
    chain,
    first_to_fail,
    hint,
    one_line,
    report,
    report_when_uncaught,
    root_cause,
    where,
)

HERE = Path(__file__)
SHARDING = "Sharding propagation failed for aten.mm: shapes (2, 8) and (4, 8)"


def raised(make, *arguments):
    """The error `make(*arguments)` raises, with its traceback."""
    try:
        make(*arguments)
    except Exception as error:  # noqa: BLE001  (any error: the one under test)
        return error
    raise AssertionError(f"{make.__name__} raised nothing")


def shape_error(message=SHARDING):
    raise ValueError(message)


def compile_error(message=SHARDING):
    try:
        shape_error(message)
    except ValueError as error:
        raise RuntimeError("compiling the step failed\nwhile tracing forward") from error


def line_of(function) -> int:
    """The line of `function` that raises."""
    lines, start = inspect.getsourcelines(function)
    return start + next(n for n, line in enumerate(lines) if "raise" in line)


@pytest.fixture
def no_store(monkeypatch):
    """No torchrun store: each rank reports as the first to fail."""
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)


@pytest.fixture
def store(monkeypatch):
    """A store like torchrun's, where the ranks claim the first failure."""
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(master.port))
    return master


def test_the_chain_follows_causes_and_contexts_outermost_first():
    """`raise ... from`, and an error raised while handling another, link the errors."""
    error = raised(compile_error)
    assert [type(link) for link in chain(error)] == [RuntimeError, ValueError]

    def while_handling():
        try:
            shape_error()
        except ValueError:
            raise KeyError("during")  # noqa: B904  (the implicit context is the point)

    assert [type(link) for link in chain(raised(while_handling))] == [KeyError, ValueError]


def test_the_chain_stops_where_a_context_is_suppressed_unless_torch_compile_suppressed_it():
    """`raise ... from None` ends the chain; torch.compile's own errors suppress the real one,
    which is followed all the same."""
    inner = ValueError(SHARDING)
    plain = RuntimeError("plain")
    plain.__context__, plain.__suppress_context__ = inner, True
    assert chain(plain) == [plain]
    dynamo = TorchDynamoException("backend failed")
    dynamo.__context__, dynamo.__suppress_context__ = inner, True
    assert chain(dynamo) == [dynamo, inner]


def test_the_chain_ends_at_an_error_already_in_it():
    """A cycle of causes does not loop."""
    first, second = ValueError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    assert chain(first) == [first, second]


def test_the_root_cause_is_the_innermost_error():
    """The innermost error, not the wrapper that only says compiling failed."""
    inner = ValueError(SHARDING)
    assert root_cause([RuntimeError("compiling failed"), inner]) is inner


def test_the_root_cause_is_a_wrapper_of_its_type_that_adds_to_its_message():
    """DTensor re-raises a shape error with the rule and shapes added: that one is shown, however
    many such wrappers there are; a wrapper of another type stops the search."""
    inner, middle, outer = (
        RuntimeError("shape"),
        RuntimeError("shape; rule"),
        RuntimeError("shape; rule; mesh"),
    )
    assert root_cause([outer, middle, inner]) is outer
    assert root_cause([RuntimeError("shape; rule"), KeyError("x"), inner]) is inner
    assert root_cause([RuntimeError("other"), inner]) is inner


def test_one_line_joins_the_message_lines():
    """`Type: message`, its lines stripped and joined by spaces, blank ones dropped."""
    error = ValueError("first\n   second \n\n third")
    assert one_line(error) == "ValueError: first second third"
    assert one_line(error, first_only=True) == "ValueError: first"


def test_one_line_cuts_a_long_message_and_names_an_empty_one_by_its_type():
    """At most LONGEST characters of message, the cut marked; no colon after a bare type."""
    assert one_line(ValueError("x" * LONGEST)) == f"ValueError: {'x' * LONGEST}"
    assert one_line(ValueError("x" * (LONGEST + 1))) == f"ValueError: {'x' * (LONGEST - 3)}..."
    assert one_line(ValueError()) == "ValueError"
    assert one_line(ValueError("MAX")) == "ValueError: MAX"


def test_your_frame_is_the_innermost_outside_torch_and_python():
    """Frames of torch, of the standard library and of generated code are not yours."""
    frame = traceback.FrameSummary
    torch_file = str(Path(torch.__file__).parent / "nn" / "modules" / "module.py")
    stdlib_file = str(Path(sysconfig.get_paths()["stdlib"]) / "runpy.py")
    frames = [
        frame("/work/project/run.py", 3, "main"),
        frame("/work/project/model.py", 12, "forward"),
        frame(torch_file, 1775, "_call_impl"),
        frame(stdlib_file, 88, "_run_code"),
        frame("<eval_with_key>.1", 5, "forward"),
    ]
    # The library's line below yours (here Python's own runpy) follows it, as frames.py says.
    assert user_frame(frames).startswith("/work/project/model.py:12 (forward)")
    assert user_frame(frames[2:]) == ""


def test_where_prefers_the_line_torch_compile_was_tracing():
    """A compile error's real_stack (the line being traced) wins over its traceback."""
    error = raised(compile_error)
    error.real_stack = [traceback.FrameSummary("/work/project/model.py", 7, "forward")]
    assert where(chain(error)) == "/work/project/model.py:7 (forward)"


def test_where_falls_back_to_the_innermost_traceback():
    """Without a traced line, the innermost error's own frame: where the shape error arose."""
    assert where(chain(raised(compile_error))) == f"{HERE}:{line_of(shape_error)} (shape_error)"
    assert where([ValueError("never raised")]) == ""


def test_a_sharding_error_hints_at_check_with_the_world_size():
    """Sharding and DTensor errors point at `check --nproc-per-node N`; others get no hint."""
    assert hint(f"ValueError: {SHARDING}", 4) == (
        "a sharded layer met inputs its plan entry does not fit: `python -m parallel_project check "
        "--nproc-per-node 4` runs parallel_plan() in one process and names the entry and its shapes"
    )
    assert hint("RuntimeError: DTensor met a plain tensor", 2)
    assert hint("KeyError: 'RANK'", 2) == ""


def test_without_a_store_a_rank_reports_as_the_first(no_store):
    """No store to ask (torchrun is gone): this rank says it all rather than nothing."""
    assert first_to_fail(3, "ValueError: x") == (3, "ValueError: x")


def test_the_first_rank_to_claim_the_failure_keeps_it(store):
    """The first claim wins, under the project's key; later ranks read it, the cause whole."""
    assert first_to_fail(1, "ValueError: first\nline") == (1, "ValueError: first\nline")
    assert first_to_fail(0, "RuntimeError: later") == (1, "ValueError: first\nline")
    assert store.get("parallel_project/first_failure") == b"1\nValueError: first\nline"


def test_a_store_that_is_gone_leaves_the_rank_reporting_as_the_first(monkeypatch):
    """torchrun stopping: the store's address answers nothing, and after STORE_TIMEOUT this
    rank reports as the first rather than waiting on."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setattr(rank_failure, "STORE_TIMEOUT", timedelta(seconds=1))
    assert first_to_fail(1, "ValueError: x") == (1, "ValueError: x")


def test_the_first_rank_prints_the_cause_where_why_and_the_full_traceback(no_store, tmp_path):
    """The root cause, where in your code, the error it was raised as, the hint and the file
    with the full traceback; torchrun's error file holds the cause and points at these lines."""
    error_file = tmp_path / "error.json"
    error = raised(compile_error)
    lines = report(error, 0, 2, error_file)
    cause, at = f"ValueError: {SHARDING}", f"{HERE}:{line_of(shape_error)} (shape_error)"
    full = tmp_path / "traceback.txt"
    assert lines == [
        f"[rank0]: {cause}",
        f"[rank0]:   at {at}",
        "[rank0]:   raised as RuntimeError: compiling the step failed",
        f"[rank0]:   hint: {hint(cause, 2)}",
        f"[rank0]:   full traceback (the first of 2 ranks to fail): {full}",
    ]
    assert full.read_text() == "".join(traceback.format_exception(error))
    message = json.loads(error_file.read_text())["message"]
    assert message["message"] == f"{cause} (at {at})"
    shown = message["extraInfo"]["py_callstack"]
    assert shown == f"ValueError, printed first on rank 0's stderr; full traceback: {full}"
    assert int(message["extraInfo"]["timestamp"]) > 0


def test_a_plain_error_gets_no_lines_it_does_not_need(no_store, tmp_path):
    """An error raised as itself, with no hint, and no place to name (or one its message names
    already): its cause and the full traceback's file, nothing else."""
    full = tmp_path / "traceback.txt"
    lines = report(ValueError("plain"), 1, 2, tmp_path / "error.json")
    assert lines == [
        "[rank1]: ValueError: plain",
        f"[rank1]:   full traceback (the first of 2 ranks to fail): {full}",
    ]
    assert json.loads((tmp_path / "error.json").read_text())["message"]["message"] == "ValueError: plain"

    at = f"{HERE}:{line_of(shape_error)} (shape_error)"
    lines = report(raised(shape_error, f"bad value at {at}"), 1, 2, tmp_path / "error.json")
    assert lines[0] == f"[rank1]: ValueError: bad value at {at}"
    assert len(lines) == 2


def test_a_later_rank_failing_the_same_way_prints_nothing(store, tmp_path):
    """The second rank with the same cause adds no line; its error file points at the first."""
    report(raised(compile_error), 0, 2, tmp_path / "error0.json")
    (tmp_path / "rank1").mkdir()
    assert report(raised(compile_error), 1, 2, tmp_path / "rank1" / "error.json") == []
    message = json.loads((tmp_path / "rank1" / "error.json").read_text())["message"]
    shown = message["extraInfo"]["py_callstack"]
    assert shown.startswith("the same ValueError as rank 0, printed on its stderr; full traceback: ")


def test_a_later_rank_failing_otherwise_prints_one_short_line(store, tmp_path):
    """A consequence (a collective whose peer is gone): one line, cut to a third of LONGEST."""
    report(raised(compile_error), 0, 2, tmp_path / "error0.json")
    (tmp_path / "rank1").mkdir()
    error = raised(shape_error, "Connection closed by peer " + "x" * LONGEST)
    lines = report(error, 1, 2, tmp_path / "rank1" / "error.json")
    cause = one_line(error)
    assert lines == [f"[rank1]: failed after rank 0: {cause[: LONGEST // 3]}"]
    message = json.loads((tmp_path / "rank1" / "error.json").read_text())["message"]
    shown = message["extraInfo"]["py_callstack"]
    assert shown.startswith("ValueError after rank 0 failed, printed on rank 1's stderr; full traceback: ")


class RecordingHook:
    """The excepthook in place before report_when_uncaught, recording what reaches it."""

    def __init__(self):
        self.calls = []

    def __call__(self, kind, value, tb):
        self.calls.append((kind, value, tb))


@pytest.fixture
def previous(monkeypatch):
    hook = RecordingHook()
    monkeypatch.setattr(sys, "excepthook", hook)
    return hook


def test_outside_torchrun_the_traceback_stays_as_it_is(previous, monkeypatch):
    """Without torchrun's error file, nothing is reported instead."""
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    report_when_uncaught(ValueError("x"), 0, 2)
    assert sys.excepthook is previous


def test_under_torchrun_the_uncaught_error_prints_its_report(
    previous, monkeypatch, tmp_path, capsys, no_store
):
    """The error ending the rank prints report()'s lines instead of its traceback; any other
    error, and one whose report fails, goes to the hook as before."""
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))
    error = raised(compile_error)
    report_when_uncaught(error, 0, 4)
    assert capsys.readouterr().err == ""  # an error some caller catches is never reported
    sys.excepthook(type(error), error, error.__traceback__)
    printed = capsys.readouterr().err
    assert printed.startswith(f"[rank0]: ValueError: {SHARDING}\n")
    assert "--nproc-per-node 4" in printed
    assert printed.endswith(
        "full traceback (the first of 4 ranks to fail): " + str(tmp_path / "traceback.txt") + "\n"
    )
    assert previous.calls == []

    other = raised(shape_error, "other")
    sys.excepthook(ValueError, other, other.__traceback__)
    assert previous.calls == [(ValueError, other, other.__traceback__)]

    monkeypatch.setattr(rank_failure, "report", lambda *arguments: 1 / 0)
    sys.excepthook(RuntimeError, error, error.__traceback__)
    assert previous.calls[1] == (RuntimeError, error, error.__traceback__)
    assert capsys.readouterr().err == ""


def test_the_hook_writes_the_error_file_over_records(previous, monkeypatch, tmp_path, no_store):
    """torch's @record writes its own error file as the error passes; the hook writes the
    report's last."""
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))
    error = raised(compile_error)
    report_when_uncaught(error, 0, 2)
    (tmp_path / "error.json").write_text('{"message": "written by record"}')
    sys.excepthook(type(error), error, error.__traceback__)
    message = json.loads((tmp_path / "error.json").read_text())["message"]
    assert message["message"].startswith(f"ValueError: {SHARDING}")


def test_a_rank_claims_its_failure_as_the_error_leaves_its_block(
    previous, monkeypatch, tmp_path, capsys, store
):
    """The failure is claimed when the error leaves the rank's block, before its process group
    goes: the peer whose collective fails then reports as the later rank."""
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))
    error = raised(compile_error)
    report_when_uncaught(error, 1, 2)
    (tmp_path / "rank0").mkdir()
    peer = raised(shape_error, "Connection closed by peer")
    assert report(peer, 0, 2, tmp_path / "rank0" / "error.json")[0].startswith(
        "[rank0]: failed after rank 1: "
    )
    sys.excepthook(type(error), error, error.__traceback__)
    assert capsys.readouterr().err.startswith(f"[rank1]: ValueError: {SHARDING}\n")


def test_a_later_rank_prints_its_line_after_the_first_ranks_cause(
    previous, monkeypatch, tmp_path, capsys, store
):
    """The first rank marks its cause told once printed; a later rank waits for that mark
    before its own line, so the cause comes first in torchrun's output."""
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))
    first = raised(compile_error)
    report_when_uncaught(first, 1, 2)
    (tmp_path / "rank0").mkdir()
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "rank0" / "error.json"))
    later = raised(shape_error, "Connection closed by peer")
    report_when_uncaught(later, 0, 2)  # the hook now in place is rank 0's
    events = []
    monkeypatch.setattr(rank_failure, "after_the_cause", lambda: events.append("waited"))
    sys.excepthook(type(later), later, later.__traceback__)
    events.append(capsys.readouterr().err.split(":")[0])
    assert events == ["waited", "[rank0]"]
    rank_failure.told()
    assert rank_failure.torchruns_store().get(rank_failure.key("told")) == b"1"
