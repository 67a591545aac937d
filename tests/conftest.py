"""Baking helpers shared by the template's tests: every combination of choices, baked in-process.

cookiecutter, copier and ruff are imported where a bake or a lint needs them: tests/toolkit bakes
nothing, and runs where they are not installed.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from copier import Settings

TEMPLATE = Path(__file__).resolve().parents[1]
CONTEXT = json.loads((TEMPLATE / "cookiecutter.json").read_text())
# Every prompted variable whose answer is a choice, with its choices (first = default).
CHOICES = {
    name: value for name, value in CONTEXT.items() if isinstance(value, list) and not name.startswith("_")
}
DEFAULT_CHOICES = {name: choices[0] for name, choices in CHOICES.items()}
COMBINATIONS = [dict(zip(CHOICES, values, strict=True)) for values in itertools.product(*CHOICES.values())]

OP_VARIANTS = [{"custom_op": "none"}] + [
    {"custom_op": kind, "op_registration": registration}
    for registration in CHOICES["op_registration"]
    for kind in CHOICES["custom_op"]
    if kind != "none"
]
# One combination per distinct code tree: the torch_npu version only changes packaging files
# (test_generated_project.py checks that), so it is left at its default.
CODE_VARIANTS = [{"mode": mode, **ops} for mode in CHOICES["mode"] for ops in OP_VARIANTS]
# Tensor parallelism reaches the MRE, the toolkit and the tests: each mode, without and with a
# custom op (one op style each).
TP_VARIANTS = [
    {"mode": "npugraph_ex", "parallel": "tensor_parallel", "custom_op": "none"},
    {
        "mode": "npugraph_ex",
        "parallel": "tensor_parallel",
        "custom_op": "in_place",
        "op_registration": "op_plugin",
    },
    {"mode": "cache_compile", "parallel": "tensor_parallel", "custom_op": "none"},
    {
        "mode": "cache_compile",
        "parallel": "tensor_parallel",
        "custom_op": "out_of_place",
        "op_registration": "torch_library",
    },
]
CODE_VARIANTS += TP_VARIANTS
# Decode changes the model, the MRE, the tools and the tests: every code variant again, baked,
# linted and checked. The full tier runs the suites of the decode variants whose code differs: each
# mode with no op, each op style's in-place op (the cache update), and tensor parallelism.
DECODE_VARIANTS = [{"workload": "decode", **answers} for answers in CODE_VARIANTS]
DECODE_SUITES = [DECODE_VARIANTS[index] for index in (0, 2, 5, 6, 9, 11, 13)]
# The default tier runs these variants' own suites: both modes; no op, an out-of-place op
# registered with torch.library and an in-place op-plugin op; tensor parallelism; decode. Together
# they hold 97% of the distinct lines of the suite variants' code and tests, the most any three
# hold without decode and tensor parallelism together, a suite of 100 CPU seconds
# (test_generated_project.py checks the share); the full tier runs every variant's suite.
REPRESENTATIVE_VARIANTS = [
    {"mode": "npugraph_ex", "custom_op": "none"},
    TP_VARIANTS[3],  # cache_compile, tensor parallel, out-of-place torch.library op
    DECODE_VARIANTS[9],  # decode, cache_compile, in-place op-plugin op
]
SUITE_VARIANTS = CODE_VARIANTS + DECODE_SUITES
CODE_VARIANTS = CODE_VARIANTS + DECODE_VARIANTS


def variant_id(answers: dict[str, str]) -> str:
    return "-".join(answers.values())


def combination_id(answers: dict[str, str]) -> str:
    return "-".join(answers[name] for name in CHOICES)


def __getattr__(name: str) -> Any:
    """RUFF: the ruff this environment installed, run directly (`python -m ruff` doubles a lint's
    time), found when a test that lints first imports it."""
    if name == "RUFF":
        from ruff.__main__ import find_ruff_bin

        return find_ruff_bin()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def isolated_config(workdir: Path, preset: dict[str, str] | None = None) -> Path:
    """A cookiecutter config file in workdir, standing in for the user's own (never read here)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = {
        "cookiecutters_dir": str(workdir / "cookiecutters"),
        "replay_dir": str(workdir / "replay"),
        "default_context": preset or {},
    }
    config_file = workdir / "cookiecutter-config.yaml"
    config_file.write_text(json.dumps(config))  # JSON is YAML
    return config_file


