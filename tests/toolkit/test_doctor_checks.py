"""Each doctor check on its own, on a machine set up for it: the whole line a user reads, with
its status, its fix, and whether it stops the MRE."""

import importlib
import json
import platform
import re
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from torch import nn

from decode_project.toolkit import doctor as decode_doctor
from forward_project import model, settings
from forward_project.toolkit import backend, doctor
from forward_project.toolkit.backend import BACKEND_ENV
from forward_project.toolkit.contract import constant_note
from forward_project.toolkit.doctor import Check
from parallel_project.toolkit import doctor as parallel_doctor

PINNED = settings.TORCH_NPU
TORCH = PINNED.split(".post")[0]
"""The torch release the pinned torch_npu needs: its version without the post-release."""
SOURCE_CANN = "source <CANN>/set_env.sh, e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh"
CAPTURE_SOCS = "Atlas A2 (Ascend910B1-B4), Atlas A3 (Ascend910_93xx) or Ascend 950"
MODEL_FIX = "fix model.py: README, section 'Your own model'"
MRE = "forward_project.mre"
DOCTOR = "python -m forward_project doctor"
"""How a user calls the doctor, and what its usage calls it."""


@pytest.fixture(autouse=True)
def default_backend(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)


@pytest.fixture
def no_torch_npu(monkeypatch, installed):
    """torch_npu neither importable nor installed, wherever this runs, and probed afresh."""
    # A None entry makes importlib.util.find_spec() answer "not installed".
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    installed("torch-npu", None)
    monkeypatch.setattr(backend, "npu_status", backend.probe_npu)


def test_the_python_line_names_version_and_interpreter():
    """The python line says which Python runs the doctor, and from where."""
    expected = Check("python", "OK", f"{platform.python_version()} ({sys.executable})")
    assert doctor.check_python() == expected


# --- versions: torch and torch_npu as their metadata says (importlib.metadata)


def test_without_torch_nothing_can_run(installed):
    """No torch: a blocking FAIL whose fix installs the project."""
    installed("torch", None)
    expected = Check("versions", "FAIL", "torch is not installed", 'pip install -e "."', blocking=True)
    assert doctor.check_versions() == expected


def test_without_torch_npu_the_versions_line_names_torch(installed):
    """No torch_npu: OK, naming torch's version, the local build tag included."""
    installed("torch", f"{TORCH}+cpu")
    installed("torch-npu", None)
    expected = Check("versions", "OK", f"torch {TORCH}+cpu (torch_npu not installed)")
    assert doctor.check_versions() == expected


def test_the_pinned_torch_npu_beside_its_torch_is_a_matching_pair(installed):
    """torch X+cpu and the pinned torch_npu requiring torch==X.* (its wheel's metadata) match."""
    installed("torch", f"{TORCH}+cpu")
    installed("torch_npu", PINNED, f"torch=={TORCH}.*", "numpy", "pyyaml")
    expected = Check("versions", "OK", f"torch {TORCH}+cpu, torch_npu {PINNED}, a matching pair")
    assert doctor.check_versions() == expected


def test_torch_npu_beside_another_torch_fails_with_the_install_command(installed):
    """A torch that torch_npu does not require: FAIL naming both and the torch to install."""
    installed("torch", "2.5.1+cpu")
    installed("torch_npu", PINNED, "numpy", f"torch=={TORCH}.*", "pyyaml")
    expected = Check(
        "versions",
        "FAIL",
        f"torch 2.5.1+cpu, torch_npu {PINNED}: torch_npu {PINNED} needs torch {TORCH}",
        f"pip install torch=={TORCH} --index-url https://download.pytorch.org/whl/cpu",
    )
    assert doctor.check_versions() == expected


def test_another_torch_npu_release_for_this_torch_warns(installed):
    """A torch_npu release other than the pinned one, for the same torch: WARN naming the pin."""
    installed("torch", f"{TORCH}+cpu")
    installed("torch_npu", f"{TORCH}.post9", f"torch=={TORCH}.*")
    detail = f"torch {TORCH}+cpu, torch_npu {TORCH}.post9; this project pins torch_npu {PINNED}"
    assert doctor.check_versions() == Check("versions", "WARN", detail)


@pytest.mark.parametrize(
    "requirement",
    [
        "torch==2.11.0.*",  # a torch-npu wheel's own pin
        "torch==2.11.0",
        "torch (==2.11.0)",  # the Metadata 1.2 form of older wheels
        "torch==2.11.0; python_version >= '3.9'",
        "torch == 2.11.0+cpu",
    ],
)
def test_the_torch_torch_npu_wants_is_read_from_its_requirements(installed, requirement):
    """Whatever form the torch requirement takes, and wherever it is listed, its version is read
    without a local build tag or wildcard."""
    installed("torch_npu", "2.11.0", "numpy", requirement, "pyyaml")
    assert doctor.torch_npu_wants() == "2.11.0"


def test_a_torch_npu_that_requires_no_torch_wants_none(installed):
    """Metadata without a torch requirement gives no torch version to insist on."""
    installed("torch_npu", "2.11.0", "numpy", "torchvision==0.28.0")
    assert doctor.torch_npu_wants() is None


