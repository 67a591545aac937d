"""Backend choice: npugraph_ex on a usable NPU, the stand-in elsewhere, always with a reason."""

import sys

import pytest

from forward_project.toolkit import backend, socs

CANN_HINT = "source the CANN set_env.sh (e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh)"
"""The fix for a torch_npu that cannot find CANN's libraries or variables."""


@pytest.fixture(autouse=True)
def default_backend(monkeypatch):
    monkeypatch.delenv(backend.BACKEND_ENV, raising=False)


@pytest.fixture
def no_npu(monkeypatch):
    """A machine where npugraph_ex can't run because torch_npu is missing, probed afresh."""
    # A None entry makes importlib.util.find_spec() answer "not installed", wherever this runs.
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    monkeypatch.setattr(backend, "npu_status", backend.probe_npu)


@pytest.fixture
def npu(monkeypatch):
    """A machine whose NPU can capture aclgraphs."""
    monkeypatch.setattr(backend, "npu_status", lambda: (True, "Ascend910B1 ready"))


def test_stand_in_without_npu_says_why(no_npu):
    """Off NPU the choice is aot_eager on the CPU, and the one line says what is missing and what
    stands in."""
    reason = "no usable NPU (torch_npu is not installed); aot_eager stands in for npugraph_ex"
    assert backend.select_backend() == backend.Backend("aot_eager", "cpu", reason)


# Option names every torch_npu release with npugraph_ex accepts (7.3.0, 26.0.0 and later).
PORTABLE_OPTIONS = {
    "capture_limit", "clone_input", "clone_output", "force_eager", "frozen_parameter",
    "inplace_pass", "input_inplace_pass", "pattern_fusion_pass", "post_grad_custom_pre_pass",
    "post_grad_custom_post_pass", "remove_noop_ops", "reuse_graph_pool_in_same_fx",
    "static_kernel_compile", "use_graph_pool",
}  # fmt: skip


def test_options_use_only_names_every_release_accepts():
    """An option name that some torch_npu release lacks would fail its first call there."""
    assert set(backend.NPUGRAPH_EX_OPTIONS) <= PORTABLE_OPTIONS


def test_npugraph_ex_on_a_usable_npu(npu):
    """With a capture-capable NPU the choice is npugraph_ex on the NPU, with its options."""
    chosen = backend.select_backend()
    assert (chosen.name, chosen.device) == ("npugraph_ex", "npu")
    assert chosen.options == backend.NPUGRAPH_EX_OPTIONS


def test_stand_in_takes_no_options(no_npu):
    """Other backends get options=None: aot_eager would ignore npugraph_ex options with a warning."""
    assert backend.select_backend().options is None


def test_environment_forces_a_backend(no_npu, monkeypatch):
    """$NPUGRAPH_BACKEND picks the backend, and the reason says it was forced."""
    monkeypatch.setenv(backend.BACKEND_ENV, "eager")
    chosen = backend.select_backend()
    assert chosen.name == "eager"
    assert backend.BACKEND_ENV in chosen.reason


def test_unknown_forced_backend_is_refused_with_the_choices(no_npu, monkeypatch):
    """A misspelt backend name fails at once, naming the value and the valid names."""
    monkeypatch.setenv(backend.BACKEND_ENV, "aot-eager")
    with pytest.raises(ValueError, match=r"NPUGRAPH_BACKEND='aot-eager' is not ") as refusal:
        backend.select_backend()
    message, _, choices = str(refusal.value).partition("; use one of ")
    assert message == "NPUGRAPH_BACKEND='aot-eager' is not a torch.compile backend"
    assert {"aot_eager", "eager", "inductor"} <= set(choices.split(", "))


def test_forcing_npugraph_ex_without_npu_explains(no_npu, monkeypatch):
    """Forcing npugraph_ex where it can't run says why, instead of failing deep in torch_npu."""
    monkeypatch.setenv(backend.BACKEND_ENV, "npugraph_ex")
    with pytest.raises(RuntimeError) as refusal:
        backend.select_backend()
    assert str(refusal.value) == (
        "NPUGRAPH_BACKEND=npugraph_ex needs a usable NPU, but torch_npu is not installed; "
        "unset NPUGRAPH_BACKEND"
    )


