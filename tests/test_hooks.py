"""The hooks: bad answers are refused before anything is written; pruning follows the answers."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from email.headerregistry import Address
from pathlib import Path

import pytest
from conftest import CODE_VARIANTS, TEMPLATE, bake, isolated_config
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter
from hypothesis import given, settings
from hypothesis import strategies as st


def load_hook(name: str):
    """The hook as the module `hooks.<name>`: the name mutation testing knows it by."""
    spec = importlib.util.spec_from_file_location(f"hooks.{name}", TEMPLATE / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rules = load_hook("answer_rules")
post_gen = load_hook("post_gen_project")

BAD_ANSWERS = {
    "package_name not an identifier": ("package_name", "my-project", "valid Python import name"),
    "package_name starting with a digit": ("package_name", "2fast", "valid Python import name"),
    "package_name a keyword": ("package_name", "class", "Python keyword"),
    "package_name a soft keyword": ("package_name", "match", "Python keyword"),
    "package_name shadowing torch": ("package_name", "torch", "shadow the module `torch`"),
    "package_name shadowing the stdlib test package": ("package_name", "test", "shadow the module `test`"),
    "package_name shadowing json": ("package_name", "json", "shadow the module `json`"),
    "package_name too long": ("package_name", "p" * 33, "longer than 32 characters"),
    "model_class not an identifier": ("model_class", "My Model", "valid class name"),
    "model_class a keyword": ("model_class", "None", "Python keyword"),
    "model_class clashing with generated code": ("model_class", "INPUT_SHAPE", "clashes with the name"),
    "model_class collected by pytest": ("model_class", "TestNet", "collect it as a test class"),
    "model_class in capitals": ("model_class", "CNN", "all capitals"),
    "cache_dir with a newline": ("cache_dir", "cache\nrm", "control character"),
    "input_shape with a word": ("input_shape", "2, eight, 32", "positive integers"),
    "input_shape with zero": ("input_shape", "2, 0, 32", "positive integers"),
    "input_shape negative": ("input_shape", "2, -8, 32", "positive integers"),
    "input_shape empty": ("input_shape", "", "positive integers"),
    "input_shape one dimension": ("input_shape", "32", "at least two dimensions"),
    "cache_dir absolute": ("cache_dir", "/tmp/cache", "relative"),
    "cache_dir Windows absolute": ("cache_dir", "C:\\cache", "relative"),
    "cache_dir home": ("cache_dir", "~/cache", "relative"),
    "cache_dir climbing out": ("cache_dir", "cache/../../elsewhere", "climb out"),
    "cache_dir empty": ("cache_dir", " ", "empty"),
    "cache_dir the project itself": ("cache_dir", ".", "project's own files"),
    "cache_dir inside src": ("cache_dir", "src/cache", "project's own files"),
    "cache_dir a gitignore pattern": ("cache_dir", "#cache", "patterns"),
    "model_class lowercase": ("model_class", "reference", "capital letter"),
    "project_slug with a space": ("project_slug", "my project", "folder and distribution name"),
    "author_email without @": ("author_email", "nobody", "email address"),
    "author_email in angle brackets": ("author_email", "<you@example.com>", "email address"),
    "author_email with a non-ASCII domain": (
        "author_email",
        "you@exämple.com",
        "has non-ASCII characters, which package metadata refuses in an address; e.g. you@example.com",
    ),
    "cache_dir with ./": ("cache_dir", "./npu_cache", "written plainly"),
}


def says(error: str, why: str) -> bool:
    """`why` stands in the error as words of its own, not inside longer ones."""
    return re.search(rf"(?<!\w){re.escape(why)}(?!\w)", error) is not None


@pytest.mark.parametrize(("variable", "value", "why"), BAD_ANSWERS.values(), ids=BAD_ANSWERS.keys())
def test_bad_answer_is_refused_with_variable_value_and_fix(tmp_path, variable, value, why):
    """The bake fails with an ERROR line naming the variable, the value and the reason, leaving no folder."""
    with pytest.raises(FailedHookException) as refused:
        bake(tmp_path, **{variable: value})
    error = str(refused.value)
    assert f"ERROR: {variable}={value!r}" in error
    assert says(error, why)
    assert "e.g." in error  # the fix
    assert not any((tmp_path / "out").iterdir())


def test_the_cookiecutter_command_prints_a_refusal_alone_and_makes_no_folder(tmp_path):
    """The command prints the ERROR lines and the command to bake again, with no traceback, exits 1,
    and leaves the output folder as it was: the answers are refused before the project folder exists."""
    config, output = isolated_config(tmp_path), tmp_path / "out"
    output.mkdir()
    command = [
        sys.executable,
        "-m",
        "cookiecutter",
        "--no-input",
        "--config-file",
        str(config),
        "-o",
        str(output),
    ]
    done = subprocess.run(
        [*command, str(TEMPLATE), "workload=decode", "input_shape=2, 8, 33"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    error = (
        "ERROR: input_shape='2, 8, 33' has a hidden size of 33, which workload=decode needs divisible "
        "by 2 (rotary positions turn pairs of features); e.g. 2, 8, 34"
    )
    again = f"cookiecutter {TEMPLATE} --no-input workload=decode input_shape='2, 8, 33'"
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        error,
        f"No project was made. Correct the answers above and bake again: {again}",
    ]
    assert "Traceback" not in done.stderr
    assert list(output.iterdir()) == []


def test_a_refusal_repeats_the_answers_given_but_not_those_derived_from_them():
    """The command to bake again carries each answer that differs from its default, quoted for the
    shell; a slug or namespace derived from a refused name is left to follow the corrected one."""
    defaults = json.loads((TEMPLATE / "cookiecutter.json").read_text())
    answers = {**DEFAULTS, "project_name": "It's mine", "package_name": "torch", "op_namespace": "torch"}
    message = rules.refusal_message(answers, "gh:org/npugraph-template", defaults)
    assert message.splitlines()[-1].endswith(
        "bake again: cookiecutter gh:org/npugraph-template --no-input "
        "project_name='It'\"'\"'s mine' description='Graph-mode inference.' package_name=torch"
    )
    assert rules.refusal_message(DEFAULTS, "gh:org/npugraph-template", defaults) == ""


def test_a_replay_file_with_a_bad_answer_is_refused_and_leaves_no_folder(tmp_path):
    """A replay skips the questions, and the first check with them; rendering the post-generation
    hook checks the answers again, and cookiecutter removes the project it made."""
    bake(tmp_path / "first")
    replay = json.loads(next((tmp_path / "first" / "replay").glob("*.json")).read_text())
    replay["cookiecutter"]["package_name"] = "torch"
    (tmp_path / "bad.json").write_text(json.dumps(replay))
    with pytest.raises(FailedHookException, match="package_name='torch' would shadow"):
        cookiecutter(
            str(TEMPLATE),
            replay=str(tmp_path / "bad.json"),
            output_dir=str(tmp_path / "out"),
            config_file=str(isolated_config(tmp_path / "second")),
        )
    assert list((tmp_path / "out").iterdir()) == []


DEFAULTS = {
    "project_name": "NPU Graph Demo",
    "description": "Graph-mode inference.",
    "author_name": "Your Name",
    "project_slug": "npu-graph-demo",
    "package_name": "npu_graph_demo",
    "model_class": "TinyBlock",
    "input_shape": "2, 8, 32",
    "cache_dir": ".torchair_cache",
    "author_email": "you@example.com",
    "workload": "forward",
    "parallel": "none",
    "custom_op": "none",
    "op_registration": "torch_library",
    "op_name": "my_op",
    "op_namespace": "npu_graph_demo",
}


OP_ANSWERS = {"custom_op": "out_of_place"}
BAD_OP_ANSWERS = {
    "op_name not snake_case": (OP_ANSWERS, "op_name", "MyOp", "snake_case"),
    "out-of-place op ending in _": (OP_ANSWERS, "op_name", "my_op_", "marks an in-place op"),
    "op-plugin in-place op ending in _": (
        {"custom_op": "in_place", "op_registration": "op_plugin"},
        "op_name",
        "my_op_",
        "ATen in-place variant",
    ),
    "op_name replacing a name custom_op.py uses": (OP_ANSWERS, "op_name", "reference", "already uses"),
    "namespace owned by torch_npu": (OP_ANSWERS, "op_namespace", "npu", "owned by torch or torch_npu"),
    "tensor parallel with an odd hidden size": (
        {"parallel": "tensor_parallel"},
        "input_shape",
        "2, 8, 33",
        "needs an even one; e.g. 2, 8, 34",
    ),
    "decode with an odd hidden size": (
        {"workload": "decode"},
        "input_shape",
        "2, 8, 33",
        "needs divisible by 2 (rotary positions turn pairs of features); e.g. 2, 8, 34",
    ),
    "decode with an odd hidden size, written without spaces": (
        {"workload": "decode"},
        "input_shape",
        "2,8,33",
        "needs divisible by 2 (rotary positions turn pairs of features); e.g. 2, 8, 34",
    ),
    "decode over two ranks with a hidden size of 2 mod 4": (
        {"workload": "decode", "parallel": "tensor_parallel"},
        "input_shape",
        "2, 8, 30",
        "splits the heads over 2 ranks in the project's tests); e.g. 2, 8, 32",
    ),
}


@pytest.mark.parametrize(
    ("answers", "variable", "value", "why"), BAD_OP_ANSWERS.values(), ids=BAD_OP_ANSWERS.keys()
)
def test_bad_op_answer_is_refused(tmp_path, answers, variable, value, why):
    """Combinations that cannot work (custom-op, tensor-parallel) are refused like the others,
    leaving no folder."""
    with pytest.raises(FailedHookException) as refused:
        bake(tmp_path, **answers, **{variable: value})
    error = str(refused.value)
    assert f"ERROR: {variable}={value!r}" in error
    assert says(error, why)
    assert not any((tmp_path / "out").iterdir())


def test_default_answers_have_no_problems():
    """The defaults in cookiecutter.json pass every check, with and without a custom op, tensor
    parallelism or decode."""
    assert rules.problems(DEFAULTS) == []
    assert rules.problems({**DEFAULTS, "custom_op": "in_place", "op_registration": "op_plugin"}) == []
    assert rules.problems({**DEFAULTS, "parallel": "tensor_parallel"}) == []
    assert rules.problems({**DEFAULTS, "workload": "decode", "parallel": "tensor_parallel"}) == []


def test_every_problem_is_reported_at_once():
    """Several bad answers give one ERROR line each, so one retry can fix them all."""
    answers = {
        **DEFAULTS,
        "package_name": "class",
        "model_class": "1x",
        "input_shape": "0",
        "cache_dir": "/abs",
    }
    assert [line.split("=")[0] for line in rules.problems(answers)] == [
        "ERROR: package_name",
        "ERROR: model_class",
        "ERROR: input_shape",
        "ERROR: cache_dir",
    ]


@pytest.mark.parametrize(
    "field",
    [
        "project_name",
        "description",
        "author_name",
        "author_email",
        "model_class",
        "package_name",
        "input_shape",
    ],
)
def test_answers_are_data_not_code(tmp_path, field):
    """An answer that closes a string and calls os.system runs nothing, now or in the baked code."""
    marker = tmp_path / "pwned"
    payload = f'"""\'\'\'); import os; os.system("touch {marker}"); ("@x'
    try:
        project = bake(tmp_path, **{field: payload})
    except FailedHookException:
        assert not marker.exists()
        return  # refused before anything was written
    assert not marker.exists()
    tomllib.loads((project / "pyproject.toml").read_text())
    for path in project.rglob("*.py"):
        calls = {
            ast.unparse(node.func)
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call)
        }
        assert "os.system" not in calls, path


