{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
"""The doctor: the right verdict here and on simulated broken machines, never a traceback."""

import json
{%- if cache %}
import os
{%- endif %}
import sys

import pytest
import torch
from torch import nn
{%- if tp %}
from torch.distributed.tensor.parallel import ColwiseParallel
{%- endif %}

from {{ cookiecutter.package_name }} import model
from {{ cookiecutter.package_name }}.toolkit import doctor
from {{ cookiecutter.package_name }}.toolkit.backend import BACKEND_ENV, npu_status
{%- if cache %}
from {{ cookiecutter.package_name }}.toolkit.compile_cache import CACHE_DIR
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.contract import constant_inputs


@pytest.fixture(autouse=True)
def default_backend(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
{%- if tp %}
    # torchrun sets it, and it is --nproc-per-node's default.
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
{%- endif %}


def run(capsys, *arguments: str) -> tuple[int, str]:
    code = doctor.main(list(arguments))
    return code, capsys.readouterr().out


def line_of(report: str, name: str) -> str:
    """The report's line for one check, with its fix line if it has one."""
    lines = report.splitlines()
    (index,) = (i for i, line in enumerate(lines) if line.split()[1:2] == [name])
    has_fix = index + 1 < len(lines) and lines[index + 1].strip().startswith("fix:")
    return "\n".join(lines[index : index + 1 + has_fix])


def test_verdict_on_this_machine(capsys):
    """Exit 0 where an NPU runs npugraph_ex, else 1: the MRE falls back to the stand-in."""
    code, report = run(capsys)
    summary = report.splitlines()[-1]
    if npu_status()[0]:
        assert code == 0
        assert summary == "the MRE runs in graph mode (npugraph_ex) here"
    else:
        assert code == 1
        assert summary.startswith("the MRE runs here, but falls back to a stand-in")


def test_verdict_is_0_when_the_mre_runs_in_graph_mode():
    """mre-backend OK (npugraph_ex chosen) and nothing blocking: exit 0, whatever WARNs remain."""
    checks = [
        doctor.Check("versions", "WARN", "an untested pair"),
        doctor.Check("mre-backend", "OK", "npugraph_ex: Ascend910B2 captures aclgraphs"),
    ]
    assert doctor.verdict(checks) == (0, "the MRE runs in graph mode (npugraph_ex) here")


def test_verdict_is_1_when_the_mre_falls_back():
    """mre-backend WARN (the stand-in chosen), a non-blocking FAIL aside: exit 1."""
    checks = [
        doctor.Check("torch_npu", "FAIL", "not installed"),
        doctor.Check("mre-backend", "WARN", "aot_eager: no NPU"),
    ]
    code, summary = doctor.verdict(checks)
    assert code == 1
    assert summary.startswith("the MRE runs here, but falls back to a stand-in")


def test_verdict_is_2_when_a_blocking_check_fails():
    """A blocking FAIL wins over a graph-mode backend: exit 2, naming the failed check."""
    checks = [
        doctor.Check("model", "FAIL", "build_model() raised", blocking=True),
        doctor.Check("mre-backend", "OK", "npugraph_ex: Ascend910B2 captures aclgraphs"),
    ]
    assert doctor.verdict(checks) == (2, "the MRE cannot run here: fix model first")


def test_json_carries_every_check(capsys):
    """--json prints one object: the verdict, a summary and each check's name, status and fix."""
    code, output = run(capsys, "--json")
    report = json.loads(output)
    assert report["verdict"] == code
    names = [check["name"] for check in report["checks"]]
    assert {"python", "versions", "torch-build", "torch_npu", "mre-backend", "model"} <= set(names)
    for check in report["checks"]:
        assert check["status"] in {"OK", "WARN", "FAIL"}
        assert set(check) == {"name", "status", "detail", "fix", "blocking"}


def test_torch_npu_that_cannot_load_points_at_cann(capsys, install_torch_npu):
    """A torch_npu failing on libhccl.so is a FAIL naming CANN, set_env.sh and the autoload trap."""
    install_torch_npu(
        init='raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")\n'
    )
    code, report = run(capsys)
    assert code == 1
    torch_npu = line_of(report, "torch_npu")
    assert torch_npu.startswith("FAIL")
    assert "libhccl.so: cannot open shared object file" in torch_npu
    assert "set_env.sh" in torch_npu
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in torch_npu


# torch_npu's own check of a half-sourced CANN at import (2.13 registry_manager.py), reduced.
CANN_PACKAGE_CHECK = """\
import os
home = os.environ["ASCEND_HOME_PATH"]
if not os.path.exists(home):
    raise Exception(f"ASCEND_HOME_PATH : {home} does not exist. Please run 'source set_env.sh' in the CANN installation path.")
if "ASCEND_OPP_PATH" not in os.environ:
    raise Exception("ASCEND_OPP_PATH environment variable is not set. Please check whether the opp package has been installed.")
if not os.path.exists(os.path.join(home, "runtime")):
    raise Exception(f"ASCEND_RUNTIME_PATH : {os.path.join(home, 'runtime')} does not exist. Please check whether the runtime package has been installed.")
"""


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("home-missing", "ASCEND_HOME_PATH={home} does not exist"),
        ("opp-unset", "ASCEND_OPP_PATH is not set"),
        ("no-runtime", "ASCEND_HOME_PATH has no runtime/"),
    ],
)
def test_half_sourced_cann_fails_with_the_fix(
    capsys, tmp_path, monkeypatch, install_torch_npu, state, expected
):
    """A torch_npu import that raises a bare Exception is a FAIL naming the variable and the fix."""
    install_torch_npu(init=CANN_PACKAGE_CHECK)
    home = tmp_path / ("missing" if state == "home-missing" else "cann")
    if state != "home-missing":
        (home / "opp").mkdir(parents=True)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    if state == "opp-unset":
        monkeypatch.delenv("ASCEND_OPP_PATH", raising=False)
    else:
        monkeypatch.setenv("ASCEND_OPP_PATH", str(home / "opp"))
    code, report = run(capsys)
    assert code == 1
    line, fix = line_of(report, "torch_npu").splitlines()
    status, _, detail = line.split(maxsplit=2)
    assert status == "FAIL"
    reason = expected.format(home=home)
    assert detail.startswith(f"installed but unusable: CANN is half-sourced: {reason}")
    assert fix.split()[0] == "fix:"
    assert "set_env.sh" in fix


