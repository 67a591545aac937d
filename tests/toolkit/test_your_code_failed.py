"""The command line (`python -m <package> <command>`, the project's __main__.py) tells a failure to
import your own code in one line, exit 2: a syntax error, an import of yours that fails, or a
name model.py lacks that the command needs. An error of anything else keeps its traceback."""

from __future__ import annotations

import contextlib
import importlib
import io
import shutil
import sys
from pathlib import Path

import pytest

PACKAGE = "decode_project"


def run_broken(tmp_path: Path, monkeypatch, command: str, old: str, new: str) -> tuple[int, str, str]:
    """`python -m <package> <command>` on a copy of the decode project whose model.py has `old`
    replaced by `new`: the exit status, stdout and stderr. The copy is a package of its own name
    (its imports are relative), imported fresh in this process, as a new process would."""
    name = broken(tmp_path)
    source = Path(importlib.import_module(PACKAGE).__file__).parent
    copy = tmp_path / name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    model = copy / "model.py"
    text = model.read_text()
    assert text.count(old) == 1, old
    model.write_text(text.replace(old, new))
    monkeypatch.syspath_prepend(str(tmp_path))
    printed, told = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
            code = importlib.import_module(f"{name}.__main__").main([command])
    finally:
        for loaded in [key for key in sys.modules if key == name or key.startswith(f"{name}.")]:
            del sys.modules[loaded]
    return code, printed.getvalue(), told.getvalue()


def broken(tmp_path: Path) -> str:
    """The name of run_broken()'s copy."""
    return f"broken_{tmp_path.name.replace('-', '_')}"


def test_a_contract_name_model_py_lacks_is_named_in_one_line(tmp_path, monkeypatch):
    """model.py without example_inputs(): generate, whose loop imports it, exits 2 naming it."""
    code, printed, told = run_broken(
        tmp_path, monkeypatch, "generate", "def example_inputs(", "def example_input("
    )
    assert (code, printed) == (2, "")
    assert told == (
        "generate: model.py defines no example_inputs, which this command needs (README, section "
        "'What is where', lists the names)\n"
    )


def test_a_syntax_error_in_model_py_is_its_file_and_line(tmp_path, monkeypatch):
    """A syntax error in model.py: bench exits 2 with the file, the line and Python's words."""
    text = (Path(importlib.import_module(PACKAGE).__file__).parent / "model.py").read_text()
    line = text.splitlines().index("MAX_SEQ_LEN = 40") + 1
    code, printed, told = run_broken(
        tmp_path, monkeypatch, "bench", "MAX_SEQ_LEN = 40\n", "MAX_SEQ_LEN = 40 +\n"
    )
    assert (code, printed) == (2, "")
    assert told == f"bench: {broken(tmp_path)}/model.py, line {line}: SyntaxError: invalid syntax\n"


def test_an_import_of_yours_that_fails_is_told_at_your_line(tmp_path, monkeypatch):
    """model.py importing a module that is not installed: profile exits 2 naming model.py's line."""
    code, printed, told = run_broken(
        tmp_path, monkeypatch, "profile", "import torch\n", "import torch\nimport not_installed_here\n"
    )
    assert (code, printed) == (2, "")
    assert told.startswith(f"profile: {broken(tmp_path)}/model.py, line ")
    assert told.endswith(": ModuleNotFoundError: No module named 'not_installed_here'\n")


@pytest.mark.parametrize(
    "error",
    [
        ImportError("cannot import name 'nothing' from 'torch'", name="torch"),
        ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib"),
        SyntaxError("invalid syntax", ("/elsewhere/file.py", 3, 1, "x +\n")),
    ],
)
def test_an_error_not_of_your_code_keeps_its_traceback(error):
    """An import error raised outside your files, or a syntax error in a file not of the
    project: not yours to fix in model.py, so no one-line verdict (the traceback stays)."""
    cli = importlib.import_module(f"{PACKAGE}.__main__")
    assert cli.your_code_failed(error) is None