def bake(workdir: Path, preset: dict[str, str] | None = None, **answers: str) -> Path:
    """Bake into workdir/out with `answers` over the defaults; `preset` is a user config's default_context."""
    from cookiecutter.main import cookiecutter

    config_file = isolated_config(workdir, preset)
    output_dir = workdir / "out"
    output_dir.mkdir(exist_ok=True)
    return Path(
        cookiecutter(
            str(TEMPLATE),
            no_input=True,
            extra_context=answers,
            output_dir=str(output_dir),
            config_file=str(config_file),
        )
    )


# What git leaves out of the template (.gitignore), and git itself.
NOT_TEMPLATE_FILES = shutil.ignore_patterns(
    ".git", "__pycache__", "*.py[cod]", ".nox", ".venv", ".*_cache", "build", ".hypothesis"
)


def template_copy(folder: Path) -> Path:
    """A plain copy of the template's files, as copier reads a folder outside git: no clone of the
    checkout for every bake (what a clone would check out, uncommitted changes included)."""
    return Path(shutil.copytree(TEMPLATE, folder, ignore=NOT_TEMPLATE_FILES, dirs_exist_ok=True))


def copier_bake(template: Path, destination: Path, settings: Settings | None = None, **answers: str) -> Path:
    """`copier copy --trust --defaults` with `answers` as --data; `settings` stands in for the
    user's settings file (never read here)."""
    from copier import Settings, run_copy

    run_copy(
        str(template), destination, data=answers, defaults=True, unsafe=True, quiet=True,
        settings=settings or Settings(),
    )  # fmt: skip
    return destination


def package_of(project: Path) -> str:
    (package,) = (project / "src").iterdir()
    return package.name


# torch 2.13's gloo on the CPU now and then kills a rank of a torchrun launch in native code
# (SIGSEGV, or SIGABRT after "terminate called without an active exception"): seen twice in about
# a hundred launches on a loaded 2-core machine, each time in another test, never twice running.
# A rank that Python code ends exits 1 or with its own code; a signal here is torch's crash.
RANK_KILLED_BY_TORCH = re.compile(r"traceback : Signal (?:6 \(SIGABRT\)|11 \(SIGSEGV\)) received by PID")


def again_if_torch_crashed(
    run: Callable[[], subprocess.CompletedProcess[str]],
) -> subprocess.CompletedProcess[str]:
    """run(), and once more if torchrun's summary says a rank died of torch's native crash: a
    launch that crashes so twice fails as it ran."""
    result = run()
    if result.returncode and RANK_KILLED_BY_TORCH.search(result.stdout + result.stderr):
        result = run()
    return result


# pip byte-compiles each module it installs, thousands for torch and vLLM, most of which no test
# imports; Python compiles those it imports as it imports them. PIP_COMPILE=0 is --no-compile.
PIP_WITHOUT_BYTECODE = {"PIP_COMPILE": "0"}


