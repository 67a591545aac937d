"""The doctor's lines that only some projects have, each in the whole report of a project of that
kind: a decode project's decode contract, a tensor-parallel project's ranks, plan and HCCL
expansion mode, a cache_compile project's cache folder."""

import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch
from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

from cache_project.toolkit import backend as cache_doctor_backend
from cache_project.toolkit import doctor as cache_doctor
from cache_project.toolkit.compile_cache import CACHE_DIR
from decode_project import model as decode_model
from decode_project.toolkit import doctor as decode_doctor
from forward_project.toolkit.backend import BACKEND_ENV
from parallel_project import model as parallel_model
from parallel_project.toolkit import backend as parallel_backend
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
    (index,) = (i for i, line in enumerate(lines) if line.split()[2:3] == [name])
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
    assert line.split()[:3] == ["FAIL", "DOC016", "decode"]
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
    """A model.py whose plan column-splits a layer of 4 outputs (gathered again, the model's
    output): 3 ranks cannot share it."""
    plan = {"0": ColwiseParallel(output_layouts=Replicate())}
    monkeypatch.setattr(parallel_model, "build_model", lambda: nn.Sequential(nn.Linear(4, 4)))
    monkeypatch.setattr(parallel_model, "parallel_plan", lambda world_size: plan)
    monkeypatch.setattr(parallel_model, "example_inputs", lambda: (torch.ones(2, 4),))


@pytest.fixture
def swapped_styles(monkeypatch):
    """A model.py whose plan swaps the Megatron styles: every split divides, nothing can run."""

    def two_layers() -> nn.Module:
        return nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4))

    monkeypatch.setattr(parallel_model, "build_model", two_layers)
    monkeypatch.setattr(parallel_model, "example_inputs", lambda: (torch.ones(3, 4),))
    plan = {"0": RowwiseParallel(), "1": ColwiseParallel()}
    monkeypatch.setattr(parallel_model, "parallel_plan", lambda world_size: plan)


@pytest.fixture
def refusing_plan(monkeypatch):
    """A model.py whose parallel_plan() raises for the ranks asked for."""

    def refuses(world_size):
        raise ValueError(f"8 heads cannot be split across {world_size} ranks")

    monkeypatch.setattr(parallel_model, "parallel_plan", refuses)


def test_ranks_and_plan_pass_by_default(capsys):
    """With one rank, the default, the model splits and the ranks have what they need."""
    _, report = run(capsys, parallel_doctor)
    status, _, _, detail = line_of(report, "ranks").split(maxsplit=3)
    assert (status, detail.split()[0]) == ("OK", "1")
    status, _, _, detail = line_of(report, "plan").split(maxsplit=3)
    assert (status, detail.split()[:2]) == ("OK", ["parallel_plan(1)", "splits"])


def test_a_model_the_ranks_cannot_split_means_nothing_can_run(capsys, unsplittable):
    """A layer that does not divide by --nproc-per-node is a FAIL naming it: exit 2."""
    code, report = run(capsys, parallel_doctor, "--nproc-per-node", "3")
    assert code == 2
    line = line_of(report, "plan")
    assert line.startswith("FAIL")
    assert "0.out_features=4 cannot be split across 3 ranks" in line


def test_a_plan_that_refuses_the_ranks_means_nothing_can_run(capsys, refusing_plan):
    """parallel_plan() raising for this many ranks is a FAIL with its message: exit 2."""
    code, report = run(capsys, parallel_doctor, "--nproc-per-node", "3")
    assert code == 2
    status, _, _, detail = line_of(report, "plan").split(maxsplit=3)
    assert status == "FAIL"
    assert detail.startswith("ValueError: 8 heads cannot be split across 3 ranks")


def test_a_model_py_without_parallel_plan_is_a_fail_naming_it(capsys, monkeypatch):
    """model.py with no parallel_plan() (a model brought from a project without ranks): the plan
    line is a FAIL saying which name model.py lacks, exit 2."""
    monkeypatch.delattr(parallel_model, "parallel_plan")
    code, report = run(capsys, parallel_doctor)
    assert code == 2
    status, _, _, detail = line_of(report, "plan").split(maxsplit=3)
    assert status == "FAIL"
    assert detail.startswith("ImportError: cannot import name 'parallel_plan'")


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
    status, _, _, detail = line_of(report, "ranks").split(maxsplit=3)
    assert status == "FAIL"
    assert detail.startswith(f"torch.distributed has no {needed} backend")


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


def test_where_os_has_no_getuid_ownership_is_not_judged(cache_file, monkeypatch):
    """On a system without user ids (Windows) no cache file counts as another user's."""
    if os.getuid() == 0:
        os.chown(cache_file, 4242, -1)  # a file of another user, which root may make
    monkeypatch.delattr(os, "getuid")
    assert cache_doctor.cache_dir().status == "OK"