# --- torch-build: torch_npu refuses to load beside a CUDA build of torch


@pytest.mark.parametrize(
    ("cuda", "npu_version", "expected"),
    [
        ("12.6", PINNED, Check(
            "torch-build",
            "FAIL",
            f"torch {TORCH}+cu126 is a CUDA build",
            "install torch's CPU build: torch_npu refuses to load beside a CUDA build",
        )),
        ("12.6", None, Check("torch-build", "OK", f"torch {TORCH}+cu126")),
        (None, PINNED, Check("torch-build", "OK", f"torch {TORCH}+cu126")),
    ],
    ids=["cuda-beside-torch_npu", "cuda-alone", "cpu-beside-torch_npu"],
)  # fmt: skip
def test_a_cuda_torch_fails_only_beside_torch_npu(monkeypatch, installed, cuda, npu_version, expected):
    """A CUDA build of torch is a FAIL with torch_npu installed, and fine without it."""
    monkeypatch.setattr(torch, "__version__", f"{TORCH}+cu126")
    monkeypatch.setattr(torch.version, "cuda", cuda)
    installed("torch_npu", npu_version, f"torch=={TORCH}.*")
    assert doctor.check_torch() == expected


# --- torch_npu and the NPU


def test_without_torch_npu_graph_mode_falls_back(no_torch_npu):
    """No torch_npu: a WARN that says the stand-in runs, and how to install it on an NPU host."""
    expected = Check(
        "torch_npu",
        "WARN",
        "not installed: graph mode falls back to the stand-in",
        'on an Ascend machine: pip install -e ".[npu]"',
    )
    assert doctor.check_torch_npu() == [expected]


def test_a_torch_npu_that_cannot_load_fails_with_cann_and_the_autoload_trap(install_torch_npu):
    """A torch_npu that cannot find libhccl.so: FAIL naming the error, set_env.sh, and
    TORCH_DEVICE_BACKEND_AUTOLOAD for the meantime."""
    missing = "libhccl.so: cannot open shared object file: No such file or directory"
    install_torch_npu(init=f"raise ImportError({missing!r})\n")
    expected = Check(
        "torch_npu",
        "FAIL",
        f"installed but unusable: CANN is not sourced ({missing})",
        "source the CANN set_env.sh (e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh); meanwhile "
        "`import torch` elsewhere fails unless TORCH_DEVICE_BACKEND_AUTOLOAD=0",
    )
    assert doctor.check_torch_npu() == [expected]


def test_torch_npu_without_a_visible_npu_fails_with_where_to_look(install_torch_npu):
    """torch_npu imports but counts no NPU: OK for torch_npu, FAIL for the NPU with what to check."""
    install_torch_npu(count=0)
    assert doctor.check_torch_npu() == [
        Check("torch_npu", "OK", f"torch_npu {PINNED} imports"),
        Check(
            "npu",
            "FAIL",
            "no NPU visible",
            "check `npu-smi info`, the driver, and ASCEND_RT_VISIBLE_DEVICES",
        ),
    ]


def test_an_npu_the_runtime_cannot_open_is_not_visible(install_torch_npu):
    """The driver counts an NPU that torch_npu's runtime cannot use (is_available() False): FAIL,
    as with none."""
    install_torch_npu(count=1, available=False)
    assert doctor.check_torch_npu()[1].detail == "no NPU visible"


def test_npus_npugraph_ex_does_not_run_on_warn_naming_those_it_runs_on(install_torch_npu):
    """Eight Ascend 310P NPUs: a WARN naming the count and why the SoC is refused, whose fix
    names the SoCs that capture."""
    install_torch_npu("Ascend310P3", count=8)
    assert doctor.check_torch_npu()[1] == Check(
        "npu",
        "WARN",
        f"8 x {backend.capture_refusal('Ascend310P3')}",
        f"run graph mode on {CAPTURE_SOCS}",
    )


def test_an_npu_that_captures_passes_with_the_aclop_advice(install_torch_npu):
    """One Atlas A2 NPU: OK, with torch_npu's own advice for its aclop capture error."""
    install_torch_npu("Ascend910B3")
    detail = (
        '1 x Ascend910B3, aclgraph capture supported; if a capture fails with "Cannot run aclop '
        'operators during NPU graph capture", set torch.npu.config.allow_internal_format = False '
        "before compiling; if it still fails, that operator has no aclnn implementation and "
        "cannot be captured"
    )
    assert doctor.check_torch_npu() == [
        Check("torch_npu", "OK", f"torch_npu {PINNED} imports"),
        Check("npu", "OK", detail),
    ]


# --- the switches that send operators to aclop, which capture refuses

SWITCHES = ["jit-compile", "internal-format"]


def test_the_aclop_switches_off_on_a_capturing_npu_pass(install_torch_npu):
    """An Atlas A2 as it starts (JIT compile off, internal formats off): an OK line each."""
    install_torch_npu("Ascend910B3")
    checks = doctor.check_aclop_switches()
    assert [(check.name, check.status) for check in checks] == [(name, "OK") for name in SWITCHES]


