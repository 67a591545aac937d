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
{before}
from {package}.__main__ import main

results = {{}}
printed, told = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
    output = runpy.run_module("{package}.mre", run_name="__main__")["infer_one_step"]()
results["mre"] = [0, printed.getvalue(), told.getvalue()]
commands = {{
    **{extra},
    "check": ["check", "--json"],
    "bench": ["bench", "--iters", "3", "--warmup", "1", "--json"],
    "doctor": ["doctor", *{doctor}],
    "export-portable": ["export", "-o", "exported_portable.py", "--target", "portable"],
    "export-npu": ["export", "-o", "exported_npu.py", "--target", "npu"],
}}
for name, command in commands.items():
    torch._dynamo.reset()
    printed, told = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
        code = main(command)
    results[name] = [code, printed.getvalue(), told.getvalue()]
print("RESULTS " + json.dumps(results))
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider"]))
"""


def run_tools(
    project: Path, before: str = "", extra: dict[str, list[str]] | None = None, **answers: str
) -> dict[str, tuple[int, str, str]]:
    """Each tool's exit code, stdout and stderr (after the code `before`, in the same process;
    the `extra` commands first); the project's own suite must pass after them."""
    doctor = ["--nproc-per-node", "2"] if answers.get("parallel") == "tensor_parallel" else []
    extra = json.dumps(extra or {})
    program = TOOLS.format(package=package_of(project), doctor=doctor, before=before, extra=extra)
    result = run_in(project, "-c", program)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULTS ")]
    return {name: tuple(outcome) for name, outcome in json.loads(line.removeprefix("RESULTS ")).items()}


def assert_runs_here(results: dict[str, tuple[int, str, str]]) -> None:
    """The MRE, check, bench and the doctor: one graph, ready, same output, no FAIL."""
    assert "backend     aot_eager" in results["mre"][1]
    assert "1 graph" in results["mre"][1]
    check_code, check_json, _ = results["check"]
    assert check_code == 0, check_json
    assert json.loads(check_json)["verdict"] == 0
    bench_code, bench_json, _ = results["bench"]
    assert bench_code == 0
    assert json.loads(bench_json)["outputs_match"] is True
    doctor_code, doctor_report, _ = results["doctor"]
    assert doctor_code == 1, doctor_report  # off an NPU graph mode falls back, nothing fails
    assert not re.search(r"^FAIL", doctor_report, re.MULTILINE), doctor_report


TENSOR_PARALLEL = {"parallel": "tensor_parallel"}
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
    "transformers BERT on three LongTensors, a ModelOutput": ({"model.py": "bert.py"}, {}),
    "bfloat16 MLP": ({"model.py": "bf16_mlp.py"}, {}),
    "CNN on images": ({"model.py": "cnn.py"}, {}),
    "tuple output holding an int and None": ({"model.py": "int_and_none_output.py"}, {}),
    "a float input beside the tensor": ({"model.py": "scalar_input.py"}, {}),
    "Linears with biases, tensor parallel": ({"model.py": "mlp_with_bias.py"}, TENSOR_PARALLEL),
    "bfloat16 MLP, tensor parallel": (
        {"model.py": ("bf16_mlp.py", "bf16_mlp_plan.py")},
        TENSOR_PARALLEL,
    ),
}


@pytest.mark.slow
@pytest.mark.full
@pytest.mark.parametrize("case", CASES)
def test_every_tool_runs_your_model(case, tmp_path):
    """The MRE, check, bench, the doctor, export and the project's own tests all work on a
    replaced model.py; under tensor_parallel the project's suite runs two ranks under torchrun.

    The project's own suite runs the portable export in an empty folder, with the project
    unimportable, and compares it with the MRE (test_export.py)."""
    files, answers = CASES[case]
    project = bake(tmp_path / "bake", **answers)
    package = package_of(project)
    drop_in(project, files, NAMESPACE=package, OP="my_op")

    results = run_tools(project, **answers)
    assert_runs_here(results)
    assert results["export-npu"][0] == 0, results["export-npu"][2]
    assert results["export-portable"][0] == 0, results["export-portable"][2]


@pytest.mark.slow
@pytest.mark.full
def test_a_transformers_llama_behind_a_static_cache_generates(tmp_path):
    """A decode project's own model, the README's Llama holding a transformers StaticCache: the
    MRE, check, bench (at its capture size), the doctor, export, generate and the project's own
    suite all run, and graph mode generates eager's tokens."""
    project = bake(tmp_path / "bake", workload="decode")
    drop_in(project, {"model.py": "static_cache_llama.py"})

    generate = ["generate", "--json", "--new-tokens", "4"]
    results = run_tools(project, extra={"generate": generate}, workload="decode")
    assert_runs_here(results)
    assert results["export-npu"][0] == 0, results["export-npu"][2]
    assert results["export-portable"][0] == 0, results["export-portable"][2]
    code, printed, told = results["generate"]
    assert code == 0, told
    generated = json.loads(printed)
    assert (generated["matches_eager"], generated["graphs"], generated["recompiles"]) == (True, 1, [])
    assert {len(tokens) for tokens in generated["tokens"]} == {generated["prompt_length"] + 4}


