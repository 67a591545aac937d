"""The doctor's lines that only some projects have, each in the whole report of a project of that
kind: a decode project's decode contract, a tensor-parallel project's ranks, plan and HCCL
expansion mode, a cache_compile project's cache folder."""

import os
from types import ModuleType

import pytest
import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

from cache_project.toolkit import doctor as cache_doctor
from cache_project.toolkit.compile_cache import CACHE_DIR
from decode_project import model as decode_model
from decode_project.toolkit import doctor as decode_doctor
from forward_project.toolkit.backend import BACKEND_ENV
from parallel_project import model as parallel_model
from parallel_project.toolkit import doctor as parallel_doctor
from parallel_project.toolkit.backend import npu_status


@pytest.fixture(autouse=True)
def default_backend(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    # torchrun sets it, and it is --nproc-per-node's default.
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)


def run(capsys, doctor: ModuleType, *arguments: str) -> tuple[int, str]:
    """The doctor's exit code and report, called with these arguments."""
    code = doctor.main(list(arguments))
    return code, capsys.readouterr().out


def line_of(report: str, name: str) -> str:
    """The report's line for one check, with its fix line if it has one."""
    lines = report.splitlines()
    (index,) = (i for i, line in enumerate(lines) if line.split()[1:2] == [name])
    has_fix = index + 1 < len(lines) and lines[index + 1].strip().startswith("fix:")
    return "\n".join(lines[index : index + 1 + has_fix])


# --- decode: MAX_BATCH, MAX_SEQ_LEN and CAPTURE_SIZES, and the prompt they must hold


def test_the_decode_contract_is_checked(capsys):
    """The decode line names MAX_BATCH, MAX_SEQ_LEN and CAPTURE_SIZES, and where the prompt runs."""
    _, report = run(capsys, decode_doctor)
    line = line_of(report, "decode")
    assert line.startswith("OK")
    cache = f"MAX_BATCH {decode_model.MAX_BATCH}, MAX_SEQ_LEN {decode_model.MAX_SEQ_LEN}"
    assert f"{cache}, CAPTURE_SIZES {decode_model.CAPTURE_SIZES}" in line


def test_capture_sizes_out_of_order_fail_with_the_fix(capsys, monkeypatch):
    """CAPTURE_SIZES out of order: a FAIL with the rule and the README section; the MRE still runs."""
    monkeypatch.setattr(decode_model, "CAPTURE_SIZES", (2, 1))
    code, report = run(capsys, decode_doctor)
    line = line_of(report, "decode")
    assert line.startswith("FAIL  decode")
    assert "CAPTURE_SIZES = (2, 1) must be positive and strictly increasing" in line
    assert "fix: fix model.py: README, section 'Generation'" in line
    assert code != 2


def test_a_prompt_the_cache_cannot_follow_means_nothing_can_run(capsys, monkeypatch):
    """A prompt as long as MAX_SEQ_LEN leaves the decode step no position: a FAIL, exit 2."""
    length = decode_model.example_inputs()[0].shape[1]
    monkeypatch.setattr(decode_model, "MAX_SEQ_LEN", length)
    code, report = run(capsys, decode_doctor)
    line = line_of(report, "decode")
    assert line.startswith("FAIL")
    assert f"a prompt of {length} tokens leaves the decode step no position" in line
    assert f"fix: raise MAX_SEQ_LEN above {length}" in line
    assert code == 2


# --- tensor parallelism: the ranks --nproc-per-node asks for, and the plan across them


@pytest.fixture
def unsplittable(monkeypatch):
    """A model.py whose plan column-splits a layer of 4 outputs: 3 ranks cannot share it."""
    monkeypatch.setattr(parallel_model, "build_model", lambda: nn.Sequential(nn.Linear(4, 4)))
    monkeypatch.setattr(parallel_model, "parallel_plan", lambda world_size: {"0": ColwiseParallel()})


@pytest.fixture
def swapped_styles(monkeypatch):
    """A model.py whose plan swaps the Megatron styles: every split divides, nothing can run."""

    def two_layers() -> nn.Module:
        return nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4))

    monkeypatch.setattr(parallel_model, "build_model", two_layers)
    monkeypatch.setattr(parallel_model, "example_inputs", lambda: (torch.ones(3, 4),))
    plan = {"0": RowwiseParallel(), "1": ColwiseParallel()}
    monkeypatch.setattr(parallel_model, "parallel_plan", lambda world_size: plan)


def test_ranks_and_plan_pass_by_default(capsys):
    """With one rank, the default, the model splits and the ranks have what they need."""
    _, report = run(capsys, parallel_doctor)
    status, _, detail = line_of(report, "ranks").split(maxsplit=2)
    assert (status, detail.split()[0]) == ("OK", "1")
    status, _, detail = line_of(report, "plan").split(maxsplit=2)
    assert (status, detail.split()[:2]) == ("OK", ["parallel_plan(1)", "splits"])


def test_a_model_the_ranks_cannot_split_means_nothing_can_run(capsys, unsplittable):
    """A layer that does not divide by --nproc-per-node is a FAIL naming it: exit 2."""
    code, report = run(capsys, parallel_doctor, "--nproc-per-node", "3")
    assert code == 2
    line = line_of(report, "plan")
    assert line.startswith("FAIL")
    assert "0.out_features=4 cannot be split across 3 ranks" in line


