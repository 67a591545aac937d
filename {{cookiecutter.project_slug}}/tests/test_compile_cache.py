"""cache_compile: the stand-in writes no cache and says so; on an NPU the cache is written."""

import logging
import stat

import pytest
import torch

from {{ cookiecutter.package_name }}.backend import BACKEND_ENV, npu_status, select_backend
from {{ cookiecutter.package_name }}.model import (  # one per line: names vary in length
    CACHE_DIR,
    INPUT_SHAPE,
    {{ cookiecutter.model_class }},
)


@pytest.fixture
def in_tmp_dir(tmp_path, monkeypatch):
    """Run in an empty folder: cache_compile resolves CACHE_DIR against the working directory."""
    monkeypatch.chdir(tmp_path)
    if npu_status()[0]:
        # A second compile of _forward in one process counts as a recompile for cache_compile,
        # which then drops its cache. (The stand-in has no cache: it may reuse the MRE's graph.)
        torch._dynamo.reset()
    return tmp_path


def run_once() -> torch.Tensor:
    device = select_backend().device
    model = {{ cookiecutter.model_class }}().to(device).eval()
    with torch.no_grad():
        return model(torch.randn(INPUT_SHAPE, device=device))


def test_forward_docstring_explains_the_cache_settings():
    """forward() documents the cache_compile settings, as the seed's template does."""
    docstring = {{ cookiecutter.model_class }}.forward.__doc__
    for setting in ("cache_compile", "dynamic=False", "cache_dir", "_forward"):
        assert setting in docstring


def test_stand_in_says_no_cache_is_written(in_tmp_dir, caplog, monkeypatch):
    """With the stand-in the model still runs as one graph, writes nothing, and says so in one line."""
    monkeypatch.setenv(BACKEND_ENV, "aot_eager")
    with caplog.at_level(logging.WARNING):
        run_once()
    assert "no persistent cache is written" in caplog.text
    assert not (in_tmp_dir / CACHE_DIR).exists()


@pytest.mark.npu
def test_cache_files_are_written_owner_only(in_tmp_dir):
    """On an NPU the first run writes compiled_module files, mode 0600, under CACHE_DIR."""
    run_once()
    written = list((in_tmp_dir / CACHE_DIR).rglob("compiled_module"))
    assert written, f"no compiled_module under {CACHE_DIR}"
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