STATIC_CACHE = (OWN_MODELS / "static_cache_llama.py").read_text()
LLAMA_CONFIG = re.search(r"CONFIG = LlamaConfig\(.*?\n\)\n", STATIC_CACHE, re.DOTALL)[0]
SMALL = """
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,"""
FAMILIES = {
    # Sliding-window attention in every layer; a window the cache fits in.
    "mistral": ("MistralConfig", "MistralForCausalLM", f"{SMALL}\n    sliding_window=4096,"),
    # A sliding layer with its own rotary base, and a full one.
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        (
            f'{SMALL}\n    head_dim=16,\n    sliding_window=512,\n    layer_types=["sliding_attention", '
            '"full_attention"],'
        ),
    ),
    # head_dim 128 of its own, where the wrapper computes 64 // 4.
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", SMALL),
}


def static_cache_model(family: str, *edits: tuple[str, str]) -> str:
    """The README's StaticCache wrapper around a small config of another transformers family,
    then `edits` (old, new) made to it as a user might."""
    config, model, fields = FAMILIES[family]
    text = STATIC_CACHE.replace(LLAMA_CONFIG, f"CONFIG = {config}({fields}\n)\n")
    text = text.replace("LlamaConfig", config).replace("LlamaForCausalLM", model)
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


def use_model(project: Path, text: str) -> None:
    (project / "src" / package_of(project) / "model.py").write_text(text)


@pytest.mark.slow
@pytest.mark.full
@pytest.mark.parametrize("family", ["mistral", "gemma3"])
def test_the_static_cache_wrapper_runs_sliding_window_configs(family, tmp_path):
    """The README's wrapper on a sliding-window config whose window holds MAX_SEQ_LEN (its cache
    built with the window off): the MRE, check, bench, the doctor, export, generate and the
    project's own suite all run, and graph mode generates eager's tokens."""
    project = bake(tmp_path / "bake", workload="decode")
    use_model(project, static_cache_model(family))

    generate = ["generate", "--json", "--new-tokens", "4"]
    results = run_tools(project, extra={"generate": generate}, workload="decode")
    assert_runs_here(results)
    code, printed, told = results["generate"]
    assert code == 0, told
    generated = json.loads(printed)
    assert (generated["matches_eager"], generated["graphs"], generated["recompiles"]) == (True, 1, [])


# Runs each tool that compares graph mode with eager, then the doctor, in one process.
REFUSALS = """\
import contextlib, io, json, torch
from {package}.__main__ import main

results = {{}}
for command in ("check", "bench", "generate", "profile", "doctor"):
    torch._dynamo.reset()
    printed, told = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
        code = main([command])
    results[command] = [code, printed.getvalue(), told.getvalue()]
print("RESULTS " + json.dumps(results))
"""
# The wrapper's early allocation of the cache, which a user may leave out.
EARLY_INITIALIZATION = (
    "        head_dim = CONFIG.hidden_size // CONFIG.num_attention_heads\n"
    "        heads = CONFIG.num_key_value_heads\n"
    "        self.cache.early_initialization(MAX_BATCH, heads, head_dim, self.lm.dtype, device)\n"
)
REFUSED = {
    # The wrapper without early_initialization(): StaticCache allocates at the first forward.
    "a cache allocated at the first call": (
        STATIC_CACHE.replace(EARLY_INITIALIZATION, ""),
        "WARN",
        (
            "cache.layers[0].keys, cache.layers[0].values, cache.layers[1].keys, cache.layers[1].values "
            "appeared during the first call"
        ),
    ),
    # The wrapper as it was, its cache built from the config: sliding-window layers.
    "a sliding-window cache": (
        static_cache_model("mistral", ("config=cache_config(CONFIG)", "config=CONFIG")),
        "WARN",
        (
            "cache.layers[0].cumulative_length_int, cache.layers[1].cumulative_length_int went from 0 "
            "to 8 during the first call"
        ),
    ),
    # The wrapper's head size, 64 // 4, where Qwen3's is 128: the cache's shape is wrong.
    "a model that fails eagerly": (
        static_cache_model("qwen3"),
        "FAIL",
        "RuntimeError: index_copy_(): Source/destination tensor must have same slice shapes.",
    ),
}
"""Each case: its model.py, the doctor's status on its model line, and what every tool names."""


