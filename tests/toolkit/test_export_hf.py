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


def printout(directory, module=export_hf, *arguments) -> str:
    """What export-hf prints for `directory`, which it names as DIR."""
    code, printed, _ = export_command(directory, module, *arguments)
    assert code == 0
    return printed.replace(str(directory), "DIR")


def test_the_printout_reads_as_its_snapshot(tmp_path, snapshot):
    """What export-hf prints (the files written, the command, each setting in vLLM's terms with
    its source) is the reviewed text: a change to it shows as a change of the snapshot."""
    assert printout(tmp_path) == snapshot


def test_a_tensor_parallel_printout_reads_as_its_snapshot(tmp_path, snapshot):
    """A tensor-parallel project's printout says so and serves on the ranks asked for."""
    assert printout(tmp_path, parallel_export_hf, "--tensor-parallel-size", "4") == snapshot


@pytest.mark.parametrize("module", [export_hf, parallel_export_hf], ids=["decode", "tensor_parallel"])
def test_the_help_reads_as_its_snapshot(module, monkeypatch, snapshot):
    """`export-hf --help` describes the tool and each argument, in the reviewed words."""
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")  # Python 3.14's argparse colours its help otherwise
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(SystemExit):
        module.main(["--help"], prog="export-hf")
    assert printed.getvalue() == snapshot


def test_the_folder_is_made_with_its_parents(tmp_path):
    """A folder whose parents do not exist yet is made, parents and all."""
    assert export_command(tmp_path / "a" / "b")[0] == 0
    assert (tmp_path / "a" / "b" / "config.json").exists()


def test_the_weights_say_they_are_pytorchs(tmp_path):
    """model.safetensors carries the metadata format "pt" that save_pretrained writes and
    transformers' loader checks for."""
    from safetensors import safe_open

    export_hf.export(tmp_path)
    with safe_open(tmp_path / "model.safetensors", "pt") as weights:
        assert weights.metadata() == {"format": "pt"}


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


def test_a_model_with_no_hf_config_and_no_transformers_model_is_refused(tmp_path, monkeypatch, snapshot):
    """A model of one's own without hf_config(): exit 2, one line naming the model's class and
    what is missing, and nothing written."""
    monkeypatch.delattr(model, "hf_config")
    target = tmp_path / "hf"
    code, printed, told = export_command(target)
    assert (code, printed) == (2, "")
    assert len(told.splitlines()) == 1
    assert f"returns a {type(model.build_model()).__name__}," in told
    assert told == snapshot
    assert not target.exists()


@pytest.mark.parametrize(
    "config",
    [{"model_type": "llama"}, "llama", {"architectures": []}, {"architectures": [3]}],
    ids=["no architectures", "not a dict", "an empty list", "not a name"],
)
def test_an_hf_config_without_an_architectures_name_is_refused(tmp_path, monkeypatch, config):
    """hf_config() must return a dict naming the architecture vLLM looks its class up by: anything
    else is refused in one line, not a traceback."""
    monkeypatch.setattr(model, "hf_config", lambda: config)
    code, _, told = export_command(tmp_path / "hf")
    assert code == 2
    assert len(told.splitlines()) == 1
    assert "must return a dict with 'architectures': [name]" in told


def test_a_size_that_is_no_number_is_refused(tmp_path, capsys):
    """--tensor-parallel-size takes a whole number: anything else is argparse's usage error."""
    with pytest.raises(SystemExit) as exit:
        parallel_export_hf.main([str(tmp_path), "--tensor-parallel-size", "two"], prog="export-hf")
    assert exit.value.code == 2
    assert "invalid int value: 'two'" in capsys.readouterr().err


def test_the_json_files_are_written_as_save_pretrained_writes_them(tmp_path):
    """config.json and generation_config.json are indented by two spaces and end in a newline,
    as transformers' save_pretrained writes them: a folder of either kind diffs alike."""
    export_hf.export(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert (tmp_path / "config.json").read_text() == json.dumps(config, indent=2) + "\n"
    generation = json.loads((tmp_path / "generation_config.json").read_text())
    assert (tmp_path / "generation_config.json").read_text() == json.dumps(generation, indent=2) + "\n"


def test_a_head_dim_the_config_names_wins_over_hidden_by_heads():
    """A config that names head_dim (Gemma's differs from hidden / heads) is read by it."""
    config = {"head_dim": 24, "hidden_size": 32, "num_attention_heads": 2}
    assert export_hf.head_dim_of(config) == 24
    assert export_hf.head_dim_of({**config, "head_dim": None}) == 16


def test_a_model_without_floating_point_weights_is_float32():
    """The dtype of a model with no floating-point weights (none at all, or integer ones) is float32."""
    holds_ints = nn.Module()
    holds_ints.table = nn.Parameter(torch.zeros(2, dtype=torch.long), requires_grad=False)
    assert export_hf.dtype_of(nn.Module()) == torch.float32
    assert export_hf.dtype_of(holds_ints) == torch.float32


def test_a_transformers_model_behind_the_contract_is_saved_with_save_pretrained(tmp_path, monkeypatch):
    """A wrapper holding a transformers LlamaForCausalLM: the Llama's own save_pretrained(), its
    architecture named, the same seeded weights; model.py's hf_config() is not read."""
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
    # A transformers model's config.json is its own: hf_config(), left over from the sample in
    # a different shape, is never read.
    monkeypatch.setattr(model, "hf_config", lambda: "left over")
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


def test_a_file_where_the_folder_goes_is_refused_in_one_line(tmp_path):
    """DIRECTORY naming a file: exit 2, one line naming it and why, nothing printed, the file
    untouched."""
    taken = tmp_path / "a_file"
    taken.write_text("mine\n")
    code, printed, told = export_command(taken)
    assert (code, printed) == (2, "")
    assert told == f"export-hf: cannot write {taken}: File exists\n"
    assert taken.read_text() == "mine\n"