@pytest.mark.parametrize(
    ("settings", "on"),
    [({"jit_compile": True}, "jit-compile"), ({"internal_format": b"enable"}, "internal-format")],
)
def test_an_aclop_switch_on_fails_with_its_fix(install_torch_npu, settings, on):
    """One switch on: its line FAILs with the fix, not blocking (graph mode fails, not the MRE
    whatever the backend); the other stays OK."""
    install_torch_npu("Ascend910B3", **settings)
    checks = {check.name: check for check in doctor.check_aclop_switches()}
    (switch,) = (switch for switch in backend.ACLOP_SWITCHES if switch.code == on)
    assert checks[on] == Check(on, "FAIL", switch.on, switch.fix)
    assert [check.status for name, check in checks.items() if name != on] == ["OK"]


def test_without_torch_npu_the_aclop_switches_could_not_run(no_torch_npu):
    """No torch_npu: each switch's line is OK and says it could not run, with no fix."""
    checks = doctor.check_aclop_switches()
    assert [check.name for check in checks] == SWITCHES
    for check in checks:
        assert (check.status, check.fix) == ("OK", "")
        assert check.detail.startswith("could not run: ")


SWITCH_CASES = {
    "both off": {},
    "JIT compile on": {"jit_compile": True},
    "internal formats never set": {"internal_format": None},
}


@pytest.mark.parametrize("settings", SWITCH_CASES.values(), ids=SWITCH_CASES)
def test_the_aclop_switch_lines_read_as_their_snapshot(install_torch_npu, settings, snapshot):
    """The jit-compile and internal-format lines on an Atlas A2: both off, JIT compile on, and the
    internal-format option never set, which torch_npu reads as on (as before Ascend910B1)."""
    install_torch_npu("Ascend910B3", **settings)
    assert [asdict(check) for check in doctor.check_aclop_switches()] == snapshot


def test_the_aclop_switch_lines_that_could_not_run_read_as_their_snapshot(no_torch_npu, snapshot):
    """Where npugraph_ex does not run, the lines that say they could not run."""
    assert [asdict(check) for check in doctor.check_aclop_switches()] == snapshot


# --- CANN: its variables, its packages, and set_env.sh


@pytest.fixture
def ascend(tmp_path, monkeypatch, installed):
    """A machine root with the usual set_env.sh places under it and no CANN variable set; it
    has torch_npu installed unless a test says installed("torch-npu", None)."""
    root = tmp_path / "root"
    toolkit, cann = root / "usr/local/Ascend/ascend-toolkit", root / "usr/local/Ascend/cann"
    scripts = (str(toolkit / "set_env.sh"), str(cann / "set_env.sh"))
    monkeypatch.setattr(doctor, "SET_ENV_SCRIPTS", scripts)
    for variable in ("ASCEND_HOME_PATH", "ASCEND_OPP_PATH"):
        monkeypatch.delenv(variable, raising=False)
    installed("torch_npu", PINNED, f"torch=={TORCH}.*")
    return root


def cann_install(folder, *parts):
    """A CANN install at folder/latest with these packages, and folder/set_env.sh."""
    home = folder / "latest"
    home.mkdir(parents=True)
    for part in parts:
        (home / part).mkdir()
    (folder / "set_env.sh").write_text("export ASCEND_HOME_PATH=...\n")
    return home


def test_without_torch_npu_cann_is_not_needed(ascend, installed):
    """No torch_npu and no CANN: every CANN line is OK, with no fix to follow."""
    installed("torch-npu", None)
    assert doctor.check_cann() == [
        Check("ASCEND_HOME_PATH", "OK", "not set (CANN not sourced)"),
        Check("ASCEND_OPP_PATH", "OK", "not set (CANN not sourced)"),
        Check("set_env.sh", "OK", "none found in the usual places"),
    ]


def test_torch_npu_without_cann_warns_on_each_line(ascend):
    """torch_npu but no CANN anywhere: a WARN on each line, each with its fix."""
    assert doctor.check_cann() == [
        Check("ASCEND_HOME_PATH", "WARN", "not set (CANN not sourced)", SOURCE_CANN),
        Check("ASCEND_OPP_PATH", "WARN", "not set (CANN not sourced)", SOURCE_CANN),
        Check("set_env.sh", "WARN", "none found in the usual places", "install CANN"),
    ]


def test_a_sourced_cann_passes_naming_its_paths(ascend, monkeypatch):
    """A complete, sourced CANN: each line OK with its path, set_env.sh the first usual one."""
    home = cann_install(ascend / "usr/local/Ascend/ascend-toolkit", "runtime", "compiler", "opp")
    cann_install(ascend / "usr/local/Ascend/cann")  # CANN 9.1's layout as well: found second
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    monkeypatch.setenv("ASCEND_OPP_PATH", str(home / "opp"))
    assert doctor.check_cann() == [
        Check("ASCEND_HOME_PATH", "OK", str(home)),
        Check("ASCEND_OPP_PATH", "OK", str(home / "opp")),
        Check("cann-packages", "OK", f"runtime, compiler in {home}"),
        Check("set_env.sh", "OK", str(ascend / "usr/local/Ascend/ascend-toolkit/set_env.sh")),
    ]


