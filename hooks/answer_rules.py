"""The rules that refuse answers which cannot make a working project, before anything is written.

Cookiecutter applies them in its own process, as soon as the last question is answered
(answer_check.py, a Jinja extension that cookiecutter.json names): the answers reach them as
Python data, never as code. Copier calls them as each answer is typed (copier_support/hook_rules.py):
its questions' `when:` is asked() and their `validator:` is refusal(), so both tools ask and refuse
by the same rules, in the same words. Standard library only: this file is template code, not
the project's, and runs wherever cookiecutter or copier runs.
"""

from __future__ import annotations

import keyword
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath, PureWindowsPath

# Import names that would shadow a module the generated project, its tests or its tools import,
# beyond the standard library (which sys.stdlib_module_names lists, without its `test` package).
SHADOWED_MODULES = frozenset(
    {"torch", "torch_npu", "torchair", "npugraph_ex", "numpy", "yaml", "pytest", "nox", "ruff"}
    # What the decode tools (export-hf, vllm-check), profile's plots and opschema import.
    | {"transformers", "safetensors", "vllm", "matplotlib", "torchgen"}
    | {"test", "tests", "src"}
)
# Module-level names of model.py, the one file that names the model class: a class called one of
# these would clash with them (tests/test_hooks.py keeps this set exact).
GENERATED_NAMES = frozenset(
    {
        "torch",
        "nn",
        "F",
        "INPUT_SHAPE",
        "HEADS",
        "build_model",
        "example_inputs",
        "custom_op",
        "meta_registrations",
    }
    | {"parallel_plan", "ColwiseParallel", "RowwiseParallel", "ParallelStyle"}
    # workload=decode's sample
    | {"PROMPT_SHAPE", "HIDDEN", "LAYERS", "VOCAB", "MAX_BATCH", "MAX_SEQ_LEN", "CAPTURE_SIZES"}
    | {"KVCache", "Block", "rotate", "KVCacheParallel", "hf_config"}
)
# The ranks the generated tests of a tensor-parallel project run: the sample's heads split over them.
TEST_RANKS = 2
# Namespaces torch or torch_npu own: torch.ops.npu is torch_npu's (TORCH_LIBRARY(npu, m)).
RESERVED_NAMESPACES = frozenset({"npu", "aten", "prim", "prims", "torch", "_c10d_functional"})
OP_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*_?")
MAX_NAME_LENGTH = 32
# Folders of the generated project: the cache must not be one of them, or inside one.
PROJECT_FOLDERS = frozenset({".", "src", "tests", ".git", ".nox", ".venv", "build", "dist"})
GITIGNORE_SPECIAL = "*?[]\\"
# Names that custom_op.py binds at module level: an op function named so would replace them.
CUSTOM_OP_NAMES = frozenset({"torch", "reference", "npu_status", "OP_NAME"})
SLUG = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")


def check_identifier(name: str, what: str) -> str | None:
    """Return why `name` can't be a Python identifier, or None."""
    if not name.isidentifier() or not name.isascii():
        return f"is not a valid {what} (letters, digits and _, not starting with a digit)"
    if len(name) > MAX_NAME_LENGTH:
        return f"is longer than {MAX_NAME_LENGTH} characters, which keeps generated lines within 100 columns"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"is a Python keyword, so it can't be a {what}"
    return None


def check_package_name(name: str) -> str | None:
    """Return why `name` can't be the import name, or None."""
    if problem := check_identifier(name, "Python import name"):
        return problem + "; set package_name, e.g. my_project"
    if name in sys.stdlib_module_names or name in SHADOWED_MODULES:
        return f"would shadow the module `{name}` that the project or its tools import; e.g. my_{name}"
    return None


def check_slug(slug: str) -> str | None:
    if not SLUG.fullmatch(slug):
        return "is not a valid folder and distribution name; use lowercase letters, digits and dashes, e.g. my-project"
    return None


def check_model_class(name: str) -> str | None:
    if problem := check_identifier(name, "class name"):
        return problem + "; e.g. TinyBlock"
    if name in GENERATED_NAMES:
        return f"clashes with the name `{name}` the generated code already uses; e.g. TinyBlock"
    if name.startswith("Test"):
        return "starts with Test, so pytest would try to collect it as a test class; e.g. TinyBlock"
    if not name[0].isupper():
        return "does not start with a capital letter, as a class name should; e.g. TinyBlock"
    if name.isupper():
        return "is all capitals, which ruff's import sorting takes for a constant; use CapWords, e.g. Cnn"
    return None