def test_probe_points_at_cann_when_torch_npu_cannot_load(install_torch_npu):
    """A torch_npu that fails on libhccl.so (CANN not sourced) is reported with the set_env.sh fix."""
    install_torch_npu(
        init='raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")\n'
    )
    why = "CANN is not sourced (libhccl.so: cannot open shared object file: No such file or directory)"
    assert backend.probe_npu() == (False, f"{why}; {CANN_HINT}")


def test_a_capturing_npu_runs_npugraph_ex_and_is_named(install_torch_npu):
    """On an Atlas A2 the choice is npugraph_ex on the NPU, and the line names the SoC and the
    torch_npu release."""
    install_torch_npu("Ascend910B2", version="7.3.0")
    reason = "Ascend NPU ready: Ascend910B2, torch_npu 7.3.0"
    assert backend.select_backend() == backend.Backend("npugraph_ex", "npu", reason)


def test_torch_npu_that_sees_no_npu_falls_back_with_where_to_look(install_torch_npu):
    """torch_npu that imports but counts no device: the stand-in, and the line says where to look."""
    install_torch_npu(count=0)
    why = "torch_npu sees no NPU (check npu-smi info and ASCEND_RT_VISIBLE_DEVICES)"
    assert backend.probe_npu() == (False, why)
    fallback = f"no usable NPU ({why}); aot_eager stands in for npugraph_ex"
    assert backend.select_backend().reason == fallback


def test_forcing_npugraph_ex_on_a_usable_npu_takes_it(install_torch_npu, monkeypatch):
    """$NPUGRAPH_BACKEND=npugraph_ex on an NPU that captures: npugraph_ex on the NPU, forced."""
    install_torch_npu("Ascend910_9392")
    monkeypatch.setenv(backend.BACKEND_ENV, "npugraph_ex")
    forced = backend.Backend("npugraph_ex", "npu", "forced by NPUGRAPH_BACKEND")
    assert backend.select_backend() == forced


# SoC names as torch.npu.get_device_name(0) returns them (torch_npu's NpuVariables.cpp).
CAPTURING_SOCS = [
    "Ascend910B1", "Ascend910B2", "Ascend910B2C", "Ascend910B3", "Ascend910B4", "Ascend910B4-1",
    "Ascend910_9391", "Ascend910_9392", "Ascend910_9381", "Ascend910_9382", "Ascend910_9372",
    "Ascend910_9362", "Ascend950PR_9599", "Ascend910_9579",
]  # fmt: skip
REFUSED_SOCS = [
    "Ascend910A", "Ascend910ProA", "Ascend910PremiumA", "Ascend910ProB", "Ascend910B",
    "Ascend310P1", "Ascend310P3", "Ascend310P7", "Ascend310B1", "Ascend310B4", "Ascend310",
    "Ascend910B9", "Ascend910B10", "Ascend910B10-1", "Ascend920A", "SomeFutureSoC", "",
]  # fmt: skip


@pytest.mark.parametrize("soc", CAPTURING_SOCS)
def test_atlas_a2_a3_and_950_capture(soc):
    """Atlas A2 (Ascend910B1..B4 and variants), A3 (Ascend910_93xx) and Ascend 950 capture."""
    assert socs.can_capture(soc)


@pytest.mark.parametrize("soc", REFUSED_SOCS)
def test_every_other_soc_is_refused(soc):
    """First-generation 910 (exact Ascend910B too), 310P, 310B and unknown names do not capture."""
    assert not socs.can_capture(soc)


CAPTURE_SOCS = "Atlas A2 (Ascend910B1-B4), Atlas A3 (Ascend910_93xx) or Ascend 950"


@pytest.mark.parametrize(
    ("soc", "verdict"),
    [
        ("Ascend910B", "Ascend910B cannot capture aclgraphs"),
        ("Ascend310P3", "Ascend310P3: npugraph_ex is not supported on 310P"),
        ("SomeFutureSoC", "SomeFutureSoC is not a SoC known to capture aclgraphs"),
    ],
)
def test_refused_soc_falls_back_naming_it(soc, verdict, install_torch_npu):
    """On a refused SoC the probe falls back, and its reason names the SoC, says whether it cannot
    capture, is a 310P (where npugraph_ex is not supported) or is not known at all, and names
    what captures."""
    install_torch_npu(soc)
    npu_ok, why = backend.probe_npu()
    assert not npu_ok
    assert why.startswith(verdict)
    assert why.endswith(f"npugraph_ex needs {CAPTURE_SOCS})")


