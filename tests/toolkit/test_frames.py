"""Where an error arose: the line of yours, then the library's line beneath it, if the stack went
on into one (transformers, the standard library); never torch's or the toolkit's."""

import json
import traceback
from pathlib import Path

import pytest
import torch

from forward_project.toolkit import frames


def line_of(marker: str) -> int:
    source = Path(__file__).read_text().splitlines()
    return next(number for number, text in enumerate(source, 1) if text.endswith(marker))


def reads_a_config():
    return json.loads("{")  # your call into a library


def test_an_error_raised_in_a_library_names_your_line_then_the_librarys():
    """A library that raises below your code: `where` is your line, which called it, then the
    library's innermost line."""
    with pytest.raises(json.JSONDecodeError) as raised:
        reads_a_config()
    where = frames.error_frame(raised.value)
    yours, _, library = where.partition(", in ")
    assert yours == f"{__file__}:{line_of('your call into a library')} (reads_a_config)"
    assert library.startswith("json/decoder.py:")


def multiplies_wrongly():
    return torch.ones(2, 3) @ torch.ones(2, 3)  # your call into torch


def test_an_error_raised_in_torch_names_your_line_alone():
    """torch's frames are not a library's line to show: the error is named at your line."""
    with pytest.raises(RuntimeError) as raised:
        multiplies_wrongly()
    assert (
        frames.error_frame(raised.value)
        == f"{__file__}:{line_of('your call into torch')} (multiplies_wrongly)"
    )


def test_a_stack_of_library_frames_alone_is_nowhere():
    """An error with no frame of yours is placed nowhere, rather than at a library's line."""
    stack = [traceback.FrameSummary(json.__file__, 1, "loads")]
    assert frames.user_frame(stack) == ""


def test_your_package_is_yours_wherever_it_is_installed():
    """Your package's files are yours even inside site-packages, where a wheel installs them; the
    files of another package there are a library's."""
    library = frames.library_roots()[0]
    model = str(library / "your_package" / "model.py")
    assert frames.kind_in(model, library / "your_package") == "yours"
    assert frames.kind_in(model, library / "their_package") == "library"