def check_input_shape(text: str) -> str | None:
    dims = [part.strip() for part in text.split(",")]
    if not all(dim.isdigit() and dim.isascii() and int(dim) > 0 for dim in dims):
        return "is not a comma-separated list of positive integers; e.g. 2, 8, 32"
    if len(dims) < 2:
        return "needs at least two dimensions, (..., sequence, hidden), because the model attends over the sequence; e.g. 2, 8, 32"
    return None


def check_tensor_parallel_shape(text: str) -> str | None:
    if problem := check_input_shape(text):
        return problem
    hidden = int(text.split(",")[-1])
    if hidden % TEST_RANKS:
        return (
            f"has an odd hidden size, {hidden}: parallel=tensor_parallel splits the sample's attention heads "
            f"over {TEST_RANKS} ranks in the project's tests, so it needs an even one; e.g. 2, 8, {hidden + 1}"
        )
    return None


def check_decode_shape(text: str, ranks: int) -> str | None:
    """The decode sample splits each head's features in two pairs' halves for rotary positions, and
    under tensor parallelism its heads over the test ranks: hidden must divide by 2 per rank."""
    if problem := check_input_shape(text):
        return problem
    hidden, step = int(text.split(",")[-1]), 2 * ranks
    if hidden % step:
        why = "rotary positions turn pairs of features" + (
            f", and parallel=tensor_parallel splits the heads over {ranks} ranks in the project's tests"
            if ranks > 1
            else ""
        )
        leading = [part.strip() for part in text.split(",")[:-1]]
        example = ", ".join([*leading, str(hidden + step - hidden % step)])
        return f"has a hidden size of {hidden}, which workload=decode needs divisible by {step} ({why}); e.g. {example}"
    return None


def check_cache_dir(path: str) -> str | None:
    if not path.strip():
        return "is empty; e.g. .torchair_cache"
    if not path.isprintable():
        return "contains a control character such as a newline; e.g. .torchair_cache"
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).anchor or path.startswith("~"):
        return "must be relative to where the MRE runs (cache_compile resolves it against the working directory); e.g. .torchair_cache"
    if PurePosixPath(path).as_posix() != path.rstrip("/"):
        return f"is not written plainly (no ./, //); e.g. {PurePosixPath(path).as_posix()}"
    parts = PureWindowsPath(path).parts
    if ".." in parts:
        return "must not climb out of the working directory with ..; e.g. .torchair_cache"
    if not parts or parts[0] in PROJECT_FOLDERS:
        return "would put the cache inside the project's own files (or be the project); e.g. .torchair_cache"
    if any(character in path for character in GITIGNORE_SPECIAL) or path.startswith(("#", "!")):
        return "has characters that .gitignore reads as patterns (* ? [ ] \\ # !); e.g. .torchair_cache"
    return None


def check_op_name(name: str, kind: str, registration: str) -> str | None:
    if not OP_NAME.fullmatch(name) or keyword.iskeyword(name):
        return "is not a snake_case operator name (lowercase letters, digits, single _); e.g. my_op"
    if len(name.rstrip("_")) > MAX_NAME_LENGTH:
        return f"is longer than {MAX_NAME_LENGTH} characters, which keeps generated lines within 100 columns; e.g. my_op"
    if name in CUSTOM_OP_NAMES and registration == "torch_library":
        return f"would replace the name `{name}` that custom_op.py already uses; e.g. my_op"
    if name.endswith("_") and kind == "out_of_place":
        return "ends with _, which marks an in-place op; drop the _ or choose custom_op=in_place"
    if name.endswith("_") and registration == "op_plugin":
        return (
            "ends with _, which op-plugin's code generator reads as an ATen in-place variant that must "
            "take and return `self`, while graph mode needs an in-place custom op to return no mutated "
            "input; drop the _, e.g. my_op"
        )
    return None


def check_namespace(namespace: str) -> str | None:
    if problem := check_identifier(namespace, "operator namespace"):
        return problem + "; e.g. my_ops"
    if namespace in RESERVED_NAMESPACES:
        return f"is owned by torch or torch_npu (torch.ops.{namespace}); e.g. my_ops"
    return None


# An address of plain dot-atoms (RFC 5322 atext), such as the default you@example.com: the parser
# below accepts every one, and a plain address spares the bake importing it.
ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
PLAIN_ADDRESS = re.compile(rf"{ATEXT}(?:\.{ATEXT})*@{ATEXT}(?:\.{ATEXT})*")


def check_email(email: str) -> str | None:
    if PLAIN_ADDRESS.fullmatch(email):
        return None
    # The parser that package metadata (hatchling, pip) uses: what it refuses breaks the install.
    from email.errors import HeaderParseError
    from email.headerregistry import Address

    try:
        Address(addr_spec=email)
    except (ValueError, IndexError, TypeError, HeaderParseError):
        return "is not an email address package metadata accepts; e.g. you@example.com"
    if not email.isascii():
        return "has non-ASCII characters, which package metadata refuses in an address; e.g. you@example.com"
    return None