def test_310p_is_refused_for_npugraph_ex_not_for_capture():
    """aclgraph captures on 310P from torch_npu 26.1.0 (IsCaptureSupported()): the reason never
    says a 310P cannot capture."""
    for soc in ("Ascend310P1", "Ascend310P3", "Ascend310P7"):
        assert "cannot capture" not in backend.capture_refusal(soc)


@pytest.mark.parametrize("soc", ["Ascend910A", "Ascend910B", "Ascend310B1", "Ascend310P3", "SomeFutureSoC"])
def test_each_kind_of_refused_soc_reads_as_its_snapshot(soc, snapshot):
    """The fallback reason of each kind of refused SoC: first-generation 910 and 310B (no aclgraph
    capture), 310P (capture, but no npugraph_ex), and a name not known."""
    assert backend.capture_refusal(soc) == snapshot


# The first lines of the bare Exceptions torch_npu's import raises on a half-sourced CANN
# (torch_npu 2.13 _init/registry/registry_manager.py, _cann_package_check()).
HALF_SOURCED = {
    "ASCEND_HOME_PATH : /opt/gone does not exist. Please run 'source set_env.sh' in the CANN "
    "installation path.": ("ASCEND_HOME_PATH=/opt/gone does not exist", "unset ASCEND_HOME_PATH"),
    "ASCEND_OPP_PATH environment variable is not set. Please check whether the opp package has "
    "been installed. If exist, please run 'source set_env.sh' in the CANN installation path.": (
        "ASCEND_OPP_PATH is not set",
        "set_env.sh",
    ),
    "ASCEND_OPP_PATH : /opt/cann/opp does not exist. Please check whether the opp package has "
    "been installed.": ("ASCEND_OPP_PATH=/opt/cann/opp does not exist", "opp package"),
    "ASCEND_RUNTIME_PATH : /opt/cann/runtime does not exist. Please check whether the runtime "
    "package has been installed.": ("ASCEND_HOME_PATH has no runtime/", "runtime package"),
    "ASCEND_COMPILER_PATH : /opt/cann/compiler does not exist. Please check whether the compiler "
    "package has been installed.": ("ASCEND_HOME_PATH has no compiler/", "compiler package"),
}


@pytest.mark.parametrize("message", HALF_SOURCED)
def test_half_sourced_cann_names_the_variable_and_fix(message):
    """Each bare-Exception text becomes one line naming the variable's state and the fix."""
    state, fix = HALF_SOURCED[message]
    error = Exception(f"{message}\n[ERROR] (PID:1, Device:-1, RankID:-1) ERR00008 PTA")
    line = backend.import_failure(error)
    assert line.startswith(f"CANN is half-sourced: {state}")
    assert fix in line
    assert "\n" not in line


# What torch_npu's import raises besides a half-sourced CANN, and the one line each becomes.
TRACEBACK_HINT = "run `python -c 'import torch_npu'` for the traceback"
IMPORT_FAILURES = {
    # libtorch_npu.so needs libhccl.so, then libascendcl.so (its ELF NEEDED entries, 2.13):
    # with CANN's hccl on the library path but not its runtime, the loader names the second.
    "ascendcl-missing": (
        ImportError("libascendcl.so: cannot open shared object file: No such file or directory"),
        (
            "CANN is not sourced (libascendcl.so: cannot open shared object file: No such file "
            f"or directory); {CANN_HINT}"
        ),
    ),
    # Any other complaint about CANN's variables (2.13 torch_npu/_inductor/cpp_builder.py).
    "ascend-variable": (
        RuntimeError("Could not find ASCEND_HOME_PATH in env. Please run set_env.sh first."),
        (
            "CANN is not sourced (Could not find ASCEND_HOME_PATH in env. Please run set_env.sh "
            f"first.); {CANN_HINT}"
        ),
    ),
    # A CUDA build of torch (2.13 torch_npu/__init__.py, _check_device_conflict()).
    "cuda-torch": (
        RuntimeError(
            "Two accelerators cannot be used at the same time in PyTorch: npu and cuda.\n"
            "[ERROR] 2026-01-01-00:00:00 (PID:1, Device:-1, RankID:-1) ERR00007 PTA"
        ),
        (
            "torch_npu failed to import (RuntimeError: Two accelerators cannot be used at the "
            f"same time in PyTorch: npu and cuda.); {TRACEBACK_HINT}"
        ),
    ),
    # A bare `assert` failing: an error without a message is named by its type.
    "no-message": (
        AssertionError(),
        f"torch_npu failed to import (AssertionError: AssertionError); {TRACEBACK_HINT}",
    ),
}


