"""What your model prints never mixes into a tool's report: stdout holds the report (or the JSON)
alone, and the model's own words go to stderr. A print in build_model() is no graph break, and
users print there, so every tool that builds the model is run here with one that does."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys

import pytest
import torch

from forward_project.toolkit.backend import BACKEND_ENV

SAID = "building my model"

# (project, the command line after `python -m <package>`, its exit status here): each tool that
# builds the model and prints JSON, kept fast. The doctor warns off an NPU.
COMMANDS = {
    "check": ("forward_project", ["check", "--json"], 0),
    "doctor": ("forward_project", ["doctor", "--json"], 1),
    "bench": ("forward_project", ["bench", "--json", "--iters", "3", "--warmup", "1"], 0),
    "generate": ("decode_project", ["generate", "--json", "--new-tokens", "3"], 0),
}


@pytest.mark.parametrize("tool", COMMANDS)
def test_a_model_that_prints_while_it_builds_leaves_stdout_to_the_json(tool, monkeypatch, tmp_path):
    """`<tool> --json` on a build_model() that prints: stdout is one JSON object, and the
    model's print is on stderr."""
    name, command, status = COMMANDS[tool]
    model = importlib.import_module(f"{name}.model")
    build = model.build_model

    def build_and_print():
        print(SAID)
        return build()

    # Modules that imported build_model from model.py hold their own name for it.
    for module in [module for key, module in sys.modules.items() if key.startswith(f"{name}.")]:
        if getattr(module, "build_model", None) is build:
            monkeypatch.setattr(module, "build_model", build_and_print)
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    torch._dynamo.reset()
    printed, told = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
        code = importlib.import_module(f"{name}.__main__").main(command)
    assert code == status, told.getvalue()
    assert isinstance(json.loads(printed.getvalue()), dict)
    assert SAID in told.getvalue()
