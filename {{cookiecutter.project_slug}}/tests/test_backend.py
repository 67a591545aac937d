"""Backend choice: npugraph_ex on a usable NPU, the stand-in elsewhere, always with a reason."""

import sys

import pytest

from {{ cookiecutter.package_name }}.toolkit import backend


@pytest.fixture
def no_npu(monkeypatch):
    """A machine where npugraph_ex can't run because torch_npu is missing."""
    monkeypatch.delenv(backend.BACKEND_ENV, raising=False)
    monkeypatch.setattr(backend, "npu_status", lambda: (False, "torch_npu is not installed"))


@pytest.fixture
def npu(monkeypatch):
    """A machine whose NPU can capture aclgraphs."""
    monkeypatch.delenv(backend.BACKEND_ENV, raising=False)
    monkeypatch.setattr(backend, "npu_status", lambda: (True, "Ascend910B1 ready"))


def test_stand_in_without_npu_says_why(no_npu):
    """Off NPU the choice is aot_eager on the CPU, and the reason names what is missing."""
    chosen = backend.select_backend()
    assert (chosen.name, chosen.device) == ("aot_eager", "cpu")
    assert "torch_npu is not installed" in chosen.reason


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
    with pytest.raises(ValueError, match=r"NPUGRAPH_BACKEND='aot-eager' is not .*aot_eager"):
        backend.select_backend()


def test_forcing_npugraph_ex_without_npu_explains(no_npu, monkeypatch):
    """Forcing npugraph_ex where it can't run says why, instead of failing deep in torch_npu."""
    monkeypatch.setenv(backend.BACKEND_ENV, "npugraph_ex")
    with pytest.raises(RuntimeError, match="needs a usable NPU, but torch_npu is not installed"):
        backend.select_backend()


def test_probe_points_at_cann_when_torch_npu_cannot_load(tmp_path, monkeypatch):
    """A torch_npu that fails on libhccl.so (CANN not sourced) is reported with the set_env.sh fix."""
    fake = tmp_path / "torch_npu"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        'raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")\n'
    )
    monkeypatch.syspath_prepend(tmp_path)
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    npu_ok, why = backend.probe_npu()
    assert not npu_ok
    assert "CANN is not sourced (libhccl.so: cannot open shared object file" in why
    assert "set_env.sh" in why