def module_level_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return names


def test_generated_names_list_what_model_class_could_clash_with(baked):
    """GENERATED_NAMES is exactly what the files naming the model class bind, in every code variant."""
    bound = set()
    for answers in CODE_VARIANTS:
        for path in baked(**answers).rglob("*.py"):
            names = module_level_names(path.read_text())
            if "TinyBlock" in names:
                bound |= names
    bound -= {"TinyBlock", "annotations"}
    assert {name for name in bound if not name.startswith("test_")} == rules.GENERATED_NAMES


def test_post_gen_removes_the_other_modes_files():
    """Each mode keeps its own files and loses the other mode's."""
    answers = {
        "package_name": "pkg",
        "workload": "decode",
        "mode": "npugraph_ex",
        "custom_op": "out_of_place",
    }
    answers |= {"op_registration": "op_plugin", "parallel": "tensor_parallel"}
    assert post_gen.paths_to_remove(answers) == [
        "src/pkg/toolkit/compile_cache.py",
        "src/pkg/custom_op.py",
    ]
    assert post_gen.paths_to_remove({**answers, "mode": "cache_compile"}) == ["src/pkg/custom_op.py"]


def test_post_gen_leaves_no_trace_of_ops_without_one():
    """custom_op=none removes every op file of both styles, each once."""
    answers = {"package_name": "pkg", "workload": "forward", "mode": "cache_compile", "custom_op": "none"}
    answers["parallel"] = "none"
    removed = post_gen.paths_to_remove({**answers, "op_registration": "op_plugin"})
    assert removed == post_gen.paths_to_remove({**answers, "op_registration": "torch_library"})
    assert len(removed) == len(set(removed))
    assert {"src/pkg/custom_op.py", "src/pkg/op_plugin_functions.yaml", "tests/test_custom_op.py"} <= set(
        removed
    )


