"""Bring your own model: real models replace model.py in a fresh bake, and every tool still works.

Each model in tests/own_models/ is dropped into a baked project as a user would, then run through
the MRE, `check`, `bench`, `export` (and `generate` in a decode project) and the project's own test
suite, which runs the portable export in an empty folder. One graph-breaking model must fail loudly
and briefly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import bake, package_of, run_in

OWN_MODELS = Path(__file__).parent / "own_models"


def drop_in(project: Path, files: dict[str, str | tuple[str, ...]], **placeholders: str) -> None:
    """Copy fixture files into the package as the user's own (model.py replaced); a tuple of
    fixtures is one file, each appended to the one before, as the README says to add them."""
    package = project / "src" / package_of(project)
    for target, fixtures in files.items():
        parts = (fixtures,) if isinstance(fixtures, str) else fixtures
        text = "\n\n".join((OWN_MODELS / fixture).read_text() for fixture in parts)
        for placeholder, value in {"PACKAGE": package.name, **placeholders}.items():
            text = text.replace(placeholder, value)
        (package / target).write_text(text)


# Runs, in one process (one import of torch and of the model's libraries), what a user runs after
# replacing model.py: the MRE, each tool, then the project's own test suite.
TOOLS = """\
import contextlib, io, json, runpy, sys, pytest, torch
from {package}.__main__ import main

results = {{}}
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    output = runpy.run_module("{package}.mre", run_name="__main__")["infer_one_step"]()
results["mre"] = [0, printed.getvalue()]
commands = {{
    **{extra},
    "check": ["check", "--json"],
    "bench": ["bench", "--iters", "3", "--warmup", "1", "--json"],
    "export-portable": ["export", "-o", "exported_portable.py", "--target", "portable"],
    "export-npu": ["export", "-o", "exported_npu.py", "--target", "npu"],
}}
for name, command in commands.items():
    torch._dynamo.reset()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(command)
    results[name] = [code, printed.getvalue()]
print("RESULTS " + json.dumps(results))
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider"]))
"""


def run_tools(project: Path, extra: dict[str, list[str]]) -> dict[str, tuple[int, str]]:
    """Each tool's exit code and output, `extra` commands first; the project's own suite must pass
    after them."""
    result = run_in(project, "-c", TOOLS.format(package=package_of(project), extra=json.dumps(extra)))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULTS ")]
    return {name: (code, text) for name, (code, text) in json.loads(line.removeprefix("RESULTS ")).items()}


CASES = {
    "transformers language model on token ids": (
        {"model.py": "language_model.py"},
        {},
    ),
    "transformers language model on token ids, tensor parallel": (
        {"model.py": ("language_model.py", "language_model_plan.py")},
        {"parallel": "tensor_parallel"},
    ),
    "two inputs, cache_compile mode": (
        {"model.py": "two_inputs.py"},
        {"mode": "cache_compile"},
    ),
    "several modules, constructor arguments, dict output": (
        {"model.py": "several_modules/model.py", "layers.py": "several_modules/layers.py"},
        {},
    ),
    "absolute import of a sibling module": (
        {"model.py": "absolute_import.py", "layers.py": "several_modules/layers.py"},
        {"mode": "cache_compile"},
    ),
    "the project's custom operator": (
        {"model.py": "calls_custom_op.py"},
        {"custom_op": "out_of_place", "op_registration": "torch_library"},
    ),
    "transformers Llama behind a StaticCache, decode": (
        {"model.py": "static_cache_llama.py"},
        {"workload": "decode"},
    ),
}
GENERATE = {"generate": ["generate", "--json", "--new-tokens", "4"]}
"""What a decode project runs besides the other tools."""


@pytest.mark.slow
@pytest.mark.full
@pytest.mark.parametrize("case", CASES)
def test_every_tool_runs_your_model(case, tmp_path):
    """The MRE, check, bench, export (generate in a decode project) and the project's own tests all
    work on a replaced model.py.

    The project's own suite runs the portable export in an empty folder, with the project
    unimportable, and compares it with the MRE (test_export.py)."""
    files, answers = CASES[case]
    decode = answers.get("workload") == "decode"
    project = bake(tmp_path / "bake", **answers)
    package = package_of(project)
    drop_in(project, files, NAMESPACE=package, OP="my_op")

    results = run_tools(project, GENERATE if decode else {})
    assert "backend     aot_eager" in results["mre"][1]
    assert "1 graph" in results["mre"][1]
    check_code, check_json = results["check"]
    assert check_code == 0, check_json
    assert json.loads(check_json)["verdict"] == 0
    bench_code, bench_json = results["bench"]
    assert bench_code == 0
    assert json.loads(bench_json)["outputs_match"] is True
    if decode:
        generate_code, generate_json = results["generate"]
        assert generate_code == 0, generate_json
        generated = json.loads(generate_json)
        assert (generated["matches_eager"], generated["recompiles"]) == (True, [])
        assert {len(tokens) for tokens in generated["tokens"]} == {generated["prompt_length"] + 4}
    assert results["export-npu"][0] == 0
    assert results["export-portable"][0] == 0


@pytest.mark.slow
@pytest.mark.full
def test_a_graph_break_fails_once_and_briefly(tmp_path):
    """A graph-breaking model: the suite fails with one short failure naming the line; check says why."""
    project = bake(tmp_path / "bake")
    drop_in(project, {"model.py": "graph_break.py"})
    model = project / "src" / package_of(project) / "model.py"
    line = next(n for n, text in enumerate(model.read_text().splitlines(), 1) if "if x.sum()" in text)

    suite = run_in(project, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert suite.returncode == 1
    summary = suite.stdout.strip().splitlines()[-1]
    assert re.match(r"1 failed, \d+ passed, \d+ skipped", summary), summary
    assert f"model.py:{line}" in suite.stdout
    assert len(suite.stdout.splitlines()) < 150, suite.stdout

    check = run_in(project, "-m", package_of(project), "check")
    assert check.returncode == 1
    assert f"model.py:{line}" in check.stdout
    assert "torch.where" in check.stdout  # the hint for a branch on a tensor value

    mre = run_in(project, "-m", f"{package_of(project)}.mre")
    assert mre.returncode != 0
    assert "Data-dependent branching" in mre.stderr


def test_readme_tensor_parallel_plan_is_the_tested_one(baked):
    """The tensor-parallel README's plan for the Llama example is the one the tested model adds."""
    readme = (baked(parallel="tensor_parallel") / "README.md").read_text()
    plan = (OWN_MODELS / "language_model_plan.py").read_text()
    assert f"```python\n{plan}```" in readme


@pytest.mark.parametrize("fixture", ["language_model.py", "two_inputs.py", "several_modules/model.py"])
def test_readme_examples_are_the_tested_models(baked, fixture):
    """The generated README's worked examples are, character for character, the models tested here."""
    readme = (baked() / "README.md").read_text()
    assert f"```python\n{(OWN_MODELS / fixture).read_text()}```" in readme


def test_readme_generation_example_is_the_tested_model(baked):
    """A decode project's README runs the Llama with a StaticCache tested here, character for
    character, and none of the forward examples, which do not keep the decode contract."""
    readme = (baked(workload="decode") / "README.md").read_text()
    assert f"```python\n{(OWN_MODELS / 'static_cache_llama.py').read_text()}```" in readme
    assert (OWN_MODELS / "language_model.py").read_text() not in readme