def test_set_env_sh_is_found_beside_a_cann_installed_elsewhere(ascend, monkeypatch):
    """A CANN outside the usual places: its set_env.sh is found next to ASCEND_HOME_PATH."""
    home = cann_install(ascend / "opt/cann", "runtime", "compiler", "opp")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    monkeypatch.setenv("ASCEND_OPP_PATH", str(home / "opp"))
    assert doctor.check_cann()[-1] == Check("set_env.sh", "OK", str(ascend / "opt/cann/set_env.sh"))


def test_a_half_sourced_cann_fails_naming_what_is_missing(ascend, monkeypatch):
    """ASCEND_HOME_PATH set but not ASCEND_OPP_PATH, on a CANN without runtime/ and compiler/:
    FAIL lines that name the missing variable and packages, with their fixes."""
    home = cann_install(ascend / "opt/cann")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    assert doctor.check_cann()[:3] == [
        Check("ASCEND_HOME_PATH", "OK", str(home)),
        Check(
            "ASCEND_OPP_PATH",
            "FAIL",
            "not set, though ASCEND_HOME_PATH is (CANN half-sourced)",
            f"{SOURCE_CANN}: it sets both",
        ),
        Check(
            "cann-packages",
            "FAIL",
            f"ASCEND_HOME_PATH={home} has no runtime/, compiler/",
            f"install CANN's runtime and compiler package there, or {SOURCE_CANN} of a full CANN",
        ),
    ]


def test_cann_variables_naming_missing_folders_fail(ascend, monkeypatch):
    """ASCEND_HOME_PATH and ASCEND_OPP_PATH naming folders that do not exist: a FAIL each, whose
    fix is to source set_env.sh or unset the variable; no package line for a missing home."""
    home = ascend / "opt/gone"
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    monkeypatch.setenv("ASCEND_OPP_PATH", str(home / "opp"))
    assert doctor.check_cann() == [
        Check(
            "ASCEND_HOME_PATH",
            "FAIL",
            f"ASCEND_HOME_PATH={home} does not exist",
            f"{SOURCE_CANN}, or unset ASCEND_HOME_PATH",
        ),
        Check(
            "ASCEND_OPP_PATH",
            "FAIL",
            f"ASCEND_OPP_PATH={home}/opp does not exist",
            f"{SOURCE_CANN}, or unset ASCEND_OPP_PATH",
        ),
        Check("set_env.sh", "WARN", "none found in the usual places", "install CANN"),
    ]


def test_a_cann_without_runtime_names_that_package_alone(ascend, monkeypatch):
    """A sourced CANN with compiler/ but no runtime/: the packages line FAILs naming runtime/
    alone, and its fix installs that package."""
    home = cann_install(ascend / "opt/cann", "compiler", "opp")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    monkeypatch.setenv("ASCEND_OPP_PATH", str(home / "opp"))
    assert doctor.check_cann()[2] == Check(
        "cann-packages",
        "FAIL",
        f"ASCEND_HOME_PATH={home} has no runtime/",
        f"install CANN's runtime package there, or {SOURCE_CANN} of a full CANN",
    )


def test_a_cann_variable_naming_a_missing_folder_fails_without_torch_npu_too(ascend, installed, monkeypatch):
    """No torch_npu: ASCEND_HOME_PATH naming a folder that does not exist is still a FAIL, with
    the fix to source set_env.sh or unset it."""
    installed("torch-npu", None)
    home = ascend / "opt/gone"
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    assert doctor.check_cann()[0] == Check(
        "ASCEND_HOME_PATH",
        "FAIL",
        f"ASCEND_HOME_PATH={home} does not exist",
        f"{SOURCE_CANN}, or unset ASCEND_HOME_PATH",
    )


def test_without_torch_npu_a_partial_cann_is_no_failure(ascend, installed, monkeypatch):
    """No torch_npu: a CANN home without ASCEND_OPP_PATH or packages fails nothing, since
    nothing loads CANN."""
    installed("torch-npu", None)
    home = cann_install(ascend / "opt/cann")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    assert doctor.check_cann() == [
        Check("ASCEND_HOME_PATH", "OK", str(home)),
        Check("ASCEND_OPP_PATH", "OK", "not set (CANN not sourced)"),
        Check("set_env.sh", "OK", str(ascend / "opt/cann/set_env.sh")),
    ]


# --- the backend: what torch lists, and what the MRE will use

# torch.compile's backends as torch 2.13 lists them (list_backends()), without and with
# torch_npu 2.13 installed: its wheel registers npu, npugraph_ex and npugraphs as entry points.
TORCH_BACKENDS = ["cudagraphs", "inductor", "openxla", "tvm"]
WITH_TORCH_NPU = ["cudagraphs", "inductor", "npu", "npugraph_ex", "npugraphs", "openxla", "tvm"]


def test_a_registered_npugraph_ex_is_counted_among_the_backends(monkeypatch):
    """torch lists npugraph_ex: OK, with how many backends it lists."""
    monkeypatch.setattr(torch._dynamo, "list_backends", lambda: WITH_TORCH_NPU)
    expected = Check("backends", "OK", "npugraph_ex is registered (7 backends)")
    assert doctor.check_backends() == expected