def test_cann_home_without_opp_or_runtime_fails(capsys, tmp_path, monkeypatch, install_torch_npu):
    """With torch_npu installed, ASCEND_HOME_PATH without ASCEND_OPP_PATH or runtime/ FAILs."""
    install_torch_npu(init=CANN_PACKAGE_CHECK)
    home = tmp_path / "cann"
    (home / "compiler").mkdir(parents=True)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    monkeypatch.delenv("ASCEND_OPP_PATH", raising=False)
    _, report = run(capsys)
    line, fix = line_of(report, "ASCEND_OPP_PATH").splitlines()
    assert line.split()[0] == "FAIL"
    assert fix.split()[:3] == ["fix:", "source", "<CANN>/set_env.sh,"]
    line, fix = line_of(report, "cann-packages").splitlines()
    assert line.split(maxsplit=2)[::2] == ["FAIL", f"ASCEND_HOME_PATH={home} has no runtime/"]
    assert fix.split()[:5] == ["fix:", "install", "CANN's", "runtime", "package"]


def test_cann_variable_pointing_nowhere_fails_with_fix(capsys, tmp_path, monkeypatch):
    """ASCEND_HOME_PATH naming a missing folder is a FAIL that says to source set_env.sh."""
    missing = tmp_path / "Ascend" / "missing"
    monkeypatch.setenv("ASCEND_HOME_PATH", str(missing))
    _, report = run(capsys)
    line = line_of(report, "ASCEND_HOME_PATH")
    assert line.startswith(f"FAIL  ASCEND_HOME_PATH  ASCEND_HOME_PATH={missing} does not exist")
    assert "fix: source <CANN>/set_env.sh" in line


