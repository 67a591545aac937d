"""export-hf on your model: the Hugging Face folder vLLM serves holds the weights every tool runs
(build_model() after torch.manual_seed(0)) and names the architecture vLLM looks its class up by."""

import contextlib
import io
import json

import pytest
import torch
from safetensors.torch import load_file

from {{ cookiecutter.package_name }}.__main__ import main
from {{ cookiecutter.package_name }}.model import build_model
from {{ cookiecutter.package_name }}.toolkit.export_hf import transformers_model


def test_export_hf_writes_your_seeded_weights_under_an_architecture(tmp_path):
    """`python -m {{ cookiecutter.package_name }} export-hf DIR` exits 0 with config.json naming an architecture,
    and model.safetensors holding the seeded model's weights (README, section 'Serving with vLLM')."""
    printed, told = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
        code = main(["export-hf", str(tmp_path)])
    if code == 2 and "no hf_config()" in told.getvalue():
        pytest.skip(told.getvalue().strip())
    assert code == 0, told.getvalue()
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"], config
    torch.manual_seed(0)
    model = build_model()
    inner = transformers_model(model)
    if inner is None:
        written = load_file(tmp_path / "model.safetensors")
        expected = model.state_dict()
    else:
        # save_pretrained writes the checkpoint's names, which transformers 5 converts from the
        # model's for some (a MoE's experts, one by one), and a tied weight once: read the folder
        # back as anyone loading it does.
        written = type(inner).from_pretrained(tmp_path).state_dict()
        expected = inner.state_dict()
    assert written.keys() <= expected.keys()
    for name, tensor in written.items():
        assert torch.equal(tensor, expected[name]), name