def test_post_gen_removes_decode_files_from_a_forward_project():
    """workload=forward removes generate.py, the decode toolkit and their tests; decode keeps them."""
    answers = {"package_name": "pkg", "mode": "npugraph_ex", "custom_op": "none", "parallel": "none"}
    answers["op_registration"] = "torch_library"
    decode_files = {
        "src/pkg/generate.py",
        "src/pkg/toolkit/decode.py",
        "tests/test_generate.py",
    }
    assert decode_files <= set(post_gen.paths_to_remove({**answers, "workload": "forward"}))
    assert not decode_files & set(post_gen.paths_to_remove({**answers, "workload": "decode"}))


def test_post_gen_removes_tensor_parallel_files_without_it():
    """parallel=none removes the parallel toolkit and its tests; tensor_parallel keeps them."""
    answers = {
        "package_name": "pkg",
        "workload": "forward",
        "mode": "cache_compile",
        "custom_op": "none",
        "op_registration": "torch_library",
    }
    removed = post_gen.paths_to_remove({**answers, "parallel": "none"})
    kept = post_gen.paths_to_remove({**answers, "parallel": "tensor_parallel"})
    tp_files = {
        "src/pkg/toolkit/parallel.py",
        "src/pkg/toolkit/two_ranks.py",
        "tests/test_tensor_parallel.py",
    }
    assert tp_files <= set(removed)
    assert not tp_files & set(kept)


