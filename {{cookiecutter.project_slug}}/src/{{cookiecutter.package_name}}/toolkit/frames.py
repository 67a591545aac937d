"""Where in your code something arose: the line of yours, and the library's line beneath it.

An error, a graph break or a graph node carries a stack. The frame worth naming is the innermost
one in your code: not torch's, not this toolkit's, not a library's (transformers, the standard
library: whatever is installed in site-packages or ships with Python). When the stack goes on
into such a library below your line, the library's innermost line follows it: model.py:66, where
you called into transformers, then transformers' configuration_utils.py:312, where it raised.
"""

from __future__ import annotations

import re
import site
import sysconfig
import traceback
from functools import cache
from pathlib import Path

import torch

from . import project

TOOLKIT = Path(__file__).resolve().parent
TORCH = Path(torch.__file__).resolve().parent


@cache
def library_roots() -> tuple[Path, ...]:
    """Where installed libraries and Python's own modules live."""
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"]}
    roots.update(site.getsitepackages())
    roots.add(site.getusersitepackages())
    return tuple(Path(root).resolve() for root in roots)


def kind(filename: str) -> str:
    """`yours`, `torch` (torch or this toolkit), or `library` (installed, or Python's own)."""
    return kind_in(filename, project.current().folder)


@cache
def kind_in(filename: str, package: Path) -> str:
    """kind() where `package` is your package's folder: yours wherever it is installed,
    site-packages included."""
    if filename.startswith("<"):
        return "torch"  # generated code (<eval_with_key>, <frozen ...>): no line to show
    path = Path(filename).resolve()
    if path.is_relative_to(TOOLKIT) or path.is_relative_to(TORCH):
        return "torch"
    if path.is_relative_to(package):
        return "yours"
    if any(path.is_relative_to(root) for root in library_roots()):
        return "library"
    return "yours"


def short(frame: traceback.FrameSummary) -> str:
    """A library frame as its path below the folder it is installed in: transformers/....py:312."""
    path = Path(frame.filename).resolve()
    roots = [root for root in library_roots() if path.is_relative_to(root)]
    shown = path.relative_to(max(roots, key=lambda root: len(root.parts))) if roots else path
    return f"{shown}:{frame.lineno} ({frame.name})"


def user_frame(frames: list[traceback.FrameSummary]) -> str:
    """file:line of the innermost frame in your code, and, if the stack went on below it into a
    library, that library's innermost line after it; "" if no frame is yours."""
    kinds = [kind(frame.filename) for frame in frames]
    if "yours" not in kinds:
        return ""
    last = len(kinds) - 1 - kinds[::-1].index("yours")
    frame = frames[last]
    where = f"{frame.filename}:{frame.lineno} ({frame.name})"
    below = [
        each
        for each, what in zip(frames[last + 1 :], kinds[last + 1 :], strict=True)
        if what == "library"
    ]
    return f"{where}, in {short(below[-1])}" if below else where


def traced_frame(text: str) -> str:
    """user_frame() of a printed stack (a traceback's text, a graph node's stack trace)."""
    traced = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', text)
    return user_frame(
        [traceback.FrameSummary(file, int(line), name) for file, line, name in traced]
    )


def caller_of_torch() -> str:
    """user_frame() of the stack: the line of yours that called into torch, whatever runs above
    it (a dispatch mode of this toolkit's, a wrapper around it)."""
    return user_frame(traceback.extract_stack())


def error_frame(error: BaseException) -> str:
    """Where in your code an error arose: Dynamo names the traced line in its message, and a
    SyntaxError the line it could not parse (the frames are the import's, not yours)."""
    if isinstance(error, SyntaxError) and error.filename:
        return f"{error.filename}:{error.lineno}"
    return traced_frame(str(error)) or user_frame(traceback.extract_tb(error.__traceback__))


def first_line(error: BaseException) -> str:
    """`Type: first line of the message`."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
