"""cache_compile: any model runs compiled through CachedModel; off NPU no cache is written; each
rank asks for a cache of its own."""

import importlib.util
import logging
import re
import stat
import sys
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.utils import counters

from cache_project.model import build_model, example_inputs
from cache_project.toolkit import backend, compile_cache
from cache_project.toolkit.backend import (
    BACKEND_ENV,
    Backend,
    npu_status,
    select_backend,
)
from cache_project.toolkit.compile_cache import CACHE_DIR, CachedModel
from cache_project.toolkit.contract import to_device
from parallel_cache_project import mre


@pytest.fixture
def in_tmp_dir(tmp_path, monkeypatch):
    """Run in an empty folder: cache_compile resolves CACHE_DIR against the working directory."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


class Plain(nn.Module):
    """A module with an ordinary forward(): what cache_compile does is the same for any model."""

    def forward(self, x):
        return x * 2


def run_once(model: nn.Module) -> None:
    device = select_backend().device
    wrapped = CachedModel(model.to(device).eval())
    with torch.no_grad():
        wrapped(torch.ones(3, device=device))


def test_forward_docstring_explains_the_cache_settings():
    """CachedModel.forward() documents the cache_compile settings, as the seed's template does."""
    for setting in ("cache_compile", "dynamic=False", "cache_dir", "_forward"):
        assert setting in CachedModel.forward.__doc__


def test_a_plain_module_runs_compiled(in_tmp_dir):
    """A model with an ordinary forward() is compiled, not run eagerly behind the wrapper."""
    torch._dynamo.reset()
    run_once(Plain())
    assert _debug_get_cache_entry_list(CachedModel._forward.__code__)


def test_shapes_are_static_each_shape_its_own_graph(in_tmp_dir):
    """dynamic=False: three input lengths compile three graphs, each for its fixed size."""

    class Plain(nn.Module):
        def forward(self, x):
            return x * 2

    torch._dynamo.reset()
    wrapped = CachedModel(Plain())
    graphs_before = counters["stats"]["unique_graphs"]
    with torch.no_grad():
        for length in (3, 5, 7):
            wrapped(torch.ones(length, device=select_backend().device))
    assert counters["stats"]["unique_graphs"] - graphs_before == 3
    entries = _debug_get_cache_entry_list(CachedModel._forward.__code__)
    guards = "\n".join(str(entry.guard_manager) for entry in entries)
    # A tensor guard lists a dynamic dimension as None: size=[None] instead of size=[3].
    assert re.findall(r"size=\[[^\]]*None", guards) == [], "symbolic sizes in a guard"


def test_a_second_instance_starts_from_a_clean_dynamo(in_tmp_dir):
    """A second CachedModel resets Dynamo, so cache_compile never sees it as a recompile."""
    run_once(Plain())
    assert _debug_get_cache_entry_list(CachedModel._forward.__code__)
    CachedModel(Plain())
    assert _debug_get_cache_entry_list(CachedModel._forward.__code__) == []


def test_stand_in_says_no_cache_is_written(in_tmp_dir, caplog, monkeypatch):
    """With the stand-in the model still runs as one graph, writes nothing, and says so in one line."""
    monkeypatch.setenv(BACKEND_ENV, "aot_eager")
    with caplog.at_level(logging.WARNING):
        run_once(Plain())
    said = "cache_compile: aot_eager compiles CachedModel._forward here, and no persistent cache"
    assert caplog.messages == [f"{said} is written"]
    assert not (in_tmp_dir / CACHE_DIR).exists()


NPU = Backend("npugraph_ex", "npu", "a test")


def on_an_npu(monkeypatch, cached=None) -> list:
    """npugraph_ex selected, with a cache_compile that records each (method, keywords) it is
    asked for and returns `cached`, or else the method itself."""
    asked = []

    def recording(method, **keywords):
        asked.append((method, keywords))
        return cached or method

    inference = SimpleNamespace(cache_compile=recording)
    npu = SimpleNamespace(npugraph_ex=SimpleNamespace(inference=inference))
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    monkeypatch.setattr(compile_cache, "select_backend", lambda: NPU)
    return asked


