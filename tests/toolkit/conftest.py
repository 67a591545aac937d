"""Projects for the toolkit's tests, and the fixtures those tests share.

The toolkit is the same files in every project (tests/test_toolkit_layout.py checks that), so it is
tested once, here, in place: each entry of PROJECTS (projects.py) is a project's package files,
kept in tests/toolkit/projects/, installed under a package name of its own with its toolkit a link
to the template's, so that the tests import the template's toolkit by each project's name
(`from forward_project.toolkit import bench`) and several configurations share one process.
A test that needs a model of its own sets the attributes of that project's `model` module.

TOOLKIT_PROJECTS, when set, names a folder that holds these projects already installed, to import
instead (`nox -s mutation_score` links their toolkits to the copy mutmut mutates).
"""

from __future__ import annotations

import atexit
import importlib
import importlib.metadata
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolkit.projects import PROJECTS, install

if _INSTALLED := os.environ.get("TOOLKIT_PROJECTS"):
    _SOURCE = Path(_INSTALLED).resolve()
else:
    _ROOT = Path(tempfile.mkdtemp(prefix="toolkit-projects-"))
    atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)
    _SOURCE = install(_ROOT)
sys.path.insert(0, str(_SOURCE))
# Each package switches off torch's device-backend autoload before torch is first imported.
for _package in PROJECTS:
    importlib.import_module(_package)

# isort: split
import torch
from torch._dynamo import guards

from forward_project.toolkit import backend

PINNED_TORCH_NPU = importlib.import_module("forward_project.settings").TORCH_NPU


TOOLKIT_TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the toolkit's tests on one xdist worker; skip those marked `npu` unless an NPU can run
    npugraph_ex here, saying why."""
    # One worker: spread over two, each compiles the same graphs and fills the same caches, and
    # they cost twice the CPU (106 s against 48 s on one process), where the other worker has the
    # template's bakes and suites to run meanwhile.
    group = pytest.mark.xdist_group("toolkit")
    for item in items:
        if item.path.is_relative_to(TOOLKIT_TESTS):
            item.add_marker(group)
    npu_ok, why = backend.npu_status()
    if npu_ok:
        return
    skip = pytest.mark.skip(reason=f"needs an Ascend NPU: {why}")
    for item in items:
        if item.get_closest_marker("npu"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def fresh_dynamo() -> None:
    """Each test compiles afresh: the tools reuse what an earlier compile in their process made
    of the same code (capture.recorder_for()), as in a project's own tests, and these tests count
    compiles, and reuse classes (nn.Linear) with other shapes, to Dynamo's recompile limit."""
    torch._dynamo.reset()


@pytest.fixture(scope="session", autouse=True)
def no_guard_latency_profiling() -> Iterator[None]:
    """Dynamo times the guards of each new graph once, for its logs alone, and first flushes the
    CPU cache to do so: about 20 ms a compile, and these tests compile dozens of graphs."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(guards, "profile_guard_manager", lambda *arguments: 0.0)
        yield


@pytest.fixture
def help_of(capsys: pytest.CaptureFixture[str]) -> Callable[[Callable[..., int], str], str]:
    """help_of(main, prog): what `--help` prints for a tool's main() called as `prog`, on one line
    however it wraps; --help must exit 0."""

    def shown(main: Callable[..., int], prog: str) -> str:
        with pytest.raises(SystemExit) as exit_status:
            main(["--help"], prog=prog)
        assert exit_status.value.code == 0
        return " ".join(capsys.readouterr().out.split())

    return shown


@pytest.fixture
def npugraph_ex_compiles(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """An `npugraph_ex` backend for the test, which runs each graph it is given as it is and
    notes its options, one entry per compile: what torch_npu's registration makes of the name,
    undone after the test."""
    compiles: list[dict] = []

    def npugraph_ex(graph_module, example_inputs, **keywords):
        compiles.append(keywords.get("options") or {})
        return graph_module.forward

    registry = torch._dynamo.backends.registry
    monkeypatch.setitem(registry._BACKENDS, "npugraph_ex", None)
    monkeypatch.setitem(registry._COMPILER_FNS, "npugraph_ex", npugraph_ex)
    return compiles


@pytest.fixture
def forget_torch_npu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's next `import torch_npu` loads afresh, and what it loads is taken away afterwards."""
    # setitem remembers that there was no entry; undoing it removes the stand-in the test loaded.
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    del sys.modules["torch_npu"]