def test_an_unregistered_npugraph_ex_warns_listing_what_torch_sees(monkeypatch):
    """torch does not list npugraph_ex: WARN naming the backends it does list."""
    monkeypatch.setattr(torch._dynamo, "list_backends", lambda: TORCH_BACKENDS)
    expected = Check(
        "backends",
        "WARN",
        "npugraph_ex is not registered; torch sees cudagraphs, inductor, openxla, tvm",
        "install torch_npu, which registers npugraph_ex",
    )
    assert doctor.check_backends() == expected


def test_the_stand_in_backend_warns_with_its_reason(no_torch_npu, monkeypatch):
    """Without torch_npu the MRE's backend line is a WARN: aot_eager, and why."""
    reason = "no usable NPU (torch_npu is not installed); aot_eager stands in for npugraph_ex"
    assert doctor.check_choice() == Check("mre-backend", "WARN", f"aot_eager: {reason}")


def test_npugraph_ex_on_a_capturing_npu_is_ok(install_torch_npu):
    """On an NPU that captures, the MRE's backend line is OK: npugraph_ex, and the SoC."""
    install_torch_npu("Ascend910B2")
    detail = f"npugraph_ex: Ascend NPU ready: Ascend910B2, torch_npu {PINNED}"
    assert doctor.check_choice() == Check("mre-backend", "OK", detail)


def test_a_backend_that_cannot_be_forced_stops_the_mre(no_torch_npu, monkeypatch):
    """$NPUGRAPH_BACKEND=npugraph_ex off NPU: a blocking FAIL with the refusal and the fix."""
    monkeypatch.setenv(BACKEND_ENV, "npugraph_ex")
    expected = Check(
        "mre-backend",
        "FAIL",
        "NPUGRAPH_BACKEND=npugraph_ex needs a usable NPU, but torch_npu is not installed; unset "
        "NPUGRAPH_BACKEND",
        "unset NPUGRAPH_BACKEND or fix its value",
        blocking=True,
    )
    assert doctor.check_choice() == expected


def test_a_forced_backend_torch_does_not_know_stops_the_mre(monkeypatch):
    """$NPUGRAPH_BACKEND naming no torch.compile backend: a blocking FAIL naming the value, whose
    fix is to unset or fix it."""
    monkeypatch.setenv(BACKEND_ENV, "no-such-backend")
    check = doctor.check_choice()
    assert (check.name, check.status, check.blocking) == ("mre-backend", "FAIL", True)
    assert check.detail.startswith(
        f"{BACKEND_ENV}='no-such-backend' is not a torch.compile backend; use one of "
    )
    assert check.fix == "unset NPUGRAPH_BACKEND or fix its value"


# --- the model contract


@pytest.fixture
def own_model(monkeypatch):
    """own_model(build, inputs): model.py's build_model and example_inputs replaced."""

    def use(build, inputs) -> None:
        monkeypatch.setattr(model, "build_model", build)
        monkeypatch.setattr(model, "example_inputs", inputs)

    return use


def test_a_model_that_keeps_the_contract_is_named_with_its_inputs(own_model):
    """build_model() and example_inputs() that work: OK, naming the class and each input, and
    saying that one step ran eagerly, where."""
    own_model(lambda: nn.Linear(4, 2), lambda: (torch.ones(3, 4),))
    detail = (
        "build_model() gives Linear, example_inputs() [0] (3, 4) float32 on cpu; one step runs eagerly on cpu"
    )
    assert doctor.check_model() == Check("model", "OK", detail)


class Fails(nn.Module):
    def forward(self, x):
        raise ValueError("bad input")  # the doctor must point at this line


def test_a_model_that_only_builds_stops_the_mre_naming_its_eager_error(own_model):
    """A model that builds but fails eagerly: a blocking FAIL with the error and its line, as
    every tool refuses it, not an OK for building."""
    own_model(Fails, lambda: (torch.ones(3),))
    source = Path(__file__).read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "the doctor must point" in text)
    detail = (
        "build_model() gives Fails, example_inputs() [0] (3,) float32 on cpu; but the model fails "
        "eagerly, so graph mode cannot be judged: ValueError: bad input; at "
        f"{__file__}:{line} (forward); `python -m forward_project check` says more"
    )
    assert doctor.check_model() == Check("model", "FAIL", detail, MODEL_FIX, blocking=True)


def test_a_model_that_cannot_move_to_the_npu_stops_the_mre_naming_the_device(own_model, monkeypatch):
    """On an NPU the model runs where the MRE runs it: one that cannot get there is a blocking FAIL
    naming the device and the error's first line (an "npu" torch does not know stands in here)."""
    own_model(lambda: nn.Linear(4, 2), lambda: (torch.ones(3, 4),))
    monkeypatch.setattr(backend, "npu_status", lambda: (True, "an NPU"))
    check = doctor.check_model()
    assert (check.name, check.status, check.fix, check.blocking) == ("model", "FAIL", MODEL_FIX, True)
    built = "build_model() gives Linear, example_inputs() [0] (3, 4) float32 on cpu"
    assert check.detail.startswith(f"{built}; but it cannot run on npu: RuntimeError: ")
    assert "\n" not in check.detail