def test_post_gen_removes_folders_left_empty(tmp_path: Path):
    """Pruning the last file of a folder removes the folder too."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "only.py").write_text("")
    (tmp_path / "keep.py").write_text("")
    post_gen.remove(tmp_path, ["a/b/only.py"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["keep.py"]


TP = {"parallel": "tensor_parallel"}
TORCH_LIBRARY_OP = {"custom_op": "out_of_place", "op_registration": "torch_library"}
# Answers over DEFAULTS, and the one line cookiecutter refuses them with, in full: what a
# user reads, each check's every refusal (the bakes above check a few words of each end to end).
REFUSALS = {
    "empty project name": (
        {"project_name": " "},
        "ERROR: project_name is empty; give the project a name, e.g. NPU Graph Demo",
    ),
    "not an identifier": (
        {"package_name": "my-project"},
        (
            "ERROR: package_name='my-project' is not a valid Python import name (letters, digits and _, "
            "not starting with a digit); set package_name, e.g. my_project"
        ),
    ),
    "not ASCII": (
        {"model_class": "Modèle"},
        (
            "ERROR: model_class='Modèle' is not a valid class name (letters, digits and _, not starting "
            "with a digit); e.g. TinyBlock"
        ),
    ),
    "32 characters at most": (
        {"package_name": "p" * 33},
        (
            f"ERROR: package_name='{'p' * 33}' is longer than 32 characters, which keeps generated lines "
            "within 100 columns; set package_name, e.g. my_project"
        ),
    ),
    "a keyword": (
        {"model_class": "None"},
        "ERROR: model_class='None' is a Python keyword, so it can't be a class name; e.g. TinyBlock",
    ),
    "a shadowed module": (
        {"package_name": "json"},
        (
            "ERROR: package_name='json' would shadow the module `json` that the project or its tools "
            "import; e.g. my_json"
        ),
    ),
    "a bad slug": (
        {"project_slug": "My Project"},
        (
            "ERROR: project_slug='My Project' is not a valid folder and distribution name; use lowercase "
            "letters, digits and dashes, e.g. my-project"
        ),
    ),
    "a generated name": (
        {"model_class": "INPUT_SHAPE"},
        (
            "ERROR: model_class='INPUT_SHAPE' clashes with the name `INPUT_SHAPE` the generated code "
            "already uses; e.g. TinyBlock"
        ),
    ),
    "a test class": (
        {"model_class": "TestNet"},
        (
            "ERROR: model_class='TestNet' starts with Test, so pytest would try to collect it as a test "
            "class; e.g. TinyBlock"
        ),
    ),
    "lowercase": (
        {"model_class": "block"},
        (
            "ERROR: model_class='block' does not start with a capital letter, as a class name should; "
            "e.g. TinyBlock"
        ),
    ),
    "capitals": (
        {"model_class": "CNN"},
        (
            "ERROR: model_class='CNN' is all capitals, which ruff's import sorting takes for a constant; "
            "use CapWords, e.g. Cnn"
        ),
    ),
    "not integers": (
        {"input_shape": "2, x"},
        "ERROR: input_shape='2, x' is not a comma-separated list of positive integers; e.g. 2, 8, 32",
    ),
    "one dimension": (
        {"input_shape": "32"},
        (
            "ERROR: input_shape='32' needs at least two dimensions, (..., sequence, hidden), because the "
            "model attends over the sequence; e.g. 2, 8, 32"
        ),
    ),
    "odd hidden size, no spaces": (
        {**TP, "input_shape": "2,8,33"},
        (
            "ERROR: input_shape='2,8,33' has an odd hidden size, 33: parallel=tensor_parallel splits the "
            "sample's attention heads over 2 ranks in the project's tests, so it needs an even one; "
            "e.g. 2, 8, 34"
        ),
    ),
    "tensor parallel, not integers": (
        {**TP, "input_shape": "2, 0"},
        "ERROR: input_shape='2, 0' is not a comma-separated list of positive integers; e.g. 2, 8, 32",
    ),
    "empty cache dir": ({"cache_dir": " "}, "ERROR: cache_dir=' ' is empty; e.g. .torchair_cache"),
    "cache dir with a tab": (
        {"cache_dir": "a\tb"},
        "ERROR: cache_dir='a\\tb' contains a control character such as a newline; e.g. .torchair_cache",
    ),
    "absolute cache dir": (
        {"cache_dir": "C:cache"},
        (
            "ERROR: cache_dir='C:cache' must be relative to where the MRE runs (cache_compile resolves it "
            "against the working directory); e.g. .torchair_cache"
        ),
    ),
    "cache dir not plain": (
        {"cache_dir": "a//b"},
        "ERROR: cache_dir='a//b' is not written plainly (no ./, //); e.g. a/b",
    ),
    "cache dir climbing out": (
        {"cache_dir": "a/../b"},
        (
            "ERROR: cache_dir='a/../b' must not climb out of the working directory with ..; "
            "e.g. .torchair_cache"
        ),
    ),
    "cache dir in the project": (
        {"cache_dir": "tests/cache"},
        (
            "ERROR: cache_dir='tests/cache' would put the cache inside the project's own files (or be the "
            "project); e.g. .torchair_cache"
        ),
    ),
    "cache dir a pattern": (
        {"cache_dir": "!cache"},
        (
            "ERROR: cache_dir='!cache' has characters that .gitignore reads as patterns (* ? [ ] \\ # !); "
            "e.g. .torchair_cache"
        ),
    ),
    "cache dir with a bracket": (
        {"cache_dir": "cache[1]"},
        (
            "ERROR: cache_dir='cache[1]' has characters that .gitignore reads as patterns (* ? [ ] \\ # !); "
            "e.g. .torchair_cache"
        ),
    ),
    "not an email": (
        {"author_email": "you@"},
        ("ERROR: author_email='you@' is not an email address package metadata accepts; e.g. you@example.com"),
    ),
    "op name not snake_case": (
        {**TORCH_LIBRARY_OP, "op_name": "myOp"},
        (
            "ERROR: op_name='myOp' is not a snake_case operator name (lowercase letters, digits, single _); "
            "e.g. my_op"
        ),
    ),
    "op name a keyword": (
        {**TORCH_LIBRARY_OP, "op_name": "lambda"},
        (
            "ERROR: op_name='lambda' is not a snake_case operator name (lowercase letters, digits, single "
            "_); e.g. my_op"
        ),
    ),
    "op name too long": (
        {**TORCH_LIBRARY_OP, "op_name": "o" * 33},
        (
            f"ERROR: op_name='{'o' * 33}' is longer than 32 characters, which keeps generated lines within "
            "100 columns; e.g. my_op"
        ),
    ),
    "op name custom_op.py uses": (
        {**TORCH_LIBRARY_OP, "op_name": "torch"},
        "ERROR: op_name='torch' would replace the name `torch` that custom_op.py already uses; e.g. my_op",
    ),
    "out-of-place op ending in _": (
        {**TORCH_LIBRARY_OP, "op_name": "my_op_"},
        (
            "ERROR: op_name='my_op_' ends with _, which marks an in-place op; drop the _ or choose "
            "custom_op=in_place"
        ),
    ),
    "op-plugin op ending in _": (
        {"custom_op": "in_place", "op_registration": "op_plugin", "op_name": "my_op_"},
        (
            "ERROR: op_name='my_op_' ends with _, which op-plugin's code generator reads as an ATen "
            "in-place variant that must take and return `self`, while graph mode needs an in-place custom "
            "op to return no mutated input; drop the _, e.g. my_op"
        ),
    ),
    "namespace not an identifier": (
        {**TORCH_LIBRARY_OP, "op_namespace": "my-ops"},
        (
            "ERROR: op_namespace='my-ops' is not a valid operator namespace (letters, digits and _, not "
            "starting with a digit); e.g. my_ops"
        ),
    ),
    "namespace reserved": (
        {**TORCH_LIBRARY_OP, "op_namespace": "aten"},
        "ERROR: op_namespace='aten' is owned by torch or torch_npu (torch.ops.aten); e.g. my_ops",
    ),
}


@pytest.mark.parametrize(("answers", "line"), REFUSALS.values(), ids=REFUSALS.keys())
def test_each_refusal_reads_in_full(answers, line):
    """Each refusal is one ERROR line: the variable, its value, why, and an example that works."""
    assert rules.problems({**DEFAULTS, **answers}) == [line]


# Answers over DEFAULTS at the edge of each rule, which pass.
EDGE_ANSWERS = [
    {"model_class": "Block2", "input_shape": "1, 1", "cache_dir": "a/b"},
    {"cache_dir": "npu_cache/"},
    {"cache_dir": "npu_cache/LINUX"},
    {"package_name": "p" * 32, "model_class": "Cnn", "cache_dir": "cache.d/x-y_z"},
    {"custom_op": "in_place", "op_name": "o" * 32 + "_", "op_namespace": "n" * 32},
    {**TP, "input_shape": "2,8,32"},
    {"custom_op": "in_place", "op_registration": "op_plugin", "op_name": "torch"},
    {"custom_op": "none", "op_name": "Not An Op", "op_namespace": "npu"},
]


@pytest.mark.parametrize("answers", EDGE_ANSWERS)
def test_answers_at_the_edge_of_each_rule_pass(answers):
    """Limits are inclusive, and op answers without an op (or op-plugin's) are not checked."""
    assert rules.problems({**DEFAULTS, **answers}) == []


@settings(max_examples=300, deadline=None)
@given(st.from_regex(rules.PLAIN_ADDRESS, fullmatch=True))
def test_an_address_taken_without_the_parser_is_one_the_parser_takes(email):
    """The hook accepts a plain address without importing email's parser: each must be one that
    the parser package metadata uses accepts, in ASCII."""
    Address(addr_spec=email)
    assert email.isascii()


def test_every_control_character_in_free_text_is_named():
    """Every free-text answer with a control character gets its own line, naming it."""
    answers = {**DEFAULTS, "description": "a\nb", "author_name": "x\ty"}
    assert rules.problems(answers) == [
        f"ERROR: {variable}={value!r} has a newline or another control or invisible character, which "
        "package metadata cannot hold; write it on one line, e.g. NPU Graph Demo"
        for variable, value in [("description", "a\nb"), ("author_name", "x\ty")]
    ]


POST_GEN_DEFAULTS = {**DEFAULTS, "mode": "npugraph_ex", "__op": "my_op"}


def test_next_steps_are_the_commands_a_new_user_types():
    """After a bake: the folder and the mode, then each command a new user types, with why."""
    heading, *steps = post_gen.next_steps(POST_GEN_DEFAULTS).splitlines()
    assert heading == "Created npu-graph-demo/ (npugraph_ex mode). Next:"
    commands = [step.partition("#")[0].strip() for step in steps]
    assert commands == [
        "cd npu-graph-demo",
        "python -m pip install --upgrade pip",
        "pip install -e . --group test",
        "python -m npu_graph_demo.mre",
        "python -m npu_graph_demo check",
        "python -m pytest",
    ]
    assert all("  # " in step for step in steps[1:])  # each command but `cd` says why


NOTES = {
    "no op, op-plugin chosen": (
        {"custom_op": "none", "op_registration": "op_plugin", "op_namespace": "npu_graph_demo"},
        ["Note: op_registration=op_plugin is unused: custom_op is none."],
    ),
    "npugraph_ex mode, cache dir given": (
        {"cache_dir": "npu_cache"},
        ["Note: cache_dir=npu_cache is unused: only cache_compile mode caches."],
    ),
    "cache_compile mode, cache dir given": ({"mode": "cache_compile", "cache_dir": "npu_cache"}, []),
    "op-plugin, own namespace given": (
        {"custom_op": "out_of_place", "op_registration": "op_plugin", "op_namespace": "ops"},
        ["Note: op_namespace is unused: op-plugin ops always live in torch.ops.npu."],
    ),
    "torch.library in-place op renamed": (
        {"custom_op": "in_place", "__op": "my_op_"},
        ["Note: the in-place op is named my_op_, not my_op: torch.library in-place ops end with _."],
    ),
    "op-plugin in-place op": (
        {"custom_op": "in_place", "op_registration": "op_plugin"},
        [
            (
                "Note: the in-place op keeps the name my_op, without a trailing _: op-plugin's code "
                "generator reads name_ as an ATen in-place variant, which must return self."
            )
        ],
    ),
    "the defaults": ({}, []),
}


@pytest.mark.parametrize(("answers", "expected"), NOTES.values(), ids=NOTES.keys())
def test_a_note_says_what_the_bake_did_with_an_answer_it_could_not_use(answers, expected):
    """An answer the bake adapted or left unused gets one Note line before the next steps."""
    answers = {**POST_GEN_DEFAULTS, **answers}
    assert post_gen.notes(answers) == expected
    assert post_gen.next_steps(answers).splitlines()[: len(expected) + 1][:-1] == expected


def test_a_bake_prints_the_notes_and_next_steps(tmp_path, capfd):
    """After the files are written the bake prints its notes, then what to type next."""
    bake(tmp_path, custom_op="in_place")
    assert capfd.readouterr().out.splitlines()[:2] == [
        "Note: the in-place op is named my_op_, not my_op: torch.library in-place ops end with _.",
        "Created npu-graph-demo/ (npugraph_ex mode). Next:",
    ]


def test_a_tensor_parallel_bake_says_so_and_starts_its_mre_under_torchrun():
    """The next steps of a tensor-parallel decode project name what it is, and run its MRE as
    one process per rank, as its README does."""
    answers = {**DEFAULTS, "workload": "decode", "parallel": "tensor_parallel", "mode": "npugraph_ex"}
    lines = post_gen.next_steps(answers).splitlines()
    assert lines[0] == "Created npu-graph-demo/ (npugraph_ex mode, decode, tensor parallel). Next:"
    assert any(line.startswith("  torchrun --nproc-per-node 2 -m npu_graph_demo.mre ") for line in lines)


def test_pruning_removes_whole_folders_and_skips_missing_paths(tmp_path: Path):
    """A listed folder goes with its contents; a listed path already gone is no error."""
    (tmp_path / "docs" / "api").mkdir(parents=True)
    (tmp_path / "docs" / "api" / "index.md").write_text("")
    (tmp_path / "keep.py").write_text("")
    post_gen.remove(tmp_path, ["docs", "gone.py"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["keep.py"]


# Answers over DEFAULTS, and the questions that do not matter under them (copier skips them).
IRRELEVANT = {
    "the defaults": ({"mode": "npugraph_ex"}, {"cache_dir", "op_registration", "op_name", "op_namespace"}),
    "cache_compile mode": ({"mode": "cache_compile"}, {"op_registration", "op_name", "op_namespace"}),
    "a torch.library op": ({"mode": "npugraph_ex", "custom_op": "in_place"}, {"cache_dir"}),
    "an op-plugin op": (
        {"mode": "cache_compile", "custom_op": "out_of_place", "op_registration": "op_plugin"},
        {"op_namespace"},
    ),
    "the fullest path": (
        {"mode": "cache_compile", "custom_op": "out_of_place", "op_registration": "torch_library"},
        set(),
    ),
}


@pytest.mark.parametrize(("answers", "irrelevant"), IRRELEVANT.values(), ids=IRRELEVANT.keys())
def test_asked_leaves_out_the_questions_other_answers_make_irrelevant(answers, irrelevant):
    """cache_dir matters in cache_compile mode only, the op's registration and name with a custom
    op only, its namespace with a torch.library op only; every other question always."""
    complete = {**DEFAULTS, **answers}
    assert {name for name in complete if not rules.asked(name, complete)} == irrelevant


def test_a_refusal_is_the_hooks_lines_about_that_answer_alone():
    """refusal() gives the ERROR lines that name one variable, joined, and "" for a good answer:
    what copier shows under the question as it is typed."""
    answers = {**DEFAULTS, "project_name": " ", "model_class": "1x", "description": "a\nb"}
    lines = rules.problems(answers)
    assert rules.refusal("project_name", answers) == lines[0]
    assert rules.refusal("description", answers) == lines[1]
    assert rules.refusal("model_class", answers) == lines[2]
    assert rules.refusal("package_name", answers) == ""
    both = {**DEFAULTS, "author_email": "a\n@b"}
    assert rules.refusal("author_email", both) == "\n".join(rules.problems(both))
    assert rules.refusal("author_email", both).count("\n") == 1


IMPORT = re.compile(r"^\s*(?:import ([A-Za-z_]\w*)|from ([A-Za-z_]\w*)[\w.]* import )", re.MULTILINE)


def test_every_library_the_project_imports_is_a_package_name_refused():
    """A package named as a library the generated code imports would shadow it (a project named
    Safetensors breaks export-hf): every top-level module the template's project files import,
    beyond the standard library, is refused as package_name."""
    imported = set()
    for path in (TEMPLATE / "{{cookiecutter.project_slug}}").rglob("*.py"):
        imported |= {first or second for first, second in IMPORT.findall(path.read_text())}
    libraries = {name for name in imported if name not in sys.stdlib_module_names} - {"__future__"}
    assert "torch" in libraries
    assert libraries <= rules.SHADOWED_MODULES, libraries - rules.SHADOWED_MODULES
