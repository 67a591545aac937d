{%- set cache = cookiecutter.mode == "cache_compile" -%}
"""On an Ascend NPU: real npugraph_ex capture and replay match eager. Skipped elsewhere."""

import pytest
import torch

from {{ cookiecutter.package_name }}.model import build_model, example_inputs
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
{%- if cache %}
from {{ cookiecutter.package_name }}.toolkit.compile_cache import CachedModel
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same, clone, to_device

pytestmark = pytest.mark.npu


def test_replays_match_eager_for_new_input_data({{ "tmp_path, monkeypatch" if cache else "" }}):
    """The first call captures, later ones replay: each equals eager on its own new inputs."""
{%- if cache %}
    monkeypatch.chdir(tmp_path)  # the cache_compile cache starts empty
{%- endif %}
    backend = select_backend()
    assert backend.is_npugraph_ex, backend.reason
    torch.manual_seed(0)
    model = build_model().to("npu").eval()
{%- if cache %}
    graph = CachedModel(model)
{%- else %}
    graph = torch.compile(
        model, backend="npugraph_ex", fullgraph=True, dynamic=False, options=backend.options
    )
{%- endif %}
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        dummy_input = to_device(example_inputs(), "npu")
        with torch.no_grad():
            assert_same(clone(graph(*dummy_input)), model(*dummy_input))