class CountsCalls(nn.Module):
    """Counts its calls in a Python int, which no tool can save and put back."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


def test_a_model_with_state_out_of_sight_warns_that_the_tools_refuse_it(own_model):
    """A model whose call advances a Python number runs (the MRE runs it), but the tools that
    compare it refuse it: a WARN naming the attribute, with the fix."""
    own_model(CountsCalls, lambda: (torch.ones(3),))
    check = doctor.check_model()
    assert (check.status, check.blocking) == ("WARN", False)
    assert check.detail == (
        "build_model() gives CountsCalls, example_inputs() [0] (3,) float32 on cpu; it runs "
        "eagerly, but the tools that compare it with graph mode refuse it: calls went from 0 to 1 "
        "during the first call"
    )
    assert check.fix.startswith("hold what a call advances in a tensor, written in place")


class CountsScaledCalls(CountsCalls):
    """Counts its calls, and its tokens in a second Python int."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = 0

    def forward(self, x, scale):
        self.tokens += 2
        return super().forward(x) * scale


def test_the_tools_refusal_comes_before_the_notes_on_constant_inputs(own_model):
    """A model the tools refuse, with a constant input too: the refusal first, naming each number
    it keeps, in the line and in its fixes, as it matters most."""
    own_model(CountsScaledCalls, lambda: (torch.ones(3), 2.0))
    check = doctor.check_model()
    note, fix = constant_note("[1]", 2.0)
    refusal = (
        "refuse it: calls went from 0 to 1 during the first call; "
        "tokens went from 0 to 2 during the first call"
    )
    assert check.detail.endswith(f"{refusal}; {note}")
    assert check.fix.startswith("hold what a call advances in a tensor")
    assert check.fix.endswith(f"; {fix}")


def test_a_decode_model_is_said_to_run_its_prefill_and_a_decode_step():
    """A decode project's model line says what ran eagerly: the prefill and one decode step."""
    detail = decode_doctor.check_model().detail
    assert detail.endswith("; the prompt's prefill and one decode step run eagerly on cpu")


def test_a_tensor_parallel_project_runs_every_check_and_the_rank_checks_for_one_rank():
    """With tensor parallelism the doctor runs every check, then the rank checks, for one rank
    unless told otherwise."""
    checks = parallel_doctor.run_checks()
    names = [check.name for check in checks]
    assert names[:-3] == [check.name for check in doctor.run_checks()]
    assert names[-3:] == ["ranks", "plan", "hccl-mode"]
    assert checks[-2].detail.startswith("parallel_plan(1) ")
    assert not {"decode", "cache-dir"} & set(names)  # a decode and a cache_compile project's lines
    assert not [check for check in checks if check.detail.startswith("the check itself failed")]


def test_a_tensor_parallel_help_reads_as_its_snapshot(help_of, snapshot):
    """--help of a tensor-parallel project's doctor, with --nproc-per-node, is the reviewed text."""
    assert help_of(parallel_doctor.main, "python -m parallel_project doctor") == snapshot


class Scale(nn.Module):
    """A Linear scaled by the numbers passed after its input."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x, *scales):
        for scale in scales:
            x = x * scale
        return self.linear(x)


def test_the_model_is_built_from_the_mre_s_seed(own_model):
    """Seed 0, build_model(), then example_inputs(), as the MRE runs them: a number drawn in
    example_inputs() is reported with the value the MRE gets."""

    def inputs():
        return (torch.ones(3), round(torch.rand(()).item(), 4))

    own_model(Scale, inputs)
    torch.manual_seed(0)
    Scale()
    drawn = inputs()[1]
    assert f"[1] float {drawn};" in doctor.check_model().detail


def test_constant_inputs_warn_with_a_note_and_fix_for_each(own_model):
    """Two non-tensor inputs: one WARN whose detail and fix carry each one's note, in order."""
    own_model(Scale, lambda: (torch.ones(3), 0.5, 2))
    float_note, float_fix = constant_note("[1]", 0.5)
    int_note, int_fix = constant_note("[2]", 2)
    inputs = "[0] (3,) float32 on cpu, [1] float 0.5, [2] int 2"
    ran = "one step runs eagerly on cpu"
    assert doctor.check_model() == Check(
        "model",
        "WARN",
        f"build_model() gives Scale, example_inputs() {inputs}; {ran}; {float_note}; {int_note}",
        f"{float_fix}; {int_fix}",
    )


def test_inputs_breaking_the_contract_stop_the_mre_with_the_contract_s_words(own_model):
    """example_inputs() returning a bare tensor: a blocking FAIL that says how to return it."""
    own_model(lambda: nn.Linear(3, 3), lambda: torch.ones(3))
    detail = (
        "example_inputs() must return a tuple of positional inputs, got Tensor; for one input "
        "write `return (x,)`"
    )
    assert doctor.check_model() == Check("model", "FAIL", detail, MODEL_FIX, blocking=True)


def test_inputs_the_project_cannot_move_to_the_device_stop_the_mre(own_model):
    """The project moves example_inputs() to the device: tensors on the meta device, which hold
    no data, cannot be moved, and the doctor says so as the MRE would fail."""
    own_model(lambda: nn.Linear(3, 3), lambda: (torch.ones(3, device="meta"),))
    detail = "model.py fails: NotImplementedError: Cannot copy out of meta tensor; no data!"
    assert doctor.check_model() == Check("model", "FAIL", detail, MODEL_FIX, blocking=True)


