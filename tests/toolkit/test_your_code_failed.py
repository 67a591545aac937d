"""The command line (`python -m <package> <command>`, the project's __main__.py) tells a failure to
import your own code in one line, exit 2: a syntax error, an import of yours that fails, or a
name model.py lacks that the command needs. An error of anything else keeps its traceback."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = "decode_project"
TIMEOUT = 300  # seconds: torch's import on a loaded 2-core machine, then a refusal


def run_broken(tmp_path: Path, command: str, old: str, new: str) -> subprocess.CompletedProcess[str]:
    """`python -m decode_project <command>` on a copy of the project whose model.py has `old`
    replaced by `new`."""
    source = Path(importlib.import_module(PACKAGE).__file__).parent
    copy = tmp_path / PACKAGE
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    model = copy / "model.py"
    text = model.read_text()
    assert text.count(old) == 1, old
    model.write_text(text.replace(old, new))
    environment = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", PACKAGE, command],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_a_contract_name_model_py_lacks_is_named_in_one_line(tmp_path):
    """model.py without example_inputs(): generate, whose loop imports it, exits 2 naming it."""
    run = run_broken(tmp_path, "generate", "def example_inputs(", "def example_input(")
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (
        "generate: model.py defines no example_inputs, which this command needs (README, section "
        "'What is where', lists the names)\n"
    )


def test_a_syntax_error_in_model_py_is_its_file_and_line(tmp_path):
    """A syntax error in model.py: bench exits 2 with the file, the line and Python's words."""
    text = (Path(importlib.import_module(PACKAGE).__file__).parent / "model.py").read_text()
    line = text.splitlines().index("MAX_SEQ_LEN = 40") + 1
    run = run_broken(tmp_path, "bench", "MAX_SEQ_LEN = 40\n", "MAX_SEQ_LEN = 40 +\n")
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == f"bench: {PACKAGE}/model.py, line {line}: SyntaxError: invalid syntax\n"


def test_an_import_of_yours_that_fails_is_told_at_your_line(tmp_path):
    """model.py importing a module that is not installed: profile exits 2 naming model.py's line."""
    run = run_broken(tmp_path, "profile", "import torch\n", "import torch\nimport not_installed_here\n")
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.startswith(f"profile: {PACKAGE}/model.py, line ")
    assert run.stderr.endswith(": ModuleNotFoundError: No module named 'not_installed_here'\n")


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
