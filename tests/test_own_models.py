"""Bring your own model: real models replace model.py in a fresh bake, and every tool still works.

Each model in tests/own_models/ is dropped into a baked project as a user would, then the
project's own test suite runs on it, and with it the test of each tool: the MRE, `check`,
`bench`, the doctor, and `export`, whose file runs in an empty folder. One graph-breaking model
must fail loudly and briefly; models the tools cannot judge are refused in their words. The transformers models of the README's "Models
it works with" table (the StaticCache Llama, BERT, ...) run in test_works_with.py.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
import tool_runs
from conftest import bake, package_of, run_in
from tool_runs import assert_runs_here
from works_with import CASES as WORKS_WITH
from works_with import DEEPSEEK_V3, MAMBA2, behind_the_wrapper

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


def run_tools(project: Path, **keywords) -> dict[str, tuple[int, str, str]]:
    """Each tool's exit code, stdout and stderr (tool_runs.run_tools's keywords); the project's
    own suite, run after them in the same process, must pass."""
    ran = tool_runs.run_tools(project, **keywords)
    assert ran.suite_code == 0, ran.output[-6000:]
    return ran.results


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
    """The project's own tests pass on a replaced model.py, and with them the test of each tool
    on it: the MRE, check, bench, the doctor and export (which runs the portable file in an empty
    folder, with the project unimportable, and compares it with the MRE); under tensor_parallel
    the suite runs two ranks under torchrun too."""
    files, answers = CASES[case]
    project = bake(tmp_path / "bake", **answers)
    package = package_of(project)
    drop_in(project, files, NAMESPACE=package, OP="my_op")

    ran = tool_runs.run_tools(project, suite_first=True, **answers)
    assert ran.suite_code == 0, ran.output[-6000:]
    assert ran.passed == {"mre", "check", "bench", "doctor", "export"}, ran.output[-6000:]


STATIC_CACHE = (OWN_MODELS / "static_cache_llama.py").read_text()


def edited(text: str, *edits: tuple[str, str]) -> str:
    """A model.py with `edits` (old, new) made to it, as a user might."""
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def use_model(project: Path, text: str) -> None:
    (project / "src" / package_of(project) / "model.py").write_text(text)


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
# The wrapper's allocation of the cache when it builds the model, which a user may leave out.
ONE_TOKEN = (
    "        with torch.no_grad():\n            self.lm(input_ids=token, cache=self.cache, use_cache=True)\n"
)
# What the wrapper does for a recurrent layer's flag, which a user may leave out.
FLAG_SET = "                layer.has_previous_state = dict.fromkeys(layer.has_previous_state, True)\n"
# Where the wrapper zeroes a recurrent layer's states at each new request.
ZEROING = '            if hasattr(layer, "recurrent_states"):\n'
# The cache allocated instead as the wrapper once did: keys and values of one width, head_dim.
SIZED_BY_HEAD_DIM = (
    "        self.cache.early_initialization(\n"
    "            MAX_BATCH, CONFIG.num_key_value_heads, CONFIG.head_dim, self.lm.dtype, device\n"
    "        )\n"
)
REFUSED = {
    # The wrapper without its one token at build: StaticCache allocates at the first forward.
    "a cache allocated at the first call": (
        STATIC_CACHE.replace(ONE_TOKEN, ""),
        "WARN",
        (
            "cache.layers[0].keys, cache.layers[0].values, cache.layers[1].keys, cache.layers[1].values "
            "appeared during the first call"
        ),
    ),
    # The wrapper as it was, its cache built from the config: sliding-window layers.
    "a sliding-window cache": (
        edited(WORKS_WITH["Mistral"].model, ("config=cache_config(CONFIG)", "config=CONFIG")),
        "WARN",
        (
            "cache.layers[0].cumulative_length_int, cache.layers[1].cumulative_length_int went from 0 "
            "to 8 during the first call"
        ),
    ),
    # Mamba2 without the wrapper's one token, nor its zeroing of states that are not there yet.
    "a recurrent layer's states allocated at the first call": (
        edited(WORKS_WITH["Mamba2"].model, (ONE_TOKEN, ""), (ZEROING, "            if False:\n")),
        "WARN",
        (
            "cache.layers[0].conv_states[0], cache.layers[0].recurrent_states[0], "
            "cache.layers[1].conv_states[0], cache.layers[1].recurrent_states[0] appeared during the "
            "first call"
        ),
    ),
    # Mamba2's flag left as reset() leaves it: the prefill sets it.
    "a recurrent layer's flag set at the first call": (
        edited(WORKS_WITH["Mamba2"].model, (FLAG_SET, "                pass\n")),
        "WARN",
        (
            "cache.layers[0].has_previous_state[0], cache.layers[1].has_previous_state[0] went from "
            "False to True during the first call"
        ),
    ),
    # DeepSeek-V3's cache sized as early_initialization() sizes one, keys and values of the
    # config's head_dim: the latent, kv_lora_rank wide, does not fit.
    "a model that fails eagerly": (
        edited(WORKS_WITH["DeepSeek-V3"].model, (ONE_TOKEN, SIZED_BY_HEAD_DIM)),
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
    (model_line,) = [line for line in doctor_report.splitlines() if line.split()[2:3] == ["model"]]
    assert model_line.startswith(doctor), doctor_report
    assert named in model_line, doctor_report

    suite = run_in(project, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert suite.returncode == 1
    assert named in suite.stdout
    # Each test of a tool says the tool's words. Where the MRE fails (a model that fails
    # eagerly), the tests that need its output skip: test_mre.py names the failure once.
    shown = ["generate exits 2 on your model:"]
    if doctor == "FAIL":
        shown.append("the doctor on your model:\nFAIL model: ")
    else:
        shown += [f"{tool} exits 2 on your model:" for tool in ("check", "bench", "profile")]
    assert [words for words in shown if words not in suite.stdout] == [], suite.stdout
    assert not re.search(r"assert [12] == 0", suite.stdout), suite.stdout
    # generate's refusal fails its own test; the decode tests that replay its graphs skip.
    generate_failures = re.findall(r"^(?:FAILED|ERROR) tests/test_generate\.py", suite.stdout, re.MULTILINE)
    assert len(generate_failures) == 1, suite.stdout


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
    # The suite passes on this model in test_every_tool_runs_your_model: the tools alone here.
    results = run_tools(project, suite=False)
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
    code, _, message = results["export"]
    assert code == 1, message
    assert "the exported file cannot carry the data files your modules read: weights.pt" in message
    assert found_at in message
    assert "torch.manual_seed(0)" in message
    assert len(message.strip().splitlines()) <= 5, message
    assert not (project / "exported_npu.py").exists()


# Twice the heads where model.py runs as the package's module: not in the file export writes.
OTHER_IN_THE_FILE = (
    "    return TinyBlock(hidden=INPUT_SHAPE[-1], heads=HEADS)\n",
    "    return TinyBlock(hidden=INPUT_SHAPE[-1], heads=HEADS * (2 if __name__.endswith('.model') else 1))\n",
)


@pytest.mark.slow
@pytest.mark.full
def test_a_file_that_computes_otherwise_fails_the_projects_export_test(tmp_path):
    """A model that computes otherwise once export has bundled it: the project's export test
    fails in export's words, naming the leaf that differs; nothing else fails."""
    project = bake(tmp_path / "bake")
    model = project / "src" / package_of(project) / "model.py"
    model.write_text(model.read_text().replace(*OTHER_IN_THE_FILE))

    suite = run_in(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_export.py")
    assert suite.returncode == 1, suite.stdout
    assert "export exits 1 on your model:\noutput: " in suite.stdout
    assert "differs from the MRE's output" in suite.stdout
    assert re.search(r"^1 failed, 1 passed in ", suite.stdout, re.MULTILINE), suite.stdout


@pytest.mark.slow
@pytest.mark.full
@pytest.mark.parametrize(
    ("registration", "room", "cut_from", "said"),
    [
        (
            "op_plugin",
            "meta_registrations.py",
            '@impl(m, "my_op")',
            "npu::my_op has no Meta function: define and register my_op_meta in meta_registrations.py",
        ),
        ("torch_library", "custom_op.py", "@my_op.register_fake", "custom_op.py has no my_op_fake"),
    ],
    ids=["op_plugin", "torch_library"],
)
def test_an_op_without_its_shape_function_fails_the_op_tests_in_one_line_each(
    tmp_path, registration, room, cut_from, said
):
    """With the Meta (or fake) function deleted from the project, as the op-plugin steps invite
    once op-plugin holds it, every op test still runs: the one about the function names it and the
    fix, instead of an error that stops the suite at collection."""
    project = bake(tmp_path / "bake", custom_op="out_of_place", op_registration=registration)
    path = project / "src" / package_of(project) / room
    text = path.read_text()
    path.write_text(text[: text.index(cut_from)])

    suite = run_in(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_custom_op.py")
    assert "error during collection" not in suite.stdout, suite.stdout
    assert said in suite.stdout, suite.stdout


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
    assert re.fullmatch(r"1 failed, \d+ passed, \d+ skipped in [0-9.]+s( \(.*\))?", summary), summary
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


OTHER_CACHES = {"Mamba2": ("Mamba2Config", MAMBA2), "DeepSeek-V3": ("DeepseekV3Config", DEEPSEEK_V3)}
"""The README's examples of the wrapper's other kinds of cache: each family's config class and fields."""


@pytest.mark.parametrize("name", OTHER_CACHES)
def test_readme_examples_of_other_caches_are_the_tested_configs(baked, name):
    """A decode project's README shows the import and CONFIG of Mamba2 and DeepSeek-V3 that the
    models tested behind the wrapper are built from (tests/works_with.py), character for character."""
    config, fields = OTHER_CACHES[name]
    readme = (baked(workload="decode") / "README.md").read_text()
    example = f"from transformers import AutoModelForCausalLM, {config}, StaticCache\n\nCONFIG = {config}(\n{fields})\n"
    assert f"```python\n{example}```" in readme
    assert WORKS_WITH[name].model == behind_the_wrapper(config, fields)


def imported(text: str, folder: Path) -> ModuleType:
    """model.py with `text`, written to `folder` and imported."""
    (folder / "model.py").write_text(text)
    spec = importlib.util.spec_from_file_location(f"model_{folder.name}", folder / "model.py")
    model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model)
    return model


@pytest.mark.full
@pytest.mark.parametrize("name", ["Llama", *OTHER_CACHES])
def test_a_new_request_reads_nothing_the_last_one_left(name, tmp_path):
    """Behind the README's wrapper, a second request's prefill, after the first request's prefill
    and decode step with nothing restored in between, returns what the first returned: Mamba2's
    recurrent states are zeroed at position 0, and attention reads no position past the prompt's."""
    import torch

    model = imported(WORKS_WITH[name].model, tmp_path)
    torch.manual_seed(0)
    lm = model.build_model().eval()
    (prompt,) = model.example_inputs()
    positions = torch.arange(prompt.shape[1])
    with torch.no_grad():
        first = lm(prompt, positions)
        lm(first[:, -1:].argmax(-1), positions[-1:] + 1)
        again = lm(prompt, positions)
    assert torch.equal(again, first)


@pytest.mark.full
def test_the_wrapper_refuses_a_model_with_fewer_positions_than_the_cache(tmp_path):
    """The README's StaticCache wrapper refuses a config whose positions (GPT-2's n_positions)
    stop short of MAX_SEQ_LEN, where a decode step would look up a position with no embedding."""
    gpt2 = "    vocab_size=512,\n    n_embd=64,\n    n_layer=1,\n    n_head=2,\n    n_positions=16,\n"
    model = imported(behind_the_wrapper("GPT2Config", gpt2), tmp_path)
    with pytest.raises(ValueError, match=r"^MAX_SEQ_LEN = 64 exceeds the model's 16 positions$"):
        model.cache_config(model.CONFIG)