def test_another_user_s_cache_stops_the_mre_only_on_an_npu(cache_file, monkeypatch):
    """cache_compile raises on another user's cache only where it runs: blocking on an NPU alone."""
    monkeypatch.setattr(os, "getuid", lambda: cache_file.stat().st_uid + 1)
    assert cache_doctor.cache_dir().blocking is False
    monkeypatch.setattr(cache_doctor_backend, "npu_status", lambda: (True, "an NPU"))
    assert cache_doctor.cache_dir().blocking is True


# --- each of the lines above, whole, as the user reads it: reviewed snapshots


def long_prompt(batch: int, length: int = 3) -> Callable[[], tuple[torch.Tensor]]:
    return lambda: (torch.zeros(batch, length, dtype=torch.long),)


def broken_inputs() -> tuple[torch.Tensor]:
    raise RuntimeError("example_inputs() is broken")


DECODE_CASES = {
    "keeps the contract": {},
    "capture sizes out of order": {"CAPTURE_SIZES": (2, 1)},
    "inputs that raise": {"example_inputs": broken_inputs},
    "two inputs": {"example_inputs": lambda: (torch.zeros(1, 3, dtype=torch.long),) * 2},
    "a float prompt": {"example_inputs": lambda: (torch.zeros(1, 3),)},
    "a prompt that is no tensor": {"example_inputs": lambda: ("Hello, my dog is cute",)},
    "a prompt of one dimension": {"example_inputs": lambda: (torch.zeros(3, dtype=torch.long),)},
    "more sequences than rows": {"MAX_BATCH": 2, "CAPTURE_SIZES": (1, 2), "example_inputs": long_prompt(3)},
    "as many sequences as rows": {"MAX_BATCH": 2, "CAPTURE_SIZES": (1, 2), "example_inputs": long_prompt(2)},
    "a prompt as long as the cache": {"MAX_SEQ_LEN": 3, "example_inputs": long_prompt(1)},
    "three sequences, padded to four": {"example_inputs": long_prompt(3)},
    "more sequences than the largest size": {
        "MAX_BATCH": 4,
        "CAPTURE_SIZES": (1, 2),
        "example_inputs": long_prompt(3),
    },
}


@pytest.mark.parametrize("settings", DECODE_CASES.values(), ids=DECODE_CASES)
def test_the_decode_line_reads_as_its_snapshot(monkeypatch, settings, snapshot):
    """The decode check's status, detail, fix and whether it stops the MRE, for a model.py that
    keeps the decode contract and for each way of breaking it."""
    for name, value in settings.items():
        monkeypatch.setattr(decode_model, name, value)
    assert asdict(decode_doctor.decode_contract()) == snapshot


def cache_state(folder: Path, state: str) -> None:
    """A cache folder as a user may find it: none, theirs, or with loose or foreign files."""
    if state == "none":
        return
    for index in range(2):
        path = folder / f"graph_{index}" / "compiled_module"
        path.parent.mkdir(parents=True)
        # 50,000 bytes in all: 0.05 MB shows as 0.1, and any other divisor than 1e6 as 0.0.
        path.write_bytes(b"x" * 25_000)
        path.chmod(0o600 if state == "yours" or index else 0o644)


@pytest.mark.parametrize("state", ["none", "yours", "one loose file", "another user's"])
def test_the_cache_line_reads_as_its_snapshot(tmp_path, monkeypatch, state, snapshot):
    """The cache folder's line: not written yet, the user's own (entries, size), a loose file, or
    another user's files (off an NPU, where cache_compile does not run, not blocking)."""
    monkeypatch.chdir(tmp_path)
    cache_state(tmp_path / CACHE_DIR, "yours" if state == "another user's" else state)
    if state == "another user's":
        someone_else = os.getuid() + 1
        monkeypatch.setattr(os, "getuid", lambda: someone_else)
    assert asdict(cache_doctor.cache_dir()) == snapshot


RANKS_CASES = [(False, 0, 1), (False, 0, 2), (True, 1, 2), (True, 2, 2), (True, 8, 1)]


@pytest.mark.parametrize(("npu_ok", "visible", "wanted"), RANKS_CASES)
def test_the_ranks_line_reads_as_its_snapshot(npu_ok, visible, wanted, snapshot):
    """The ranks line for CPU ranks, too few NPUs, exactly enough and more than enough."""
    assert asdict(parallel_doctor.fit_ranks(npu_ok, visible, wanted)) == snapshot


@pytest.fixture
def npus(monkeypatch):
    """An NPU machine as the ranks check sees it: torch_npu loaded, 8 NPUs, hccl registered."""
    monkeypatch.setattr(parallel_backend, "npu_status", lambda: (True, "an NPU"))
    monkeypatch.setattr(torch, "npu", SimpleNamespace(device_count=lambda: 8), raising=False)
    monkeypatch.setattr(torch.distributed.Backend, "backend_list", ["gloo", "hccl"])