def test_unknown_forced_backend_means_it_cannot_run(capsys, monkeypatch):
    """An invalid $NPUGRAPH_BACKEND stops the MRE: exit 2, and the line says how to fix it."""
    monkeypatch.setenv(BACKEND_ENV, "no-such-backend")
    code, report = run(capsys)
    assert code == 2
    assert "unset NPUGRAPH_BACKEND" in line_of(report, "mre-backend")


def test_the_model_is_built_not_assumed(capsys):
    """The model check builds build_model() and example_inputs() and names what they gave: OK,
    or WARN when an input is not a tensor (graph mode bakes it in as a constant)."""
    _, report = run(capsys)
    baked_in = constant_inputs(model.example_inputs())
    assert line_of(report, "model").startswith("WARN" if baked_in else "OK")
    assert type(model.build_model()).__name__ in line_of(report, "model")
    assert line_of(report, "mre-import").startswith("OK")


def test_a_model_that_fails_to_build_means_nothing_can_run(capsys, monkeypatch):
    """If build_model() raises, the doctor says so with the error and exits 2."""

    def broken():
        raise ValueError("hidden size 33 is not divisible by 4 heads")

    monkeypatch.setattr(model, "build_model", broken)
    code, report = run(capsys)
    assert code == 2
    line = line_of(report, "model")
    assert line.startswith("FAIL")
    assert "ValueError: hidden size 33 is not divisible by 4 heads" in line


def test_inputs_that_are_not_a_tuple_are_named(capsys, monkeypatch):
    """example_inputs() returning a bare tensor is a FAIL that says to return a tuple."""
    inputs = model.example_inputs()
    monkeypatch.setattr(model, "example_inputs", lambda: inputs[0])
    code, report = run(capsys)
    assert code == 2
    assert "must return a tuple of positional inputs, got Tensor" in line_of(report, "model")


class Scale(nn.Module):
    def forward(self, x, scale: float):
        return x * scale


def test_a_non_tensor_input_is_a_warning_on_the_model_line(capsys, monkeypatch):
    """A float input is a WARN naming its path and value, baked into the graph, with the fix."""
    monkeypatch.setattr(model, "build_model", Scale)
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.ones(3), 0.5))
    _, report = run(capsys)
    line = line_of(report, "model")
    assert line.startswith("WARN")
    assert "; [1]: float 0.5 is baked into the graph as a constant" in line
    assert "fix: pass a 0-d tensor, torch.tensor(0.5)" in line


{% if decode -%}
def test_the_decode_contract_is_checked(capsys):
    """The decode line names MAX_BATCH, MAX_SEQ_LEN and CAPTURE_SIZES, and where the prompt runs."""
    _, report = run(capsys)
    line = line_of(report, "decode")
    assert line.startswith("OK")
    cache = f"MAX_BATCH {model.MAX_BATCH}, MAX_SEQ_LEN {model.MAX_SEQ_LEN}"
    assert f"{cache}, CAPTURE_SIZES {model.CAPTURE_SIZES}" in line


def test_capture_sizes_out_of_order_fail_with_the_fix(capsys, monkeypatch):
    """CAPTURE_SIZES out of order: a FAIL with the rule and the README section; the MRE still runs."""
    monkeypatch.setattr(model, "CAPTURE_SIZES", (2, 1))
    code, report = run(capsys)
    line = line_of(report, "decode")
    assert line.startswith("FAIL  decode")
    assert "CAPTURE_SIZES = (2, 1) must be positive and strictly increasing" in line
    assert "fix: fix model.py: README, section 'Generation'" in line
    assert code != 2


def test_a_prompt_the_cache_cannot_follow_means_nothing_can_run(capsys, monkeypatch):
    """A prompt as long as MAX_SEQ_LEN leaves the decode step no position: a FAIL, exit 2."""
    length = model.example_inputs()[0].shape[1]
    monkeypatch.setattr(model, "MAX_SEQ_LEN", length)
    code, report = run(capsys)
    line = line_of(report, "decode")
    assert line.startswith("FAIL")
    assert f"a prompt of {length} tokens leaves the decode step no position" in line
    assert f"fix: raise MAX_SEQ_LEN above {length}" in line
    assert code == 2