def test_a_model_py_that_raises_stops_the_mre_with_the_error_s_first_line(own_model):
    """build_model() raising: a blocking FAIL with the error's type and first line."""

    def broken():
        raise ValueError("hidden size 33 is not divisible by 4 heads\nin layer 0")

    own_model(broken, lambda: (torch.ones(3),))
    detail = "model.py fails: ValueError: hidden size 33 is not divisible by 4 heads"
    assert doctor.check_model() == Check("model", "FAIL", detail, MODEL_FIX, blocking=True)


def test_a_build_model_that_gives_no_module_stops_the_mre(own_model):
    """build_model() returning a function: a blocking FAIL naming what it returned."""
    own_model(lambda: torch.sin, lambda: (torch.ones(3),))
    detail = "build_model() returned builtin_function_or_method, not a torch.nn.Module"
    assert doctor.check_model() == Check("model", "FAIL", detail, MODEL_FIX, blocking=True)


# --- what the MRE imports: model.py's contract and the toolkit, never mre.py itself


@pytest.mark.parametrize(
    ("package", "names", "modules"),
    [
        ("forward_project", "build_model, example_inputs", "backend, contract, report"),
        ("cache_project", "build_model, example_inputs", "backend, compile_cache, contract, report"),
        ("decode_project", "build_model, example_inputs", "backend, contract, decode, report"),
        (
            "parallel_project",
            "build_model, example_inputs, parallel_plan",
            "backend, contract, parallel, report",
        ),
    ],
)
def test_what_the_mre_imports_is_there(package, names, modules):
    """model.py's names and the toolkit modules the MRE of each kind of project imports all
    import: OK, naming each."""
    tool = importlib.import_module(f"{package}.toolkit.doctor")
    detail = f"model.py's {names} and the toolkit's {modules} import, as {package}.mre needs"
    assert tool.check_mre_imports() == tool.Check("mre-import", "OK", detail)


def test_a_toolkit_module_that_cannot_import_stops_everything_with_how_to_see_why(monkeypatch):
    """A toolkit module the MRE imports failing to import: a blocking FAIL naming it, with the
    error and the command that shows its traceback."""
    report = "forward_project.toolkit.report"
    monkeypatch.setitem(sys.modules, report, None)
    expected = Check(
        "mre-import",
        "FAIL",
        f"{MRE} cannot import toolkit.report: ModuleNotFoundError: import of {report} halted; "
        "None in sys.modules",
        f"python -m {MRE} shows the traceback",
        blocking=True,
    )
    assert doctor.check_mre_imports() == expected


def test_a_model_py_without_a_name_the_mre_imports_stops_everything(monkeypatch):
    """model.py without example_inputs: a blocking FAIL naming it, as the MRE's import fails."""
    monkeypatch.delattr(model, "example_inputs")
    expected = Check(
        "mre-import",
        "FAIL",
        f"model.py has no example_inputs, which {MRE} imports from it",
        f"python -m {MRE} shows the traceback",
        blocking=True,
    )
    assert doctor.check_mre_imports() == expected


def test_every_name_the_mre_imports_that_model_py_lacks_is_named(monkeypatch):
    """model.py without build_model and example_inputs: the FAIL names both."""
    monkeypatch.delattr(model, "build_model")
    monkeypatch.delattr(model, "example_inputs")
    detail = doctor.check_mre_imports().detail
    assert detail == f"model.py has no build_model, example_inputs, which {MRE} imports from it"


# --- the report


def test_a_crashing_check_becomes_a_fail_line_named_after_it(monkeypatch):
    """A check that raises is a FAIL named after the check, quoting the error; the rest still run
    and a check's list of lines is reported line by line."""

    def check_explodes():
        raise OSError("disk on fire")

    def check_two_lines():
        return [Check("first", "OK", "one"), Check("second", "WARN", "two")]

    monkeypatch.setattr(doctor, "CHECKS", (check_explodes, check_two_lines))
    monkeypatch.setattr(doctor, "RANK_CHECKS", ())
    assert doctor.run_checks() == [
        Check("explodes", "FAIL", "the check itself failed: OSError('disk on fire')"),
        Check("first", "OK", "one"),
        Check("second", "WARN", "two"),
    ]


RUNS_EAGERLY = "your model runs eagerly: `python -m forward_project check` says if graph mode runs it"
"""What the verdict adds unless a check blocks: the doctor runs the model eagerly, never compiled."""
FALLBACK = f"graph mode falls back to a stand-in here (see WARN and FAIL above), and {RUNS_EAGERLY}"


def test_graph_mode_is_exit_0_whatever_warnings_remain():
    """mre-backend OK (npugraph_ex chosen) and nothing blocking: exit 0, whatever WARNs remain."""
    checks = [
        Check("versions", "WARN", "an untested pair"),
        Check("mre-backend", "OK", "npugraph_ex: Ascend910B2 captures aclgraphs"),
    ]
    assert doctor.verdict(checks) == (0, f"graph mode (npugraph_ex) can run here, and {RUNS_EAGERLY}")