@pytest.mark.parametrize("case", IMPORT_FAILURES)
def test_an_import_failure_is_one_line_with_its_cause_and_fix(case):
    """A missing CANN library or variable points at set_env.sh; anything else is quoted with its
    type, and the fix is the command that shows the traceback."""
    error, line = IMPORT_FAILURES[case]
    assert backend.import_failure(error) == line


def test_probe_falls_back_on_a_bare_exception(install_torch_npu):
    """A torch_npu whose import raises a bare Exception is a fallback with the reason, not a crash."""
    install_torch_npu(init=f"raise Exception({next(iter(HALF_SOURCED))!r})\n")
    npu_ok, why = backend.probe_npu()
    assert not npu_ok
    assert why.startswith("CANN is half-sourced: ASCEND_HOME_PATH=/opt/gone does not exist")


def test_the_deterministic_recompile_hint_names_what_changes_the_level():
    """DETERMINISTIC_RECOMPILE, for a recompile's hint, names both calls that change the NPU
    deterministic level torch_npu guards graphs on, and what a recompile costs cache_compile."""
    for name in ("torch_npu.npu.set_deterministic_level", "torch.use_deterministic_algorithms"):
        assert name in backend.DETERMINISTIC_RECOMPILE
    assert "cache_compile" in backend.DETERMINISTIC_RECOMPILE


# --- the switches that send operators to aclop, read before npugraph_ex compiles


def test_off_the_npu_no_aclop_switch_is_reported(no_npu):
    """Where npugraph_ex does not run, the preflight has no switch to report."""
    assert backend.aclop_switches() == []


def test_on_an_atlas_a2_s_defaults_no_aclop_switch_is_on(install_torch_npu):
    """JIT compile off and internal formats off, as an Atlas A2 starts: nothing to report."""
    install_torch_npu("Ascend910B2")
    assert backend.aclop_switches() == []


def test_each_aclop_switch_on_is_reported_with_its_fix(install_torch_npu):
    """JIT compile on and allow_internal_format on: each is reported, in order, with its fix."""
    install_torch_npu("Ascend910B2", jit_compile=True, internal_format=b"enable")
    assert backend.aclop_switches() == [(s.on, s.fix) for s in backend.ACLOP_SWITCHES]
    assert [switch.code for switch in backend.ACLOP_SWITCHES] == ["jit-compile", "internal-format"]


def test_jit_compile_set_on_is_read_though_cann_s_default_is_off(install_torch_npu):
    """set_compile_mode(jit_compile=True) after CANN's default "disable": JIT compile is on, as
    torch_npu's dispatch takes it (is_jit_compile_false() would still answer True)."""
    install_torch_npu("Ascend910B2", jit_compile=True)
    assert backend.jit_compile_on()


@pytest.mark.parametrize(
    ("option", "on"), [(b"disable", False), (b"enable", True), (None, True), (b"", True)]
)
def test_internal_format_is_read_as_torch_npu_reads_it(install_torch_npu, option, on):
    """The ALLOW_INTERNAL_FORMAT option is off only when it says "disable": unset or empty means
    on, as torch_npu's CheckForbidInternalFormat() reads it (its default is "enable")."""
    install_torch_npu("Ascend910B2", internal_format=option)
    assert backend.internal_format_on() is on