RANKS_CHECK_CASES = {
    "no torch.distributed": (
        False,
        lambda monkeypatch: monkeypatch.setattr(torch.distributed, "is_available", lambda: False),
    ),
    "an NPU without hccl": (
        True,
        lambda monkeypatch: monkeypatch.setattr(torch.distributed.Backend, "backend_list", ["gloo"]),
    ),
    "no NPU and no gloo": (
        False,
        lambda monkeypatch: monkeypatch.setattr(torch.distributed, "is_gloo_available", lambda: False),
    ),
    "8 NPUs": (True, lambda monkeypatch: None),
    "no NPU": (False, lambda monkeypatch: None),
}


@pytest.mark.parametrize(("on_npus", "breaks"), RANKS_CHECK_CASES.values(), ids=RANKS_CHECK_CASES)
def test_the_ranks_check_reads_as_its_snapshot(request, monkeypatch, on_npus, breaks, snapshot):
    """The ranks line for 2 ranks: what torch.distributed lacks, or the ranks on NPUs or CPUs."""
    if on_npus:
        request.getfixturevalue("npus")
    breaks(monkeypatch)
    assert asdict(parallel_doctor.check_ranks(2)) == snapshot


PLAN_CASES = {
    "one rank": ("", 1),
    "two ranks": ("", 2),
    "one entry": ("unsplittable", 2),
    "a layer the ranks cannot split": ("unsplittable", 3),
    "a plan that raises": ("refusing_plan", 2),
}


@pytest.mark.parametrize(("model", "wanted"), PLAN_CASES.values(), ids=PLAN_CASES)
def test_the_plan_line_reads_as_its_snapshot(request, model, wanted, snapshot):
    """The plan line: the ranks and entries it splits over, or the plan's failure and its fix."""
    if model:
        request.getfixturevalue(model)
    assert asdict(parallel_doctor.check_plan(wanted)) == snapshot


def test_the_plan_is_rehearsed_from_the_mre_s_seed(monkeypatch):
    """Seed 0, then parallel_plan() and build_model(), as the MRE runs them."""
    seeds = []
    monkeypatch.setattr(
        parallel_model, "parallel_plan", lambda world_size: seeds.append(torch.initial_seed()) or {}
    )
    parallel_doctor.check_plan(2)
    assert seeds == [0]


HCCL_CASES = [
    (True, 2, None),
    (True, 2, "AIV"),
    (True, 2, "HOST"),
    (False, 2, None),
    (True, 1, None),
    (False, 1, "AIV"),
]


@pytest.mark.parametrize(("graph_mode", "wanted", "value"), HCCL_CASES)
def test_the_hccl_line_reads_as_its_snapshot(graph_mode, wanted, value, snapshot):
    """The HCCL expansion mode line: a WARN only where collectives are captured and it is unset."""
    assert asdict(parallel_doctor.hccl_mode(graph_mode, wanted, value)) == snapshot


def test_aiv_advised_or_set_in_graph_mode_carries_its_caveat():
    """Where the doctor advises HCCL's AIV mode, and where it finds it set in graph mode, the line
    carries the caveat of vllm-ascend issue 13688: AIV fails with collectives in npugraph_ex's
    task groups."""
    advised = parallel_doctor.hccl_mode(True, 2, None)
    found = parallel_doctor.hccl_mode(True, 2, "AIV")
    assert parallel_doctor.AIV_CAVEAT in advised.fix
    assert parallel_doctor.AIV_CAVEAT in found.detail
    assert "13688" in parallel_doctor.AIV_CAVEAT


def test_the_hccl_check_reads_the_backend_and_the_variable(monkeypatch):
    """The check asks select_backend() whether graph mode runs, and reads HCCL_OP_EXPANSION_MODE."""
    monkeypatch.setattr(parallel_backend, "select_backend", lambda: SimpleNamespace(is_npugraph_ex=True))
    monkeypatch.delenv(parallel_doctor.HCCL_MODE, raising=False)
    assert parallel_doctor.check_hccl_mode(2).status == "WARN"
    monkeypatch.setenv(parallel_doctor.HCCL_MODE, "AIV")
    assert parallel_doctor.check_hccl_mode(2).detail.startswith(f"{parallel_doctor.HCCL_MODE}=AIV;")


def test_a_backend_that_cannot_be_chosen_captures_no_collective(monkeypatch):
    """$NPUGRAPH_BACKEND naming no backend: no graph is captured, so the HCCL mode is no matter
    (the mre-backend line reports the bad name)."""
    monkeypatch.setenv(BACKEND_ENV, "no_such_backend")
    monkeypatch.delenv(parallel_doctor.HCCL_MODE, raising=False)
    check = parallel_doctor.check_hccl_mode(2)
    assert (check.status, check.detail.split(": ")[1]) == ("OK", "no aclgraph is captured here")


@pytest.mark.parametrize("ranks", ["0", "two"])
def test_a_number_of_ranks_that_is_none_is_a_usage_error(capsys, ranks):
    """--nproc-per-node takes a whole number of 1 or more: anything else is a usage error naming it."""
    with pytest.raises(SystemExit) as exit_:
        parallel_doctor.main(["--nproc-per-node", ranks])
    assert exit_.value.code == 2
    assert f"{ranks!r} is not a number of ranks (1 or more)" in capsys.readouterr().err