CHECKS = {
    "project_slug": check_slug,
    "package_name": check_package_name,
    "model_class": check_model_class,
    "input_shape": check_input_shape,
    "cache_dir": check_cache_dir,
    "author_email": check_email,
}


# The questions that another answer makes irrelevant, and when they matter: copier asks them only
# then, and the op answers are checked only then (cache_dir is checked in any mode: settings.py
# and the README render it whatever the mode).
ASKED_WHEN: dict[str, Callable[[Mapping[str, object]], bool]] = {
    "cache_dir": lambda answers: answers["mode"] == "cache_compile",
    "op_registration": lambda answers: answers["custom_op"] != "none",
    "op_name": lambda answers: answers["custom_op"] != "none",
    # op-plugin ops always live in torch.ops.npu.
    "op_namespace": lambda answers: (
        answers["custom_op"] != "none" and answers["op_registration"] == "torch_library"
    ),
}


def asked(variable: str, answers: Mapping[str, object]) -> bool:
    """Whether `variable` matters under `answers` (the questions before it, at least)."""
    return variable not in ASKED_WHEN or ASKED_WHEN[variable](answers)


def checks_for(answers: dict[str, object]) -> dict[str, Callable[[str], str | None]]:
    """The checks that apply: the custom-op answers only matter when there is a custom op."""
    checks = dict(CHECKS)
    if answers["parallel"] == "tensor_parallel":
        checks["input_shape"] = check_tensor_parallel_shape
    if answers["workload"] == "decode":
        ranks = TEST_RANKS if answers["parallel"] == "tensor_parallel" else 1
        checks["input_shape"] = lambda text: check_decode_shape(text, ranks)
    if asked("op_name", answers):
        kind, registration = str(answers["custom_op"]), str(answers["op_registration"])
        checks["op_name"] = lambda name: check_op_name(name, kind, registration)
    if asked("op_namespace", answers):
        checks["op_namespace"] = check_namespace
    return checks


# Free text that goes into pyproject metadata and the README: one printable line each.
FREE_TEXT = ("project_name", "description", "author_name", "author_email")


def problems(answers: dict[str, object]) -> list[str]:
    """One `ERROR:` line per answer that can't work: the variable, the value and the fix."""
    found = []
    if not str(answers["project_name"]).strip():
        found.append("ERROR: project_name is empty; give the project a name, e.g. NPU Graph Demo")
    for variable in FREE_TEXT:
        value = str(answers[variable])
        if not value.isprintable():
            found.append(
                f"ERROR: {variable}={value!r} has a newline or another control or invisible character, "
                "which package metadata cannot hold; write it on one line, e.g. NPU Graph Demo"
            )
    for variable, check in checks_for(answers).items():
        value = str(answers[variable])
        if problem := check(value):
            found.append(f"ERROR: {variable}={value!r} {problem}")
    return found


def refusal(variable: str, answers: dict[str, object]) -> str:
    """The ERROR lines about `variable` alone, or "": what copier says as the answer is typed.

    Every rule that `variable`'s check reads must be asked before it (cookiecutter.json's order),
    so that the answers typed so far decide it as they decide the whole bake.
    """
    lines = problems(answers)
    return "\n".join(
        line for line in lines if line.startswith((f"ERROR: {variable}=", f"ERROR: {variable} "))
    )


def refusal_message(answers: dict[str, object], template: str, defaults: Mapping[str, object]) -> str:
    """Every ERROR line for `answers`, then what to do next, or "" when all of them can work.

    Cookiecutter saves no replay of refused answers, so the message ends with a command that bakes
    again with the answers given, to correct and run: those that differ from cookiecutter.json's
    defaults, leaving out the ones its defaults derive from others (a slug from the name), which
    follow the corrected answers again, unless one of those is refused itself.
    """
    errors = problems(answers)
    if not errors:
        return ""
    refused = {line.removeprefix("ERROR: ").split("=")[0].split(" ")[0] for line in errors}
    given = [
        f"{name}={shlex.quote(str(value))}"
        for name, value in answers.items()
        if name in defaults
        and not name.startswith("_")
        and value != first_offered(defaults[name])
        and ("{{" not in str(defaults[name]) or name in refused)
    ]
    command = " ".join([shlex.join(["cookiecutter", template, "--no-input"]), *given])
    return "\n".join([*errors, f"No project was made. Correct the answers above and bake again: {command}"])


def first_offered(default: object) -> object:
    """What cookiecutter offers for a question: the first choice of a list, else the default."""
    return default[0] if isinstance(default, list) else default
