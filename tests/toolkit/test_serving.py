"""The project's settings in vLLM's terms: each one translated or named as having no equivalent,
capture sizes in tokens, and the part a CPU takes."""

import json
import shlex

import pytest
import torch

from decode_project import model
from decode_project.toolkit import project, serving
from decode_project.toolkit.decode import Limits, limits

LIMITS = Limits(max_batch=8, max_seq_len=128, capture_sizes=(1, 3, 8))


def flags(settings: list[serving.Setting]) -> dict[str, str]:
    """Each translated flag and its value."""
    return dict(setting.vllm.split(" ", 1) for setting in settings if setting.vllm)


def test_each_limit_becomes_its_vllm_key():
    """MAX_BATCH is max_num_seqs, MAX_SEQ_LEN max_model_len, the dtype vLLM's dtype."""
    translated = flags(serving.translation(LIMITS, torch.bfloat16))
    assert translated["--max-num-seqs"] == "8"
    assert translated["--max-model-len"] == "128"
    assert translated["--dtype"] == "bfloat16"


def test_capture_sizes_are_decode_only_graph_sizes_in_tokens():
    """CAPTURE_SIZES are vLLM's cudagraph_capture_sizes, one token per sequence of a decode step,
    captured in vLLM's decode-only full-graph mode."""
    (compilation,) = shlex.split(flags(serving.translation(LIMITS, torch.float32))["--compilation-config"])
    assert json.loads(compilation) == {
        "cudagraph_mode": "FULL_DECODE_ONLY",
        "cudagraph_capture_sizes": [1, 3, 8],
    }


def test_npugraph_ex_is_vllm_ascends_own_setting():
    """The npugraph_ex choice is vllm-ascend's ascend_compilation_config.enable_npugraph_ex."""
    (additional,) = shlex.split(flags(serving.translation(LIMITS, torch.float32))["--additional-config"])
    assert json.loads(additional) == {"ascend_compilation_config": {"enable_npugraph_ex": True}}


def test_every_translated_key_cites_its_source_at_a_named_version():
    """Each setting says where vLLM or vllm-ascend defines it, at the version paired."""
    for setting in serving.translation(LIMITS, torch.float32, tensor_parallel_size=2):
        assert (
            f"vLLM {serving.VLLM}" in setting.source
            or f"vllm-ascend {serving.VLLM_ASCEND}" in (setting.source)
            or setting.vllm is None
        ), setting


def test_settings_without_an_equivalent_are_named_not_dropped():
    """The model's own KV cache and the npugraph_ex options have no vLLM value: each is listed,
    saying what takes its place."""
    missing = {s.project: s.note for s in serving.translation(LIMITS, torch.float32) if s.vllm is None}
    cache = next(note for name, note in missing.items() if "KV cache" in name)
    assert "vLLM owns the KV cache" in cache
    assert any("NPUGRAPH_EX_OPTIONS" in name for name in missing)


def test_cache_compile_names_its_cache_folder_as_having_no_equivalent(monkeypatch):
    """In cache_compile mode CACHE_DIR is named: vLLM keeps its own compile cache."""
    monkeypatch.setattr(project, "CACHE_COMPILE", True)
    monkeypatch.setattr(project, "CACHE_DIR", ".my_cache")
    missing = [s for s in serving.translation(LIMITS, torch.float32) if s.vllm is None]
    assert any("'.my_cache'" in s.project and "VLLM_CACHE_ROOT" in s.source for s in missing)


def test_the_cache_folders_row_reads_as_its_snapshot(monkeypatch, snapshot):
    """The rows of the settings with no equivalent, the cache_compile folder's among them, read as
    reviewed (the others are in export-hf's printout)."""
    monkeypatch.setattr(project, "CACHE_COMPILE", True)
    monkeypatch.setattr(project, "CACHE_DIR", ".my_cache")
    assert serving.render(serving.no_equivalent()) == snapshot


@pytest.mark.parametrize("size", [None, 2])
def test_tensor_parallel_size_only_where_asked(size):
    """--tensor-parallel-size appears exactly when a tensor-parallel project asks for it."""
    translated = flags(serving.translation(LIMITS, torch.float32, tensor_parallel_size=size))
    assert translated.get("--tensor-parallel-size") == (None if size is None else "2")


def test_the_serve_command_is_one_flag_a_line_that_a_shell_reads_back():
    """The printed command parses as a shell command line: every flag and value intact."""
    command = serving.serve_command("/models/my model", LIMITS, torch.float32)
    words = shlex.split(command.replace("\\\n", ""))
    assert words[:3] == ["vllm", "serve", "/models/my model"]
    assert words[words.index("--max-num-seqs") + 1] == "8"
    assert "--skip-tokenizer-init" in words


def test_a_cpu_runs_the_batch_length_and_dtype_eagerly():
    """vLLM's CPU build gets the batch, the length and the dtype, no graph capture."""
    arguments = serving.cpu_arguments(limits(), torch.float32)
    assert arguments["max_num_seqs"] == model.MAX_BATCH
    assert arguments["max_model_len"] == model.MAX_SEQ_LEN
    assert (arguments["dtype"], arguments["enforce_eager"]) == ("float32", True)


def test_a_cpu_run_starts_no_tokenizer():
    """The export holds no tokenizer, so vLLM's CPU build is told to start none."""
    assert serving.cpu_arguments(limits(), torch.float32)["skip_tokenizer_init"] is True