def distribution_key(name: str) -> str:
    """A distribution name as importlib.metadata matches it: any case, runs of -_. alike."""
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """installed(name, version, *requires): importlib.metadata finds this distribution with these
    Requires-Dist lines, or none if version is None, whatever this machine has installed."""
    real = importlib.metadata.distribution
    found: dict[str, importlib.metadata.Distribution | None] = {}

    def distribution(name: str) -> importlib.metadata.Distribution:
        if not name or distribution_key(name) not in found:
            return real(name)  # which refuses an empty name, as the real lookup does
        if (chosen := found[distribution_key(name)]) is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return chosen

    def install(name: str, version: str | None, *requires: str) -> None:
        if version is None:
            found[distribution_key(name)] = None
            return
        folder = tmp_path / f"{name}-{version}.dist-info"
        folder.mkdir(exist_ok=True)  # a test may install the same release twice
        lines = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
        (folder / "METADATA").write_text("Metadata-Version: 2.1\n" + "\n".join(lines) + "\n")
        found[distribution_key(name)] = importlib.metadata.PathDistribution(folder)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    return install


# A torch_npu that imports, with the calls the toolkit makes as torch-npu 2.13 defines them
# (torch_npu/npu/__init__.py): device_count() is the driver's count (ascend_hal), is_available()
# whether the runtime counts any (_npu_getDeviceCount()); get_device_name() takes a device index
# (None: the current one), refuses one past device_count() and returns aclrtGetSocName(), the
# same for every device. utils.get_cann_version() is torch_npu.utils's (torch_npu/npu/utils.py),
# CANN's release as its runtime reports it. init() initialises the device, and
# _C._npu_getOption() returns the options behind the two switches that send operators to aclop
# (torch_npu/npu/npu_config.py): bytes, or None where never set. Like the real one, it makes
# itself torch.npu.
TORCH_NPU_STAND_IN = """\
import sys, types, torch
__version__ = {version!r}
def device_count(): return {count}
def is_available(): return {available}
def get_device_name(device_name=None):
    if not 0 <= (device_name or 0) < device_count():
        raise AssertionError("Invalid device id")
    return {soc!r}
utils = types.SimpleNamespace(get_cann_version=lambda module="CANN": {cann!r})
def init(): pass
_C = types.SimpleNamespace(_npu_getOption={options!r}.get)
torch.npu = sys.modules[__name__]
"""
CANN = "9.1.0"
"""The CANN release the stand-in torch_npu reports unless a test says otherwise."""


@pytest.fixture
def install_torch_npu(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    forget_torch_npu: None,
    installed: Callable[..., None],
) -> Callable[..., None]:
    """install(soc, count, available=..., init=..., version=..., cann=..., jit_compile=...,
    internal_format=..., requires=...): a stand-in torch_npu on the path with its metadata, probed
    afresh by every project's npu_status(); monkeypatch takes it and torch.npu away afterwards.
    `available` defaults to count > 0; `init` replaces the stand-in's __init__.py (to fail the
    import, say); its options are an Atlas A2's once its device initialises, jitCompileInit
    (CANN's default) and ALLOW_INTERNAL_FORMAT b"disable", with jitCompile b"enable" where
    jit_compile (set_compile_mode(jit_compile=True)) and ALLOW_INTERNAL_FORMAT `internal_format`;
    the default metadata is the projects' pin, requiring the torch installed here. Installing
    again replaces the one installed before."""
    installs = []

    def install(
        soc: str = "Ascend910B2",
        count: int = 1,
        *,
        available: bool | None = None,
        init: str | None = None,
        version: str = PINNED_TORCH_NPU,
        cann: str = CANN,
        jit_compile: bool = False,
        internal_format: bytes | None = b"disable",
        requires: tuple[str, ...] | None = None,
    ) -> None:
        # A folder of its own each time: a rewritten __init__.py of the same size, written in the
        # same second, could be read from the first one's bytecode.
        installs.append(soc)
        package = tmp_path / f"packages{len(installs)}" / "torch_npu"
        package.mkdir(parents=True)
        sys.modules.pop("torch_npu", None)  # forget_torch_npu removes whatever is left at the end
        available = count > 0 if available is None else available
        options = {"jitCompileInit": b"disable", "ALLOW_INTERNAL_FORMAT": internal_format}
        if jit_compile:
            options["jitCompile"] = b"enable"
        init = init or TORCH_NPU_STAND_IN.format(
            version=version, count=count, available=available, soc=soc, cann=cann, options=options
        )
        (package / "__init__.py").write_text(init)
        torch_version = importlib.metadata.version("torch").split("+")[0]
        installed("torch_npu", version, *(requires or (f"torch=={torch_version}.*",)))
        monkeypatch.setattr(torch, "npu", None, raising=False)
        monkeypatch.syspath_prepend(package.parent)
        for project in PROJECTS:
            tools = importlib.import_module(f"{project}.toolkit.backend")
            monkeypatch.setattr(tools, "npu_status", tools.probe_npu)

    return install