def run_in(
    project: Path, *command: str, timeout: float | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run `command` in a baked project as its own checkout would: src on the path, no stray plugins."""
    inherited = {
        name: value
        for name, value in os.environ.items()
        if name not in {"NPUGRAPH_BACKEND", "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    }
    environment = {
        **inherited,
        "PYTHONPATH": str(project / "src"),
        # A project's own environment has none of this suite's pytest plugins (xdist, ...).
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        # Leave the baked tree as baked: other tests compare its exact file list.
        "PYTHONDONTWRITEBYTECODE": "1",
        # Tests run side by side on few cores: one thread each, or torch's threads fight.
        "OMP_NUM_THREADS": "1",
        # Its own pytest temp root: the shared one (/tmp/pytest-of-<user>) is scanned by every
        # concurrent run, and a folder removed mid-scan leaks an iterator, a ResourceWarning that
        # the project's filterwarnings makes an error after every test passed.
        "PYTEST_ADDOPTS": "--basetemp=" + tempfile.mkdtemp(prefix="pytest-", dir=project.parent),
        **env,
    }
    return subprocess.run(
        [sys.executable, *command],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


# What Jinja's compiled code depends on besides the source: the syntax, the extensions and the
# code generator's options (jinja2.Environment's arguments).
COMPILE_OPTIONS = (
    "block_start_string",
    "block_end_string",
    "variable_start_string",
    "variable_end_string",
    "comment_start_string",
    "comment_end_string",
    "line_statement_prefix",
    "line_comment_prefix",
    "trim_blocks",
    "lstrip_blocks",
    "newline_sequence",
    "keep_trailing_newline",
    "optimized",
    "finalize",
    "is_async",
)


def pytest_configure(config: pytest.Config) -> None:
    """Compile each template once per test process, and remove each rendered hook after it ran.
    Cookiecutter makes new Jinja environments for every bake and compiled the template's files,
    file names, hooks and prompts again: more than half of a bake's time, and the tests bake
    hundreds of times. (Benchmarks import this module without this hook, and time a bake as users
    wait for it.) Without cookiecutter (tests/toolkit alone) nothing bakes."""
    try:
        from cookiecutter import hooks
        from cookiecutter.environment import StrictEnvironment
    except ImportError:
        return
    compiled: dict[tuple, Any] = {}
    compile_source = StrictEnvironment.compile

    def compile_once(environment: StrictEnvironment, source: str, *arguments: Any, **keywords: Any) -> Any:
        options = [getattr(environment, name) for name in COMPILE_OPTIONS]
        key = (source, *arguments, *sorted(keywords.items()), *options, *environment.extensions)
        if key not in compiled:
            compiled[key] = compile_source(environment, source, *arguments, **keywords)
        return compiled[key]

    StrictEnvironment.compile = compile_once
    hooks.run_script_with_context = functools.partial(run_and_remove, hooks.run_script_with_context)


def run_and_remove(run: Callable[..., None], script_path: str, cwd: str, context: dict[str, Any]) -> None:
    """Run a hook as cookiecutter does, then remove its rendered copy. Cookiecutter leaves every
    rendered hook in the temp folder, on purpose (cookiecutter/cookiecutter#886): two files per
    bake, and the tests bake thousands of times. Here each is rendered into a folder of its own."""
    saved = tempfile.tempdir
    with tempfile.TemporaryDirectory(prefix="hook-") as folder:
        tempfile.tempdir = folder
        try:
            run(script_path, cwd, context)
        finally:
            tempfile.tempdir = saved


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help="the full tier: also the tests marked `full` (every variant's suite, real models, torchrun)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the `full` tier unless --full; run `slow` tests first (started last, one would
    keep a worker busy after the rest finish)."""
    if not config.getoption("--full"):
        full = [item for item in items if item.get_closest_marker("full")]
        if full:
            config.hook.pytest_deselected(items=full)
            items[:] = [item for item in items if not item.get_closest_marker("full")]
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of this run that every xdist worker shares: each worker's own base temp folder
    sits in it."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(folder: Path, key: str, make: Callable[[Path], Any]) -> Any:
    """make(folder/key)'s result, made once across xdist workers (the others wait for it) and
    read back as JSON by every caller."""
    from filelock import FileLock

    folder.mkdir(exist_ok=True)
    done = folder / f"{key}.json"
    with FileLock(folder / f"{key}.lock"):
        if not done.exists():
            done.write_text(json.dumps(make(folder / key)))
    return json.loads(done.read_text())


@pytest.fixture(scope="session")
def baked(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """bake(**answers), memoised across xdist workers: each set of answers is baked once, into a
    folder named by its hash, and shared by every test that asks for it (read-only)."""
    bakes = run_folder(tmp_path_factory) / "bakes"

    def bake_once(**answers: str) -> Path:
        # Answers left out are the defaults: the same project, so the same bake.
        complete = {**DEFAULT_CHOICES, **answers}
        key = hashlib.sha256(json.dumps(complete, sort_keys=True).encode()).hexdigest()[:16]
        return Path(once(bakes, key, lambda folder: str(bake(folder, **answers))))

    return bake_once


@pytest.fixture(scope="session")
def copier_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain copy of the template, for copier to bake from (one per test process)."""
    return template_copy(tmp_path_factory.mktemp("copier-template"))