{% endif -%}
def test_an_mre_that_cannot_import_is_a_failure(capsys, monkeypatch):
    """A toolkit module the MRE imports that does not import stops everything: exit 2, not 'the
    MRE runs here'."""
    monkeypatch.setitem(sys.modules, "{{ cookiecutter.package_name }}.toolkit.report", None)
    code, report = run(capsys)
    assert code == 2
    assert line_of(report, "mre-import").startswith("FAIL")


def test_a_crashing_check_is_reported_not_raised(capsys, monkeypatch):
    """A check that raises becomes a FAIL line with the error; the other checks still run."""

    def check_explodes():
        raise OSError("disk on fire")

    monkeypatch.setattr(doctor, "CHECKS", (check_explodes, *doctor.CHECKS))
    _, report = run(capsys)
    assert "FAIL  explodes" in report
    assert "disk on fire" in report
    assert "mre-backend" in report
{%- if tp %}


@pytest.fixture
def unsplittable(monkeypatch):
    """A model.py whose plan column-splits a layer of 4 outputs: 3 ranks cannot share it."""
    monkeypatch.setattr(model, "build_model", lambda: nn.Sequential(nn.Linear(4, 4)))
    monkeypatch.setattr(model, "parallel_plan", lambda world_size: {"0": ColwiseParallel()})


def test_ranks_and_plan_pass_by_default(capsys):
    """With one rank, the default, the model splits and the ranks have what they need."""
    _, report = run(capsys)
    status, _, detail = line_of(report, "ranks").split(maxsplit=2)
    assert (status, detail.split()[0]) == ("OK", "1")
    status, _, detail = line_of(report, "plan").split(maxsplit=2)
    assert (status, detail.split()[:2]) == ("OK", ["parallel_plan(1)", "splits"])


def test_a_model_the_ranks_cannot_split_means_nothing_can_run(capsys, unsplittable):
    """A layer that does not divide by --nproc-per-node is a FAIL naming it: exit 2."""
    code, report = run(capsys, "--nproc-per-node", "3")
    assert code == 2
    line = line_of(report, "plan")
    assert line.startswith("FAIL")
    assert "0.out_features=4 cannot be split across 3 ranks" in line


def test_a_plan_that_refuses_the_ranks_means_nothing_can_run(capsys, monkeypatch):
    """parallel_plan() raising for this many ranks is a FAIL with its message: exit 2."""

    def refuses(world_size):
        raise ValueError(f"8 heads cannot be split across {world_size} ranks")

    monkeypatch.setattr(model, "parallel_plan", refuses)
    code, report = run(capsys, "--nproc-per-node", "3")
    assert code == 2
    status, _, detail = line_of(report, "plan").split(maxsplit=2)
    assert status == "FAIL"
    assert detail.startswith("ValueError: 8 heads cannot be split across 3 ranks")


def test_a_plan_that_cannot_run_is_refused_before_launch(capsys, swapped_styles):
    """The sharded model is run for 2 ranks in this process: a plan that fails is a short FAIL
    naming its entry, the layer's weight and the input's shape; exit 2."""
    code, report = run(capsys, "--nproc-per-node", "2")
    assert code == 2
    line = line_of(report, "plan")
    assert line.startswith("FAIL")
    entry = "plan entry '0' (RowwiseParallel) on 0: Linear, weight (8, 4), bias (8,); input (3, 4)"
    assert entry in line
    assert len(line.splitlines()) <= 10


def test_ranks_default_to_torchrun_s_local_world_size(capsys, monkeypatch, unsplittable):
    """Without --nproc-per-node, the doctor checks $LOCAL_WORLD_SIZE ranks, as torchrun sets it."""
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    _, report = run(capsys)
    assert "across 3 ranks" in line_of(report, "plan")


