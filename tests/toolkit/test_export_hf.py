"""export-hf: a decode project's model as a Hugging Face folder for vLLM, seeded as the MRE seeds it;
the sample under its port's architecture, a transformers model through save_pretrained, a model
with neither refused in one line; and the `vllm serve` command it prints."""

import contextlib
import io
import json

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from decode_parallel_project.toolkit import export_hf as parallel_export_hf
from decode_project import model
from decode_project.toolkit import export_hf


def export_command(directory, module=export_hf, *arguments):
    """`python -m <project> export-hf DIRECTORY ARGUMENTS`: the exit status, stdout and stderr."""
    printed, told = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
        code = module.main([str(directory), *arguments], prog="export-hf")
    return code, printed.getvalue(), told.getvalue()


def test_the_sample_is_written_under_its_ports_architecture(tmp_path):
    """config.json is model.py's hf_config(), naming the class vllm_model.py registers, beside
    the weights and a generation_config.json."""
    code, printed, _ = export_command(tmp_path)
    assert code == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(export_hf.FILES)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config == model.hf_config()
    assert config["architectures"] == ["TinyBlockForCausalLM"]
    assert json.loads((tmp_path / "generation_config.json").read_text())["do_sample"] is False
    assert "TinyBlockForCausalLM" in printed


def test_the_weights_are_the_mre_seeded_models_under_its_own_names(tmp_path):
    """model.safetensors holds build_model()'s state_dict after torch.manual_seed(0), name for
    name: the weights every tool runs, under the names the port's load_weights() reads."""
    export_hf.export(tmp_path)
    torch.manual_seed(0)
    expected = model.build_model().state_dict()
    written = load_file(tmp_path / "model.safetensors")
    assert written.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(written[name], tensor), name


def test_the_config_says_what_the_port_reads(tmp_path):
    """The sizes vllm_model.py builds its layers from are the sample's."""
    exported = export_hf.export(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["hidden_size"], config["num_attention_heads"]) == (model.HIDDEN, model.HEADS)
    assert (config["num_hidden_layers"], config["vocab_size"]) == (model.LAYERS, model.VOCAB)
    assert config["max_position_embeddings"] == model.MAX_SEQ_LEN
    assert exported.head_dim == model.HIDDEN // model.HEADS


def test_a_model_with_no_hf_config_and_no_transformers_model_is_refused(tmp_path, monkeypatch):
    """A model of one's own without hf_config(): exit 2, one line naming what is missing, and
    nothing written."""
    monkeypatch.delattr(model, "hf_config")
    target = tmp_path / "hf"
    code, printed, told = export_command(target)
    assert (code, printed) == (2, "")
    assert len(told.splitlines()) == 1
    assert "no hf_config()" in told
    assert "vllm_model.py" in told
    assert not target.exists()


def test_an_hf_config_without_architectures_is_refused(tmp_path, monkeypatch):
    """hf_config() must name the architecture vLLM looks its class up by."""
    monkeypatch.setattr(model, "hf_config", lambda: {"model_type": "llama"})
    code, _, told = export_command(tmp_path / "hf")
    assert code == 2
    assert "'architectures'" in told


def test_a_transformers_model_behind_the_contract_is_saved_with_save_pretrained(tmp_path, monkeypatch):
    """A wrapper holding a transformers LlamaForCausalLM: the Llama's own save_pretrained(), its
    architecture named, the same seeded weights."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )

    class Wrapper(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = transformers.LlamaForCausalLM(config)

    monkeypatch.setattr(model, "build_model", Wrapper)
    exported = export_hf.export(tmp_path)
    assert (exported.kind, exported.architecture) == ("transformers", "LlamaForCausalLM")
    assert {"config.json", "model.safetensors", "generation_config.json"} <= {
        path.name for path in tmp_path.iterdir()
    }
    torch.manual_seed(0)
    expected = Wrapper().lm.state_dict()
    written = load_file(tmp_path / "model.safetensors")
    assert torch.equal(written["model.embed_tokens.weight"], expected["model.embed_tokens.weight"])
    assert exported.head_dim == 16


def test_a_gpt2_is_described_in_its_own_configs_names(tmp_path, monkeypatch):
    """A transformers GPT-2, whose config.json names its sizes n_embd and n_head: saved, and its
    head width read as transformers reads those names, not a KeyError."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2)
    monkeypatch.setattr(model, "build_model", lambda: transformers.GPT2LMHeadModel(config))
    exported = export_hf.export(tmp_path)
    assert (exported.architecture, exported.head_dim) == ("GPT2LMHeadModel", 16)


def test_the_printed_command_serves_the_folder_with_every_translated_setting(tmp_path):
    """The `vllm serve` line for an Ascend machine names the folder and the project's batch,
    length, capture sizes and npugraph_ex in vLLM's keys."""
    _, printed, _ = export_command(tmp_path)
    command = printed.split("on an Ascend machine:\n", 1)[1].split("\n\n", 1)[0]
    assert command.startswith(f"vllm serve {tmp_path} \\")
    assert f"--max-num-seqs {model.MAX_BATCH}" in command
    assert f"--max-model-len {model.MAX_SEQ_LEN}" in command
    sizes = json.dumps(list(model.CAPTURE_SIZES))
    assert f'"cudagraph_capture_sizes": {sizes}' in command
    assert '"cudagraph_mode": "FULL_DECODE_ONLY"' in command
    assert '{"ascend_compilation_config": {"enable_npugraph_ex": true}}' in command
    assert "--tensor-parallel-size" not in command


def test_a_tensor_parallel_project_serves_on_as_many_ranks(tmp_path):
    """A tensor-parallel decode project's command adds --tensor-parallel-size, 2 by default."""
    code, printed, _ = export_command(tmp_path, parallel_export_hf)
    assert code == 0
    assert "--tensor-parallel-size 2" in printed
    _, printed, _ = export_command(tmp_path, parallel_export_hf, "--tensor-parallel-size", "4")
    assert "--tensor-parallel-size 4" in printed