def test_on_an_npu_cache_compile_gets_the_method_shapes_folder_and_options(monkeypatch):
    """On an NPU CachedModel hands npugraph_ex's cache_compile its _forward, dynamic=False, the
    folder of the model's code in the cache folder it was given and the npugraph_ex options, and
    forward() runs what that returns."""
    asked = on_an_npu(monkeypatch, cached=lambda *dummy_input: ("cached graph", dummy_input))
    model = CachedModel(Plain(), cache_dir="npu_cache")
    ((method, keywords),) = asked
    assert method == model._forward
    folder = f"npu_cache/code_{compile_cache.folder_key(Plain())}"
    assert keywords == {"dynamic": False, "cache_dir": folder, "options": NPU.options}
    assert model(1, 2) == ("cached graph", (1, 2))


MODEL_FILE = """\
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(SLOTS))

    def forward(self, x):
        return x * 2
"""


def model_from(monkeypatch, folder, text: str, slots: int = 4) -> nn.Module:
    """An instance of Model from model.py holding `text` in `folder`, with a cache of `slots`,
    imported as a module of its own (as a project's model.py is)."""
    folder.mkdir(exist_ok=True)
    (folder / "model.py").write_text(text.replace("SLOTS", str(slots)))
    name = f"fingerprinted_{folder.name}"
    spec = importlib.util.spec_from_file_location(name, folder / "model.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module.Model()


def test_the_cache_folder_follows_the_models_code_and_state_shapes(monkeypatch, tmp_path):
    """The cache's folder is keyed on the source of the model's classes and its state's shapes:
    the same code gives the same folder; an edit of the code or a longer cache, another one, where
    npugraph_ex's own key (str(model)) would stay the same and load the old graph."""
    fingerprint = compile_cache.code_fingerprint
    same = fingerprint(model_from(monkeypatch, tmp_path / "a", MODEL_FILE))
    assert fingerprint(model_from(monkeypatch, tmp_path / "b", MODEL_FILE)) == same
    assert fingerprint(model_from(monkeypatch, tmp_path / "c", MODEL_FILE.replace("x * 2", "x * 3"))) != same
    assert fingerprint(model_from(monkeypatch, tmp_path / "d", MODEL_FILE, slots=8)) != same
    model = model_from(monkeypatch, tmp_path / "e", MODEL_FILE)
    assert compile_cache.keyed("npu_cache", model) == f"npu_cache/code_{compile_cache.folder_key(model)}"
    assert compile_cache.keyed(None, Plain()) is None


def test_the_cache_folder_follows_torch_npu_and_cann(install_torch_npu):
    """The cache's folder is keyed on the torch_npu and CANN releases too, which npugraph_ex's own
    key leaves out: the same releases give the same folder; another torch_npu or another CANN,
    another one, so that an upgrade compiles anew instead of loading the old release's graph."""

    def folder(version: str, cann: str) -> str:
        install_torch_npu(version=version, cann=cann)
        return compile_cache.keyed("npu_cache", Plain())

    same = folder("2.14.0", "9.1.0")
    assert folder("2.14.0", "9.1.0") == same
    assert folder("2.13.0", "9.1.0") != same
    assert folder("2.14.0", "9.0.0") != same


def test_off_an_npu_the_cache_folder_is_the_same_on_every_run(monkeypatch):
    """Where torch_npu does not load, the key says so, and the folder is the same each time."""
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    monkeypatch.setattr(backend, "npu_status", backend.probe_npu)
    assert backend.npu_versions() == "torch_npu not loaded"
    assert compile_cache.keyed("npu_cache", Plain()) == compile_cache.keyed("npu_cache", Plain())


def test_a_cann_that_cannot_say_its_release_is_unknown(install_torch_npu):
    """CANN before 8.1.RC1 reports no release (torch_npu's get_cann_version() answers ""): the key
    says unknown, and still names torch_npu's release."""
    install_torch_npu(version="2.14.0", cann="")
    assert backend.npu_versions() == "torch_npu 2.14.0, CANN unknown"


def test_a_class_with_no_source_file_leaves_the_rest_of_the_fingerprint(monkeypatch, tmp_path):
    """A class made at run time has no file to read: the fingerprint goes on with the others, so
    an edit of model.py still changes it."""
    made = type("Made", (nn.Module,), {"__module__": "made_at_run_time", "forward": lambda self, x: x})
    assert compile_cache.source_file(made) is None

    def with_made(text: str) -> nn.Module:
        model = model_from(monkeypatch, tmp_path / str(len(text)), text)
        model.made = made()
        return model

    fingerprint = compile_cache.code_fingerprint
    edited = MODEL_FILE.replace("x * 2", "x * 20")
    assert fingerprint(with_made(MODEL_FILE)) != fingerprint(with_made(edited))


def test_instances_counts_the_cached_models_built():
    """CachedModel.instances counts the CachedModels built in this process, one each."""
    before = CachedModel.instances
    CachedModel(Plain())
    CachedModel(Plain())
    assert CachedModel.instances == before + 2


@pytest.mark.npu
def test_cache_files_are_written_owner_only(in_tmp_dir):
    """On an NPU the first run writes compiled_module files, mode 0600, under CACHE_DIR."""
    assert npu_status()[0]
    torch.manual_seed(0)
    model = CachedModel(build_model().to("npu").eval())
    with torch.no_grad():
        model(*to_device(example_inputs(), "npu"))
    written = list((in_tmp_dir / CACHE_DIR).rglob("compiled_module"))
    assert written, f"no compiled_module under {CACHE_DIR}"
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


class Asked(Exception):
    """What the MRE asked cache_compile for is all that test_each_rank_asks_for_its_own_cache needs."""


def test_each_rank_asks_for_its_own_cache(in_tmp_dir, monkeypatch):
    """The tensor-parallel MRE's CachedModel hands npugraph_ex's cache_compile this rank's
    global_rank and tp_rank: one cache per rank."""
    from parallel_cache_project.toolkit.backend import Backend
    from parallel_cache_project.toolkit.parallel import tensor_parallel

    asked = []

    def recording(method, **keywords):
        asked.append(keywords)
        raise Asked  # stop there: what follows is a compile of the model, tested elsewhere

    npugraph_ex = SimpleNamespace(inference=SimpleNamespace(cache_compile=recording))
    monkeypatch.setattr(torch, "npu", SimpleNamespace(npugraph_ex=npugraph_ex), raising=False)
    backend = Backend("npugraph_ex", "cpu", "a test")
    with tensor_parallel("cpu"), pytest.raises(Asked):
        mre.CachedModel(nn.Linear(2, 2), backend, backend.options)
    assert [{k: v for k, v in each.items() if k.endswith("rank")} for each in asked] == [
        {"global_rank": 0, "tp_rank": 0}
    ]


def test_on_an_npu_each_capture_size_is_a_cached_method_of_its_own(monkeypatch):
    """cached_steps hands cache_compile one method per capture size, named decode_batch<size>
    (its own code, so its own graph and cache folder), with dynamic=False, the cache folder, the
    options and this rank's keywords; each runs the model."""
    asked = on_an_npu(monkeypatch)
    ranks = {"global_rank": 1, "tp_rank": 1, "pp_rank": 0}
    steps = compile_cache.cached_steps(Plain(), (1, 4), cache_dir="npu_cache", **ranks)
    assert sorted(steps) == [1, 4]
    assert [method for method, _ in asked] == [steps[1], steps[4]]
    for size, (method, keywords) in zip((1, 4), asked, strict=True):
        name = f"decode_batch{size}"
        assert (method.__name__, method.__qualname__) == (name, f"DecodeSteps.{name}")
        assert method.__code__.co_name == name
        folder = f"npu_cache/code_{compile_cache.folder_key(Plain())}"
        assert keywords == {"dynamic": False, "cache_dir": folder, "options": NPU.options, **ranks}
        assert torch.equal(method(torch.ones(2)), torch.full((2,), 2.0))
    assert steps[1].__code__ is not steps[4].__code__


def test_off_an_npu_a_decode_step_must_compile_as_one_graph(monkeypatch):
    """The stand-in compiles each step with fullgraph=True: a graph break fails, it is not split."""

    class Breaks(nn.Module):
        def forward(self, x):
            torch._dynamo.graph_break()
            return x * 2

    monkeypatch.setenv(BACKEND_ENV, "aot_eager")
    torch._dynamo.reset()
    (step,) = compile_cache.cached_steps(Breaks(), (2,), cache_dir="unused").values()
    with pytest.raises(torch._dynamo.exc.Unsupported):
        step(torch.ones(2))