def test_a_blocking_failure_wins_over_graph_mode():
    """A blocking FAIL beside a graph-mode backend: exit 2, naming the failed check."""
    checks = [
        Check("model", "FAIL", "build_model() raised", blocking=True),
        Check("mre-backend", "OK", "npugraph_ex: Ascend910B2 captures aclgraphs"),
    ]
    assert doctor.verdict(checks) == (2, "the MRE cannot run here: fix model first")


def test_every_blocking_failure_is_named_in_the_verdict():
    """Two blocking FAILs, a non-blocking one aside: exit 2, naming both in order."""
    checks = [
        Check("versions", "FAIL", "torch is not installed", blocking=True),
        Check("npu", "FAIL", "no NPU visible"),
        Check("model", "FAIL", "model.py fails", blocking=True),
    ]
    assert doctor.verdict(checks) == (2, "the MRE cannot run here: fix versions, model first")


def test_the_fallback_verdict_points_at_the_lines_above():
    """No blocking FAIL and no graph-mode backend: exit 1, pointing at the WARN and FAIL lines,
    a FAIL that does not block aside."""
    summary = FALLBACK
    fallback = Check("mre-backend", "WARN", "aot_eager: no NPU")
    assert doctor.verdict([fallback]) == (1, summary)
    assert doctor.verdict([Check("python", "OK", "3.11")]) == (1, summary)
    assert doctor.verdict([Check("torch_npu", "FAIL", "not installed"), fallback]) == (1, summary)


def test_the_report_aligns_names_shows_fixes_only_for_problems_and_ends_with_the_verdict(snapshot):
    """One line per check, its code, names padded to the longest; a fix line under WARN and FAIL
    only; a blank line, then the verdict: the reviewed layout."""
    checks = [
        Check("python", "OK", "3.11", "never shown"),
        Check("mre-backend", "WARN", "aot_eager: no NPU", "run on an NPU"),
        Check("npu", "FAIL", "no NPU visible"),
    ]
    assert doctor.render(checks, "the verdict") == snapshot


def test_every_check_has_its_own_stable_code():
    """Each check the doctor can run has a code of its own, DOC and three digits."""
    assert len(set(doctor.CODES.values())) == len(doctor.CODES)
    assert all(re.fullmatch(r"DOC\d{3}", code) for code in doctor.CODES.values())
    assert Check("npu", "OK", "").code == doctor.CODES["npu"]


@pytest.fixture
def two_checks(monkeypatch):
    """A doctor whose only checks are an OK python line and a WARN backend line with a fix."""

    def checks():
        return [
            Check("python", "OK", "3.11"),
            Check("mre-backend", "WARN", "aot_eager: no NPU", "run on an NPU"),
        ]

    monkeypatch.setattr(doctor, "CHECKS", (checks,))
    monkeypatch.setattr(doctor, "RANK_CHECKS", ())
    return checks


def test_the_doctor_prints_its_report_and_exits_with_the_verdict(capsys, two_checks):
    """Without options: the report on stdout, exit 1 for a fallback."""
    assert doctor.main([]) == 1
    printed = capsys.readouterr().out
    assert printed == doctor.render(two_checks(), FALLBACK) + "\n"


def test_json_is_one_indented_object_with_verdict_summary_and_checks(capsys, two_checks):
    """--json: one object, indented by 2, with the verdict, its summary and every field of each
    check."""
    assert doctor.main(["--json"]) == 1
    output = capsys.readouterr().out
    assert json.loads(output) == {
        "verdict": 1,
        "summary": FALLBACK,
        "checks": [
            {
                "name": "python",
                "status": "OK",
                "detail": "3.11",
                "fix": "",
                "blocking": False,
                "code": "DOC001",
            },
            {
                "name": "mre-backend",
                "status": "WARN",
                "detail": "aot_eager: no NPU",
                "fix": "run on an NPU",
                "blocking": False,
                "code": "DOC011",
            },
        ],
    }
    assert output.startswith('{\n  "verdict": 1,\n  "summary": ')


def test_the_report_has_every_check_s_line_and_its_verdict(capsys):
    """Run whole here: the report has a line from each check that every project runs, each with
    a status of OK, WARN or FAIL, and the exit code is its verdict."""
    code = doctor.main(["--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == code
    names = {check["name"] for check in report["checks"]}
    assert names >= {
        "python",
        "versions",
        "torch-build",
        "torch_npu",
        "ASCEND_HOME_PATH",
        "ASCEND_OPP_PATH",
        "set_env.sh",
        "backends",
        "mre-backend",
        "model",
        "jit-compile",
        "internal-format",
        "mre-import",
    }
    assert {check["status"] for check in report["checks"]} <= {"OK", "WARN", "FAIL"}


def test_help_says_what_the_doctor_answers(help_of):
    """--help: the usage under the name it is called by, the doctor's question and --json."""
    words = help_of(doctor.main, DOCTOR)
    assert words.startswith(f"usage: {DOCTOR} [-h] [--json]")
    assert "Why won't graph mode run here? One screen of OK / WARN / FAIL lines" in words
    assert "--json print one JSON object instead" in words