def test_each_rank_needs_its_own_npu():
    """More ranks than visible NPUs is a blocking FAIL naming both and the two fixes."""
    check = doctor.fit_ranks(npu_ok=True, visible=1, wanted=2)
    assert (check.status, check.blocking) == ("FAIL", True)
    assert check.detail == "--nproc-per-node 2 needs 2 NPUs (one per rank); 1 visible"
    assert "lower --nproc-per-node to at most 1" in check.fix
    assert "ASCEND_RT_VISIBLE_DEVICES" in check.fix


def test_captured_collectives_without_the_hccl_expansion_mode_warn():
    """Graph mode over several ranks with HCCL_OP_EXPANSION_MODE unset: a WARN whose fix is AIV."""
    check = doctor.hccl_mode(graph_mode=True, wanted=2, value=None)
    assert check.status == "WARN"
    assert "HCCL_OP_EXPANSION_MODE is unset" in check.detail
    assert "export HCCL_OP_EXPANSION_MODE=AIV" in check.fix


@pytest.mark.parametrize(
    ("graph_mode", "wanted", "value"), [(True, 2, "AIV"), (False, 2, None), (True, 1, None)]
)
def test_the_hccl_expansion_mode_is_fine_when_set_or_nothing_is_captured(graph_mode, wanted, value):
    """Set, off graph mode (the stand-in), or one rank (no collective): OK."""
    assert doctor.hccl_mode(graph_mode, wanted, value).status == "OK"


def test_enough_npus_or_cpu_ranks_pass():
    """An NPU per rank passes over hccl; off NPU, any number of ranks runs on the CPU over gloo."""
    on_npus = doctor.fit_ranks(npu_ok=True, visible=8, wanted=2)
    assert (on_npus.status, on_npus.detail) == ("OK", "2 ranks over hccl, one NPU each (8 visible)")
    on_cpu = doctor.fit_ranks(npu_ok=False, visible=0, wanted=2)
    assert on_cpu.status == "OK"
    assert on_cpu.detail == "2 CPU ranks over gloo (no NPU: hccl needs one per rank)"


def test_a_missing_process_group_backend_means_nothing_can_run(capsys, monkeypatch):
    """Without the backend the ranks need (hccl on an NPU, gloo elsewhere): FAIL, exit 2."""
    if npu_status()[0]:
        monkeypatch.setattr(torch.distributed.Backend, "backend_list", ["gloo"])
        needed = "hccl"
    else:
        monkeypatch.setattr(torch.distributed, "is_gloo_available", lambda: False)
        needed = "gloo"
    code, report = run(capsys)
    assert code == 2
    status, _, detail = line_of(report, "ranks").split(maxsplit=2)
    assert status == "FAIL"
    assert detail.startswith(f"torch.distributed has no {needed} backend")
{%- endif %}
{%- if cache %}


@pytest.fixture
def cache_file(tmp_path, monkeypatch):
    """A cache_compile file in an empty working directory, mode 0600 like cache_compile writes."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / CACHE_DIR / "Model_static_aclgraphcache_0" / "_forward" / "compiled_module"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"cache")
    path.chmod(0o600)
    return path


def test_own_cache_is_ok(capsys, cache_file):
    """A cache owned by this user with 0600 files passes."""
    _, report = run(capsys)
    assert line_of(report, "cache-dir").startswith("OK")


def test_cache_file_with_loose_mode_warns(capsys, cache_file):
    """A cache file that is not 0600 is a WARN: cache_compile would clear and rebuild it."""
    cache_file.chmod(0o644)
    _, report = run(capsys)
    line = line_of(report, "cache-dir")
    assert line.startswith("WARN")
    assert "not mode 0600" in line
    assert "rm -r" in line


def test_foreign_owned_cache_fails(capsys, cache_file, monkeypatch):
    """A cache file owned by another user is a FAIL: cache_compile raises on it."""
    owner = cache_file.stat().st_uid
    # Giving the file away needs root: be another user instead, one who owns nothing here.
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)
    _, report = run(capsys)
    line = line_of(report, "cache-dir")
    assert line.startswith("FAIL")
    assert "owned by another user" in line
{%- endif %}