def test_a_plan_that_refuses_the_ranks_means_nothing_can_run(capsys, monkeypatch):
    """parallel_plan() raising for this many ranks is a FAIL with its message: exit 2."""

    def refuses(world_size):
        raise ValueError(f"8 heads cannot be split across {world_size} ranks")

    monkeypatch.setattr(parallel_model, "parallel_plan", refuses)
    code, report = run(capsys, parallel_doctor, "--nproc-per-node", "3")
    assert code == 2
    status, _, detail = line_of(report, "plan").split(maxsplit=2)
    assert status == "FAIL"
    assert detail.startswith("ValueError: 8 heads cannot be split across 3 ranks")


def test_a_plan_that_cannot_run_is_refused_before_launch(capsys, swapped_styles):
    """The sharded model is run for 2 ranks in this process: a plan that fails is a short FAIL
    naming its entry, the layer's weight and the input's shape; exit 2."""
    code, report = run(capsys, parallel_doctor, "--nproc-per-node", "2")
    assert code == 2
    line = line_of(report, "plan")
    assert line.startswith("FAIL")
    entry = "plan entry '0' (RowwiseParallel) on 0: Linear, weight (8, 4), bias (8,); input (3, 4)"
    assert entry in line
    assert len(line.splitlines()) <= 10


def test_ranks_default_to_torchrun_s_local_world_size(capsys, monkeypatch, unsplittable):
    """Without --nproc-per-node, the doctor checks $LOCAL_WORLD_SIZE ranks, as torchrun sets it."""
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    _, report = run(capsys, parallel_doctor)
    assert "across 3 ranks" in line_of(report, "plan")


def test_each_rank_needs_its_own_npu():
    """More ranks than visible NPUs is a blocking FAIL naming both and the two fixes."""
    check = parallel_doctor.fit_ranks(npu_ok=True, visible=1, wanted=2)
    assert (check.status, check.blocking) == ("FAIL", True)
    assert check.detail == "--nproc-per-node 2 needs 2 NPUs (one per rank); 1 visible"
    assert "lower --nproc-per-node to at most 1" in check.fix
    assert "ASCEND_RT_VISIBLE_DEVICES" in check.fix


def test_enough_npus_or_cpu_ranks_pass():
    """An NPU per rank passes over hccl; off NPU, any number of ranks runs on the CPU over gloo."""
    on_npus = parallel_doctor.fit_ranks(npu_ok=True, visible=8, wanted=2)
    assert (on_npus.status, on_npus.detail) == ("OK", "2 ranks over hccl, one NPU each (8 visible)")
    on_cpu = parallel_doctor.fit_ranks(npu_ok=False, visible=0, wanted=2)
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
    code, report = run(capsys, parallel_doctor)
    assert code == 2
    status, _, detail = line_of(report, "ranks").split(maxsplit=2)
    assert status == "FAIL"
    assert detail.startswith(f"torch.distributed has no {needed} backend")


def test_captured_collectives_without_the_hccl_expansion_mode_warn():
    """Graph mode over several ranks with HCCL_OP_EXPANSION_MODE unset: a WARN whose fix is AIV."""
    check = parallel_doctor.hccl_mode(graph_mode=True, wanted=2, value=None)
    assert check.status == "WARN"
    assert "HCCL_OP_EXPANSION_MODE is unset" in check.detail
    assert "export HCCL_OP_EXPANSION_MODE=AIV" in check.fix


@pytest.mark.parametrize(
    ("graph_mode", "wanted", "value"), [(True, 2, "AIV"), (False, 2, None), (True, 1, None)]
)
def test_the_hccl_expansion_mode_is_fine_when_set_or_nothing_is_captured(graph_mode, wanted, value):
    """Set, off graph mode (the stand-in), or one rank (no collective): OK."""
    assert parallel_doctor.hccl_mode(graph_mode, wanted, value).status == "OK"


# --- cache_compile: the cache folder must be this user's, its files mode 0600


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
    _, report = run(capsys, cache_doctor)
    assert line_of(report, "cache-dir").startswith("OK")


def test_cache_file_with_loose_mode_warns(capsys, cache_file):
    """A cache file that is not 0600 is a WARN: cache_compile would clear and rebuild it."""
    cache_file.chmod(0o644)
    _, report = run(capsys, cache_doctor)
    line = line_of(report, "cache-dir")
    assert line.startswith("WARN")
    assert "not mode 0600" in line
    assert "rm -r" in line


def test_loose_cache_files_are_counted(capsys, cache_file):
    """Two cache files that are not 0600: the line names the first and counts the other."""
    cache_file.chmod(0o644)
    other = cache_file.with_name("other_module")
    other.write_bytes(b"cache")
    other.chmod(0o644)
    _, report = run(capsys, cache_doctor)
    loose = sorted(path.relative_to(cache_file.parents[3]) for path in (cache_file, other))
    assert f"has files not mode 0600: {loose[0]} and 1 more" in line_of(report, "cache-dir")


def test_every_foreign_cache_entry_is_counted(capsys, cache_file, monkeypatch):
    """A cache of another user's: the line names the first entry and counts the others (the
    folders and the file)."""
    monkeypatch.setattr(os, "getuid", lambda: cache_file.stat().st_uid + 1)
    _, report = run(capsys, cache_doctor)
    assert f"owned by another user: {CACHE_DIR} and 3 more" in line_of(report, "cache-dir")


def test_foreign_owned_cache_fails(capsys, cache_file, monkeypatch):
    """A cache file owned by another user is a FAIL: cache_compile raises on it."""
    owner = cache_file.stat().st_uid
    # Giving the file away needs root: be another user instead, one who owns nothing here.
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)
    _, report = run(capsys, cache_doctor)
    line = line_of(report, "cache-dir")
    assert line.startswith("FAIL")
    assert "owned by another user" in line