@pytest.mark.slow
@pytest.mark.full
@pytest.mark.parametrize("case", REFUSED)
def test_every_tool_refuses_a_model_it_cannot_judge_in_its_words(case, tmp_path):
    """A transformers model behind the StaticCache wrapper that keeps state the tools cannot
    save, or fails eagerly: check, bench, generate and profile exit 2 with a few lines naming
    it, no traceback; the doctor says it; the project's own suite fails in the tools' words."""
    text, doctor, named = REFUSED[case]
    project = bake(tmp_path / "bake", workload="decode")
    use_model(project, text)

    ran = run_in(project, "-c", REFUSALS.format(package=package_of(project)))
    (line,) = [line for line in ran.stdout.splitlines() if line.startswith("RESULTS ")]
    results = json.loads(line.removeprefix("RESULTS "))
    for command in ("check", "bench", "generate", "profile"):
        code, printed, told = results[command]
        said = printed if command == "check" else told
        assert code == 2, (command, said)
        assert named in said, (command, said)
        assert "Traceback" not in told, (command, told)
        assert len(said.strip().splitlines()) <= 6, (command, said)
    assert results["check"][1].startswith("model       StaticCacheLM\n")
    _, doctor_report, _ = results["doctor"]
    (model_line,) = [line for line in doctor_report.splitlines() if "  model  " in line]
    assert model_line.startswith(doctor), doctor_report
    assert named in model_line, doctor_report

    suite = run_in(project, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert suite.returncode == 1
    assert named in suite.stdout
    # Each test of a tool says the tool's words. Where the MRE fails (a model that fails
    # eagerly), the tests that need its output skip: test_mre.py names the failure once.
    shown = ["generate refuses your model:", "generate exits 2 on your model:"]
    if doctor == "FAIL":
        shown.append("the doctor on your model:\nFAIL model: ")
    else:
        shown += [f"{tool} exits 2 on your model:" for tool in ("check", "bench", "profile")]
    assert [words for words in shown if words not in suite.stdout] == [], suite.stdout
    assert not re.search(r"assert [12] == 0", suite.stdout), suite.stdout


COUNTS_CALLS = """

_build_model = build_model


def build_model():
    \"\"\"The sample, counting its calls in a Python int: state the tools cannot save.\"\"\"
    model = _build_model()
    model.calls = 0
    model.register_forward_pre_hook(lambda module, inputs: setattr(module, "calls", module.calls + 1))
    return model
"""


@pytest.mark.slow
@pytest.mark.full
def test_two_ranks_fail_in_the_words_of_the_tool_that_refused(tmp_path):
    """Under torchrun too: a model the tools refuse fails the project's two-rank tests of bench,
    profile and generate with each rank's exit status and rank 0's refusal."""
    project = bake(tmp_path / "bake", workload="decode", parallel="tensor_parallel")
    model = project / "src" / package_of(project) / "model.py"
    model.write_text(model.read_text() + COUNTS_CALLS)

    selected = "torchrun or two_ranks_generate"
    suite = run_in(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", selected)
    assert suite.returncode == 1
    for tool in ("bench", "profile", "generate"):
        refusal = f"{tool} under torchrun:\nrank 0 exits 2: {tool}: the model keeps state"
        assert refusal in suite.stdout, suite.stdout
    assert "calls went from 0 to 1 during the first call" in suite.stdout


@pytest.mark.slow
@pytest.mark.full
def test_a_float_input_is_named_as_baked_into_the_graph(tmp_path):
    """forward(x, scale: float): check, the MRE's report and the doctor name the input `[1]`."""
    project = bake(tmp_path / "bake")
    drop_in(project, {"model.py": "scalar_input.py"})
    results = run_tools(project)
    (warning,) = [f for f in json.loads(results["check"][1])["findings"] if f["path"] == "[1]"]
    assert warning["severity"] == "warning"
    assert "0.5" in warning["reason"]
    assert "[1]" in results["mre"][1]
    assert "[1]" in results["doctor"][1]


DATA_FILES = {
    "through Path(__file__).parent": ("data_files/weights_beside.py", "model.py:6 through __file__"),
    "through importlib.resources": (
        "data_files/weights_resource.py",
        "model.py:1 through importlib.resources",
    ),
}


@pytest.mark.slow
@pytest.mark.full
@pytest.mark.parametrize("how", DATA_FILES)
def test_a_model_reading_a_data_file_runs_every_tool_and_export_names_it(how, tmp_path):
    """A model loading weights.pt beside it: every tool and the suite run; export exits 1 and
    writes nothing, naming the file, where the model finds it, and what to do instead."""
    fixture, found_at = DATA_FILES[how]
    project = bake(tmp_path / "bake")
    drop_in(project, {"model.py": fixture})
    weights = project / "src" / package_of(project) / "weights.pt"
    save = f"torch.manual_seed(0); torch.save(torch.nn.Linear(16, 16).state_dict(), {str(weights)!r})"

    results = run_tools(project, before=save)
    assert_runs_here(results)
    for target in ("export-npu", "export-portable"):
        code, _, message = results[target]
        assert code == 1, message
        assert "the exported file cannot carry the data files your modules read: weights.pt" in message
        assert found_at in message
        assert "torch.manual_seed(0)" in message
        assert len(message.strip().splitlines()) <= 5, message
    assert not (project / "exported_npu.py").exists()


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
